#include "train/run_summary.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace mt {
namespace {

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

void write_run_summary(const std::string& path, const RunSummaryRecord& r) {
  nlohmann::json memory = nlohmann::json::array();
  for (size_t i = 0; i < r.peak_rss_bytes.size(); ++i)
    memory.push_back({{"rank", i},
                      {"peak_rss_bytes", r.peak_rss_bytes[i]},
                      {"peak_tensor_bytes", i < r.peak_tensor_bytes.size() ? r.peak_tensor_bytes[i] : 0}});
  nlohmann::json collectives = nlohmann::json::array();
  for (const auto& [key, t] : r.collectives)
    collectives.push_back({{"group", key.first},
                           {"collective", key.second},
                           {"calls", t.calls},
                           {"bytes", t.bytes},
                           {"seconds", t.seconds}});
  nlohmann::json j{{"format", "meshtrain run summary 1"},
                         {"mesh", r.mesh},
                         {"mode", r.mode},
                         {"world_size", r.world_size},
                         {"timed_steps", r.timed_steps},
                         {"timed_seconds", r.timed_seconds},
                         {"tokens_per_s", r.tokens_per_s},
                         {"mfu", r.mfu},
                         {"peak_flops", r.peak_flops},
                         {"val_loss_start", finite_or_null(r.val_loss_start)},
                         {"val_loss_end", finite_or_null(r.val_loss_end)},
                         {"memory_per_rank", memory},
                         {"op_seconds", r.op_seconds},
                         {"collectives", collectives}};
  for (size_t i = 0; i < r.pipeline.size(); ++i) {
    const auto& [stage, t] = r.pipeline[i];
    j["pipeline_per_rank"].push_back({{"rank", i},
                                      {"stage", stage},
                                      {"compute_s", t.compute_s},
                                      {"recv_wait_s", t.recv_wait_s},
                                      {"send_wait_s", t.send_wait_s},
                                      {"sent_bytes", t.sent_bytes},
                                      {"peak_in_flight", t.peak_in_flight},
                                      {"peak_buffer_bytes", t.peak_buffer_bytes}});
  }
  write_file_atomically(path, [&](std::ostream& os) { os << j.dump(1) << '\n'; });
}

}  // namespace mt

#include "train/metrics.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "core/regular_file.h"
#include "core/bounded_json.h"
#include "core/error.h"

namespace mt {

std::string format_bytes(int64_t bytes) {
  if (bytes < 0) return std::string("-").append(format_bytes(bytes == INT64_MIN ? INT64_MAX : -bytes));
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes) / 1024.0;
  int u = 0;
  // Move up a unit when the value would print as 1024 or more.
  while (v >= 1023.995 && u < 5) v /= 1024.0, ++u;
  char buf[32];
  if (v < 9.995)
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  else if (v < 99.95)
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char buf[48];
  if (seconds < 9.995) {
    std::snprintf(buf, sizeof buf, "%.2fs", seconds);
    return buf;
  }
  const long long s = std::llround(seconds);
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    const long long m = (s + 30) / 60;  // minutes, rounded
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", m / 60, m % 60);
  }
  return buf;
}

std::string format_progress_line(const StepMetrics& m) {
  const int width = int(std::to_string(m.total_steps).size());
  char head[64], loss[32], lr[32], tok[32], mfu[32];
  std::snprintf(head, sizeof head, "step %*lld/%lld", width, (long long)m.step,
                (long long)m.total_steps);
  std::snprintf(loss, sizeof loss, "loss %.4f", m.loss);
  std::snprintf(lr, sizeof lr, "lr %.2e", m.lr);
  std::snprintf(tok, sizeof tok, "%.0f tok/s", std::isfinite(m.tokens_per_s) ? m.tokens_per_s : 0.0);
  std::snprintf(mfu, sizeof mfu, "MFU %.1f%%", 100.0 * m.mfu);
  std::string val, moe;
  if (m.routing_loss != 0.0) {
    char buf[40];
    std::snprintf(buf, sizeof buf, " (+routing %.4f)", m.routing_loss);
    moe = buf;
  }
  const auto pref = [](const PreferenceMetrics& p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " | acc %.3f margin %.4f", p.accuracy, p.margin);
    return p.pairs > 0 ? std::string(buf) : std::string();
  };
  moe += pref(m.preference);
  if (std::isfinite(m.val_loss)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " | val %.4f", m.val_loss);
    val = buf + pref(m.val_preference);
  }
  if (m.moe_dropped >= 0) moe += " | dropped " + std::to_string(m.moe_dropped);
  return std::string(head) + " | " + loss + moe + val + " | " + lr + " | " + tok + " | " + mfu + " | mem " +
         format_bytes(m.peak_mem_bytes) + " | elapsed " + format_duration(m.elapsed_s) + " | eta " +
         format_duration(m.eta_s);
}

nlohmann::json step_json(const StepMetrics& m) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j{{"step", m.step},
                    {"total_steps", m.total_steps},
                    {"loss", num(m.loss)},
                    {"lr", num(m.lr)},
                    {"tokens_per_s", num(m.tokens_per_s)},
                    {"mfu", num(m.mfu)},
                    {"peak_mem_bytes", m.peak_mem_bytes},
                    {"elapsed_s", num(m.elapsed_s)},
                    {"eta_s", num(m.eta_s)}};
  if (std::isfinite(m.val_loss)) j["val_loss"] = m.val_loss;
  if (m.routing_loss != 0.0) j["routing_loss"] = num(m.routing_loss);  // beside the tokens' loss
  if (m.moe_dropped >= 0) j["moe_dropped"] = m.moe_dropped;
  const auto pref = [&](const PreferenceMetrics& p, const std::string& prefix) {
    if (p.pairs == 0) return;
    j[prefix + "rewards/chosen"] = num(p.rewards_chosen), j[prefix + "rewards/rejected"] = num(p.rewards_rejected);
    j[prefix + "rewards/accuracies"] = num(p.accuracy), j[prefix + "rewards/margins"] = num(p.margin);
    j[prefix + "logps/chosen"] = num(p.logps_chosen), j[prefix + "logps/rejected"] = num(p.logps_rejected);
    j[prefix + "nll_loss"] = num(p.nll);
    j[prefix + "pairs"] = p.pairs;
  };
  pref(m.preference, "");
  pref(m.val_preference, "eval_");
  return j;
}

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) fail("cannot create directory '" + p.parent_path().string() + "' for '" + path +
                 "': " + ec.message());
  }
  require_regular_file(path, "metrics file");  // a FIFO would block the open
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) fail("cannot open metrics file '" + path + "' for writing");
}

void JsonlWriter::write(const nlohmann::json& obj) {
  // dump() escapes control characters, so the object is always exactly one line. Invalid UTF-8
  // in strings is replaced rather than thrown on.
  out_ << obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_) fail("cannot write to metrics file '" + path_ + "'");
}

}  // namespace mt

namespace mt {

MetricsRewind truncate_metrics(const std::string& path, int64_t step) {
  MetricsRewind out;
  require_regular_file(path, "metrics file");
  std::ifstream in(path);
  if (!in) return out;
  std::ostringstream kept, unreadable;
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    const nlohmann::json j = parse_json_or_discarded(line, JsonKind::metrics_line);
    const bool is_step = j.is_object() && j.contains("step") && j["step"].is_number_integer();
    // A killed run's last line may be cut short (no newline): it was never a whole record.
    if (in.eof()) {
      out.torn_last_line = !line.empty();
      break;
    }
    if (!is_step) {
      out.unreadable_lines.push_back(no);
      unreadable << line << '\n';
    } else if (j["step"].get<int64_t>() <= step) {
      kept << line << '\n';
    } else {
      ++out.dropped_steps;
    }
  }
  in.close();
  if (!out.unreadable_lines.empty()) {
    out.unreadable_file = (std::filesystem::path(path).parent_path() / kMetricsUnreadableFile).string();
    std::ofstream aside(out.unreadable_file, std::ios::app | std::ios::binary);
    aside << unreadable.str();
    aside.flush();
    if (!aside) fail("cannot write '" + out.unreadable_file + "' (the unreadable lines of " + path + ")");
  }
  write_file_atomically(path, [&](std::ostream& os) { os << kept.str(); });
  return out;
}

std::map<int64_t, double> read_val_losses(const std::string& path) {
  std::map<int64_t, double> out;
  require_regular_file(path, "metrics file");
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = parse_json_or_discarded(line, JsonKind::metrics_line);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j.contains("val_loss") && j["val_loss"].is_number())
      out[j["step"].get<int64_t>()] = j["val_loss"].get<double>();
  }
  return out;
}

}  // namespace mt

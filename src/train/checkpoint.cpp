#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/safetensors_write.h"

namespace mt {

namespace {

namespace fs = std::filesystem;
constexpr int kFormatVersion = 1;

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%06lld", static_cast<long long>(step));
  return buf;
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) ::fsync(fd), ::close(fd);
}

// Completed checkpoints of output_dir, oldest first.
std::vector<fs::path> list_checkpoints(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n.find('.') == std::string::npos &&
        fs::exists(e.path() / "manifest.json"))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            LlamaModel& model, AdamW& optimizer, const std::string& config_toml,
                            int64_t keep) {
  const fs::path root = fs::path(output_dir) / "checkpoints";
  const fs::path final_dir = root / step_name(state.step);
  const fs::path tmp = root / (step_name(state.step) + ".tmp");
  fs::remove_all(tmp);
  fs::create_directories(tmp);

  ParamStore& params = model.trainable();
  std::vector<TensorOut> values, moments;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (auto& p : params.params()) {
    if (!p.grad) continue;
    const size_t bytes = size_t(p.numel) * 4;
    values.push_back({p.name, "F32", p.shape, p.master, bytes});
    moments.push_back({p.name + ".exp_avg", "F32", p.shape, optimizer.m().data() + p.grad_offset, bytes});
    moments.push_back({p.name + ".exp_avg_sq", "F32", p.shape, optimizer.v().data() + p.grad_offset, bytes});
    tensors.push_back({{"name", p.name}, {"shape", p.shape}});
  }
  write_safetensors((tmp / "trainable.safetensors").string(), values);
  write_safetensors((tmp / "optimizer.safetensors").string(), moments);
  nlohmann::ordered_json m;
  m["format"] = "meshtrain-checkpoint";
  m["version"] = kFormatVersion;
  m["step"] = state.step;
  m["sampler"] = {{"seed", state.sampler.seed}, {"batches_drawn", state.sampler.batches_drawn}};
  m["optimizer_steps"] = optimizer.steps_taken();
  m["lora"] = model.has_lora();
  m["tensors"] = tensors;
  m["config"] = config_toml;
  write_file_atomically((tmp / "manifest.json").string(), [&](std::ostream& os) { os << m.dump(2) << "\n"; });
  fsync_dir(tmp);

  fs::remove_all(final_dir);  // a re-save of the same step replaces it
  fs::rename(tmp, final_dir);
  fsync_dir(root);
  write_file_atomically((root / "latest").string(),
                        [&](std::ostream& os) { os << final_dir.filename().string() << "\n"; });
  auto all = list_checkpoints(root);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i]);
  return final_dir.string();
}

std::string resolve_checkpoint(const std::string& spec, const std::string& output_dir) {
  if (spec != "latest") {
    if (!fs::exists(fs::path(spec) / "manifest.json"))
      fail("train.resume: '" + spec + "' is not a checkpoint directory (no manifest.json)");
    return spec;
  }
  const fs::path root = fs::path(output_dir) / "checkpoints";
  std::ifstream f(root / "latest");
  std::string name;
  if (f >> name && fs::exists(root / name / "manifest.json")) return (root / name).string();
  auto all = list_checkpoints(root);  // `latest` missing or stale: the newest complete one
  if (all.empty()) fail("train.resume = \"latest\": no checkpoint in " + root.string());
  return all.back().string();
}

CheckpointState load_checkpoint(const std::string& dir, LlamaModel& model, AdamW& optimizer) {
  const fs::path d(dir);
  std::ifstream mf(d / "manifest.json");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(mf);
  } catch (const nlohmann::json::exception& e) {
    fail((d / "manifest.json").string() + ": not valid JSON (" + e.what() + ")");
  }
  if (m.value("format", "") != "meshtrain-checkpoint" || m.value("version", 0) != kFormatVersion)
    fail((d / "manifest.json").string() + ": not a meshtrain checkpoint of format version " +
         std::to_string(kFormatVersion));
  if (m.value("lora", false) != model.has_lora())
    fail(dir + ": checkpoint is from a " + std::string(m.value("lora", false) ? "LoRA" : "full") +
         " run, this run is " + (model.has_lora() ? "LoRA" : "full"));
  SafetensorsFile values((d / "trainable.safetensors").string());
  SafetensorsFile moments((d / "optimizer.safetensors").string());
  ParamStore& params = model.trainable();
  for (auto& p : params.params()) {
    if (!p.grad) continue;
    if (!values.contains(p.name)) fail(dir + ": checkpoint has no tensor '" + p.name + "'");
    if (values.info(p.name).shape != p.shape)
      fail(dir + ": tensor '" + p.name + "' has another shape in the checkpoint");
    values.read_f32(p.name, p.master);
    moments.read_f32(p.name + ".exp_avg", optimizer.m().data() + p.grad_offset);
    moments.read_f32(p.name + ".exp_avg_sq", optimizer.v().data() + p.grad_offset);
  }
  if (int64_t(m["tensors"].size()) != int64_t(std::count_if(params.params().begin(), params.params().end(),
                                                            [](const Param& p) { return p.grad != nullptr; })))
    fail(dir + ": checkpoint and model have different trainable tensors");
  model.sync_compute_weights();
  optimizer.set_steps_taken(m["optimizer_steps"].get<int64_t>());
  CheckpointState s;
  s.step = m["step"].get<int64_t>();
  s.sampler.seed = m["sampler"]["seed"].get<uint64_t>();
  s.sampler.batches_drawn = m["sampler"]["batches_drawn"].get<int64_t>();
  return s;
}

}  // namespace mt

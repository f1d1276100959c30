#include "io/model_files.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/error.h"
#include "io/gpt2_layout.h"
#include "io/hf_generation_config.h"
#include "io/safetensors_write.h"

namespace mt {

namespace {

// The text of <origin>/<name> when the origin is a directory holding it, else "".
std::string origin_file(const ModelOrigin& origin, const char* name) {
  namespace fs = std::filesystem;
  if (origin.path.empty() || !fs::is_directory(origin.path)) return "";
  const fs::path path = fs::path(origin.path) / name;
  if (!fs::exists(path)) return "";
  return read_json_text(path.string(), JsonKind::hf_config);
}

// The files of save_base_model, the tensors written under the names given.
std::vector<std::string> write_model_files(const ModelConfig& config, Precision precision,
                                           const std::vector<ExportTensor>& tensors,
                                           const FetchValues& fetch, const std::string& dir,
                                           const ModelOrigin& origin) {
  const bool bf = precision == Precision::bf16;  // written in the run's precision
  std::vector<TensorOut> specs;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    specs.push_back({t.name, bf ? "BF16" : "F32", t.shape, nullptr, size_t(n) * (bf ? 2 : 4)});
  }
  std::string weights = dir + "/model.safetensors", config_path = dir + "/config.json";
  // The metadata first: a malformed generation_config.json in the origin fails before the weights
  // are written, and an origin that is `dir` itself is read before anything there is replaced.
  const char* torch_dtype = bf ? "bfloat16" : "float32";
  const std::string config_json =
      hf_config_json(config, torch_dtype, origin_file(origin, "config.json"), origin.tokens);
  const std::string generation_path = dir + "/generation_config.json";
  const std::string generation_json = hf_generation_config_json(
      config_json, origin_file(origin, "generation_config.json"), origin.path + "/generation_config.json");
  write_safetensors_streamed(weights, specs, [&](size_t i) {
    const std::vector<float> v = fetch(tensors[i].name);
    std::vector<char> bytes(specs[i].bytes);
    if (bf) convert(reinterpret_cast<bf16*>(bytes.data()), v.data(), v.size());
    else std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }, {{"format", "pt"}});
  write_file_atomically(config_path, [&](std::ostream& os) { os << config_json; });
  write_file_atomically(generation_path, [&](std::ostream& os) { os << generation_json; });
  return {config_path, generation_path, weights};
}

}  // namespace

std::vector<std::string> save_base_model(const ModelConfig& config, Precision precision,
                                         const std::vector<ExportTensor>& tensors,
                                         const FetchValues& fetch, const std::string& dir,
                                         const ModelOrigin& origin) {
  if (config.model_type != "gpt2") return write_model_files(config, precision, tensors, fetch, dir, origin);
  // GPT-2 is written in its own HF layout (io/gpt2_layout.h): c_attn fused from q, k and v,
  // Conv1D weights transposed, GPT2LMHeadModel's names.
  std::vector<ExportTensor> hf;
  for (const Gpt2HfTensor& t : gpt2_hf_tensors(config)) hf.push_back({t.name, t.shape});
  return write_model_files(config, precision, hf, [&](const std::string& name) {
    return gpt2_hf_values(name, config, fetch);
  }, dir, origin);
}

std::vector<std::string> save_base_model(Transformer& model, const std::string& dir,
                                         const ModelOrigin& origin) {
  std::vector<ExportTensor> tensors;
  for (const auto& p : model.base().params()) tensors.push_back({p.name, p.shape});
  return save_base_model(model.config(), model.precision(), tensors, [&](const std::string& name) {
    const Param& p = model.base().get(name);
    std::vector<float> v(static_cast<size_t>(p.numel));
    model.base().get_values(p, v.data());  // a bf16-only tensor round-trips exactly
    return v;
  }, dir, origin);
}

}  // namespace mt

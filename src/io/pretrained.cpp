#include "io/pretrained.h"

#include <cctype>
#include <filesystem>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/regular_file.h"
#include "core/shape_string.h"
#include "io/gguf_model.h"
#include "io/gpt2_layout.h"
#include "io/hf_config.h"
#include "io/llama2c.h"
#include "io/safetensors_index.h"
#include "io/peft_names.h"
#include "io/weight_shapes.h"
#include "model/param_shapes.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

bool is_llama2c_file(const std::string& path) {
  return fs::is_regular_file(path) && fs::path(path).extension() == ".bin";
}

bool is_gguf_file(const std::string& path) {
  return fs::is_regular_file(path) && fs::path(path).extension() == ".gguf";
}

// Copies each tensor of `store` from the checkpoint under `prefix + name`, checking shapes.
void load_store(const SafetensorsCheckpoint& ckpt, ParamStore& store, const std::string& prefix,
                const std::string& where) {
  std::vector<float> tmp;
  for (auto& p : store.params()) {
    const std::string name = file_tensor_name(prefix, p.name);
    if (!ckpt.contains(name)) fail(where + ": missing tensor '" + name + "'");
    const auto& info = ckpt.info(name);
    if (info.shape != p.shape)
      fail(where + ": tensor '" + name + "' has shape " + shape_string(info.shape) + ", config expects " +
           shape_string(p.shape));
    tmp.resize(size_t(p.numel));
    ckpt.read_f32(name, tmp.data());
    store.set_values(p, tmp.data());
  }
}

// GPT-2's base tensors from its HF layout (io/gpt2_layout.h): c_attn split into q, k and v,
// Conv1D weights transposed.
void load_gpt2_store(const SafetensorsCheckpoint& ckpt, ParamStore& store, const ModelConfig& c) {
  const std::string prefix = gpt2_prefix(ckpt.names());
  auto read_hf = [&](const std::string& hf_name) {
    const std::string name = prefix + hf_name;
    std::vector<float> v(size_t(ckpt.info(name).numel));
    ckpt.read_f32(name, v.data());
    return v;
  };
  for (auto& p : store.params()) {
    const std::vector<float> v = read_gpt2_tensor(gpt2_part(p.name, p.shape, c), read_hf);
    store.set_values(p, v.data());
  }
}

// What a checkpoint holds, as its headers say.
HeldTensors held_tensors(const SafetensorsCheckpoint& ckpt) {
  return {ckpt.names(), [&ckpt](const std::string& name) -> std::optional<std::vector<int64_t>> {
            if (!ckpt.contains(name)) return std::nullopt;
            return ckpt.info(name).shape;
          }};
}


// ORG/NAME with the Hub's characters (letters, digits, '-', '_', '.'), neither part a dot
// directory: what users of transformers pass as a model name.
bool looks_like_hub_id(const std::string& path) {
  const size_t slash = path.find('/');
  if (slash == std::string::npos || path.find('/', slash + 1) != std::string::npos) return false;
  const std::string org = path.substr(0, slash), name = path.substr(slash + 1);
  for (const std::string& part : {org, name}) {
    if (part.empty() || part.front() == '.') return false;
    for (char c : part)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

void reject_hub_id(const std::string& path) {
  if (fs::exists(path) || !looks_like_hub_id(path)) return;
  // Every command resolves a Hub id through io/hub_model.h before it reads a directory: reaching
  // here means a caller skipped that, so say what to give rather than how to download.
  fail("'" + path + "' is not a local directory; give the model's directory, or the Hub id as --model or "
       "model.path, which meshtrain looks up in the Hugging Face cache (docs/fine-tuning.md)");
}

ModelConfig pretrained_config(const std::string& path) {
  reject_hub_id(path);
  if (!fs::exists(path)) fail(path + ": model path does not exist");
  if (!fs::is_directory(path)) require_regular_file(path, "model path");
  if (is_llama2c_file(path)) return read_llama2c_config(path);
  if (is_gguf_file(path)) return gguf_model_config(read_gguf(path));
  if (fs::is_directory(path)) {
    const std::string cfg = (fs::path(path) / "config.json").string();
    if (!fs::exists(cfg)) fail(path + ": no config.json in the model directory");
    return load_hf_config(cfg);
  }
  fail(path + ": expected an HF model directory (config.json + safetensors), a llama2.c .bin or a .gguf");
}

ModelConfig checked_pretrained_config(const std::string& path) {
  const ModelConfig config = pretrained_config(path);
  // A llama2.c header was checked against the file's size, a GGUF's tensors against its metadata.
  if (is_llama2c_file(path) || is_gguf_file(path)) return config;
  const SafetensorsCheckpoint ckpt(path);
  if (config.model_type == "gpt2") check_gpt2_held_shapes(config, held_tensors(ckpt), path);
  else check_held_shapes(config, LoraConfig{}, /*adapters=*/false, held_tensors(ckpt), "", path);
  return config;
}

std::unique_ptr<Transformer> load_pretrained(const std::string& path, Precision precision,
                                            const LoraConfig& lora, uint64_t seed, Backend& backend) {
  if (is_gguf_file(path)) {  // read once: the whole file is in memory
    const GgufFile g = read_gguf(path);
    auto model = std::make_unique<Transformer>(gguf_model_config(g), precision, lora, true, backend);
    load_gguf_weights(g, *model);
    model->init_adapters(seed);
    return model;
  }
  auto model = std::make_unique<Transformer>(checked_pretrained_config(path), precision, lora, true, backend);
  if (is_llama2c_file(path)) {
    load_llama2c_weights(path, *model);
  } else {
    SafetensorsCheckpoint ckpt(path);
    if (model->config().model_type == "gpt2") load_gpt2_store(ckpt, model->base(), model->config());
    else load_store(ckpt, model->base(), "", path);
  }
  model->init_adapters(seed);  // after the base: a trained router's copy starts as the router
  return model;
}

namespace {

// GPT-2's adapter tensors (PEFT's module names, c_attn's lora_B stacked from q, k and v) for the
// adapters of `config` and `lora`.
std::vector<Gpt2AdapterTensor> gpt2_peft_of(const ModelConfig& config, const LoraConfig& lora) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> ours;
  for (const ParamShape& p : llama_param_shapes(config, lora))
    if (p.adapter) ours.push_back({p.name, p.shape});
  return gpt2_peft_tensors(ours);
}

}  // namespace

void check_peft_adapter(const std::string& dir, const ModelConfig& config, const LoraConfig& lora) {
  const std::string path = adapter_weights_path(dir);
  const SafetensorsCheckpoint ckpt(path);
  if (!gpt2_lora_targets(lora.targets)) {
    check_held_shapes(config, lora, /*adapters=*/true, held_tensors(ckpt), kPeftPrefix, path);
    return;
  }
  check_lora_targets(config, lora);
  std::set<std::string> expected;
  for (const Gpt2AdapterTensor& t : gpt2_peft_of(config, lora)) {
    const std::string name = kPeftPrefix + t.name;
    expected.insert(name);
    if (!ckpt.contains(name)) fail(path + ": missing tensor '" + name + "'");
    if (ckpt.info(name).shape != t.shape)
      fail(path + ": tensor '" + name + "' has shape " + shape_string(ckpt.info(name).shape) +
           ", the config gives " + shape_string(t.shape));
  }
  refuse_unread_adapter_tensors(held_tensors(ckpt), expected, path);
}

std::string adapter_weights_path(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(path)) fail(path + ": missing (expected a PEFT adapter directory)");
  return path;
}

void load_peft_adapter(const std::string& dir, Transformer& model) {
  const std::string path = adapter_weights_path(dir);
  SafetensorsCheckpoint ckpt(path);
  if (!gpt2_lora_targets(model.lora_config().targets)) {
    load_store(ckpt, model.adapters(), kPeftPrefix, path);
    return;
  }
  check_peft_adapter(dir, model.config(), model.lora_config());
  std::vector<float> stacked;
  for (const Gpt2AdapterTensor& t : gpt2_peft_of(model.config(), model.lora_config())) {
    const std::string name = "base_model.model." + t.name;
    stacked.resize(size_t(ckpt.info(name).numel));
    ckpt.read_f32(name, stacked.data());
    size_t at = 0;
    for (const std::string& part : t.parts) {  // q, k and v's rows of c_attn's lora_B, in order
      Param& p = model.adapters().get(part);
      model.adapters().set_values(p, stacked.data() + at);
      at += size_t(p.numel);
    }
  }
}

}  // namespace mt

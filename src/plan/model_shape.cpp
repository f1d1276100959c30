#include "plan/model_shape.h"

#include <filesystem>

#include "core/error.h"
#include "io/family_presets.h"
#include "io/hf_config.h"
#include "io/pretrained.h"
#include "model/transformer.h"
#include "train/flops.h"

namespace mt::plan {

ModelShape gpt_shape(const std::string& name, int64_t layers, int64_t hidden, int64_t heads,
                     int64_t vocab, int64_t max_positions) {
  ModelShape m;
  m.name = name;
  m.arch = Arch::gpt;
  ModelConfig& c = m.config;
  c.num_hidden_layers = layers;
  c.hidden_size = hidden;
  c.intermediate_size = 4 * hidden;
  c.num_attention_heads = heads;
  c.num_key_value_heads = heads;
  c.vocab_size = vocab;
  c.max_position_embeddings = max_positions;
  c.tie_word_embeddings = true;
  c.validate();
  return m;
}

std::vector<std::string> model_preset_names() {
  auto names = published_preset_names();  // Llama 3.1 and the families on its block
  for (const char* g : {"gpt-22b", "gpt-175b", "gpt-1t"}) names.push_back(g);
  return names;
}

ModelShape model_preset(const std::string& name) {
  // The Frontier study's shapes (Dash et al. 2023): vocab 50257 padded to 50688, seq 2048.
  if (name == "gpt-22b") return gpt_shape(name, 48, 6144, 48, 50688, 2048);
  if (name == "gpt-175b") return gpt_shape(name, 96, 12288, 96, 50688, 2048);
  if (name == "gpt-1t") return gpt_shape(name, 128, 25600, 128, 50688, 2048);
  for (const auto& n : published_preset_names())
    if (n == name) return {name, Arch::llama, published_preset(name)};
  std::string known;
  for (const auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown model '" + name + "' (known: " + known + ", or a config.json / model directory)");
}

ModelShape resolve_model(const std::string& s) {
  namespace fs = std::filesystem;
  if (s.find('/') == std::string::npos && !fs::exists(s)) return model_preset(s);
  reject_hub_id(s);
  if (!fs::exists(s)) fail(s + ": no such file or directory (expected a config.json or a model directory)");
  // A config.json alone is enough: the planner needs the shape, not the weights.
  if (fs::is_regular_file(s) && fs::path(s).extension() == ".json") {
    const fs::path parent = fs::absolute(s).parent_path();
    return {parent.filename().string(), Arch::llama, load_hf_config(s)};
  }
  return {fs::path(s).filename().string(), Arch::llama, pretrained_config(s)};
}

namespace {

ModelParts llama_parts(const ModelShape& m, const LoraConfig& lora) {
  // One layer's list is exact for every layer: the rules match names up to the layer index.
  // Parted by the trainer's units (param_unit): 0 the embedding (and a tied head's adapters), 1 the
  // layer, 2 the final norm and an untied head with its adapters.
  ModelConfig one = m.config;
  one.num_hidden_layers = 1;
  one.layer_window.clear();  // windows change no tensor
  ModelParts p;
  for (auto& t : llama_param_shapes(one, lora)) {
    const int unit = param_unit(t.name, one);
    (unit == 0 ? p.first : unit == 1 ? p.layer : p.last).push_back(std::move(t));
  }
  // Tied: the last stage stores unit 0 again (parallel::stage_holds), the head's adapters with it.
  if (m.config.tie_word_embeddings) p.head_copy = p.first;
  return p;
}

ModelParts gpt_parts(const ModelShape& m) {
  const int64_t h = m.hidden(), f = m.config.intermediate_size, V = m.vocab();
  ModelParts p;
  p.first = {{"transformer.wte.weight", {V, h}},
             {"transformer.wpe.weight", {m.config.max_position_embeddings, h}}};
  const std::string l = "transformer.h.0.";
  p.layer = {{l + "ln_1.weight", {h}},           {l + "ln_1.bias", {h}},
             {l + "attn.qkv.weight", {3 * h, h}}, {l + "attn.qkv.bias", {3 * h}},
             {l + "attn.proj.weight", {h, h}},    {l + "attn.proj.bias", {h}},
             {l + "ln_2.weight", {h}},           {l + "ln_2.bias", {h}},
             {l + "mlp.fc1.weight", {f, h}},      {l + "mlp.fc1.bias", {f}},
             {l + "mlp.fc2.weight", {h, f}},      {l + "mlp.fc2.bias", {h}}};
  p.last = {{"transformer.ln_f.weight", {h}}, {"transformer.ln_f.bias", {h}}};
  p.head_copy = {{"lm_head.weight", {V, h}}};  // Megatron's copy of wte on the last stage
  return p;
}

}  // namespace

ModelParts model_parts(const ModelShape& m, const LoraConfig& lora) {
  if (m.arch == Arch::llama) return llama_parts(m, lora);
  if (lora.enabled) fail("LoRA is planned for LLaMA models only (" + m.name + " is a GPT shape)");
  return gpt_parts(m);
}

namespace {

parallel::PartitionRules gpt_rules() {
  // Megatron: qkv and fc1 column-parallel (output rows over tp), proj and fc2 row-parallel (input
  // columns over tp); the vocabulary split over tp; fsdp shards the other dimension.
  const std::vector<parallel::Axis> tp = {parallel::Axis::tp}, fsdp = {parallel::Axis::fsdp};
  parallel::PartitionRules r;
  r.add(R"(^(transformer\.wte|lm_head)\.weight$)", {tp, fsdp});
  r.add(R"(^transformer\.wpe\.weight$)", {{}, fsdp});
  r.add(R"(\.(attn\.qkv|mlp\.fc1)\.weight$)", {tp, fsdp});
  r.add(R"(\.(attn\.qkv|mlp\.fc1)\.bias$)", {tp});
  r.add(R"(\.(attn\.proj|mlp\.fc2)\.weight$)", {fsdp, tp});
  r.add(R"(\.(attn\.proj|mlp\.fc2)\.bias$)", {});
  r.add(R"(\.ln_(1|2|f)\.(weight|bias)$)", {});
  return r;
}

}  // namespace

const parallel::PartitionRules& model_rules(const ModelShape& m) {
  static const parallel::PartitionRules llama = parallel::default_llama_rules(), gpt = gpt_rules();
  return m.arch == Arch::llama ? llama : gpt;
}

int64_t total_params(const ModelParts& p, int64_t layers, bool adapters) {
  auto sum = [&](const std::vector<ParamShape>& v) {
    int64_t n = 0;
    for (const auto& t : v)
      if (t.adapter == adapters) n += t.numel();
    return n;
  };
  return sum(p.first) + layers * sum(p.layer) + sum(p.last);
}

double model_flops_per_token(const ModelShape& m, const LoraConfig& lora, int64_t seq) {
  if (m.arch == Arch::llama) return training_flops(m.config, lora, seq).per_token;
  const double h = double(m.hidden()), l = double(m.layers());
  const double n = l * 12.0 * h * h + double(m.vocab()) * h;  // matmul weights incl. the tied head
  return 6.0 * n + 12.0 * l * h * double(seq);
}

double megatron_flops(int64_t B, int64_t s, int64_t l, int64_t h, int64_t V, bool recompute) {
  const double c = recompute ? 4.0 : 3.0;
  const double hd = double(h);
  return 24.0 * c * double(B) * double(s) * double(l) * hd * hd *
         (1.0 + double(s) / (6.0 * hd) + double(V) / (16.0 * double(l) * hd));
}

}  // namespace mt::plan

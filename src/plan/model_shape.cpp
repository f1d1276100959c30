#include "plan/model_shape.h"

#include <filesystem>

#include "core/error.h"
#include "io/family_presets.h"
#include "io/hf_config.h"
#include "io/pretrained.h"
#include "model/transformer.h"
#include "train/flops.h"

namespace mt::plan {

std::vector<std::string> model_preset_names() { return published_preset_names(); }

ModelShape model_preset(const std::string& name) {
  for (const auto& n : published_preset_names())
    if (n == name) return {name, published_preset(name)};
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
    return {parent.filename().string(), load_hf_config(s)};
  }
  return {fs::path(s).filename().string(), pretrained_config(s)};
}

ModelParts model_parts(const ModelShape& m, const LoraConfig& lora) {
  // One layer's list is exact for every layer: the rules match names up to the layer index.
  // Parted by the trainer's units (param_unit): 0 the embedding (and a tied head's adapters), 1 the
  // layer, 2 the final norm and an untied head with its adapters.
  ModelConfig one = m.config;
  one.num_hidden_layers = 1;
  one.layer_window.clear();  // windows change no tensor
  // A mixture of experts is priced with every layer sparse (all of the published configs' are;
  // a dense mlp_only_layer is priced as an MoE one).
  if (one.moe()) one.mlp_only_layers.clear(), one.decoder_sparse_step = 1;
  ModelParts p;
  for (auto& t : llama_param_shapes(one, lora)) {
    const int unit = param_unit(t.name, one);
    (unit == 0 ? p.first : unit == 1 ? p.layer : p.last).push_back(std::move(t));
  }
  // Tied: the last stage stores unit 0 again (parallel::stage_holds), the head's adapters with it.
  if (m.config.tie_word_embeddings) p.head_copy = p.first;
  return p;
}

const parallel::PartitionRules& model_rules() {
  static const parallel::PartitionRules rules = parallel::default_llama_rules();
  return rules;
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

bool is_expert_param(const ParamShape& p) { return p.name.find(".experts.") != std::string::npos; }

int64_t active_params(const ModelParts& p, const ModelConfig& c, int64_t layers) {
  const int64_t total = total_params(p, layers, /*adapters=*/false);
  if (!c.moe()) return total;
  int64_t experts = 0;  // one layer's, all of them
  for (const auto& t : p.layer)
    if (!t.adapter && is_expert_param(t)) experts += t.numel();
  return total - layers * experts / c.num_experts * (c.num_experts - c.num_experts_per_tok);
}

double model_flops_per_token(const ModelShape& m, const LoraConfig& lora, int64_t seq) {
  return training_flops(m.config, lora, seq).per_token;
}

double megatron_flops(int64_t B, int64_t s, int64_t l, int64_t h, int64_t V, bool recompute) {
  const double c = recompute ? 4.0 : 3.0;
  const double hd = double(h);
  return 24.0 * c * double(B) * double(s) * double(l) * hd * hd *
         (1.0 + double(s) / (6.0 * hd) + double(V) / (16.0 * double(l) * hd));
}

}  // namespace mt::plan

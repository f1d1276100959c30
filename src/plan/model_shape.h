// What the planner needs to know about a model: its description (ModelConfig: every family, the
// Frontier study's GPT shapes among them, is one block described by its config), its parameters as
// shape-only tensors in three parts (what the first pipeline stage holds, one transformer layer,
// what the last stage holds), the partition rules that place them, and its FLOPs. The parameters
// come from llama_param_shapes, the trainer's own list.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/partition.h"
#include "model/config.h"
#include "model/param_shapes.h"
#include "train/run_config.h"

namespace mt::plan {

struct ModelShape {
  std::string name;
  ModelConfig config;

  int64_t layers() const { return config.num_hidden_layers; }
  int64_t hidden() const { return config.hidden_size; }
  int64_t vocab() const { return config.vocab_size; }
};

// llama3-8b, llama3-70b, llama3-405b, reference (the engine's benchmark shape), gpt2*, gemma3-*,
// the families' published sizes (io/family_presets.h: qwen2.5-*, qwen3-*, mistral-*, the mixtures
// of experts mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, qwen3-235b-a22b, and the Frontier study's
// gpt-22b, gpt-175b, gpt-1t); throws listing the names.
ModelShape model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
// A preset name, an HF config.json, or a model directory.
ModelShape resolve_model(const std::string& name_or_path);

struct ModelParts {
  std::vector<ParamShape> first;      // embedding(s) (and a tied head's adapters): the first stage
  std::vector<ParamShape> layer;      // one transformer layer (layer 0's names)
  std::vector<ParamShape> last;       // final norm, an untied head and its adapters: the last stage
  std::vector<ParamShape> head_copy;  // tied head: a copy the last stage holds when it is not the first
};
ModelParts model_parts(const ModelShape& m, const LoraConfig& lora);
// The trainer's rules (one set names every family's tensors), compiled once: the search asks
// thousands of times.
const parallel::PartitionRules& model_rules();

int64_t total_params(const ModelParts& p, int64_t layers, bool adapters);
// Whether a parameter is an expert's (or an expert's adapter): model/param_shapes.h names them
// ...experts.{e}...
bool is_expert_param(const ParamShape& p);
// The base parameters a token uses: of a mixture of experts, all but the experts it does not
// pass (num_experts - num_experts_per_tok of each MoE layer's; the router, the attention, the
// embedding, the norms and the head counted), as the model cards' "activated" figures count them;
// total_params for a dense model. `layers` MoE layers (model_parts prices every layer as one).
int64_t active_params(const ModelParts& p, const ModelConfig& c, int64_t layers);

// Model FLOPs per trained token (no recomputation), as train/flops.h counts them
// (6N + 12·L·Q·T, LoRA 4N + 6N_lora + 12·L·Q·T; a GeLU MLP has two matrices, not three).
double model_flops_per_token(const ModelShape& m, const LoraConfig& lora, int64_t seq);
// Megatron's count per iteration (Narayanan et al. 2021), as the Frontier study reports it:
// 24·c·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)); c = 3, or 4 with activation recomputation.
double megatron_flops(int64_t batch, int64_t seq, int64_t layers, int64_t hidden, int64_t vocab,
                      bool recompute);

}  // namespace mt::plan

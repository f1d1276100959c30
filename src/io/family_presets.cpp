#include "io/family_presets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_config.h"
#include "model/presets.h"

namespace mt {

namespace {

// The keys every size of a family shares, from its releases' config.json (each preset below says
// where its own were checked).
const char* family_keys(const std::string& family) {
  if (family == "qwen2")
    return R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rms_norm_eps": 1e-06,
               "rope_theta": 1000000.0, "use_sliding_window": false})";
  if (family == "qwen3")
    return R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
               "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
               "rope_theta": 1000000, "attention_bias": false, "sliding_window": null,
               "use_sliding_window": false})";
  if (family == "mistral")
    return R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "intermediate_size": 14336,
               "num_key_value_heads": 8, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
               "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false})";
  // The mixtures of experts (docs/model-families.md "Mixtures of experts"). Mixtral: every layer
  // sparse, the experts intermediate_size wide, the two chosen renormalised; Qwen3-MoE: the
  // experts moe_intermediate_size wide, 8 of 128 a token, renormalised (norm_topk_prob), no dense
  // layer (decoder_sparse_step 1, mlp_only_layers empty), Qwen3's q/k norms and head_dim 128.
  // Both untied, the routing losses off as the published configs ship them.
  if (family == "mixtral")
    return R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_key_value_heads": 8,
               "num_local_experts": 8, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05,
               "rope_theta": 1000000.0, "sliding_window": null, "router_jitter_noise": 0.0,
               "output_router_logits": false, "tie_word_embeddings": false})";
  if (family == "qwen3_moe")
    return R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "head_dim": 128,
               "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
               "rope_theta": 1000000.0, "attention_bias": false, "num_experts": 128,
               "num_experts_per_tok": 8, "norm_topk_prob": true, "decoder_sparse_step": 1,
               "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "output_router_logits": false,
               "sliding_window": null, "use_sliding_window": false, "tie_word_embeddings": false})";
  // The Frontier study's GPT (Megatron-DeepSpeed's GPT model, Dash et al. 2023) described as GPT-2:
  // LayerNorm with biases, a 4h GeLU MLP, learned positions (its sequence, 2048), biases on every
  // projection, the head tied to the token embedding. GPT-2's 50257 tokens padded as Megatron pads
  // them: to a multiple of make_vocab_size_divisible_by (128) x the tensor-parallel size, here the
  // study's TP 4 for 175B and 1T: 512 x 99 = 50688 (the study's text we have gives no padded
  // size; megatron/tokenizer/tokenizer.py _vocab_size_with_padding gives the rule). LayerNorm eps
  // 1e-5 is Megatron's default (--layernorm-epsilon) and GPT-2's.
  if (family == "gpt")
    return R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 2048,
               "vocab_size": 50688, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
               "n_inner": null, "tie_word_embeddings": true})";
  fail("family preset: unknown family '" + family + "' (expected qwen2, qwen3, mistral, mixtral, qwen3_moe or gpt)");
}

}  // namespace

// Each preset's keys are those of its repository's config.json
// (https://huggingface.co/<source>/blob/main/config.json), checked on 2026-12-03 against public
// copies of that file (the comment by each preset names them; huggingface.co itself is out of
// reach here); docs/planner.md "The presets, checked" has the table. The published figure is the
// parameter count its model card (or the Hub's safetensors summary, or the paper) prints.
// tests/test_family_presets.cpp checks the exact counts against a hand count and the published
// figure (which also settles tie_word_embeddings: tied or not changes the count by V x C).
const std::vector<FamilyPreset>& family_presets() {
  static const std::vector<FamilyPreset> presets = {
      // Checked: Lightning-AI/litgpt litgpt/config.py (its copy of this config.json: 32768 positions,
      // eps 1e-6, theta 1e6) and a verbatim copy of the file ("# Qwen/Qwen2.5-0.5B ## model config").
      {"qwen2.5-0.5b", "qwen2", "Qwen/Qwen2.5-0.5B", "0.49B",
       R"({"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
           "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
           "tie_word_embeddings": true})", ""},
      // Checked: litgpt/config.py (131072 positions, eps 1e-6) and a veRL run log printing the
      // Qwen2Config it loaded from Qwen/Qwen2.5-7B (every key above). The Instruct model has 32768.
      {"qwen2.5-7b", "qwen2", "Qwen/Qwen2.5-7B", "7.61B",
       R"({"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 131072,
           "tie_word_embeddings": false})", ""},
      // Checked: litgpt/config.py (norm_eps 1e-5, 131072 positions) and a transformers.Qwen2Config
      // copied "From https://huggingface.co/Qwen/Qwen2.5-72B/blob/main/config.json" (rms_norm_eps
      // 1e-05; the Instruct model's is 1e-06).
      {"qwen2.5-72b", "qwen2", "Qwen/Qwen2.5-72B", "72.7B",
       R"({"hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80, "num_attention_heads": 64,
           "num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 131072,
           "rms_norm_eps": 1e-05, "tie_word_embeddings": false})", ""},
      // Qwen3 checked: litgpt/config.py for 0.6B, 8B and 32B (40960 positions, eps 1e-6, theta 1e6,
      // head_size 128, q/k norms); a Qwen3Config copy of Qwen3-8B (FLUX.2's text encoder) for the
      // rest of its keys.
      {"qwen3-0.6b", "qwen3", "Qwen/Qwen3-0.6B", "0.6B",
       R"({"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
           "num_key_value_heads": 8, "tie_word_embeddings": true})", ""},
      {"qwen3-8b", "qwen3", "Qwen/Qwen3-8B", "8.2B",
       R"({"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "tie_word_embeddings": false})", ""},
      {"qwen3-32b", "qwen3", "Qwen/Qwen3-32B", "32.8B",
       R"({"hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
           "num_key_value_heads": 8, "tie_word_embeddings": false})", ""},
      // v0.1: every layer attends to the last 4096 positions, RoPE base 1e4. Checked: litgpt/config.py
      // (sliding_window_size 4096, vocab 32000, eps 1e-5, its note that the positions are 32768).
      {"mistral-7b", "mistral", "mistralai/Mistral-7B-v0.1", "7.24B",
       R"({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,
           "rope_theta": 10000.0, "sliding_window": 4096})", ""},
      // v0.3: no window, 768 more tokens (control tokens), RoPE base 1e6. Checked: litgpt/config.py
      // (vocab 32768, 32768 positions, rope_base 1e6, no window).
      {"mistral-7b-v0.3", "mistral", "mistralai/Mistral-7B-v0.3", "7.25B",
       R"({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32768})", ""},
      // Nemo: 32 heads of 128 (4096 wide) on a 5120-wide residual stream. Checked: the model card
      // (head dim 128, theta 1M, vocabulary 2^17) and NVIDIA NeMo's MistralNeMoConfig12B
      // (rotary_base 1e6, its note that config.json has max_position_embeddings 1024000, no window).
      {"mistral-nemo-12b", "mistral", "mistralai/Mistral-Nemo-Base-2407", "12.2B",
       R"({"hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 32, "head_dim": 128,
           "vocab_size": 131072, "max_position_embeddings": 1024000})", ""},
      // Mixtral 8x7B: the keys of tests/test_moe_hf.cpp's copy of its config.json (transformers 4.36),
      // which MoeHf.ReadsMixtral8x7B reads; also litgpt/config.py's Mixtral-8x7B entry (32768
      // positions, eps 1e-5, rope_base 1e6, 8 experts, 2 a token, intermediate 14336). 46.7B in all,
      // 12.9B a token (the Mistral AI release's figures).
      {"mixtral-8x7b", "mixtral", "mistralai/Mixtral-8x7B-v0.1", "46.7B",
       R"({"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "vocab_size": 32000, "max_position_embeddings": 32768, "router_aux_loss_coef": 0.02})",
       "12.9B"},
      // Mixtral 8x22B: the config.json as known (hidden 6144, 56 layers, 48 heads, 8 KV heads, 16384
      // wide experts, vocabulary 32768, 65536 positions), checked on 2026-12-06 against
      // litgpt/config.py's Mixtral-8x22B entry (the same keys, rope_base 1e6, eps 1e-5). 141B in all,
      // 39B active (Mistral AI's announcement); the tensors count 140.63B.
      {"mixtral-8x22b", "mixtral", "mistralai/Mixtral-8x22B-v0.1", "141B",
       R"({"hidden_size": 6144, "intermediate_size": 16384, "num_hidden_layers": 56, "num_attention_heads": 48,
           "vocab_size": 32768, "max_position_embeddings": 65536, "router_aux_loss_coef": 0.001})",
       "39B"},
      // Qwen3-30B-A3B: the keys of tests/test_moe_hf.cpp's copy of its config.json (transformers
      // 4.51), which MoeHf.ReadsQwen3_30B_A3B reads. 30.5B in all, 3.3B activated (the model card).
      {"qwen3-30b-a3b", "qwen3_moe", "Qwen/Qwen3-30B-A3B", "30.5B",
       R"({"hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
           "num_attention_heads": 32, "num_key_value_heads": 4})",
       "3.3B"},
      // Qwen3-235B-A22B: its config.json as known (hidden 4096, 94 layers, 64 heads, 4 KV heads,
      // experts 1536 wide), checked on 2026-12-06 against public copies of its shape (benchmark
      // presets naming qwen3-235b-a22b: hidden 4096, moe_intermediate_size 1536, 94 layers, 64
      // heads, 4 KV heads, 128 experts); the family's keys are Qwen3-30B-A3B's. 235B in all, 22B
      // activated (the model card).
      {"qwen3-235b-a22b", "qwen3_moe", "Qwen/Qwen3-235B-A22B", "235B",
       R"({"hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_hidden_layers": 94,
           "num_attention_heads": 64, "num_key_value_heads": 4})",
       "22B"},
      // The Frontier study's shapes (layers / hidden / heads from its Table of model sizes): GPT-3's
      // 175B (Brown et al. 2020 print 175.0B for the same shape with 50257 tokens), and 22B and 1T.
      {"gpt-22b", "gpt", "Dash et al. 2023, arXiv:2312.12705", "22B",
       R"({"n_layer": 48, "n_embd": 6144, "n_head": 48})", ""},
      {"gpt-175b", "gpt", "Dash et al. 2023, arXiv:2312.12705", "175B",
       R"({"n_layer": 96, "n_embd": 12288, "n_head": 96})", ""},
      {"gpt-1t", "gpt", "Dash et al. 2023, arXiv:2312.12705", "1T",
       R"({"n_layer": 128, "n_embd": 25600, "n_head": 128})", ""},
  };
  return presets;
}

std::vector<std::string> family_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : family_presets()) names.push_back(p.name);
  return names;
}

const FamilyPreset* find_family_preset(const std::string& name) {
  for (const auto& p : family_presets())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<std::string> published_preset_names() {
  auto names = llama_preset_names();
  for (auto& n : family_preset_names()) names.push_back(std::move(n));
  return names;
}

std::string family_preset_json(const std::string& name) {
  const FamilyPreset* p = find_family_preset(name);
  if (!p) {
    std::string known;
    for (const auto& n : family_preset_names()) known += (known.empty() ? "" : ", ") + n;
    fail("unknown family preset '" + name + "' (expected " + known + ")");
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(family_keys(p->family));
  j.update(nlohmann::ordered_json::parse(p->keys));
  return j.dump(2);
}

ModelConfig family_preset(const std::string& name) {
  const std::string json = family_preset_json(name);
  const FamilyPreset* p = find_family_preset(name);
  return parse_hf_config(json, std::string("preset ") + p->name + " (" + p->source + " config.json)");
}

ModelConfig published_preset(const std::string& name) {
  if (find_family_preset(name)) return family_preset(name);
  for (const auto& n : llama_preset_names())
    if (n == name) return llama_preset(name);
  std::string known;
  for (const auto& n : published_preset_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown model preset '" + name + "' (expected " + known + ")");
}

}  // namespace mt

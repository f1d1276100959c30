// GGUF export of the mixtures of experts (io/gguf_architectures.h): Mixtral as llama.cpp's llama,
// Qwen3-MoE as its qwen3moe and OLMoE as its olmoe, with the router (ffn_gate_inp, always F32) and
// each projection's experts stacked into one 3-D ffn_*_exps tensor [experts, out, in] (ggml's
// ne = {in, out, experts}); the expert keys; every type; the file read back by meshtrain into the
// same model (the logits of the HF directory); LoRA adapters of the experts stacked alike; and
// what llama.cpp would compute otherwise refused in one line with no file left behind.
// (scripts/check_llamacpp.sh runs the real llama.cpp on such files.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf_export.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/llama2c.h"
#include "io/model_files.h"
#include "io/pretrained.h"
#include "model/generate.h"
#include "model_fixtures.h"
#include "next_token_loss.h"
#include "temp_dirs.h"

namespace mt {
namespace {

std::string temp_file(const std::string& name) {
  static const std::string dir = testing::fresh_temp_dir("gguf_moe");
  return dir + "/" + name;
}

std::vector<float> values(const ParamStore& store, const std::string& name) {
  const Param& p = store.get(name);
  std::vector<float> v(size_t(p.numel));
  store.get_values(p, v.data());
  return v;
}

// A tiny model of the family, its rows whole blocks of 32 (so every matrix can be quantised):
// hidden 32, 4 heads, 4 experts, 2 a token. Mixtral: GQA, the experts intermediate_size wide,
// renormalised; Qwen3-MoE: per-head q/k norms, head_dim 16 (not 32 / 4), experts 32 wide (not
// intermediate_size), renormalised (norm_topk_prob true, as Qwen3-30B-A3B), tied embeddings;
// OLMoE: q/k norms over the whole projections, no GQA (llama.cpp's olmoe has none), not renormalised.
ModelConfig moe_config(const std::string& family) {
  ModelConfig c = testing::tiny_config();
  c.model_type = family;
  c.hidden_size = 32, c.intermediate_size = 64, c.num_attention_heads = 4;
  c.num_experts = 4, c.num_experts_per_tok = 2;
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = family != "olmoe";
  if (family == "qwen3_moe") {
    c.qk_norm = true, c.head_dim_override = 16, c.moe_intermediate_size = 32;
    c.tie_word_embeddings = true;
  }
  if (family == "olmoe") c.qk_norm = c.qk_norm_whole = true, c.num_key_value_heads = 4;
  c.validate();
  return c;
}

std::unique_ptr<Transformer> random_model(const ModelConfig& c, uint64_t seed) {
  auto m = std::make_unique<Transformer>(c, Precision::fp32, LoraConfig{});
  m->init_weights(seed);
  testing::randomize(m->base(), seed + 1, 0.3f);
  return m;
}

// HF's names of a layer's router and of one expert's projection (gate, up or down).
std::string router(const ModelConfig& c, int l) {
  return "model.layers." + std::to_string(l) + (c.model_type == "mixtral" ? ".block_sparse_moe" : ".mlp") + ".gate.weight";
}
std::string expert(const ModelConfig& c, int l, int64_t e, int proj) {
  static const char* mixtral[] = {"w1", "w3", "w2"};
  static const char* others[] = {"gate_proj", "up_proj", "down_proj"};
  const bool m = c.model_type == "mixtral";
  return "model.layers." + std::to_string(l) + (m ? ".block_sparse_moe" : ".mlp") + ".experts." + std::to_string(e) +
         "." + (m ? mixtral[proj] : others[proj]) + ".weight";
}
const char* const kExps[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

const std::vector<int32_t> kTwelve = {5, 17, 9, 2, 30, 1, 12, 7, 3, 3, 21, 8};

std::vector<float> logits(Transformer& m, const std::vector<int32_t>& tokens) {
  ModelInput in;
  in.tokens = tokens.data();
  in.B = 1, in.T = int64_t(tokens.size());
  std::vector<float> out(tokens.size() * size_t(m.config().vocab_size));
  m.forward_logits(in, out.data());
  return out;
}


struct MoeCase {
  const char* family;
  const char* architecture;
};

class GgufMoe : public ::testing::TestWithParam<MoeCase> {};

TEST_P(GgufMoe, ExpertKeysAndStackedTensors) {
  const MoeCase f = GetParam();
  const ModelConfig c = moe_config(f.family);
  auto m = random_model(c, 3);
  const std::string path = temp_file(std::string(f.family) + ".gguf");
  EXPECT_EQ(export_gguf_model(*m, path, nullptr, GgufDtype::f32).architecture, f.architecture);
  const GgufFile g = read_gguf(path);
  const std::string a = f.architecture;
  EXPECT_EQ(g.get_str("general.architecture"), a);
  EXPECT_EQ(g.get_u32(a + ".expert_count"), 4u);
  EXPECT_EQ(g.get_u32(a + ".expert_used_count"), 2u);
  // qwen3moe reads its experts' width from its own key; llama and olmoe size them by n_ff.
  if (a == "qwen3moe") {
    EXPECT_EQ(g.get_u32(a + ".expert_feed_forward_length"), 32u);
  } else {
    EXPECT_EQ(g.find(a + ".expert_feed_forward_length"), nullptr);
  }
  EXPECT_EQ(g.get_u32(a + ".feed_forward_length"), uint64_t(c.intermediate_size));
  const int64_t E = c.num_experts, C = c.hidden_size, I = c.moe_intermediate_size;
  for (int l = 0; l < 2; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(g.tensor(blk + "ffn_gate_inp.weight").ne, (std::vector<uint64_t>{uint64_t(C), uint64_t(E)}));
    EXPECT_EQ(g.tensor_f32(blk + "ffn_gate_inp.weight"), values(m->base(), router(c, l)));
    EXPECT_EQ(g.find_tensor(blk + "ffn_gate.weight"), nullptr);
    // ne as llama.cpp's loaders create them: gate / up {n_embd, n_ff, n_expert}, down {n_ff, n_embd, n_expert}.
    for (int p = 0; p < 3; ++p) {
      const std::string name = blk + kExps[p] + ".weight";
      const std::vector<uint64_t> ne = p == 2 ? std::vector<uint64_t>{uint64_t(I), uint64_t(C), uint64_t(E)}
                                              : std::vector<uint64_t>{uint64_t(C), uint64_t(I), uint64_t(E)};
      EXPECT_EQ(g.tensor(name).ne, ne) << name;
      std::vector<float> stacked;
      for (int64_t e = 0; e < E; ++e) {
        const std::vector<float> v = values(m->base(), expert(c, l, e, p));
        stacked.insert(stacked.end(), v.begin(), v.end());
      }
      EXPECT_EQ(g.tensor_f32(name), stacked) << name;
    }
  }
  // Per layer: 3 stacks and a router instead of 3 E expert matrices and a router.
  EXPECT_EQ(g.tensors.size(), m->base().params().size() - size_t(c.num_hidden_layers * (3 * E - 3)));
  // Mixtral's q rows in llama's interleaved order (llama.cpp's converter permutes them); the
  // others' RoPE rotates halves, as HF's rows.
  const std::vector<float> q = values(m->base(), "model.layers.1.self_attn.q_proj.weight");
  const std::vector<float> got = g.tensor_f32("blk.1.attn_q.weight");
  if (a == "llama") {
    std::vector<float> hf(got.size());
    permute_rotary_rows(got.data(), hf.data(), c.num_attention_heads, c.head_dim(), C);
    EXPECT_EQ(hf, q);
  } else {
    EXPECT_EQ(got, q);
  }
  // OLMoE's q/k norms span the hidden size; Qwen3-MoE's a head.
  if (c.qk_norm) {
    EXPECT_EQ(g.tensor("blk.0.attn_k_norm.weight").ne[0], uint64_t(c.qk_norm_whole ? C : c.head_dim()));
  }
  EXPECT_EQ(g.find_tensor("output.weight") == nullptr, c.tie_word_embeddings);
}

// The f32 file reads back as the model: config, every value, and the logits of the HF directory
// the same model is saved as; greedy generation.
TEST_P(GgufMoe, ReadsBackAsTheHfDirectory) {
  const MoeCase f = GetParam();
  const ModelConfig c = moe_config(f.family);
  auto m = random_model(c, 5);
  const std::string dir = temp_file(std::string(f.family) + "_hf");
  save_base_model(*m, dir);
  const std::string path = temp_file(std::string(f.family) + "_back.gguf");
  export_gguf_model(*m, path, nullptr, GgufDtype::f32);
  auto hf = load_pretrained(dir, Precision::fp32, LoraConfig{}, 0);
  auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
  const ModelConfig& b = back->config();
  EXPECT_EQ(b.model_type, c.model_type);
  EXPECT_EQ(b.num_experts, c.num_experts);
  EXPECT_EQ(b.num_experts_per_tok, c.num_experts_per_tok);
  EXPECT_EQ(b.moe_intermediate_size, c.moe_intermediate_size);
  EXPECT_EQ(b.norm_topk_prob, c.norm_topk_prob);
  EXPECT_EQ(b.qk_norm, c.qk_norm);
  EXPECT_EQ(b.qk_norm_whole, c.qk_norm_whole);
  EXPECT_EQ(b.head_dim(), c.head_dim());
  EXPECT_EQ(b.num_key_value_heads, c.num_key_value_heads);
  EXPECT_EQ(b.tie_word_embeddings, c.tie_word_embeddings);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(b.moe_layer(l));
  ASSERT_EQ(back->base().params().size(), m->base().params().size());
  for (const Param& p : m->base().params()) EXPECT_EQ(values(back->base(), p.name), values(m->base(), p.name)) << p.name;
  EXPECT_EQ(logits(*back, kTwelve), logits(*hf, kTwelve));
  GenerateOptions greedy;
  greedy.max_new_tokens = 12;
  EXPECT_EQ(generate(*back, {3, 11}, greedy), generate(*hf, {3, 11}, greedy));
}

// Every type: the stacks in the type asked for (blocks along each expert's rows; a Q4_0 file
// keeps the output at Q8_0 as for the dense families), the router and norms F32; the file reads
// back to its own values (meshtrain's reader gives the values the file holds), its loss near the
// source's (as the dense families' quantised files: 2% for Q8_0, 20% for Q4_0).
TEST_P(GgufMoe, EveryTypeReadsBack) {
  const MoeCase f = GetParam();
  const ModelConfig c = moe_config(f.family);
  auto m = random_model(c, 7);
  const double want = testing::next_token_mean_loss(*m, kTwelve);
  for (GgufDtype d : {GgufDtype::f16, GgufDtype::bf16, GgufDtype::q8_0, GgufDtype::q4_0}) {
    SCOPED_TRACE(gguf_dtype_name(d));
    const std::string path = temp_file(std::string(f.family) + "_" + gguf_dtype_name(d) + ".gguf");
    const GgufModelWritten w = export_gguf_model(*m, path, nullptr, d);
    EXPECT_EQ(w.file_type, d);
    EXPECT_TRUE(w.kept_f16.empty());
    const GgufFile g = read_gguf(path);
    const GgmlType asked = d == GgufDtype::f16    ? GgmlType::f16
                           : d == GgufDtype::bf16 ? GgmlType::bf16
                           : d == GgufDtype::q8_0 ? GgmlType::q8_0
                                                  : GgmlType::q4_0;
    for (const char* x : kExps) EXPECT_EQ(g.tensor(std::string("blk.1.") + x + ".weight").type, asked) << x;
    EXPECT_EQ(g.tensor("blk.1.attn_q.weight").type, asked);
    EXPECT_EQ(g.tensor("blk.1.ffn_gate_inp.weight").type, GgmlType::f32);
    EXPECT_EQ(g.tensor("blk.1.attn_norm.weight").type, GgmlType::f32);
    auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
    for (int p = 0; p < 3; ++p) {
      std::vector<float> stacked;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::vector<float> v = values(back->base(), expert(c, 1, e, p));
        stacked.insert(stacked.end(), v.begin(), v.end());
      }
      EXPECT_EQ(stacked, g.tensor_f32(std::string("blk.1.") + kExps[p] + ".weight")) << kExps[p];
    }
    const double tol = d == GgufDtype::q4_0 ? 0.2 : d == GgufDtype::f16 ? 1e-3 : 0.02;
    EXPECT_NEAR(testing::next_token_mean_loss(*back, kTwelve), want, tol * want);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GgufMoe,
                         ::testing::Values(MoeCase{"mixtral", "llama"}, MoeCase{"qwen3_moe", "qwen3moe"},
                                           MoeCase{"olmoe", "olmoe"}),
                         [](const auto& info) { return std::string(info.param.family); });

// The one-line refusal export_gguf_model (and export_gguf_lora) gives a model of config c; no file left.
std::string refusal(const ModelConfig& c, const std::string& name) {
  Transformer m(c, Precision::fp32, LoraConfig{});
  const std::string path = temp_file(name + ".gguf");
  std::string e;
  try {
    export_gguf_model(m, path, nullptr, GgufDtype::f32);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << name;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_FALSE(e.empty()) << name << " was written";
  return e;
}

// What llama.cpp's graphs would compute otherwise, or its loaders refuse.
TEST(GgufMoeRefusals, WhatLlamaCppWouldComputeOtherwise) {
  // qwen3moe always renormalises the top k (Qwen3-MoE's norm_topk_prob false is computed otherwise).
  ModelConfig q = moe_config("qwen3_moe");
  q.norm_topk_prob = false;
  EXPECT_NE(refusal(q, "q_norm").find("llama.cpp's qwen3moe architecture renormalises the chosen experts' weights; "
                                      "this model does not (norm_topk_prob false)"),
            std::string::npos);
  // olmoe never does.
  ModelConfig o = moe_config("olmoe");
  o.norm_topk_prob = true;
  EXPECT_NE(refusal(o, "o_norm").find("olmoe architecture does not renormalise"), std::string::npos);
  // A dense layer among the sparse ones (Qwen3-MoE's mlp_only_layers): llama.cpp's are all sparse.
  ModelConfig dense = moe_config("qwen3_moe");
  dense.mlp_only_layers = {1};
  EXPECT_NE(refusal(dense, "dense").find("puts experts on every layer; this model's layer 1 is dense"), std::string::npos);
  ModelConfig step = moe_config("mixtral");
  step.decoder_sparse_step = 2;
  EXPECT_NE(refusal(step, "step").find("this model's layer 0 is dense (decoder_sparse_step 2"), std::string::npos);
  // A capacity limit drops choices; llama.cpp computes them all.
  ModelConfig cap = moe_config("mixtral");
  cap.moe_capacity_factor = 1.25f;
  EXPECT_NE(refusal(cap, "cap").find("drops choices past an expert's capacity"), std::string::npos);
  // OLMoE with grouped-query attention: llama.cpp sizes its k norm [hidden].
  ModelConfig gqa = moe_config("olmoe");
  gqa.num_key_value_heads = 2;
  EXPECT_NE(refusal(gqa, "gqa").find("olmoe architecture sizes k and its norm as the hidden size (32); this model's "
                                     "kv heads x head_dim is 16"),
            std::string::npos);
  // OLMoE tied: llama.cpp's olmoe loads output.weight unconditionally.
  ModelConfig tied = moe_config("olmoe");
  tied.tie_word_embeddings = true;
  EXPECT_NE(refusal(tied, "tied").find("olmoe architecture requires output.weight"), std::string::npos);
  // Mixtral's experts of another width than feed_forward_length (llama.cpp's llama has one n_ff).
  ModelConfig width = moe_config("mixtral");
  width.moe_intermediate_size = 32;
  EXPECT_NE(refusal(width, "width").find("sizes the experts by feed_forward_length; this model's experts are 32 wide"),
            std::string::npos);
  // Experts on an architecture without them.
  ModelConfig qwen3 = moe_config("qwen3_moe");
  qwen3.model_type = "qwen3";
  EXPECT_NE(refusal(qwen3, "qwen3").find("qwen3 architecture has no experts"), std::string::npos);
}

// A GGUF file whose architecture is a mixture of experts but holds no expert_count is refused on reading.
TEST(GgufMoeRefusals, FileWithoutExpertCount) {
  const ModelConfig c = moe_config("olmoe");
  auto m = random_model(c, 2);
  const std::string path = temp_file("no_count.gguf");
  export_gguf_model(*m, path, nullptr, GgufDtype::f32);
  GgufFile g = read_gguf(path);
  std::vector<GgufKV> kvs;
  for (const GgufKV& kv : g.kvs)
    if (kv.key != "olmoe.expert_count") kvs.push_back(kv);
  std::vector<GgufTensorOut> tensors;
  std::vector<std::vector<float>> data;
  data.reserve(g.tensors.size());
  for (const auto& t : g.tensors) {
    data.push_back(g.tensor_f32(t.name));
    tensors.push_back({t.name, t.shape(), GgmlType::f32, data.back().data(), {}});
  }
  const std::string broken = temp_file("no_count_broken.gguf");
  write_gguf(broken, kvs, tensors);
  try {
    load_pretrained(broken, Precision::fp32, LoraConfig{}, 0);
    ADD_FAILURE() << "read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("olmoe.expert_count is missing or 0"), std::string::npos) << e.what();
  }
}

// LoRA adapters of the experts: each projection's experts' A and B stacked as the base tensor,
// lora_a [experts, rank, in] and lora_b [experts, out, rank]; attention adapters as for the dense
// families (q's B rows permuted in llama's order); the router has none.
TEST(GgufMoeLora, ExpertAdaptersStacked) {
  const ModelConfig c = moe_config("mixtral");
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f;
  lora.targets = {"q", "gate", "up", "down"};
  Transformer m(c, Precision::fp32, lora);
  m.init_weights(4);
  m.init_adapters(5);
  testing::randomize(m.adapters(), 6, 0.3f);
  const std::string path = temp_file("mixtral_lora.gguf");
  export_gguf_lora(m, path, "tiny-mixtral");
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "llama");
  const uint64_t E = uint64_t(c.num_experts), C = uint64_t(c.hidden_size), I = uint64_t(c.moe_intermediate_size), r = 2;
  // Per layer: q's pair and one pair per projection's stack.
  EXPECT_EQ(g.tensors.size(), size_t(c.num_hidden_layers) * 2 * 4);
  for (int p = 0; p < 3; ++p) {
    const std::string base = std::string("blk.1.") + kExps[p] + ".weight";
    const uint64_t in = p == 2 ? I : C, out = p == 2 ? C : I;
    EXPECT_EQ(g.tensor(base + ".lora_a").ne, (std::vector<uint64_t>{in, r, E})) << base;
    EXPECT_EQ(g.tensor(base + ".lora_b").ne, (std::vector<uint64_t>{r, out, E})) << base;
    std::vector<float> a, b;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string module = expert(c, 1, e, p);
      const std::string stem = module.substr(0, module.size() - std::string(".weight").size());
      const std::vector<float> va = values(m.adapters(), stem + ".lora_A.weight");
      const std::vector<float> vb = values(m.adapters(), stem + ".lora_B.weight");
      a.insert(a.end(), va.begin(), va.end());
      b.insert(b.end(), vb.begin(), vb.end());
    }
    EXPECT_EQ(g.tensor_f32(base + ".lora_a"), a) << base;
    EXPECT_EQ(g.tensor_f32(base + ".lora_b"), b) << base;
  }
  const std::vector<float> qb = values(m.adapters(), "model.layers.1.self_attn.q_proj.lora_B.weight");
  const std::vector<float> got = g.tensor_f32("blk.1.attn_q.weight.lora_b");
  std::vector<float> hf(got.size());
  permute_rotary_rows(got.data(), hf.data(), c.num_attention_heads, c.head_dim(), 2);
  EXPECT_EQ(hf, qb);
}

// The merged export of an adapted mixture of experts (export --adapter --merged, then --gguf):
// merging puts each expert's adapter into that expert, so the merged model computes the adapted
// one's logits, and its GGUF reads back to them.
TEST(GgufMoeLora, MergedExpertsExportAndReadBack) {
  for (const char* family : {"mixtral", "qwen3_moe"}) {
    SCOPED_TRACE(family);
    LoraConfig lora;
    lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f;
    lora.targets = {"q", "v", "gate", "up", "down"};
    Transformer m(moe_config(family), Precision::fp32, lora);
    m.init_weights(4);
    m.init_adapters(5);
    testing::randomize(m.adapters(), 6, 0.3f);
    const std::vector<float> adapted = logits(m, kTwelve);
    const std::vector<float> base_expert = values(m.base(), expert(m.config(), 1, 2, 2));
    m.merge_adapters();
    EXPECT_NE(values(m.base(), expert(m.config(), 1, 2, 2)), base_expert);  // the expert took its adapter
    const std::vector<float> merged = logits(m, kTwelve);
    ASSERT_EQ(merged.size(), adapted.size());
    for (size_t k = 0; k < merged.size(); ++k) ASSERT_NEAR(merged[k], adapted[k], 1e-4f) << k;
    const std::string path = temp_file(std::string(family) + "_merged.gguf");
    export_gguf_model(m, path, nullptr, GgufDtype::f32);
    auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
    const std::vector<float> read = logits(*back, kTwelve);
    for (size_t k = 0; k < read.size(); ++k) ASSERT_NEAR(read[k], merged[k], 1e-5f) << k;
  }
}

}  // namespace
}  // namespace mt

// GGUF export of the families (io/gguf_architectures.h): each family in llama.cpp's architecture
// for it (qwen2, qwen3, llama for Mistral) with its metadata and tensor names, read back by
// meshtrain's own GGUF reader into the same model (config, weights, loss and greedy tokens), and
// what an architecture cannot hold refused in one line with no file left behind.
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
#include "io/llama2c.h"
#include "io/pretrained.h"
#include "model/generate.h"
#include "model_fixtures.h"
#include "temp_dirs.h"

namespace mt {
namespace {

using testing::family_config;

std::string temp_file(const std::string& name) { return testing::fresh_temp_dir("gguf_families") + "/" + name; }

std::vector<float> values(const ParamStore& store, const Param& p) {
  std::vector<float> v(size_t(p.numel));
  store.get_values(p, v.data());
  return v;
}

// A family model with random values in every tensor (biases and norms away from 0 and 1).
std::unique_ptr<Transformer> random_model(const ModelConfig& c, uint64_t seed) {
  auto m = std::make_unique<Transformer>(c, Precision::fp32, LoraConfig{});
  m->init_weights(seed);
  testing::randomize(m->base(), seed + 1, 0.3f);
  return m;
}

// The error export_gguf_model gives, or "" when it wrote the file.
std::string export_error(Transformer& m, const std::string& path) {
  try {
    export_gguf_model(m, path, nullptr, GgufDtype::f32);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

double mean_loss(Transformer& m, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(-1);
  ModelInput in;
  in.tokens = tokens.data();
  in.targets = targets.data();
  in.B = 1, in.T = int64_t(tokens.size());
  const LossSum s = m.forward_loss(in);
  return s.sum / double(s.count);
}

struct FamilyCase {
  const char* family;
  const char* architecture;
  bool permuted;  // q / k rows in llama.cpp's interleaved order
};

class GgufFamily : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(GgufFamily, ArchitectureMetadataAndTensors) {
  const FamilyCase f = GetParam();
  const ModelConfig c = family_config(f.family);
  auto model = random_model(c, 3);
  Transformer& m = *model;
  const std::string path = temp_file(std::string(f.family) + ".gguf");
  const GgufModelWritten w = export_gguf_model(m, path, nullptr, GgufDtype::f32);
  EXPECT_EQ(w.architecture, f.architecture);
  const GgufFile g = read_gguf(path);
  const std::string a = f.architecture;
  EXPECT_EQ(g.get_str("general.architecture"), a);
  EXPECT_EQ(g.get_u32(a + ".embedding_length"), uint64_t(c.hidden_size));
  EXPECT_EQ(g.get_u32(a + ".block_count"), uint64_t(c.num_hidden_layers));
  EXPECT_EQ(g.get_u32(a + ".feed_forward_length"), uint64_t(c.intermediate_size));
  EXPECT_EQ(g.get_u32(a + ".attention.head_count"), uint64_t(c.num_attention_heads));
  EXPECT_EQ(g.get_u32(a + ".attention.head_count_kv"), uint64_t(c.num_key_value_heads));
  EXPECT_EQ(g.get_u32(a + ".rope.dimension_count"), uint64_t(c.head_dim()));
  EXPECT_EQ(g.get_f32(a + ".rope.freq_base"), c.rope_theta);
  EXPECT_EQ(g.get_f32(a + ".attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  EXPECT_EQ(g.get_u32(a + ".context_length"), uint64_t(c.max_position_embeddings));
  // An explicit head_dim (qwen3's 6, mistral's 8 on hidden 16 / 4 heads) as key and value length.
  const bool explicit_head = c.head_dim() != c.hidden_size / c.num_attention_heads;
  EXPECT_EQ(g.find(a + ".attention.key_length") != nullptr, explicit_head);
  if (explicit_head) {
    EXPECT_EQ(g.get_u32(a + ".attention.key_length"), uint64_t(c.head_dim()));
    EXPECT_EQ(g.get_u32(a + ".attention.value_length"), uint64_t(c.head_dim()));
  }
  EXPECT_EQ(g.find_tensor("blk.1.attn_q.bias") != nullptr, c.qkv_bias);
  EXPECT_EQ(g.find_tensor("blk.1.attn_v.bias") != nullptr, c.qkv_bias);
  EXPECT_EQ(g.find_tensor("blk.0.attn_q_norm.weight") != nullptr, c.qk_norm);
  EXPECT_EQ(g.find_tensor("blk.0.attn_k_norm.weight") != nullptr, c.qk_norm);
  EXPECT_EQ(g.find_tensor("output.weight") == nullptr, c.tie_word_embeddings);
  EXPECT_EQ(g.tensors.size(), m.base().params().size());

  // Values: q and k rows permuted for llama only; qwen2 / qwen3 keep HF's rows, as llama.cpp's
  // converter writes them (their RoPE rotates halves); biases and norms as they are.
  const GgufArchitecture& arch = *find_gguf_architecture(a);
  for (const Param& p : m.base().params()) {
    SCOPED_TRACE(p.name);
    const std::vector<float> want = values(m.base(), p);
    const std::vector<float> got = g.tensor_f32(gguf_tensor_name(arch, p.name));
    const bool q_or_k = p.name.find("q_proj.weight") != std::string::npos || p.name.find("k_proj.weight") != std::string::npos;
    if (q_or_k && f.permuted) {
      const int64_t heads = p.name.find("q_proj") != std::string::npos ? c.num_attention_heads : c.num_key_value_heads;
      std::vector<float> hf(got.size());
      permute_rotary_rows(got.data(), hf.data(), heads, c.head_dim(), p.shape.back());
      EXPECT_EQ(hf, want);
      EXPECT_NE(got, want);
    } else {
      EXPECT_EQ(got, want);
    }
  }
}

// What is written reads back as the same model: its config (family, parts, head_dim), every
// value, the loss and the greedy tokens. The families' windows are not in the file (llama.cpp's
// architectures have none; gguf_window_note), so the model reads back without them and the
// comparison is made on tokens the window of 3 does not cut.
TEST_P(GgufFamily, ReadsBackAsTheSameModel) {
  const FamilyCase f = GetParam();
  const ModelConfig c = family_config(f.family);
  auto model = random_model(c, 5);
  Transformer& m = *model;
  const std::string path = temp_file(std::string(f.family) + "_back.gguf");
  export_gguf_model(m, path, nullptr, GgufDtype::f32);
  auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
  const ModelConfig& b = back->config();
  EXPECT_EQ(b.model_type, c.model_type);
  EXPECT_EQ(b.qkv_bias, c.qkv_bias);
  EXPECT_EQ(b.o_bias, c.o_bias);
  EXPECT_EQ(b.mlp_bias, c.mlp_bias);
  EXPECT_EQ(b.qk_norm, c.qk_norm);
  EXPECT_EQ(b.head_dim(), c.head_dim());
  EXPECT_EQ(b.tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_TRUE(b.layer_window.empty());
  ASSERT_EQ(back->base().params().size(), m.base().params().size());
  for (const Param& p : m.base().params()) EXPECT_EQ(values(back->base(), back->base().get(p.name)), values(m.base(), p)) << p.name;

  const std::vector<int32_t> three = {5, 17, 9};
  const double want3 = mean_loss(m, three);
  EXPECT_NEAR(mean_loss(*back, three), want3, 1e-6 * want3);
  GenerateOptions greedy;
  greedy.max_new_tokens = 1;  // prompt 2 + 1 new: within the window of 3
  EXPECT_EQ(generate(*back, {3, 11}, greedy), generate(m, {3, 11}, greedy));
  // Past the window the two compute differently for a windowed family, as llama.cpp would.
  const std::vector<int32_t> eight = {5, 17, 9, 2, 30, 1, 12, 7};
  const double want8 = mean_loss(m, eight), got8 = mean_loss(*back, eight);
  if (c.layer_window.empty()) {
    EXPECT_NEAR(got8, want8, 1e-6 * want8);
  } else {
    EXPECT_GT(std::fabs(got8 - want8), 1e-4 * want8);
  }
}

// The same without the window: equal on every length, and greedy generation of 12 tokens.
TEST_P(GgufFamily, WithoutAWindowEqualOnEveryLength) {
  ModelConfig c = family_config(GetParam().family);
  c.layer_window.clear();
  auto model = random_model(c, 7);
  Transformer& m = *model;
  const std::string path = temp_file(std::string(GetParam().family) + "_nowindow.gguf");
  EXPECT_TRUE(export_gguf_model(m, path, nullptr, GgufDtype::f32).note.empty());
  auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
  const std::vector<int32_t> tokens = {5, 17, 9, 2, 30, 1, 12, 7, 3, 3, 21, 8};
  const double want = mean_loss(m, tokens);
  EXPECT_NEAR(mean_loss(*back, tokens), want, 1e-6 * want);
  GenerateOptions greedy;
  greedy.max_new_tokens = 12;
  EXPECT_EQ(generate(*back, {3, 11}, greedy), generate(m, {3, 11}, greedy));
}

// Quantised files of each family: Q8_0 where rows are whole blocks of 32 (mistral's o_proj, 32
// wide), F16 elsewhere and named (rows of 16 and 24), norms and biases F32; the file reads back.
TEST_P(GgufFamily, QuantisedWhereRowsAreWholeBlocks) {
  const ModelConfig c = family_config(GetParam().family);
  auto model = random_model(c, 9);
  Transformer& m = *model;
  const std::string path = temp_file(std::string(GetParam().family) + "_q8.gguf");
  const GgufModelWritten w = export_gguf_model(m, path, nullptr, GgufDtype::q8_0);
  const GgufFile g = read_gguf(path);
  const GgufArchitecture& arch = *find_gguf_architecture(GetParam().architecture);
  size_t blocked = 0, kept = 0;
  for (const Param& p : m.base().params()) {
    const GgufTensorInfo& t = g.tensor(gguf_tensor_name(arch, p.name));
    const GgmlType want = p.shape.size() == 1 ? GgmlType::f32 : p.shape.back() % 32 == 0 ? GgmlType::q8_0 : GgmlType::f16;
    EXPECT_EQ(t.type, want) << p.name;
    blocked += want == GgmlType::q8_0;
    kept += want == GgmlType::f16;
  }
  EXPECT_EQ(w.kept_f16.size(), kept);
  EXPECT_EQ(w.file_type, blocked > 0 ? GgufDtype::q8_0 : GgufDtype::f16);
  EXPECT_EQ(blocked > 0, std::string(GetParam().family) == "mistral");
  EXPECT_NO_THROW(load_pretrained(path, Precision::fp32, LoraConfig{}, 0));
}

INSTANTIATE_TEST_SUITE_P(Families, GgufFamily,
                         ::testing::Values(FamilyCase{"qwen2", "qwen2", false}, FamilyCase{"qwen3", "qwen3", false},
                                           FamilyCase{"mistral", "llama", true}),
                         [](const auto& info) { return std::string(info.param.family); });

TEST(GgufFamilies, WindowNoteSaysUpToWhichContextTheyAgree) {
  auto mistral = random_model(family_config("mistral"), 1);
  const GgufModelWritten w = export_gguf_model(*mistral, temp_file("note.gguf"), nullptr, GgufDtype::f32);
  EXPECT_EQ(w.note,
            "llama.cpp's llama architecture has no sliding window: the windowed layers (2 of 2) attend to the whole "
            "context there, so llama.cpp's output equals meshtrain's for contexts of up to 3 tokens only");
  auto qwen2 = random_model(family_config("qwen2"), 1);
  EXPECT_NE(export_gguf_model(*qwen2, temp_file("note2.gguf"), nullptr, GgufDtype::f32)
                .note.find("qwen2 architecture has no sliding window: the windowed layers (1 of 2)"),
            std::string::npos);
  // A window no context can reach (>= max_position_embeddings) changes nothing: no note.
  ModelConfig wide = family_config("qwen2");
  wide.layer_window = {0, wide.max_position_embeddings};
  auto q = random_model(wide, 2);
  EXPECT_EQ(export_gguf_model(*q, temp_file("wide.gguf"), nullptr, GgufDtype::f32).note, "");
}

// What an architecture cannot hold is refused before anything is written.
TEST(GgufFamilies, RefusesWhatTheArchitectureCannotHold) {
  auto refusal = [](const ModelConfig& c, const std::string& name) {
    Transformer m(c, Precision::fp32, LoraConfig{});
    const std::string path = temp_file(name + ".gguf");
    const std::string e = export_error(m, path);
    EXPECT_FALSE(std::filesystem::exists(path)) << name;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  // "every": a llama config with biases everywhere; llama.cpp's llama is written without biases.
  const std::string every = refusal(family_config("every"), "every");
  EXPECT_NE(every.find("llama.cpp's llama architecture has no tensor for model.layers.0."), std::string::npos) << every;
  EXPECT_NE(every.find(".bias (a part of this llama model it does not compute)"), std::string::npos) << every;
  // Qwen3 with attention_bias (q, k, v and o): llama.cpp's qwen3 loads no o bias.
  ModelConfig qwen3_bias = family_config("qwen3");
  qwen3_bias.qkv_bias = qwen3_bias.o_bias = true;
  const std::string q3 = refusal(qwen3_bias, "qwen3_bias");
  EXPECT_NE(q3.find("qwen3 architecture has no tensor for model.layers.0.self_attn."), std::string::npos) << q3;
  // Qwen2 whose heads do not span the hidden size: llama.cpp sizes q and o [hidden, hidden].
  ModelConfig qwen2_head = family_config("qwen2");
  qwen2_head.head_dim_override = 6;
  EXPECT_NE(refusal(qwen2_head, "qwen2_head").find("heads x head_dim (24) to be the hidden size (16)"), std::string::npos);
  // Llama 3 rope scaling is llama's rope_freqs.weight; qwen2 would not load that tensor.
  ModelConfig qwen2_scaled = family_config("qwen2");
  qwen2_scaled.rope_scaling.factor = 8.0f;
  qwen2_scaled.rope_scaling.low_freq_factor = 1.0f;
  qwen2_scaled.rope_scaling.high_freq_factor = 4.0f;
  qwen2_scaled.rope_scaling.original_max_position_embeddings = 8;
  EXPECT_NE(refusal(qwen2_scaled, "qwen2_scaled").find("does not read rope_freqs.weight"), std::string::npos);
  // A family without an architecture.
  ModelConfig gemma = testing::tiny_config();
  gemma.model_type = "gemma3";
  EXPECT_NE(refusal(gemma, "gemma").find("GGUF export of a gemma3 model is not supported: meshtrain writes llama.cpp's "
                                         "llama, qwen2, qwen3 architectures"),
            std::string::npos);
}

// A LoRA adapter of a qwen3 model: its architecture, the family's tensor names, no permutation.
TEST(GgufFamilies, LoraAdapterOfTheFamilysArchitecture) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 2;
  lora.alpha = 4.0f;
  lora.targets = {"q", "k", "v", "o"};
  Transformer m(family_config("qwen3"), Precision::fp32, lora);
  m.init_weights(4);
  m.init_adapters(5);
  testing::randomize(m.adapters(), 6, 0.3f);
  const std::string path = temp_file("qwen3_lora.gguf");
  export_gguf_lora(m, path, "tiny-qwen3");
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "qwen3");
  EXPECT_EQ(g.get_str("general.type"), "adapter");
  const Param& b = m.adapters().get("model.layers.1.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(g.tensor_f32("blk.1.attn_q.weight.lora_b"), values(m.adapters(), b));
  EXPECT_EQ(g.tensors.size(), m.adapters().params().size());
}

}  // namespace
}  // namespace mt

// GGUF export of the families (io/gguf_architectures.h): each family in llama.cpp's architecture
// for it (qwen2, qwen3, llama for Mistral, gpt2, gemma3) with its metadata and tensor names, read back by
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
#include "next_token_loss.h"
#include "temp_dirs.h"

namespace mt {
namespace {

using testing::family_config;

// One directory for the whole program: made (and emptied) once, so a second file never wipes the first.
std::string temp_file(const std::string& name) {
  static const std::string dir = testing::fresh_temp_dir("gguf_families");
  return dir + "/" + name;
}

std::vector<float> values(const ParamStore& store, const Param& p) {
  std::vector<float> v(size_t(p.numel));
  store.get_values(p, v.data());
  return v;
}
std::vector<float> values(const ParamStore& store, const std::string& name) { return values(store, store.get(name)); }

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

// The one-line refusal export_gguf_model gives a model of config c, checking that no file is left.
std::string refusal(const ModelConfig& c, const std::string& name) {
  Transformer m(c, Precision::fp32, LoraConfig{});
  const std::string path = temp_file(name + ".gguf");
  const std::string e = export_error(m, path);
  EXPECT_FALSE(std::filesystem::exists(path)) << name;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  return e;
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
  const double want3 = testing::next_token_mean_loss(m, three);
  EXPECT_NEAR(testing::next_token_mean_loss(*back, three), want3, 1e-6 * want3);
  GenerateOptions greedy;
  greedy.max_new_tokens = 1;  // prompt 2 + 1 new: within the window of 3
  EXPECT_EQ(generate(*back, {3, 11}, greedy), generate(m, {3, 11}, greedy));
  // Past the window the two compute differently for a windowed family, as llama.cpp would.
  const std::vector<int32_t> eight = {5, 17, 9, 2, 30, 1, 12, 7};
  const double want8 = testing::next_token_mean_loss(m, eight), got8 = testing::next_token_mean_loss(*back, eight);
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
  const double want = testing::next_token_mean_loss(m, tokens);
  EXPECT_NEAR(testing::next_token_mean_loss(*back, tokens), want, 1e-6 * want);
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
  ModelConfig other = testing::tiny_config();
  other.model_type = "phi3";
  EXPECT_NE(refusal(other, "phi3").find("GGUF export of a phi3 model is not supported: meshtrain writes llama.cpp's "
                                        "llama, qwen2, qwen3, gpt2, gemma3, qwen3moe, olmoe architectures"),
            std::string::npos);
}

LoraConfig rank2_lora(std::vector<std::string> targets) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 2;
  lora.alpha = 4.0f;
  lora.targets = std::move(targets);
  return lora;
}

// A model of config c with random rank-2 adapters on `targets`.
std::unique_ptr<Transformer> adapted_model(const ModelConfig& c, std::vector<std::string> targets) {
  auto m = std::make_unique<Transformer>(c, Precision::fp32, rank2_lora(std::move(targets)));
  m->init_weights(4);
  m->init_adapters(5);
  testing::randomize(m->adapters(), 6, 0.3f);
  return m;
}

// A LoRA adapter of a qwen3 model: its architecture, the family's tensor names, no permutation.
TEST(GgufFamilies, LoraAdapterOfTheFamilysArchitecture) {
  auto adapted = adapted_model(family_config("qwen3"), {"q", "k", "v", "o"});
  Transformer& m = *adapted;
  const std::string path = temp_file("qwen3_lora.gguf");
  export_gguf_lora(m, path, "tiny-qwen3");
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "qwen3");
  EXPECT_EQ(g.get_str("general.type"), "adapter");
  const Param& b = m.adapters().get("model.layers.1.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(g.tensor_f32("blk.1.attn_q.weight.lora_b"), values(m.adapters(), b));
  EXPECT_EQ(g.tensors.size(), m.adapters().params().size());
}

// ---- GPT-2 and Gemma 3: llama.cpp's gpt2 architecture with its fused attn_qkv and learned
// positions, and its gemma3 with four norms a layer stored as 1 + w and the windowed layers and
// their RoPE base as keys.

// The fixture's Gemma 3 as llama.cpp can compute it: HF's model_type, the attention scale
// llama.cpp's gemma3 applies (1 / sqrt(head_dim)); three layers, the first two windowed.
ModelConfig gemma3_for_llama_cpp() {
  ModelConfig c = family_config("gemma3");
  c.model_type = "gemma3_text";
  c.attention_scale = 1.0f / std::sqrt(float(c.head_dim()));
  c.num_hidden_layers = 3;
  c.layer_window = {3, 3, 0};
  return c;
}

const std::vector<int32_t> kTwelve = {5, 17, 9, 2, 30, 1, 12, 7, 3, 3, 21, 8};

// The model as its f32 GGUF file `name` reads back.
std::unique_ptr<Transformer> exported_and_read_back(Transformer& m, const std::string& name) {
  const std::string path = temp_file(name);
  export_gguf_model(m, path, nullptr, GgufDtype::f32);
  return load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
}

// The model read back computes the source's loss on 12 tokens (within `relative`) and its 12
// greedy tokens.
void expect_same_outputs(Transformer& back, Transformer& source, double relative) {
  const double want = testing::next_token_mean_loss(source, kTwelve);
  EXPECT_NEAR(testing::next_token_mean_loss(back, kTwelve), want, relative * want);
  GenerateOptions greedy;
  greedy.max_new_tokens = 12;
  EXPECT_EQ(generate(back, {3, 11}, greedy), generate(source, {3, 11}, greedy));
}

TEST(GgufGpt2, KeysAndTensorsAsLlamaCppsGpt2) {
  const ModelConfig c = family_config("gpt2");
  auto m = random_model(c, 3);
  const std::string path = temp_file("gpt2.gguf");
  EXPECT_EQ(export_gguf_model(*m, path, nullptr, GgufDtype::f32).architecture, "gpt2");
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "gpt2");
  EXPECT_EQ(g.get_u32("gpt2.context_length"), uint64_t(c.max_position_embeddings));
  EXPECT_EQ(g.get_u32("gpt2.embedding_length"), uint64_t(c.hidden_size));
  EXPECT_EQ(g.get_u32("gpt2.block_count"), uint64_t(c.num_hidden_layers));
  EXPECT_EQ(g.get_u32("gpt2.feed_forward_length"), uint64_t(c.intermediate_size));
  EXPECT_EQ(g.get_u32("gpt2.attention.head_count"), uint64_t(c.num_attention_heads));
  EXPECT_EQ(g.get_f32("gpt2.attention.layer_norm_epsilon"), c.rms_norm_eps);
  EXPECT_EQ(g.find("gpt2.rope.freq_base"), nullptr);  // no RoPE
  EXPECT_EQ(g.find("gpt2.attention.layer_norm_rms_epsilon"), nullptr);
  // 4 outside the layers (token_embd, position_embd, output_norm weight and bias; the tied head
  // is token_embd in llama.cpp) and 12 a layer.
  EXPECT_EQ(g.tensors.size(), size_t(4 + 12 * c.num_hidden_layers));
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.tensor_f32("position_embd.weight"), values(m->base(), kPositionEmbedName));
  EXPECT_EQ(g.tensor_f32("output_norm.bias"), values(m->base(), "model.norm.bias"));
  const int64_t C = c.hidden_size;
  for (const char* leaf : {"weight", "bias"}) {
    SCOPED_TRACE(leaf);
    const std::string l1 = "model.layers.1.";
    std::vector<float> qkv;
    for (const char* p : {"q", "k", "v"}) {
      const std::vector<float> v = values(m->base(), l1 + "self_attn." + p + "_proj." + leaf);
      qkv.insert(qkv.end(), v.begin(), v.end());
    }
    const std::string fused = std::string("blk.1.attn_qkv.") + leaf;
    EXPECT_EQ(g.tensor_f32(fused), qkv);  // rows q, k, v: HF's c_attn order
    const std::vector<int64_t> want_shape =
        std::string(leaf) == "weight" ? std::vector<int64_t>{3 * C, C} : std::vector<int64_t>{3 * C};
    EXPECT_EQ(g.tensor(fused).shape(), want_shape);
    EXPECT_EQ(g.tensor_f32(std::string("blk.1.attn_output.") + leaf), values(m->base(), l1 + "self_attn.o_proj." + leaf));
    EXPECT_EQ(g.tensor_f32(std::string("blk.1.attn_norm.") + leaf), values(m->base(), l1 + "input_layernorm." + leaf));
    EXPECT_EQ(g.tensor_f32(std::string("blk.1.ffn_norm.") + leaf), values(m->base(), l1 + "post_attention_layernorm." + leaf));
    EXPECT_EQ(g.tensor_f32(std::string("blk.1.ffn_up.") + leaf), values(m->base(), l1 + "mlp.up_proj." + leaf));
    EXPECT_EQ(g.tensor_f32(std::string("blk.1.ffn_down.") + leaf), values(m->base(), l1 + "mlp.down_proj." + leaf));
  }
}

TEST(GgufGpt2, ReadsBackAsTheSameModel) {
  const ModelConfig c = family_config("gpt2");
  auto m = random_model(c, 5);
  auto back = exported_and_read_back(*m, "gpt2_back.gguf");
  const ModelConfig& b = back->config();
  EXPECT_EQ(b.model_type, "gpt2");
  EXPECT_TRUE(b.layer_norm());
  EXPECT_TRUE(b.gelu_mlp());
  EXPECT_TRUE(b.learned_positions());
  EXPECT_TRUE(b.qkv_bias && b.o_bias && b.mlp_bias);
  EXPECT_EQ(b.rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(b.max_position_embeddings, c.max_position_embeddings);
  EXPECT_TRUE(b.tie_word_embeddings);
  ASSERT_EQ(back->base().params().size(), m->base().params().size());
  for (const Param& p : m->base().params())
    EXPECT_EQ(values(back->base(), p.name), values(m->base(), p.name)) << p.name;
  expect_same_outputs(*back, *m, 1e-6);
}

TEST(GgufGemma3, KeysAndTensorsAsLlamaCppsGemma3) {
  const ModelConfig c = gemma3_for_llama_cpp();
  auto m = random_model(c, 3);
  const std::string path = temp_file("gemma3.gguf");
  const GgufModelWritten w = export_gguf_model(*m, path, nullptr, GgufDtype::f32);
  EXPECT_EQ(w.architecture, "gemma3");
  EXPECT_EQ(w.note, "");  // llama.cpp computes the windows
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "gemma3");
  EXPECT_EQ(g.get_u32("gemma3.attention.key_length"), 8u);
  EXPECT_EQ(g.get_u32("gemma3.attention.value_length"), 8u);
  EXPECT_EQ(g.get_f32("gemma3.rope.freq_base"), c.rope_theta);
  EXPECT_EQ(g.get_f32("gemma3.rope.freq_base_swa"), 100.0f);
  EXPECT_EQ(g.get_str("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(g.get_f32("gemma3.rope.scaling.factor"), 2.0f);
  EXPECT_EQ(g.get_u32("gemma3.attention.sliding_window"), 3u);
  const GgufValue& pattern = g.get("gemma3.attention.sliding_window_pattern");
  EXPECT_EQ(pattern.elem, GgufType::boolean);
  EXPECT_EQ(pattern.ints, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.tensors.size(), m->base().params().size());
  // HF's names to llama.cpp's; norm weights stored as 1 + w (llama.cpp's plain RMSNorm).
  const std::vector<std::pair<std::string, std::string>> names = {
      {"model.layers.2.input_layernorm.weight", "blk.2.attn_norm.weight"},
      {"model.layers.2.post_attention_layernorm.weight", "blk.2.post_attention_norm.weight"},
      {"model.layers.2.pre_feedforward_layernorm.weight", "blk.2.ffn_norm.weight"},
      {"model.layers.2.post_feedforward_layernorm.weight", "blk.2.post_ffw_norm.weight"},
      {"model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight"},
      {"model.layers.2.self_attn.k_norm.weight", "blk.2.attn_k_norm.weight"},
      {"model.norm.weight", "output_norm.weight"},
  };
  for (const auto& [hf, gguf] : names) {
    std::vector<float> want = values(m->base(), hf);
    for (float& x : want) x += 1.0f;
    EXPECT_EQ(g.tensor_f32(gguf), want) << gguf;
  }
  // Projections as they are (llama.cpp's gemma3 rotates halves, as HF).
  for (const char* p : {"q", "k", "v", "o"})
    EXPECT_EQ(g.tensor_f32(std::string("blk.0.attn_") + (std::string(p) == "o" ? "output" : p) + ".weight"),
              values(m->base(), std::string("model.layers.0.self_attn.") + p + "_proj.weight"));
  EXPECT_EQ(g.tensor_f32("blk.0.ffn_gate.weight"), values(m->base(), "model.layers.0.mlp.gate_proj.weight"));
}

// Windows are in the file: equal past the window (12 tokens, window 3) and greedy generation.
TEST(GgufGemma3, ReadsBackAsTheSameModel) {
  const ModelConfig c = gemma3_for_llama_cpp();
  auto m = random_model(c, 5);
  auto back = exported_and_read_back(*m, "gemma3_back.gguf");
  const ModelConfig& b = back->config();
  EXPECT_EQ(b.model_type, "gemma3_text");
  EXPECT_EQ(b.norm_weight_offset, 1.0f);
  EXPECT_TRUE(b.post_norms && b.geglu && b.scale_embeddings && b.qk_norm);
  EXPECT_EQ(b.head_dim(), 8);
  EXPECT_EQ(b.attention_scale, c.attention_scale);
  EXPECT_EQ(b.layer_window, c.layer_window);
  EXPECT_EQ(b.rope_local_theta, c.rope_local_theta);
  EXPECT_EQ(b.rope_theta, c.rope_theta);
  EXPECT_TRUE(b.rope_scaling.linear);
  EXPECT_EQ(b.rope_scaling.factor, 2.0f);
  EXPECT_TRUE(b.tie_word_embeddings);
  ASSERT_EQ(back->base().params().size(), m->base().params().size());
  for (const Param& p : m->base().params()) {
    const std::vector<float> want = values(m->base(), p.name), got = values(back->base(), p.name);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-6f) << p.name;  // (1 + w) - 1
  }
  expect_same_outputs(*back, *m, 1e-5);  // the norms' rounding
}

// Quantised files: attn_qkv and the Gemma projections (rows of 32) in the type asked for, the
// output (the tied embedding) Q8_0 in a Q4_0 file; each file reads back near the source.
TEST(GgufGpt2Gemma3, QuantisedFilesReadBack) {
  ModelConfig gpt2 = family_config("gpt2");
  gpt2.hidden_size = 32, gpt2.intermediate_size = 64;
  ModelConfig gemma = gemma3_for_llama_cpp();
  gemma.hidden_size = 32, gemma.intermediate_size = 64, gemma.head_dim_override = 32;
  gemma.attention_scale = 1.0f / std::sqrt(32.0f);
  for (const ModelConfig& c : {gpt2, gemma}) {
    SCOPED_TRACE(c.model_type);
    auto m = random_model(c, 7);
    const double want = testing::next_token_mean_loss(*m, kTwelve);
    for (GgufDtype d : {GgufDtype::q8_0, GgufDtype::q4_0}) {
      const std::string path = temp_file(c.model_type + "_" + gguf_dtype_name(d) + ".gguf");
      const GgufModelWritten w = export_gguf_model(*m, path, nullptr, d);
      EXPECT_EQ(w.file_type, d);
      EXPECT_TRUE(w.kept_f16.empty());
      const GgufFile g = read_gguf(path);
      const GgmlType asked = d == GgufDtype::q8_0 ? GgmlType::q8_0 : GgmlType::q4_0;
      EXPECT_EQ(g.tensor(c.model_type == "gpt2" ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight").type, asked);
      EXPECT_EQ(g.tensor("token_embd.weight").type, GgmlType::q8_0);
      EXPECT_EQ(g.tensor("blk.0.attn_norm.weight").type, GgmlType::f32);
      auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
      EXPECT_NEAR(testing::next_token_mean_loss(*back, kTwelve), want, (d == GgufDtype::q8_0 ? 0.02 : 0.2) * want);
    }
  }
}

// What llama.cpp's gpt2 / gemma3 would compute otherwise is refused before anything is written.
TEST(GgufGpt2Gemma3, RefusesWhatLlamaCppWouldComputeOtherwise) {
  // query_pre_attn_scalar 5 (the fixture's): llama.cpp's gemma3 scales by 1 / sqrt(head_dim) = 1 / sqrt(8).
  ModelConfig scale = gemma3_for_llama_cpp();
  scale.attention_scale = 1.0f / std::sqrt(5.0f);
  const std::string s = refusal(scale, "gemma3_scale");
  EXPECT_NE(s.find("the model scales attention scores by 0.447214 (query_pre_attn_scalar 5.000000); llama.cpp's "
                   "gemma3 architecture scales them by 0.353553"),
            std::string::npos)
      << s;
  // Two window widths: llama.cpp takes one sliding_window.
  ModelConfig widths = gemma3_for_llama_cpp();
  widths.layer_window = {3, 4, 0};
  EXPECT_NE(refusal(widths, "gemma3_widths").find("takes one sliding_window for all its windowed layers; this model's are 3 and 4"),
            std::string::npos);
  // Linear rope scaling where meshtrain writes no scaling keys (qwen2).
  ModelConfig linear = family_config("qwen2");
  linear.layer_window.clear();
  linear.rope_scaling.factor = 2.0f, linear.rope_scaling.linear = true;
  EXPECT_NE(refusal(linear, "qwen2_linear").find("linear rope scaling on a qwen2 model"), std::string::npos);
  // GPT-2 whose heads do not span the hidden size: llama.cpp's attn_output is [hidden, hidden].
  ModelConfig gpt2_heads = family_config("gpt2");
  gpt2_heads.head_dim_override = 8;
  EXPECT_NE(refusal(gpt2_heads, "gpt2_heads").find("gpt2 architecture needs heads x head_dim (32) to be the hidden size (16)"),
            std::string::npos);
}

// GPT-2's q, k and v are one attn_qkv in llama.cpp: their adapters have no tensor of their own.
TEST(GgufGpt2Gemma3, Gpt2LoraAdapterRefused) {
  Transformer m(family_config("gpt2"), Precision::fp32, rank2_lora({"c_attn"}));
  m.init_weights(4);
  m.init_adapters(5);
  const std::string path = temp_file("gpt2_lora.gguf");
  try {
    export_gguf_lora(m, path, "tiny-gpt2");
    ADD_FAILURE() << "written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no tensor of its own in llama.cpp's gpt2 architecture"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A Gemma 3 adapter: llama.cpp's gemma3 names, no permutation.
TEST(GgufGpt2Gemma3, Gemma3LoraAdapter) {
  auto adapted = adapted_model(gemma3_for_llama_cpp(), {"q", "o", "gate"});
  Transformer& m = *adapted;
  const std::string path = temp_file("gemma3_lora.gguf");
  export_gguf_lora(m, path, "tiny-gemma3");
  const GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_str("general.architecture"), "gemma3");
  EXPECT_EQ(g.tensor_f32("blk.2.attn_q.weight.lora_b"), values(m.adapters(), "model.layers.2.self_attn.q_proj.lora_B.weight"));
  EXPECT_EQ(g.tensor_f32("blk.1.ffn_gate.weight.lora_a"), values(m.adapters(), "model.layers.1.mlp.gate_proj.lora_A.weight"));
  EXPECT_EQ(g.tensors.size(), m.adapters().params().size());
}

}  // namespace
}  // namespace mt

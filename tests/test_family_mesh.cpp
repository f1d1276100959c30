// The families' parts on real MPI ranks: a Qwen2-like model (q/k/v biases, a window on its upper
// layers), a Qwen3-like one (q/k norms, head_dim != hidden / heads) and a Gemma 3-like one ((1 + w)
// norms, post norms, GeGLU, scaled embeddings and attention, local RoPE on its windowed layers,
// tied head) in their HF layout, fine-tuned from that directory (full and LoRA) on tp=2, fsdp=2,
// pp=2, fsdp=2 x tp=2 and cp=2, and QLoRA on tp=2, fsdp=2 and dp=2 x tp=2 / pp=2, give the one-rank
// run's losses and final parameters (fp32): biases split with their rows or added once after the
// reduction, q/k norm gradients summed over the tensor-parallel ranks, every tensor in its unit.
// A GPT-2 model (LayerNorms with biases, a GeLU MLP, learned positions, fused c_attn in its HF
// file) takes the full and LoRA runs, on cp=2 (its position rows at each chunk's true positions)
// and dp=2 too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/hf_config.h"
#include "io/model_files.h"
#include "family_model_dir.h"
#include "mesh_runs.h"
#include "model/transformer.h"
#include "core/normal_init.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.grad_accum=2 --set train.seq_len=32 "
    "--set train.log_every=100 --set optim.warmup_steps=2 ";

// Gemma 3's post norms rescale sublayer outputs of a few thousandths (this model's N(0, 0.02)
// matrices) to order one, so the last bits of the tensor-parallel sums reach the gradients (1e-5
// relative on tp=2, every tensor: checked once by hand with updates linear in the gradient), and
// AdamW's update, which divides by each element's own gradient, turns that into visibly different
// steps for the elements whose gradient is near zero (5 of o_proj's 20480 after one step), which
// the following steps amplify. With optim.eps = 1 the update is linear in the gradient (as in
// Sharded.WeightsAgreeToRoundingWhenUpdatesAreLinearInTheGradient) and the runs agree to 1e-6.
std::string family_args(const std::string& family) {
  return family == "gemma3_text" ? "--set optim.eps=1 " : "";
}

// `family`'s parts on the config of a short run's exported model. `nf4_tp`: widths whose
// tensor-parallel column halves are whole NF4 blocks (docs/qlora.md): an MLP of 256 and, for
// qwen3, a head_dim of 32 (q width 256; still not hidden / heads = 16).
void set_family_parts(ModelConfig& c, const std::string& family, bool nf4_tp) {
  c.model_type = family;
  if (family == "qwen2") {
    c.qkv_bias = true;
    c.layer_window.assign(size_t(c.num_hidden_layers), 0);
    for (int64_t l = 1; l < c.num_hidden_layers; ++l) c.layer_window[size_t(l)] = 8;  // < seq_len
  } else if (family == "qwen3") {
    c.qk_norm = true;
    c.head_dim_override = nf4_tp ? 32 : c.hidden_size / c.num_attention_heads + 4;
  } else if (family == "gpt2") {  // gpt2: its config.json says n_head only (no grouped KV heads)
    c.norm = ModelConfig::Norm::layer, c.mlp = ModelConfig::Mlp::gelu;
    c.positions = ModelConfig::Positions::learned;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.tie_word_embeddings = true, c.num_key_value_heads = c.num_attention_heads;
  } else {  // gemma3_text: every part of Gemma 3's block; the post norms replicated under tp
    c.qk_norm = true;
    c.head_dim_override = c.hidden_size / c.num_attention_heads + 4;
    c.norm_weight_offset = 1.0f, c.post_norms = c.geglu = c.scale_embeddings = true;
    c.attention_scale = 0.3f, c.rope_local_theta = 100.0f;
    c.rope_scaling = RopeScaling{}, c.rope_scaling.factor = 4.0f, c.rope_scaling.linear = true;
    c.layer_window.assign(size_t(c.num_hidden_layers), 0);
    for (int64_t l = 0; l < c.num_hidden_layers; l += 2) c.layer_window[size_t(l)] = 8;  // < seq_len
    c.tie_word_embeddings = true;
  }
}

// Biases and norms away from 0 and 1, so that they matter.
void spread_vectors(Transformer& m) {
  std::vector<float> v;
  for (Param& p : m.base().params()) {
    if (p.shape.size() != 1) continue;
    v.resize(size_t(p.numel));
    fill_normal(v.data(), p.numel, 0.3f, 6, p.name);
    if (p.name.find(".bias") == std::string::npos)
      for (float& x : v) x += 1.0f;
    m.base().set_values(p, v.data());
  }
}

// A model directory of `family` made from a short run's exported one (its tokenizer and config
// keys), with the family's parts and random values in every tensor (family_model_dir.h). Returns a
// config file that names it as model.path. `tag` names the test's scratch directory.
std::string family_model(const std::string& family, const std::string& tag, bool nf4_tp = false) {
  const std::string dir = family_model_dir(
      tag, std::string("--set train.seq_len=32 --set train.batch_size=2") + (nf4_tp ? " --set model.intermediate_size=256" : ""),
      [&](ModelConfig& c) { set_family_parts(c, family, nf4_tp); }, /*seed=*/5, spread_vectors);
  std::ofstream(dir + ".toml") << "[model]\npath = \"" << dir << "\"\n";
  return dir + ".toml";
}

struct FamilyMeshCase {
  const char* family;
  const char* mesh;
};

class FamilyMeshEquality : public ::testing::TestWithParam<FamilyMeshCase> {};

TEST_P(FamilyMeshEquality, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("family_") + GetParam().family + "_" + tag_of(GetParam().mesh);
  const std::string toml = family_model(GetParam().family, tag);
  const std::string config = nlohmann::json::parse(std::ifstream(toml.substr(0, toml.size() - 5) + "/config.json")).dump();
  EXPECT_NE(config.find(std::string("\"model_type\":\"") + GetParam().family + "\""), std::string::npos) << config;
  expect_same_run(tag, "--config " + toml + " " + kRun + family_args(GetParam().family), GetParam().mesh,
                  "/model/model.safetensors");
}

// LoRA on every projection (biased ones included: the bias stays frozen in the base) and the head;
// GPT-2's on its modules, c_attn's one adapter split over tp as q, k and v each (not its rows blindly).
TEST_P(FamilyMeshEquality, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const bool gpt2 = GetParam().family == std::string("gpt2");
  const std::string lora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 " +
      std::string(gpt2 ? "--set 'lora.targets=[\"c_attn\",\"c_proj\",\"c_fc\",\"lm_head\"]' "
                       : "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\",\"lm_head\"]' ");
  const std::string tag = std::string("family_lora_") + GetParam().family + "_" + tag_of(GetParam().mesh);
  expect_same_run(tag, "--config " + family_model(GetParam().family, tag) + " " + kRun + lora + family_args(GetParam().family),
                  GetParam().mesh, "/adapter/adapter_model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, FamilyMeshEquality,
                         ::testing::Values(FamilyMeshCase{"qwen2", "tp=2"}, FamilyMeshCase{"qwen2", "fsdp=2"},
                                           FamilyMeshCase{"qwen2", "pp=2"}, FamilyMeshCase{"qwen2", "fsdp=2,tp=2"},
                                           FamilyMeshCase{"qwen3", "tp=2"}, FamilyMeshCase{"qwen3", "fsdp=2"},
                                           FamilyMeshCase{"qwen3", "pp=2"}, FamilyMeshCase{"qwen3", "fsdp=2,tp=2"},
                                           // context parallelism: qwen2's window and qwen3's q/k norms
                                           // over sequences split in 4 chunks of 8 tokens
                                           FamilyMeshCase{"qwen2", "cp=2"}, FamilyMeshCase{"qwen3", "cp=2"},
                                           FamilyMeshCase{"gpt2", "tp=2"}, FamilyMeshCase{"gpt2", "fsdp=2"},
                                           FamilyMeshCase{"gpt2", "pp=2"}, FamilyMeshCase{"gpt2", "fsdp=2,tp=2"},
                                           // learned positions: each context chunk's true positions
                                           FamilyMeshCase{"gpt2", "cp=2"}, FamilyMeshCase{"gpt2", "dp=2"},
                                           FamilyMeshCase{"gemma3_text", "tp=2"},
                                           FamilyMeshCase{"gemma3_text", "fsdp=2"},
                                           FamilyMeshCase{"gemma3_text", "pp=2"},
                                           FamilyMeshCase{"gemma3_text", "fsdp=2,tp=2"},
                                           // the attention scale through the context-parallel path
                                           FamilyMeshCase{"gemma3_text", "cp=2"}),
                         [](const auto& info) {
                           return std::string(info.param.family) + "_" + tag_of(info.param.mesh);
                         });

// QLoRA (lora.base_dtype = nf4): each rank quantises its own rows of the family's projections;
// biases and q/k norms stay f32 in the frozen base. Tolerances as QloraMeshEquality's
// (test_sharded.cpp): 5e-5 on the adapters (AdamW amplifies rounding where gradients are near 0),
// 1e-6 with updates linear in the gradient.
class FamilyQloraMeshEquality : public ::testing::TestWithParam<FamilyMeshCase> {};

TEST_P(FamilyQloraMeshEquality, QloraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string qlora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set lora.base_dtype=nf4 "
      "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\"]' ";
  const std::string tag = std::string("family_qlora_") + GetParam().family + "_" + tag_of(GetParam().mesh);
  const std::string toml = family_model(GetParam().family, tag, /*nf4_tp=*/true);
  expect_same_run(tag, "--config " + toml + " " + kRun + qlora, GetParam().mesh, "/adapter/adapter_model.safetensors",
                  5e-5);
  // The sharp check: with updates linear in the gradient (AdamW eps = 1) nothing amplifies
  // rounding, so the adapters agree to 1e-6: every rank's NF4 bytes are the one rank's and every
  // gradient piece arrives once.
  expect_same_run(tag + "_linear", "--config " + toml + " " + kRun + qlora + "--set optim.eps=1.0 --set optim.lr=0.5 ",
                  GetParam().mesh, "/adapter/adapter_model.safetensors", 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Meshes, FamilyQloraMeshEquality,
                         ::testing::Values(FamilyMeshCase{"qwen2", "tp=2"}, FamilyMeshCase{"qwen2", "fsdp=2"},
                                           FamilyMeshCase{"qwen2", "dp=2,tp=2"}, FamilyMeshCase{"qwen3", "tp=2"},
                                           FamilyMeshCase{"qwen3", "fsdp=2"}, FamilyMeshCase{"qwen3", "pp=2"}),
                         [](const auto& info) {
                           return std::string(info.param.family) + "_" + tag_of(info.param.mesh);
                         });

}  // namespace
}  // namespace mt::testing

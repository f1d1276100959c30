// GPT-2 (GPT2LMHeadModel): its config.json read into the model description and refused in one
// line naming the key where meshtrain would compute something else, and its HF layout (fused
// c_attn, Conv1D weights [in, out], transformer.* names with or without the prefix) loaded and
// written back (io/gpt2_config.h, io/gpt2_layout.h). The forward against an independent float64
// implementation of modeling_gpt2.py is scripts/family_reference.py (ctest family_reference).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/gpt2_layout.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "io/pretrained.h"
#include "io/safetensors.h"
#include "io/safetensors_write.h"
#include "model/param_shapes.h"
#include "model/presets.h"
#include "hf_config_fixtures.h"
#include "model_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

using json = nlohmann::json;

// openai-community/gpt2's config.json (the published GPT-2 124M).
const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_inner": null, "n_layer": 12, "n_positions": 1024, "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true,
  "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
  "summary_type": "cls_index", "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257})";

std::string gpt2_with(const json& changes) { return testing::config_with(kGpt2, changes); }
using testing::expect_config_error;

TEST(Gpt2Config, ReadsGpt2SmallIntoTheDescription) {
  const ModelConfig c = parse_hf_config(kGpt2, "config.json");
  EXPECT_EQ(c.model_type, "gpt2");
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_EQ(c.intermediate_size, 3072);  // n_inner null: 4 * n_embd
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.layer_norm() && c.gelu_mlp() && c.learned_positions() && c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  // Named by architectures alone, and n_inner given.
  const ModelConfig a = parse_hf_config(gpt2_with({{"model_type", "<erase>"}, {"n_inner", 1000}}), "c");
  EXPECT_EQ(a.model_type, "gpt2");
  EXPECT_EQ(a.intermediate_size, 1000);
  EXPECT_TRUE(parse_hf_config(gpt2_with({{"activation_function", "gelu_pytorch_tanh"}}), "c").gelu_mlp());
  // GPT-2 124M's published count, tied head: 124,439,808.
  int64_t params = 0;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) params += p.numel();
  EXPECT_EQ(params, 124439808);
}

// The presets count OpenAI's published sizes exactly (tied head): what plan and shard read.
TEST(Gpt2Presets, CountThePublishedParameters) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"gpt2", 124439808}, {"gpt2-medium", 354823168}, {"gpt2-large", 774030080}, {"gpt2-xl", 1557611200}};
  for (const auto& [name, published] : sizes) {
    const ModelConfig c = llama_preset(name);
    EXPECT_EQ(c.model_type, "gpt2") << name;
    int64_t params = 0;
    for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) params += p.numel();
    EXPECT_EQ(params, published) << name;
  }
  // The same count from the published config.json.
  int64_t from_config = 0;
  for (const ParamShape& p : llama_param_shapes(parse_hf_config(kGpt2, "config.json"), LoraConfig{}))
    from_config += p.numel();
  EXPECT_EQ(from_config, 124439808);
}

// shard and plan read the presets with their GPT-2 parts (the [model] keys carry the shape only).
TEST(Gpt2Presets, ShardAndPlanCountThem) {
  testing::CommandResult r = testing::run_meshtrain("shard --preset gpt2 --mesh fsdp=2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("124439808 parameters"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.embed_positions.weight"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("gate_proj"), std::string::npos) << r.output;
  // LoRA r8 on c_attn (one shared A), c_proj and c_fc: PEFT's 9,830,400 adapter parameters.
  r = testing::run_meshtrain("plan --model gpt2-xl --cluster mi300x-node --devices 8 --mesh fsdp=8 --mode lora "
                             "--lora-rank 8 --lora-targets c_attn,c_proj,c_fc --seq 1024");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1557611200 base"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("9830400 trainable"), std::string::npos) << r.output;
}

TEST(Gpt2Config, RefusesWhatItWouldComputeDifferentlyNamingTheKey) {
  expect_config_error(gpt2_with({{"activation_function", "relu"}}), "activation_function \"relu\" is not supported");
  expect_config_error(gpt2_with({{"activation_function", "gelu"}}), "activation_function \"gelu\" is not supported");
  expect_config_error(gpt2_with({{"scale_attn_weights", false}}), "scale_attn_weights false is not supported");
  expect_config_error(gpt2_with({{"scale_attn_by_inverse_layer_idx", true}}),
                    "scale_attn_by_inverse_layer_idx true is not supported");
  expect_config_error(gpt2_with({{"reorder_and_upcast_attn", true}}), "reorder_and_upcast_attn true is not supported");
  expect_config_error(gpt2_with({{"add_cross_attention", true}}), "add_cross_attention true is not supported");
  expect_config_error(gpt2_with({{"tie_word_embeddings", false}}), "tie_word_embeddings false is not supported");
  expect_config_error(gpt2_with({{"n_ctx", 512}}), "n_ctx 512 differs from n_positions 1024");
  expect_config_error(gpt2_with({{"n_head", 7}}), "must divide model.hidden_size");
  expect_config_error(gpt2_with({{"n_embd", "768"}}), "key 'n_embd' must be an integer");
  expect_config_error(gpt2_with({{"quantization_config", {{"bits", 4}}}}), "quantization_config");
}

// Issue 34: transformers reads hidden_size, num_hidden_layers, num_attention_heads and
// max_position_embeddings as GPT-2's n_embd, n_layer, n_head and n_positions; meshtrain read the
// GPT-2 names alone, so a config giving both, differently, loaded another model than transformers'.
TEST(Gpt2Config, TwoNamesForOneSettingThatDisagreeAreRefusedNamingBoth) {
  expect_config_error(gpt2_with({{"hidden_size", 1024}}), "hidden_size 1024 contradicts n_embd 768");
  expect_config_error(gpt2_with({{"num_hidden_layers", 24}}), "num_hidden_layers 24 contradicts n_layer 12");
  expect_config_error(gpt2_with({{"num_attention_heads", 16}}), "num_attention_heads 16 contradicts n_head 12");
  expect_config_error(gpt2_with({{"max_position_embeddings", 2048}}),
                      "max_position_embeddings 2048 contradicts n_positions 1024");
  expect_config_error(gpt2_with({{"intermediate_size", 4096}}), "intermediate_size 4096 contradicts n_inner (4 x n_embd) 3072");
  expect_config_error(gpt2_with({{"n_inner", 2048}, {"intermediate_size", 3072}}),
                      "intermediate_size 3072 contradicts n_inner 2048");
  // Alike, or the HF name alone (transformers' attribute_map), reads as transformers reads it.
  const ModelConfig same = parse_hf_config(
      gpt2_with({{"hidden_size", 768}, {"num_hidden_layers", 12}, {"intermediate_size", 3072}}), "config.json");
  EXPECT_EQ(same.hidden_size, 768);
  const ModelConfig hf = parse_hf_config(
      gpt2_with({{"n_embd", "<erase>"}, {"n_layer", "<erase>"}, {"hidden_size", 1024}, {"num_hidden_layers", 24},
                 {"n_head", "<erase>"}, {"num_attention_heads", 16}}),
      "config.json");
  EXPECT_EQ(hf.hidden_size, 1024);
  EXPECT_EQ(hf.num_hidden_layers, 24);
  EXPECT_EQ(hf.num_attention_heads, 16);
  EXPECT_EQ(hf.intermediate_size, 4096);
  // Written back, a kept HF name follows the value written (and reads back).
  const json out = json::parse(hf_config_json(hf, "float32", gpt2_with({{"hidden_size", 768}})));
  EXPECT_EQ(out["hidden_size"], 1024);
  EXPECT_EQ(parse_hf_config(out.dump(), "written").hidden_size, 1024);
}

TEST(Gpt2Config, WritesGpt2KeysBack) {
  ModelConfig c = parse_hf_config(kGpt2, "config.json");
  const json out = json::parse(hf_config_json(c, "float32", kGpt2));
  EXPECT_EQ(out["model_type"], "gpt2");
  EXPECT_EQ(out["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(out["n_embd"], 768);
  EXPECT_TRUE(out["n_inner"].is_null());  // still 4 * n_embd: the source's null is kept
  EXPECT_EQ(out["n_ctx"], 1024);
  EXPECT_EQ(out["layer_norm_epsilon"], 1e-05);
  EXPECT_EQ(out["activation_function"], "gelu_new");
  EXPECT_EQ(out["summary_type"], "cls_index");  // keys meshtrain does not read are kept
  EXPECT_FALSE(out.contains("hidden_size") || out.contains("rms_norm_eps") || out.contains("hidden_act"));
  // Written without a source, it reads back as the same model.
  c.intermediate_size = 1000;
  const ModelConfig back = parse_hf_config(hf_config_json(c, "float32"), "written");
  EXPECT_EQ(back.intermediate_size, 1000);
  EXPECT_EQ(back.hidden_size, 768);
  EXPECT_TRUE(back.layer_norm() && back.gelu_mlp() && back.learned_positions());
}

// A random tiny GPT-2 written by meshtrain is GPT-2's HF layout: c_attn is [in, 3 * out] with q,
// k and v side by side, Conv1D weights transposed; it loads back as the same model, with or
// without the transformer. prefix, with the attention-mask buffers some files carry.
TEST(Gpt2Layout, WritesHfLayoutAndLoadsItBack) {
  const ModelConfig c = testing::family_config("gpt2");
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(1);
  testing::randomize(m.base(), 2, 0.3f);
  const std::string dir = testing::fresh_temp_dir("gpt2_layout");
  save_base_model(m, dir + "/model");

  const SafetensorsFile file(dir + "/model/model.safetensors");
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  ASSERT_TRUE(file.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_EQ(file.info("transformer.h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{C, 3 * C}));
  EXPECT_EQ(file.info("transformer.h.1.mlp.c_fc.weight").shape, (std::vector<int64_t>{C, I}));
  EXPECT_EQ(file.info("transformer.h.1.mlp.c_proj.weight").shape, (std::vector<int64_t>{I, C}));
  EXPECT_EQ(file.info("transformer.wpe.weight").shape, (std::vector<int64_t>{c.max_position_embeddings, C}));
  EXPECT_TRUE(file.contains("transformer.ln_f.bias"));
  EXPECT_FALSE(file.contains("lm_head.weight"));  // tied
  std::vector<float> fused(size_t(C * 3 * C)), k(size_t(C * C)), fused_bias(size_t(3 * C));
  std::vector<float> v_bias(static_cast<size_t>(C));
  file.read_f32("transformer.h.1.attn.c_attn.weight", fused.data());
  file.read_f32("transformer.h.1.attn.c_attn.bias", fused_bias.data());
  m.base().get_values(m.base().get("model.layers.1.self_attn.k_proj.weight"), k.data());
  m.base().get_values(m.base().get("model.layers.1.self_attn.v_proj.bias"), v_bias.data());
  for (int64_t o = 0; o < C; ++o) {  // k's output row o is c_attn's column C + o
    for (int64_t i = 0; i < C; ++i) ASSERT_EQ(fused[size_t(i * 3 * C + C + o)], k[size_t(o * C + i)]) << o << " " << i;
    ASSERT_EQ(fused_bias[size_t(2 * C + o)], v_bias[size_t(o)]);
  }
  const json cfg = json::parse(std::ifstream(dir + "/model/config.json"));
  EXPECT_EQ(cfg["model_type"], "gpt2");

  // The same tensors without the prefix, plus attn.bias / attn.masked_bias buffers.
  std::vector<std::vector<float>> values;
  std::vector<TensorOut> out;
  for (const std::string& name : file.names()) {
    const TensorInfo& info = file.info(name);
    values.emplace_back(size_t(info.numel));
    file.read_f32(name, values.back().data());
    out.push_back({name.substr(std::strlen("transformer.")), "F32", info.shape, nullptr, size_t(info.numel) * 4});
  }
  std::vector<float> mask(size_t(c.max_position_embeddings * c.max_position_embeddings), 1.0f), masked{-1e4f};
  values.push_back(mask), values.push_back(masked);
  const int64_t P = c.max_position_embeddings;
  out.push_back({"h.0.attn.bias", "F32", {1, 1, P, P}, nullptr, mask.size() * 4});
  out.push_back({"h.0.attn.masked_bias", "F32", {}, nullptr, 4});
  for (size_t i = 0; i < out.size(); ++i) out[i].data = values[i].data();
  std::filesystem::create_directories(dir + "/bare");
  std::filesystem::copy_file(dir + "/model/config.json", dir + "/bare/config.json");
  write_safetensors(dir + "/bare/model.safetensors", out);

  auto batch = testing::tiny_batch(c.vocab_size, 5, 2, 8);
  std::vector<float> want(size_t(16 * c.vocab_size)), got(want.size());
  m.forward_logits(batch.input(), want.data());
  for (const char* sub : {"/model", "/bare"}) {
    SCOPED_TRACE(sub);
    auto loaded = load_pretrained(dir + sub, Precision::fp32, LoraConfig{}, 0);
    ASSERT_EQ(loaded->base().params().size(), m.base().params().size());
    for (auto& p : m.base().params()) {
      std::vector<float> a(size_t(p.numel)), b(size_t(p.numel));
      m.base().get_values(p, a.data());
      loaded->base().get_values(loaded->base().get(p.name), b.data());
      ASSERT_EQ(a, b) << p.name;
    }
    loaded->forward_logits(batch.input(), got.data());
    EXPECT_EQ(got, want);
  }
}

TEST(Gpt2Layout, RefusesAFileThatDisagreesWithItsConfigNamingTheTensor) {
  const ModelConfig c = testing::family_config("gpt2");
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(1);
  const std::string dir = testing::fresh_temp_dir("gpt2_layout_bad");
  save_base_model(m, dir);
  // Two layers in the file, three in the config.
  json cfg = json::parse(std::ifstream(dir + "/config.json"));
  cfg["n_layer"] = 3;
  std::ofstream(dir + "/config.json") << cfg.dump();
  try {
    checked_pretrained_config(dir);
    ADD_FAILURE() << "a 2-layer file loaded as 3 layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the weights hold 2 layers, the config gives n_layer = 3"), std::string::npos) << e.what();
  }
  // A wider MLP in the config than in the file: the HF tensor is named, in its HF shape.
  cfg["n_layer"] = 2, cfg["n_inner"] = 30;
  std::ofstream(dir + "/config.json") << cfg.dump();
  try {
    checked_pretrained_config(dir);
    ADD_FAILURE() << "a file of n_inner 24 loaded as 30";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'transformer.h.0.mlp.c_fc.weight' has shape [16, 24], the config gives [16, 30]"),
              std::string::npos) << e.what();
  }
}

// A tiny GPT-2 with GPT-2's own tokenizer (vocab.json + merges.txt, 50257 tokens) in its
// directory trains through the binary: full, LoRA and QLoRA (NF4 base); the full run's export is
// GPT-2's HF layout again and evaluates.
TEST(Gpt2Binary, TrainsFullLoraAndQloraWithTheGpt2Tokenizer) {
  const std::string tokenizer = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/gpt2";
  if (!std::filesystem::exists(tokenizer + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  ModelConfig c = testing::family_config("gpt2");
  c.vocab_size = 50257, c.hidden_size = 32, c.intermediate_size = 64, c.max_position_embeddings = 64;
  c.num_attention_heads = c.num_key_value_heads = 4;
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(3);
  const std::string dir = testing::fresh_temp_dir("gpt2_binary");
  save_base_model(m, dir + "/gpt2");
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(tokenizer + "/" + f, dir + "/gpt2/" + f);
  const std::string run = "train --set model.path=" + dir + "/gpt2 --set train.steps=3 --set train.seq_len=32 "
                          "--set train.batch_size=2 --set train.peak_gflops=100 --set train.log_every=1 ";
  const std::string lora = "--set lora.enabled=true --set lora.rank=4 "
                           "--set 'lora.targets=[\"c_attn\",\"c_proj\",\"c_fc\"]' ";
  testing::CommandResult r = testing::run_meshtrain(run + "--set output.dir=" + dir + "/full");
  ASSERT_EQ(r.code, 0) << r.output;
  const json written = json::parse(std::ifstream(dir + "/full/model/config.json"));
  EXPECT_EQ(written["model_type"], "gpt2");
  EXPECT_TRUE(std::filesystem::exists(dir + "/full/model/vocab.json"));
  std::ofstream(dir + "/text.txt") << "Hello world, this is GPT-2 reading a few words of plain English text.\n";
  r = testing::run_meshtrain("eval --model " + dir + "/full/model --data " + dir + "/text.txt --seq-len 8");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mean loss"), std::string::npos) << r.output;
  r = testing::run_meshtrain(run + lora + "--set output.dir=" + dir + "/lora");
  ASSERT_EQ(r.code, 0) << r.output;
  // PEFT's adapter on GPT-2's modules: c_attn's lora_B holds q, k and v's rows, [3 C, r].
  const SafetensorsFile adapter(dir + "/lora/adapter/adapter_model.safetensors");
  EXPECT_EQ(adapter.info("base_model.model.transformer.h.1.attn.c_attn.lora_A.weight").shape,
            (std::vector<int64_t>{4, c.hidden_size}));
  EXPECT_EQ(adapter.info("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight").shape,
            (std::vector<int64_t>{3 * c.hidden_size, 4}));
  EXPECT_TRUE(adapter.contains("base_model.model.transformer.h.0.attn.c_proj.lora_B.weight"));
  EXPECT_TRUE(adapter.contains("base_model.model.transformer.h.0.mlp.c_proj.lora_A.weight"));
  EXPECT_TRUE(adapter.contains("base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight"));
  EXPECT_EQ(adapter.names().size(), size_t(2 * 4 * c.num_hidden_layers));
  const json adapter_config = json::parse(std::ifstream(dir + "/lora/adapter/adapter_config.json"));
  EXPECT_EQ(adapter_config["target_modules"], json({"c_attn", "c_proj", "c_fc"}));
  EXPECT_EQ(adapter_config["fan_in_fan_out"], true);
  // The adapter reads back (generate --adapter) and merges (export --merged) into GPT-2's layout.
  r = testing::run_meshtrain("generate --model " + dir + "/gpt2 --adapter " + dir +
                             "/lora/adapter --prompt 'Hello' --max-new-tokens 4");
  EXPECT_EQ(r.code, 0) << r.output;
  r = testing::run_meshtrain("export --model " + dir + "/gpt2 --adapter " + dir + "/lora/adapter --merged " +
                             dir + "/merged");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(json::parse(std::ifstream(dir + "/merged/config.json"))["model_type"], "gpt2");
  // Roles are another family's names: refused on GPT-2 in one line naming the target.
  r = testing::run_meshtrain(run + "--set lora.enabled=true --set 'lora.targets=[\"q\"]' --set output.dir=" + dir + "/q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("lora.targets: 'q' is not a GPT-2 module"), std::string::npos) << r.output;
  r = testing::run_meshtrain(run + lora + "--set lora.base_dtype=nf4 --set output.dir=" + dir + "/qlora");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/qlora/adapter/adapter_model.safetensors"));
}

}  // namespace
}  // namespace mt

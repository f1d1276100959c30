// Models in and out: HF directories, llama2.c import with greedy reference text, PEFT adapters.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "io/llama2c.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/peft_config.h"
#include "io/pretrained.h"
#include "io/safetensors_index.h"
#include "io/safetensors_write.h"
#include "model/generate.h"
#include "model_fixtures.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;

std::vector<float> logits_of(Transformer& m, const testing::TinyBatch& b) {
  std::vector<float> out(size_t(b.B * b.T * m.config().vocab_size));
  m.forward_logits(b.input(), out.data());
  return out;
}

TEST(Pretrained, HfDirectoryRoundTripGivesTheSameLogits) {
  for (bool tied : {false, true}) {
    Transformer m(testing::tiny_config(tied), Precision::fp32, LoraConfig{});
    m.init_weights(3);
    testing::randomize(m.base(), 4, 0.3f);
    std::string dir = fresh_temp_dir("hf_roundtrip");
    save_base_model(m, dir);
    auto loaded = load_pretrained(dir, Precision::fp32, LoraConfig{}, 0);
    auto batch = testing::tiny_batch(32);
    auto a = logits_of(m, batch), b = logits_of(*loaded, batch);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "tied=" << tied;
  }
}

TEST(Pretrained, MissingTensorAndWrongShapeAreNamed) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(3);
  std::string dir = fresh_temp_dir("hf_bad");
  save_base_model(m, dir);
  // Rewrite the weights without one tensor, then with a wrong shape.
  std::vector<TensorOut> tensors;
  for (auto& p : m.base().params())
    if (p.name != "model.norm.weight")
      tensors.push_back({p.name, "F32", p.shape, p.master, size_t(p.numel) * 4});
  write_safetensors(dir + "/model.safetensors", tensors);
  try {
    load_pretrained(dir, Precision::fp32, LoraConfig{}, 0);
    ADD_FAILURE() << "missing tensor not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos) << e.what();
  }
  const Param& n = m.base().get("model.norm.weight");
  tensors.push_back({n.name, "F32", {n.numel / 2, 2}, n.master, size_t(n.numel) * 4});
  write_safetensors(dir + "/model.safetensors", tensors);
  try {
    load_pretrained(dir, Precision::fp32, LoraConfig{}, 0);
    ADD_FAILURE() << "wrong shape not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
}

TEST(Pretrained, PeftAdapterRoundTripGivesTheSameLogits) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 2;
  lora.alpha = 4.0f;
  lora.targets = {"q", "v", "down", "lm_head"};
  Transformer m(testing::tiny_config(), Precision::fp32, lora);
  m.init_weights(3);
  testing::randomize(m.adapters(), 8, 0.3f);
  std::string base = fresh_temp_dir("peft_base"), adapter = fresh_temp_dir("peft_adapter");
  save_base_model(m, base);
  save_peft_adapter(m, adapter, base);
  LoraConfig read = read_peft_config(adapter);
  EXPECT_EQ(read.rank, 2);
  EXPECT_EQ(read.targets, lora.targets);
  auto loaded = load_pretrained(base, Precision::fp32, read, 0);
  load_peft_adapter(adapter, *loaded);
  auto batch = testing::tiny_batch(32);
  auto a = logits_of(m, batch), b = logits_of(*loaded, batch);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// Sets keys of <dir>/adapter_config.json, as a PEFT version with more options would have written it.
void set_adapter_config_keys(const std::string& dir, const nlohmann::json& keys) {
  const std::string path = dir + "/adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  j.update(keys);
  std::ofstream(path) << j.dump(2);
}

// An adapter of rank 4 with random A and B, saved beside its base; returns the model it came from.
std::unique_ptr<Transformer> saved_adapter(const LoraConfig& lora, const std::string& base,
                                          const std::string& adapter) {
  auto m = std::make_unique<Transformer>(testing::tiny_config(), Precision::fp32, lora);
  m->init_weights(3);
  testing::randomize(m->adapters(), 8, 0.3f);
  save_base_model(*m, base);
  save_peft_adapter(*m, adapter, base);
  return m;
}

// Issue 34, item 7. Was: tensors of a PEFT adapter meshtrain does not read (DoRA's magnitude, an
// embedding's LoRA, a bias on B, a module saved in full, an adapter on an untargeted module) were
// skipped, so the adapter loaded as another one. Now each is refused, naming it and what it is.
TEST(Peft, TensorsMeshtrainDoesNotReadAreRefusedNamingThem) {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 4, lora.targets = {"q", "v"};
  const std::string base = fresh_temp_dir("peft_extra_base"), adapter = fresh_temp_dir("peft_extra_adapter");
  saved_adapter(lora, base, adapter);
  const std::string file = adapter + "/adapter_model.safetensors";
  std::vector<std::pair<std::string, std::vector<int64_t>>> infos;
  std::vector<std::vector<float>> values;
  {
    const SafetensorsCheckpoint saved(file);
    for (const std::string& name : saved.names()) {
      infos.push_back({name, saved.info(name).shape});
      values.emplace_back(size_t(saved.info(name).numel));
      saved.read_f32(name, values.back().data());
    }
  }
  const LoraConfig read = read_peft_config(adapter);
  EXPECT_NO_THROW(check_peft_adapter(adapter, testing::tiny_config(), read));
  const std::vector<float> extra(16, 0.5f);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", "DoRA's magnitude"},
      {"base_model.model.model.embed_tokens.lora_embedding_A", "LoRA on an embedding"},
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias", "a trained bias on an adapter"},
      {"base_model.model.lm_head.weight", "a module trained in full (modules_to_save)"},
      {"base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight", "an adapter on a module the config does not target"},
  };
  for (const auto& [name, meaning] : cases) {
    SCOPED_TRACE(name);
    std::vector<TensorOut> out;
    for (size_t i = 0; i < infos.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : infos[i].second) n *= d;
      out.push_back({infos[i].first, "F32", infos[i].second, values[i].data(), size_t(n) * 4});
    }
    out.push_back({name, "F32", {16}, extra.data(), extra.size() * 4});
    write_safetensors(file, out);
    std::string msg;
    try {
      check_peft_adapter(adapter, testing::tiny_config(), read);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("tensor '" + name + "' (" + meaning + ") is not one meshtrain reads"), std::string::npos) << msg;
  }
}

// use_rslora used to be ignored, applying the adapter at alpha / r instead of alpha / sqrt(r).
TEST(Peft, RsloraAdapterIsScaledByAlphaOverSqrtRank) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 4;
  lora.alpha = 8.0f;  // plain LoRA scale 8 / 4 = 2, the same as rsLoRA's 4 / sqrt(4)
  lora.targets = {"q", "v", "down", "lm_head"};
  std::string base = fresh_temp_dir("rslora_base"), adapter = fresh_temp_dir("rslora_adapter");
  auto plain = saved_adapter(lora, base, adapter);
  set_adapter_config_keys(adapter, {{"use_rslora", true}, {"lora_alpha", 4.0}});
  const LoraConfig read = read_peft_config(adapter);
  EXPECT_TRUE(read.rank_stabilized);
  EXPECT_EQ(read.scale(), 2.0f);
  auto loaded = load_pretrained(base, Precision::fp32, read, 0);
  load_peft_adapter(adapter, *loaded);
  auto batch = testing::tiny_batch(32);
  auto a = logits_of(*plain, batch), b = logits_of(*loaded, batch);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  // Written back, the flag survives.
  const std::string again = fresh_temp_dir("rslora_again");
  save_peft_adapter(*loaded, again, base);
  EXPECT_TRUE(read_peft_config(again).rank_stabilized);
}

// use_dora used to be ignored, applying a DoRA adapter as plain LoRA (no magnitude vector).
TEST(Peft, DoraAdapterIsRefusedNamingTheOption) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 4;
  std::string base = fresh_temp_dir("dora_base"), adapter = fresh_temp_dir("dora_adapter");
  saved_adapter(lora, base, adapter);
  set_adapter_config_keys(adapter, {{"use_dora", true}});
  try {
    read_peft_config(adapter);
    ADD_FAILURE() << "a DoRA adapter was read as LoRA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_dora"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("adapter_config.json"), std::string::npos) << e.what();
  }
  set_adapter_config_keys(adapter, {{"use_dora", false}, {"use_rslora", nullptr}});
  EXPECT_FALSE(read_peft_config(adapter).rank_stabilized);  // false and null are PEFT's defaults
  set_adapter_config_keys(adapter, {{"use_rslora", "yes"}});
  EXPECT_THROW(read_peft_config(adapter), Error);
}

// ../shared/data/README.md: greedy generation from stories260K, BOS first, no prompt.
const char* kStoriesReference =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.";

TEST(Pretrained, Llama2cStoriesGreedyTextMatchesTheReference) {
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/";
  if (!fs::exists(data + "stories260K.bin")) GTEST_SKIP() << "shared data not present";
  // Through an HF directory, as `meshtrain convert` writes it.
  std::string dir = fresh_temp_dir("stories");
  save_base_model(*load_llama2c(data + "stories260K.bin"), dir);
  auto model = load_pretrained(dir, Precision::fp32, LoraConfig{}, 0);
  auto tok = load_tokenizer(data + "tok512.bin");
  GenerateOptions o;
  o.max_new_tokens = 256;
  o.stop_ids = {tok->bos_id(), tok->eos_id()};
  auto ids = generate(*model, {tok->bos_id()}, o);
  std::vector<int32_t> with_bos = {tok->bos_id()};
  with_bos.insert(with_bos.end(), ids.begin(), ids.end());
  std::string text = tok->decode(with_bos);
  EXPECT_EQ(text.substr(0, std::strlen(kStoriesReference)), kStoriesReference) << text;
}

}  // namespace
}  // namespace mt

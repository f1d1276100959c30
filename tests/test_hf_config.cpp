#include <gtest/gtest.h>

#include "core/error.h"
#include "io/hf_config.h"

namespace mt {
namespace {

// The config.json of Llama 3.1 8B as published (unused keys included).
const char* kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

TEST(HfConfig, ReadsLlama31) {
  ModelConfig c = parse_hf_config(kLlama31_8B, "config.json");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(HfConfig, WriteThenReadIsTheSame) {
  ModelConfig c = parse_hf_config(kLlama31_8B, "config.json");
  c.tie_word_embeddings = true;
  ModelConfig d = parse_hf_config(hf_config_json(c, "bfloat16"), "written");
  EXPECT_EQ(d.hidden_size, c.hidden_size);
  EXPECT_EQ(d.num_key_value_heads, c.num_key_value_heads);
  EXPECT_FLOAT_EQ(d.rope_scaling.high_freq_factor, c.rope_scaling.high_freq_factor);
  EXPECT_TRUE(d.tie_word_embeddings);
}

// Floats as the short decimals users write, every one reading back as the same float; torch_dtype
// as given (the element type of the weights written beside it).
TEST(HfConfig, WritesShortDecimalsAndTheWeightsDtype) {
  ModelConfig c = parse_hf_config(kLlama31_8B, "config.json");
  c.rms_norm_eps = 1e-5f;
  c.rope_scaling.low_freq_factor = 1.1f;
  const std::string text = hf_config_json(c, "float32");
  EXPECT_NE(text.find("\"rms_norm_eps\": 1e-05,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"rope_theta\": 500000.0,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"low_freq_factor\": 1.1,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"torch_dtype\": \"float32\""), std::string::npos) << text;
  const ModelConfig d = parse_hf_config(text, "written");
  EXPECT_EQ(d.rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(d.rope_scaling.low_freq_factor, c.rope_scaling.low_freq_factor);
}

void expect_error(const std::string& text, const std::string& word) {
  try {
    parse_hf_config(text, "cfg.json");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  }
}

TEST(HfConfig, BadFilesNameTheProblem) {
  std::string good = kLlama31_8B;
  auto replace = [&](const std::string& a, const std::string& b) {
    std::string s = good;
    s.replace(s.find(a), a.size(), b);
    return s;
  };
  expect_error("{not json", "JSON");
  expect_error("[1,2]", "object");
  expect_error(replace("\"hidden_size\": 4096,", ""), "hidden_size");
  expect_error(replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": \"32\""), "num_hidden_layers");
  expect_error(replace("\"num_attention_heads\": 32", "\"num_attention_heads\": 30"), "num_attention_heads");
  expect_error(replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 7"), "num_key_value_heads");
  expect_error(replace("\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\""), "yarn");
  expect_error(replace("\"model_type\": \"llama\"", "\"model_type\": \"gpt2\""), "gpt2");
  // What meshtrain does not compute: read as if absent, then written back, they would claim it.
  expect_error(replace("\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias true");
  expect_error(replace("\"mlp_bias\": false", "\"mlp_bias\": true"), "mlp_bias true");
  expect_error(replace("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""), "hidden_act \"gelu\"");
  expect_error(replace("\"use_cache\": true", "\"use_cache\": true, \"quantization_config\": {}"),
               "quantization_config");
}

// The source's keys in its order, unknown ones included; meshtrain's architecture keys and dtype
// replace theirs in place (dtype too, transformers' newer name for torch_dtype); the tokenizer's
// ids fill only what the source lacks.
TEST(HfConfig, WritingKeepsTheSourceKeys) {
  const std::string source = std::string(kLlama31_8B).replace(std::string(kLlama31_8B).find("\"use_cache\""), 0,
                                                              "\"dtype\": \"bfloat16\", \"extra\": [1, {\"a\": null}], ");
  const ModelConfig c = parse_hf_config(source, "config.json");
  const std::string text = hf_config_json(c, "float32", source, {true, 5, 6});
  EXPECT_NE(text.find("\"bos_token_id\": 128000,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"eos_token_id\": 128001,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"extra\": [\n    1,\n    {\n      \"a\": null\n    }\n  ],"), std::string::npos) << text;
  EXPECT_NE(text.find("\"dtype\": \"float32\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"torch_dtype\": \"float32\""), std::string::npos) << text;
  EXPECT_LT(text.find("\"architectures\""), text.find("\"attention_bias\"")) << text;  // the source's order
  EXPECT_LT(text.find("\"attention_bias\""), text.find("\"hidden_size\"")) << text;
  // Without a source: the tokenizer's ids, null for one it lacks.
  const std::string bare = hf_config_json(c, "bfloat16", "", {true, 5, -1});
  EXPECT_NE(bare.find("\"bos_token_id\": 5,"), std::string::npos) << bare;
  EXPECT_NE(bare.find("\"eos_token_id\": null"), std::string::npos) << bare;
  EXPECT_EQ(hf_config_json(c, "bfloat16").find("bos_token_id"), std::string::npos);
}

// Found by fuzz/fuzz_hf_configs.cpp (and reading the parser for it): each of these escaped as an
// nlohmann exception, overflowed, or was read as a value that could not be written back.
TEST(HfConfig, MalformedValuesAreOneErrorLine) {
  std::string good = kLlama31_8B;
  auto replace = [&](const std::string& a, const std::string& b) {
    std::string s = good;
    s.replace(s.find(a), a.size(), b);
    return s;
  };
  // Was: an uncaught out_of_range (number overflow) from the JSON parser.
  expect_error(replace("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e400"), "not valid JSON");
  // Was: read as infinity, written back as null.
  expect_error(replace("\"rope_theta\": 500000.0", "\"rope_theta\": 1e300"), "rope_theta");
  // Was: an uncaught type_error.
  expect_error(replace("\"rope_type\": \"llama3\"", "\"rope_type\": 3"), "rope_type");
  // Was: signed overflow (undefined behaviour) in head_dim * num_attention_heads.
  expect_error(replace("\"hidden_act\"", "\"head_dim\": 4611686018427387904, \"hidden_act\""), "head_dim");
  expect_error(replace("\"hidden_act\"", "\"head_dim\": 64, \"hidden_act\""), "head_dim");
  // Was: accepted, with llama3 scaling against an original context of 0.
  expect_error(replace("\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 0"),
               "original_max_position_embeddings");
  EXPECT_EQ(parse_hf_config(replace("\"hidden_act\"", "\"head_dim\": 128, \"hidden_act\""), "cfg.json").head_dim(), 128);
}

}  // namespace
}  // namespace mt

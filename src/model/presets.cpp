#include "model/presets.h"

#include "core/error.h"

namespace mt {
namespace {

LlamaConfig llama31(int64_t hidden, int64_t inter, int64_t layers, int64_t heads) {
  LlamaConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = 8;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {8.0f, 1.0f, 4.0f, 8192};
  c.tie_word_embeddings = false;
  return c;
}

// OpenAI's GPT-2 sizes (vocab 50257, 1024 positions, MLP 4 x hidden).
LlamaConfig gpt2(int64_t layers, int64_t hidden, int64_t heads) {
  LlamaConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = 4 * hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.vocab_size = 50257;
  c.max_position_embeddings = 1024;
  use_gpt2_block(c);
  return c;
}

}  // namespace

std::vector<std::string> llama_preset_names() {
  return {"llama3-8b", "llama3-70b", "llama3-405b", "reference", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"};
}

LlamaConfig llama_preset(const std::string& name) {
  if (name == "llama3-8b") return llama31(4096, 14336, 32, 32);
  if (name == "llama3-70b") return llama31(8192, 28672, 80, 64);
  if (name == "llama3-405b") return llama31(16384, 53248, 126, 128);
  if (name == "gpt2") return gpt2(12, 768, 12);  // 124,439,808 parameters
  if (name == "gpt2-medium") return gpt2(24, 1024, 16);
  if (name == "gpt2-large") return gpt2(36, 1280, 20);
  if (name == "gpt2-xl") return gpt2(48, 1600, 25);
  if (name == "reference") {  // the engine's benchmark shape (meshtrain bench, configs/reference.toml)
    LlamaConfig c;
    c.hidden_size = 768, c.intermediate_size = 2048, c.num_hidden_layers = 12;
    c.num_attention_heads = 12, c.num_key_value_heads = 4, c.vocab_size = 32000;
    c.max_position_embeddings = 2048, c.tie_word_embeddings = false;
    return c;
  }
  fail("unknown model preset '" + name +
       "' (expected llama3-8b, llama3-70b, llama3-405b, reference, gpt2, gpt2-medium, gpt2-large or gpt2-xl)");
}

}  // namespace mt

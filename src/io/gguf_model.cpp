#include "io/gguf_model.h"

#include "core/error.h"
#include "io/gguf_export.h"
#include "io/llama2c.h"
#include "io/weight_shapes.h"

namespace mt {

namespace {

int64_t size_key(const GgufFile& g, const std::string& key) { return int64_t(g.get_u32(key)); }

}  // namespace

LlamaConfig gguf_model_config(const GgufFile& g) {
  if (g.get_str("general.architecture") != "llama")
    fail(g.label + ": general.architecture is '" + g.get_str("general.architecture") + "'; only llama is read");
  if (g.find_tensor("rope_freqs.weight"))
    fail(g.label + ": rope_freqs.weight (llama3 rope scaling) cannot be read back: the file keeps the "
         "factors, not the scaling's parameters");
  LlamaConfig c;
  c.hidden_size = size_key(g, "llama.embedding_length");
  c.intermediate_size = size_key(g, "llama.feed_forward_length");
  c.num_hidden_layers = size_key(g, "llama.block_count");
  c.num_attention_heads = size_key(g, "llama.attention.head_count");
  c.num_key_value_heads =
      g.find("llama.attention.head_count_kv") ? size_key(g, "llama.attention.head_count_kv") : c.num_attention_heads;
  c.max_position_embeddings = size_key(g, "llama.context_length");
  c.rms_norm_eps = g.get_f32("llama.attention.layer_norm_rms_epsilon");
  c.rope_theta = g.find("llama.rope.freq_base") ? g.get_f32("llama.rope.freq_base") : 10000.0f;
  const GgufTensorInfo& embed = g.tensor("token_embd.weight");
  c.vocab_size = g.find("llama.vocab_size") ? size_key(g, "llama.vocab_size") : int64_t(embed.ne.back());
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.validate();
  if (g.find("llama.rope.dimension_count") && size_key(g, "llama.rope.dimension_count") != c.head_dim())
    fail(g.label + ": llama.rope.dimension_count is not the head dim (partial rotary is not supported)");

  HeldTensors held;
  for (const auto& t : g.tensors)
    if (auto hf = hf_name_of_gguf_tensor(t.name)) held.names.push_back(*hf);
  held.shape = [&g](const std::string& hf) -> std::optional<std::vector<int64_t>> {
    const GgufTensorInfo* t = g.find_tensor(gguf_tensor_name(hf));
    if (!t) return std::nullopt;
    return t->shape();
  };
  // The shapes are checked under their HF names, so a message names the HF tensor.
  check_held_shapes(c, LoraConfig{}, /*adapters=*/false, held, "", g.label);
  return c;
}

void load_gguf_weights(const GgufFile& g, LlamaModel& model) {
  const LlamaConfig& c = model.config();
  for (auto& p : model.base().params()) {
    std::vector<float> v = g.tensor_f32(gguf_tensor_name(p.name));
    if (const int64_t heads = gguf_rotary_heads(p.name, c)) {  // interleaved -> rotate-half rows
      std::vector<float> hf(v.size());
      permute_rotary_rows(v.data(), hf.data(), heads, c.head_dim(), p.shape.back());
      v.swap(hf);
    }
    model.base().set_values(p, v.data());
  }
}

}  // namespace mt

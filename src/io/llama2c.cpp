#include "io/llama2c.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

void permute_rotary_rows(const float* src, float* dst, int64_t heads, int64_t head_dim,
                         int64_t cols) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s) {
        const float* from = src + (h * head_dim + 2 * i + s) * cols;
        float* to = dst + (h * head_dim + s * half + i) * cols;
        std::memcpy(to, from, size_t(cols) * sizeof(float));
      }
}

namespace {

struct Header {
  ModelConfig config;
  bool shared = true;
};

Header read_header(std::ifstream& f, const std::string& path) {
  f.seekg(0, std::ios::end);
  const int64_t file_size = f.tellg();
  f.seekg(0);
  int32_t h[7];
  if (file_size < int64_t(sizeof(h)) || !f.read(reinterpret_cast<char*>(h), sizeof(h)))
    fail(path + ": too short for a llama2.c header (7 int32 values)");
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
  const bool shared = h[5] > 0;
  const int64_t vocab = h[5] > 0 ? h[5] : -int64_t(h[5]), seq = h[6];
  auto plausible = [](int64_t v) { return v > 0 && v < (int64_t(1) << 24); };
  if (!plausible(dim) || !plausible(hidden) || !plausible(layers) || !plausible(heads) ||
      !plausible(kv_heads) || !plausible(vocab) || !plausible(seq))
    fail(path + ": implausible llama2.c header (dim " + std::to_string(dim) + ", hidden " +
         std::to_string(hidden) + ", layers " + std::to_string(layers) + ", heads " +
         std::to_string(heads) + ", kv_heads " + std::to_string(kv_heads) + ", vocab " +
         std::to_string(vocab) + ", seq_len " + std::to_string(seq) + ")");
  Header out;
  ModelConfig& c = out.config;
  c.hidden_size = dim;
  c.intermediate_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.vocab_size = vocab;
  c.max_position_embeddings = seq;
  c.rms_norm_eps = 1e-5f;  // llama2.c's run.c
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = shared;
  out.shared = shared;
  try {
    c.validate();
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
  const int64_t D = dim / heads, kv = D * kv_heads;
  const int64_t floats = vocab * dim +
                         layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) + dim +
                         seq * D + (shared ? 0 : vocab * dim);
  if (file_size != int64_t(sizeof(h)) + 4 * floats)
    fail(path + ": size " + std::to_string(file_size) +
         " bytes does not match its header (expected " +
         std::to_string(int64_t(sizeof(h)) + 4 * floats) + ")");
  return out;
}

}  // namespace

ModelConfig read_llama2c_config(const std::string& path) {
  require_regular_file(path, "llama2.c checkpoint");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open llama2.c checkpoint");
  return read_header(f, path).config;
}

void load_llama2c_weights(const std::string& path, Transformer& model) {
  require_regular_file(path, "llama2.c checkpoint");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open llama2.c checkpoint");
  const Header hd = read_header(f, path);
  const ModelConfig& c = hd.config;
  const ModelConfig& m = model.config();
  if (m.hidden_size != c.hidden_size || m.num_hidden_layers != c.num_hidden_layers ||
      m.vocab_size != c.vocab_size || m.intermediate_size != c.intermediate_size ||
      m.num_attention_heads != c.num_attention_heads ||
      m.num_key_value_heads != c.num_key_value_heads ||
      m.tie_word_embeddings != c.tie_word_embeddings)
    fail(path + ": checkpoint shape does not match the model it is loaded into");
  const int64_t dim = c.hidden_size, hidden = c.intermediate_size, layers = c.num_hidden_layers;
  const int64_t D = c.head_dim(), kv = c.kv_dim(), vocab = c.vocab_size;
  std::vector<float> tmp, perm;
  auto read = [&](int64_t n) {
    tmp.resize(size_t(n));
    if (!f.read(reinterpret_cast<char*>(tmp.data()), std::streamsize(n * 4)))
      fail(path + ": unexpected end of file");
    return tmp.data();
  };
  auto set = [&](const std::string& name, const float* src) { model.base().set_values(name, src); };
  // Per-layer tensors are stored grouped by kind: all layers' q, then all layers' k, ...
  auto per_layer = [&](const std::string& suffix, int64_t rows, int64_t cols, int64_t rot_heads) {
    for (int64_t l = 0; l < layers; ++l) {
      const float* src = read(rows * cols);
      if (rot_heads > 0) {
        perm.resize(size_t(rows * cols));
        permute_rotary_rows(src, perm.data(), rot_heads, D, cols);
        src = perm.data();
      }
      set(layer_prefix(l) + suffix, src);
    }
  };
  set(kEmbedName, read(vocab * dim));
  per_layer("input_layernorm.weight", 1, dim, 0);
  per_layer("self_attn.q_proj.weight", dim, dim, c.num_attention_heads);
  per_layer("self_attn.k_proj.weight", kv, dim, c.num_key_value_heads);
  per_layer("self_attn.v_proj.weight", kv, dim, 0);
  per_layer("self_attn.o_proj.weight", dim, dim, 0);
  per_layer("post_attention_layernorm.weight", 1, dim, 0);
  per_layer("mlp.gate_proj.weight", hidden, dim, 0);  // w1
  per_layer("mlp.down_proj.weight", dim, hidden, 0);  // w2
  per_layer("mlp.up_proj.weight", hidden, dim, 0);    // w3
  set(kFinalNormName, read(dim));
  read(c.max_position_embeddings * D);  // legacy RoPE tables (cos and sin halves); recomputed
  if (!hd.shared) set(kHeadName, read(vocab * dim));
}

std::unique_ptr<Transformer> load_llama2c(const std::string& path) {
  auto model = std::make_unique<Transformer>(read_llama2c_config(path), Precision::fp32, LoraConfig{});
  load_llama2c_weights(path, *model);
  return model;
}

}  // namespace mt

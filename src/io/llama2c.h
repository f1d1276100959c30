// Reader for llama2.c checkpoints (the legacy "version 0" export: a header of 7 int32 values,
// dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, then f32 tensors; a
// negative vocab_size means the classifier is stored separately instead of shared with the
// embedding). llama2.c rotates interleaved pairs (2i, 2i+1); the q and k rows are permuted here
// into the HF rotate-half layout the model uses.
#pragma once
#include <memory>
#include <string>

#include "model/transformer.h"

namespace mt {

// The architecture in the checkpoint's header (checked against the file size). Throws mt::Error
// naming the file when the header is implausible or the size does not match.
ModelConfig read_llama2c_config(const std::string& path);
// Loads the weights into a model built from read_llama2c_config (any precision, with or without
// adapters).
void load_llama2c_weights(const std::string& path, Transformer& model);
// Both: a new fp32 model without adapters.
std::unique_ptr<Transformer> load_llama2c(const std::string& path);

// The HF-layout row order for a q or k matrix stored with interleaved rotary pairs: row
// (head, i, half) of the interleaved layout moves to (head, half, i). rows = heads * head_dim.
void permute_rotary_rows(const float* src, float* dst, int64_t heads, int64_t head_dim, int64_t cols);

}  // namespace mt

// A model's vocabulary grown for tokens added to its tokenizer (data.add_tokens): the embedding
// (and an untied head) get rows appended, each the mean of the rows the model had.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/transformer.h"

namespace mt {

// `model` with `vocab_size` rows in its embedding and untied head: the rows it had unchanged, each
// new row the mean of them (transformers' resize_token_embeddings(mean_resizing=True) draws new
// rows from a normal around that mean with 1e-5 of the rows' covariance; the mean alone is its
// centre and keeps a run reproducible without a second random stream). Every other parameter is
// copied; the adapters start as init_adapters(seed) makes them (a trained copy of the embedding
// from the grown rows). `model` itself when it already has vocab_size rows. The model must own
// its storage and have no NF4 base.
std::unique_ptr<Transformer> grow_vocabulary(std::unique_ptr<Transformer> model, int64_t vocab_size, uint64_t seed);

// The mean of `rows` rows of `cols` values (row-major), summed in double.
std::vector<float> mean_row(const float* values, int64_t rows, int64_t cols);

}  // namespace mt

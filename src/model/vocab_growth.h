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
// copied (an NF4 base's records as they are: QLoRA quantises the blocks' projections only, never
// the embedding or head); the adapters start as init_adapters(seed) makes them (a trained copy of
// the embedding from the grown rows). `model` itself when it already has vocab_size rows. The model
// must own its storage.
std::unique_ptr<Transformer> grow_vocabulary(std::unique_ptr<Transformer> model, int64_t vocab_size, uint64_t seed);

// The mean of `rows` rows of `cols` values (row-major), summed in double.
std::vector<float> mean_row(const float* values, int64_t rows, int64_t cols);

// mean_row in parts, for rows read a few at a time (a sharded model's loader): `rows` rows added
// to `sum` (cols doubles) in order, then the mean of the `total` rows added. The same values in
// the same order give mean_row's result bit for bit.
void add_rows(std::vector<double>& sum, const float* values, int64_t rows, int64_t cols);
std::vector<float> mean_of_sum(const std::vector<double>& sum, int64_t total);

}  // namespace mt

#include "model/vocab_growth.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace mt {

void add_rows(std::vector<double>& sum, const float* values, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) sum[size_t(j)] += values[r * cols + j];
}

std::vector<float> mean_of_sum(const std::vector<double>& sum, int64_t total) {
  std::vector<float> mean(sum.size());
  for (size_t j = 0; j < sum.size(); ++j) mean[j] = float(sum[j] / double(total));
  return mean;
}

std::vector<float> mean_row(const float* values, int64_t rows, int64_t cols) {
  std::vector<double> sum(size_t(cols), 0.0);
  add_rows(sum, values, rows, cols);
  return mean_of_sum(sum, rows);
}

std::unique_ptr<Transformer> grow_vocabulary(std::unique_ptr<Transformer> model, int64_t vocab_size,
                                             uint64_t seed) {
  const ModelConfig& had = model->config();
  if (vocab_size == had.vocab_size) return model;
  MT_CHECK(vocab_size > had.vocab_size, "a vocabulary is only grown");
  MT_CHECK(model->owns_storage(), "growing the vocabulary of a model whose parameters live in a parallel layer");
  ModelConfig c = had;
  c.vocab_size = vocab_size;
  auto grown = std::make_unique<Transformer>(c, model->precision(), model->lora_config(), true, model->backend());
  std::vector<float> values;
  std::vector<uint8_t> records;
  for (Param& p : grown->base().params()) {
    const Param& src = model->base().get(p.name);
    if (src.quant) {  // an NF4 (QLoRA) projection: its records copied, not quantised again
      MT_CHECK(p.quant && src.numel == p.numel, p.name + " is NF4 in one model only");
      records.resize(src.quant_tensor().bytes());
      model->backend().copy_to_host(records.data(), src.quant_tensor());
      grown->backend().copy_from_host(p.quant_tensor(), records.data());
      continue;
    }
    values.resize(size_t(src.numel));
    model->base().get_values(src, values.data());
    if (src.numel != p.numel) {  // the embedding or the head: [rows, C] -> [vocab_size, C]
      MT_CHECK(src.shape.size() == 2 && p.shape.size() == 2 && src.shape[1] == p.shape[1] &&
                   p.shape[0] == vocab_size,
               p.name + " changes shape other than by rows of the vocabulary");
      const int64_t rows = src.shape[0], cols = src.shape[1];
      const std::vector<float> mean = mean_row(values.data(), rows, cols);
      values.resize(size_t(p.numel));
      for (int64_t r = rows; r < vocab_size; ++r)
        std::copy(mean.begin(), mean.end(), values.begin() + r * cols);
    }
    grown->base().set_values(p, values.data());
  }
  grown->init_adapters(seed);
  return grown;
}

}  // namespace mt

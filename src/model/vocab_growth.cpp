#include "model/vocab_growth.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"

namespace mt {

std::vector<float> mean_row(const float* values, int64_t rows, int64_t cols) {
  std::vector<double> sum(size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) sum[size_t(j)] += values[r * cols + j];
  std::vector<float> mean(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) mean[size_t(j)] = float(sum[size_t(j)] / double(rows));
  return mean;
}

std::unique_ptr<Transformer> grow_vocabulary(std::unique_ptr<Transformer> model, int64_t vocab_size,
                                             uint64_t seed) {
  const ModelConfig& had = model->config();
  if (vocab_size == had.vocab_size) return model;
  MT_CHECK(vocab_size > had.vocab_size, "a vocabulary is only grown");
  MT_CHECK(model->owns_storage(), "growing the vocabulary of a model whose parameters live in a parallel layer");
  if (model->lora_config().quantized_base())
    fail("data.add_tokens: growing the vocabulary of an NF4 (QLoRA) base is not supported; train with "
         "lora.base_dtype = \"bf16\"");
  ModelConfig c = had;
  c.vocab_size = vocab_size;
  auto grown = std::make_unique<Transformer>(c, model->precision(), model->lora_config(), true, model->backend());
  std::vector<float> values;
  for (Param& p : grown->base().params()) {
    const Param& src = model->base().get(p.name);
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

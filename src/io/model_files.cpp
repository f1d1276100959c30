#include "io/model_files.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/hf_config.h"
#include "io/safetensors_write.h"

namespace mt {

std::vector<std::string> save_base_model(LlamaModel& model, const std::string& dir) {
  const bool bf = model.precision() == Precision::bf16;
  std::vector<Buffer<bf16>> converted;  // bf16 copies of tensors that only have f32 values
  std::vector<TensorOut> out;
  for (auto& p : model.base().params()) {
    TensorOut t{p.name, bf ? "BF16" : "F32", p.shape, nullptr, 0};
    if (!bf) {
      t.data = p.master, t.bytes = size_t(p.numel) * 4;
    } else if (p.compute && !p.master) {
      t.data = p.compute, t.bytes = size_t(p.numel) * 2;
    } else {
      converted.emplace_back(size_t(p.numel));
      convert(converted.back().data(), p.master, size_t(p.numel));
      t.data = converted.back().data(), t.bytes = size_t(p.numel) * 2;
    }
    out.push_back(t);
  }
  std::string weights = dir + "/model.safetensors", config = dir + "/config.json";
  write_safetensors(weights, out, {{"format", "pt"}});
  write_file_atomically(config, [&](std::ostream& os) { os << hf_config_json(model.config()); });
  return {config, weights};
}

}  // namespace mt

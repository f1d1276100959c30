#include "io/model_files.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "data/tokenizer.h"
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

std::vector<std::string> save_tokenizer_files(const std::string& tokenizer_path,
                                              const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> written;
  if (tokenizer_path.empty() ||
      std::filesystem::path(tokenizer_path).filename() == kByteTokenizerFile) {
    const std::string marker = (fs::path(dir) / kByteTokenizerFile).string();
    write_file_atomically(marker, [](std::ostream& os) {
      os << "meshtrain byte-level tokenizer: token id = byte value (0..255)\n";
    });
    return {marker};
  }
  fs::path src(find_tokenizer_file(tokenizer_path));
  std::vector<fs::path> files = {src};
  if (src.filename() == "vocab.json") files.push_back(src.parent_path() / "merges.txt");
  for (const auto& f : files) {
    fs::path dst = fs::path(dir) / f.filename();
    if (fs::exists(dst) && fs::equivalent(f, dst)) continue;
    fs::copy_file(f, dst, fs::copy_options::overwrite_existing);
    fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    written.push_back(dst.string());
  }
  return written;
}

}  // namespace mt

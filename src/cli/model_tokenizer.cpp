#include "cli/model_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "data/ggml_vocab.h"
#include "io/gguf_reader.h"
#include "io/gguf_tokenizer.h"

namespace mt::cli {

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".gguf" && !std::filesystem::is_directory(path);
}

std::optional<TokenizerInfo> gguf_tokenizer_info(const std::string& gguf_path) {
  return read_tokenizer_keys(read_gguf(gguf_path));
}

std::unique_ptr<Tokenizer> load_any_tokenizer(const std::string& path) {
  if (!is_gguf_path(path)) return load_tokenizer(path);
  const auto info = gguf_tokenizer_info(path);
  if (!info)
    fail(path + ": the GGUF file carries no tokenizer (no tokenizer.ggml.model); give --tokenizer "
         "with the model's tokenizer file or directory");
  return tokenizer_of_ggml_vocab(*info, path);
}

}  // namespace mt::cli

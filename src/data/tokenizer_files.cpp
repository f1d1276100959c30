#include "data/tokenizer_files.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "core/atomic_file.h"
#include "data/hf_sentencepiece_writer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"

namespace mt {

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
  // A sentencepiece model (tokenizer.model, llama2.c's tokenizer.bin) also gets the HF files, so
  // the directory is a complete HF model directory; its .model is copied under the name
  // transformers' slow LlamaTokenizer reads.
  std::unique_ptr<Tokenizer> spm_source;
  if (src.extension() != ".json") {
    auto tok = load_tokenizer(src.string());
    if (dynamic_cast<const SentencePieceTokenizer*>(tok.get())) spm_source = std::move(tok);
  }
  std::vector<std::pair<fs::path, std::string>> files = {
      {src, spm_source && src.extension() == ".model" ? "tokenizer.model" : src.filename().string()}};
  if (src.filename() == "vocab.json") files.push_back({src.parent_path() / "merges.txt", "merges.txt"});
  // An HF tokenizer.json travels with the files transformers reads beside it (and llama2.c's
  // tokenizer.bin, which GGUF export reads the vocabulary from).
  if (src.filename() == "tokenizer.json")
    for (const char* companion : {"tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                                  "tokenizer.bin"})
      if (fs::is_regular_file(src.parent_path() / companion))
        files.push_back({src.parent_path() / companion, companion});
  for (const auto& [f, name] : files) {
    fs::path dst = fs::path(dir) / name;
    if (fs::exists(dst) && fs::equivalent(f, dst)) continue;
    fs::copy_file(f, dst, fs::copy_options::overwrite_existing);
    fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    written.push_back(dst.string());
  }
  if (const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(spm_source.get())) {
    const std::pair<const char*, std::string> hf[] = {{"tokenizer.json", hf_tokenizer_json(*spm)},
                                                      {"tokenizer_config.json", hf_tokenizer_config_json(*spm)}};
    for (const auto& [file, text] : hf) {
      const std::string dst = (fs::path(dir) / file).string();
      write_file_atomically(dst, [&](std::ostream& os) { os << text; });
      written.push_back(dst);
    }
  }
  return written;
}

}  // namespace mt

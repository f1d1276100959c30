#include "data/tokenizer_files.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/hf_byte_level_writer.h"
#include "data/hf_sentencepiece_writer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

// Writes the HF files for a tokenizer that has no tokenizer.json of its own.
void write_hf_files(const Tokenizer& tok, const fs::path& dir, std::vector<std::string>& written) {
  std::string json, config;
  if (const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(&tok)) {
    json = hf_tokenizer_json(*spm);
    config = hf_tokenizer_config_json(*spm);
  } else if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) {
    json = hf_byte_level_tokenizer_json(*bpe);
    config = hf_byte_level_tokenizer_config_json(*bpe);
  } else {
    return;
  }
  for (const auto& [file, text] : {std::pair{"tokenizer.json", &json}, std::pair{"tokenizer_config.json", &config}}) {
    const std::string dst = (dir / file).string();
    write_file_atomically(dst, [&](std::ostream& os) { os << *text; });
    written.push_back(dst);
  }
}

}  // namespace

std::vector<std::string> save_tokenizer_files(const std::string& tokenizer_path,
                                              const std::string& dir) {
  std::vector<std::string> written;
  if (tokenizer_path.empty() ||
      std::filesystem::path(tokenizer_path).filename() == kByteTokenizerFile) {
    // The marker keeps the directory loading as the byte tokenizer itself (load_tokenizer looks
    // for it first); the HF files are for transformers.
    const std::string marker = (fs::path(dir) / kByteTokenizerFile).string();
    write_file_atomically(marker, [](std::ostream& os) {
      os << "meshtrain byte-level tokenizer: token id = byte value (0..255)\n";
    });
    written.push_back(marker);
    write_hf_files(*byte_tokenizer_as_bpe(), dir, written);
    return written;
  }
  fs::path src(find_tokenizer_file(tokenizer_path));
  // A tokenizer without a tokenizer.json (sentencepiece tokenizer.model, llama2.c's tokenizer.bin,
  // tiktoken, GPT-2's vocab.json + merges.txt) also gets the HF files, so the directory is a
  // complete HF model directory; a sentencepiece .model is copied under the name transformers'
  // slow LlamaTokenizer reads.
  std::unique_ptr<Tokenizer> source;
  if (src.extension() != ".json" || src.filename() == "vocab.json") source = load_tokenizer(src.string());
  const bool spm_model = dynamic_cast<const SentencePieceTokenizer*>(source.get()) && src.extension() == ".model";
  std::vector<std::pair<fs::path, std::string>> files = {
      {src, spm_model ? "tokenizer.model" : src.filename().string()}};
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
  if (source) write_hf_files(*source, dir, written);
  return written;
}

std::vector<std::string> save_tokenizer_files(const Tokenizer& tok, const std::string& dir) {
  std::vector<std::string> written;
  write_hf_files(tok, dir, written);
  if (written.empty()) fail("the " + std::string(tok.kind()) + " tokenizer has no HF tokenizer.json form");
  return written;
}

}  // namespace mt

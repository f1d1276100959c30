// load_tokenizer(): format detection by file name and content, then the matching reader.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

// Every kind of tokenizer file (tiktoken, sentencepiece, llama2.c, not only JSON) under the size
// limit of a tokenizer file, checked before it is read.
std::string read_file(const fs::path& p) { return read_json_text(p.string(), JsonKind::tokenizer); }

std::unique_ptr<Tokenizer> load_gpt2_pair(const fs::path& dir) {
  fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
  if (!fs::is_regular_file(vocab) || !fs::is_regular_file(merges))
    fail("GPT-2 tokenizer needs vocab.json and merges.txt together in " + dir.string());
  return read_gpt2(read_file(vocab), read_file(merges), vocab.string());
}

std::unique_ptr<Tokenizer> load_file(const fs::path& p) {
  std::string fname = p.filename().string(), ext = p.extension().string();
  if (fname == kByteTokenizerFile) return std::make_unique<ByteTokenizer>();
  if (fname == "vocab.json" || fname == "merges.txt") return load_gpt2_pair(p.parent_path());
  std::string content = read_file(p);
  if (ext == ".bin") return read_llama2c_tokenizer(content, p.string());
  if (ext == ".json") return read_hf_tokenizer_json(content, p.string());
  if (looks_like_tiktoken(content)) return read_tiktoken(content, p.string());
  size_t first = content.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && content[first] == '{')
    return read_hf_tokenizer_json(content, p.string());
  // A ModelProto starts with its first piece: field 1, length-delimited, tag byte 0x0a.
  if (ext == ".model" && !content.empty() && content[0] == '\x0a')
    return read_sentencepiece_model(content, p.string());
  fail(p.string() + ": unrecognised tokenizer file (expected tiktoken `base64 rank` lines, "
       "a sentencepiece .model, tokenizer.json, vocab.json/merges.txt or a llama2.c .bin)");
}

// A special token of tokenizer_config.json ("bos_token", "eos_token"): a string, or an AddedToken
// object {"content": ...}. "" when absent or null.
std::string config_token(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

// From the tokenizer_config.json next to a tokenizer file: its chat_template (a string, or HF's
// list of {"name", "template"} whose "default" entry is the chat template) and the bos_token /
// eos_token strings templates get. Left unset when there is no such file.
void read_config_beside(const fs::path& file, Tokenizer& tok) {
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return;
  const nlohmann::json j = parse_json_object(read_file(config), JsonKind::tokenizer, config.string() + ": malformed JSON");
  tok.set_config_tokens(config_token(j, "bos_token"), config_token(j, "eos_token"));
  const auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return;
  if (it->is_string()) tok.set_chat_template(it->get<std::string>());
  if (it->is_array())
    for (const auto& t : *it)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        tok.set_chat_template(t["template"].get<std::string>());
}

}  // namespace

std::string find_tokenizer_file(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec)) fail("tokenizer not found: " + path);
  if (!fs::is_directory(p, ec)) return p.string();
  // The byte tokenizer's marker first: meshtrain writes it beside an HF tokenizer.json that
  // encodes the same, and the marker loads the byte tokenizer itself.
  for (const char* name : {kByteTokenizerFile, "tokenizer.json", "tokenizer.model"})
    if (fs::is_regular_file(p / name, ec)) return (p / name).string();
  if (fs::is_regular_file(p / "vocab.json", ec) && fs::is_regular_file(p / "merges.txt", ec))
    return (p / "vocab.json").string();
  if (fs::is_regular_file(p / "tokenizer.bin", ec)) return (p / "tokenizer.bin").string();
  // llama2.c's custom-vocabulary exports are named tok<N>.bin (tok512.bin).
  for (const auto& entry : fs::directory_iterator(p, ec)) {
    std::string n = entry.path().filename().string();
    if (entry.is_regular_file() && n.rfind("tok", 0) == 0 && entry.path().extension() == ".bin")
      return entry.path().string();
  }
  fail("no tokenizer found in directory " + path +
       " (looked for tokenizer.byte, tokenizer.json, tokenizer.model, vocab.json+merges.txt, "
       "tokenizer.bin, tok*.bin)");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const fs::path file = find_tokenizer_file(path);
  std::unique_ptr<Tokenizer> tok = load_file(file);
  read_config_beside(file, *tok);
  return tok;
}

}  // namespace mt

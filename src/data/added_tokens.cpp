#include "data/added_tokens.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/hf_tokenizer_json.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"

namespace mt {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

ojson read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string() + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return ojson::parse(text.str());
  } catch (const std::exception& e) {
    fail(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

void write_json(const fs::path& path, const ojson& j) {
  write_file_atomically(path.string(), [&](std::ostream& os) { os << j.dump(2) << "\n"; });
}

}  // namespace

std::vector<std::string> write_tokenizer_with_added_tokens(const std::string& source,
                                                           const std::vector<std::string>& tokens,
                                                           const std::string& dir) {
  check_added_tokens(tokens);
  if (source.empty())
    fail("data.add_tokens: the byte-level tokenizer has no file to add tokens to; give data.tokenizer "
         "(or model.path) a tokenizer file");
  const std::unique_ptr<Tokenizer> base = load_tokenizer(source);
  fs::create_directories(dir);
  // The source's own files (a tokenizer.json with its tokenizer_config.json; any other form also
  // gets both written from it), then the added tokens appended to both.
  for (const std::string& f : save_tokenizer_files(source, dir)) {
    // Only the HF files and a sentencepiece tokenizer.model (llama.cpp's converter reads it and
    // takes the added tokens from tokenizer_config.json) stay: a llama2.c .bin beside them would
    // be another tokenizer without the new tokens.
    const std::string name = fs::path(f).filename().string();
    if (name != "tokenizer.json" && name != "tokenizer_config.json" && name != "special_tokens_map.json" &&
        name != "tokenizer.model")
      fs::remove(f);
  }
  const fs::path json_path = fs::path(dir) / "tokenizer.json";
  if (!fs::is_regular_file(json_path))
    fail("data.add_tokens: the " + std::string(base->kind()) + " tokenizer at " + source +
         " has no HF tokenizer.json form to add tokens to");
  ojson json = read_json(json_path);
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  ojson config = fs::is_regular_file(config_path) ? read_json(config_path) : ojson();
  if (!json.contains("added_tokens") || json["added_tokens"].is_null()) json["added_tokens"] = ojson::array();
  if (!json["added_tokens"].is_array()) fail(json_path.string() + ": added_tokens is not a list");
  std::vector<std::string> notes;
  int64_t next = base->vocab_size();
  for (const std::string& t : tokens) {
    if (const int32_t id = base->token_to_id(t); id >= 0) {
      notes.push_back("data.add_tokens: '" + t + "' is already the tokenizer's special token " +
                      std::to_string(id) + "; not added again");
      continue;
    }
    json["added_tokens"].push_back(hf_added_token(int32_t(next), t, /*special=*/true));
    if (config.is_object()) {
      if (!config.contains("added_tokens_decoder") || !config["added_tokens_decoder"].is_object())
        config["added_tokens_decoder"] = ojson::object();
      config["added_tokens_decoder"][std::to_string(next)] = hf_added_token_decoder_entry(t, /*special=*/true);
    }
    ++next;
  }
  write_json(json_path, json);
  if (config.is_object()) write_json(config_path, config);
  return notes;
}

}  // namespace mt

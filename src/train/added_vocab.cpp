#include "train/added_vocab.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "data/added_tokens.h"

namespace mt {

namespace fs = std::filesystem;

std::string added_tokens_dir(const RunConfig& cfg) { return (fs::path(cfg.output.dir) / "tokenizer").string(); }

namespace {

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has_every_token(const Tokenizer& tok, const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens)
    if (tok.token_to_id(t) < 0) return false;
  return true;
}

bool same_files(const fs::path& a, const fs::path& b) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(a / name) != fs::exists(b / name) || file_text(a / name) != file_text(b / name)) return false;
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_with_added_tokens(const RunConfig& cfg, const std::string& given_source) {
  const std::string dir = added_tokens_dir(cfg);
  // Written beside it, then kept only if it differs from what is there: a directory left by an
  // earlier run into output.dir (another model, other tokens) is never read in its place, and
  // ranks of one run (or a second process) never read a half-written directory.
  const std::string partial = dir + ".partial." + std::to_string(::getpid());
  fs::remove_all(partial);
  std::error_code ec;
  std::vector<std::string> notes;
  try {
    notes = write_tokenizer_with_added_tokens(given_source, cfg.data.add_tokens, partial);
  } catch (const Error&) {
    // The tokenizer it was grown from is gone (a run exported elsewhere): the run's record stands.
    fs::remove_all(partial, ec);
    if (fs::is_regular_file(fs::path(dir) / "tokenizer.json")) {
      auto tok = load_tokenizer(dir);
      if (has_every_token(*tok, cfg.data.add_tokens)) return tok;
    }
    throw;
  }
  if (fs::is_directory(dir) && same_files(partial, dir)) {
    fs::remove_all(partial, ec);
  } else {
    for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
    fs::remove_all(dir, ec);
    fs::rename(partial, dir, ec);
    if (ec) fs::remove_all(partial, ec);  // another process put it there first: the same files
  }
  return load_tokenizer(dir);
}

int64_t run_vocab_size(const RunConfig& cfg, const Tokenizer& tok, int64_t model_vocab, const std::string& where) {
  if (tok.vocab_size() <= model_vocab) return model_vocab;
  if (!cfg.data.add_tokens.empty()) return tok.vocab_size();
  fail("the " + std::string(tok.kind()) + " tokenizer has " + std::to_string(tok.vocab_size()) +
       " tokens but " + where + " has vocab_size " + std::to_string(model_vocab) +
       (cfg.model_path.empty() && tok.kind() == "byte" ? " (the byte-level tokenizer needs 256)" : ""));
}

}  // namespace mt

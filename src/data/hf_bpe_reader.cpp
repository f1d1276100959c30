// HF tokenizer.json (byte-level BPE; byte-fallback BPE is hf_sentencepiece_reader.cpp) and
// GPT-2 vocab.json + merges.txt -> BpeTokenizer.
// Both store tokens as byte-level mapped strings (byte_level.h) and rank merges by list order.
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_level.h"
#include "data/hf_sentencepiece.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

using nlohmann::json;

struct MappedVocab {
  BpeTables tables;
  // Mapped token string -> id, for resolving merges.
  std::unordered_map<std::string, int32_t> mapped_to_id;
};

int32_t checked_id(const json& v, const std::string& what, const std::string& name) {
  if (!v.is_number_integer()) fail(name + ": id of " + what + " is not an integer");
  int64_t id = v.get<int64_t>();
  if (id < 0 || id > kMaxTokenId)
    fail(name + ": id " + std::to_string(id) + " of " + what + " is out of range");
  return int32_t(id);
}

// `skip` lists tokens that need not be byte-level strings (added/special tokens).
MappedVocab read_vocab(const json& vocab, const std::unordered_map<std::string, int32_t>& skip,
                       const std::string& name) {
  if (!vocab.is_object()) fail(name + ": vocab is not an object of token -> id");
  MappedVocab v;
  for (const auto& [text, idv] : vocab.items()) {
    int32_t id = checked_id(idv, "vocab token '" + text + "'", name);
    v.mapped_to_id[text] = id;
    auto bytes = byte_level_to_bytes(text);
    if (!bytes) {
      if (skip.count(text)) continue;
      fail(name + ": vocab token '" + text + "' is not a byte-level token");
    }
    v.tables.add_token(id, std::move(*bytes), name);
  }
  return v;
}

void add_merge(MappedVocab& v, const std::string& a, const std::string& b, int32_t rank,
               const std::string& name) {
  auto where = [&] { return name + ": merge " + std::to_string(rank) + " '" + a + " " + b + "'"; };
  auto ia = v.mapped_to_id.find(a), ib = v.mapped_to_id.find(b), iab = v.mapped_to_id.find(a + b);
  if (ia == v.mapped_to_id.end() || ib == v.mapped_to_id.end())
    fail(where() + " uses a token that is not in the vocab");
  if (iab == v.mapped_to_id.end()) fail(where() + " produces a token that is not in the vocab");
  v.tables.add_merge(ia->second, ib->second, rank, iab->second);
}

// A merge written as "a b" (one space: byte-level strings contain none) or as ["a", "b"].
std::pair<std::string, std::string> split_merge(const json& m, size_t rank, const std::string& name) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      fail(name + ": merge " + std::to_string(rank) + " '" + s + "' is not two tokens");
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  fail(name + ": merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
}

bool is_false_or_absent(const json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null() || obj[key] == false;
}
bool is_null_or_absent(const json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null() || obj[key] == "";
}

// The pre-tokenizer configurations that map onto a hand-written pattern (pretokenize.h):
// ByteLevel with its built-in regex (GPT-2), ByteLevel without one (no split: the byte
// tokenizer's file), or Split(Regex, Isolated) + ByteLevel without one.
SplitPattern select_pattern(const json& pre, const std::string& name) {
  auto unsupported = [&](const std::string& why) -> SplitPattern {
    fail(name + ": unsupported pre_tokenizer (" + why + "): " + pre.dump().substr(0, 300));
  };
  if (!pre.is_object()) return unsupported("not an object");
  auto byte_level_ok = [&](const json& bl, bool use_regex) {
    return bl.is_object() && bl.value("type", "") == "ByteLevel" &&
           bl.value("use_regex", true) == use_regex && bl.value("add_prefix_space", false) == false;
  };
  if (byte_level_ok(pre, true)) return SplitPattern::kGpt2;
  if (byte_level_ok(pre, false)) return SplitPattern::kNone;
  if (pre.value("type", "") != "Sequence") return unsupported("expected ByteLevel or Sequence");
  const json& seq = pre.value("pretokenizers", json::array());
  if (!seq.is_array() || seq.size() != 2 || !byte_level_ok(seq[1], false))
    return unsupported("expected Sequence[Split, ByteLevel(use_regex=false, add_prefix_space=false)]");
  const json& split = seq[0];
  if (!split.is_object() || split.value("type", "") != "Split" ||
      split.value("behavior", "") != "Isolated" || split.value("invert", false) != false ||
      !split.contains("pattern") || !split["pattern"].is_object() ||
      !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
    return unsupported("expected Split with a Regex pattern, behavior Isolated, invert false");
  std::string regex = split["pattern"]["Regex"].get<std::string>();
  for (SplitPattern p : {SplitPattern::kLlama3, SplitPattern::kQwen2, SplitPattern::kGpt2})
    if (regex == split_pattern_regex(p)) return p;
  return unsupported("unknown split regex");
}

// Which added token is BOS/EOS is not stored in tokenizer.json; these are the usual names.
int32_t find_special(const std::vector<Tokenizer::Special>& specials,
                     std::initializer_list<const char*> names) {
  for (const char* n : names)
    for (const auto& s : specials)
      if (s.text == n) return s.id;
  return -1;
}

std::unique_ptr<Tokenizer> parse_hf(const json& doc, const std::string& name) {
  if (!doc.contains("model") || !doc["model"].is_object()) fail(name + ": missing model");
  const json& model = doc["model"];
  if (model.value("type", "BPE") != "BPE")
    fail(name + ": model.type '" + model.value("type", "") + "' is not supported (only BPE)");
  if (!model.contains("vocab")) fail(name + ": missing model.vocab");
  if (!model.contains("merges") || !model["merges"].is_array())
    fail(name + ": missing model.merges (a list)");
  // Options that change BPE semantics away from plain byte-level BPE.
  if (!is_null_or_absent(model, "dropout") && model["dropout"] != 0.0)
    fail(name + ": model.dropout is not supported");
  if (!is_null_or_absent(model, "continuing_subword_prefix") ||
      !is_null_or_absent(model, "end_of_word_suffix"))
    fail(name + ": continuing_subword_prefix / end_of_word_suffix are not supported");
  // Byte fallback means sentencepiece-style BPE over "▁"-escaped text (Llama 2, Mistral).
  if (!is_false_or_absent(model, "byte_fallback")) return parse_hf_sentencepiece(doc, name);
  // NFC is the one normalizer byte-level files use (Qwen); anything else would change the text
  // silently if ignored.
  const bool nfc = !is_null_or_absent(doc, "normalizer");
  if (nfc && !(doc["normalizer"].is_object() && doc["normalizer"].value("type", "") == "NFC"))
    fail(name + ": unsupported normalizer for a byte-level BPE (only NFC): " + doc["normalizer"].dump().substr(0, 200));
  if (!doc.contains("pre_tokenizer")) fail(name + ": missing pre_tokenizer");
  SplitPattern pattern = select_pattern(doc["pre_tokenizer"], name);
  if (!is_null_or_absent(doc, "decoder") && doc["decoder"].value("type", "") != "ByteLevel")
    fail(name + ": decoder must be ByteLevel");

  BpeTokenizer::Config cfg;
  cfg.kind = "hf-bpe";
  cfg.pattern = pattern;
  cfg.nfc = nfc;
  std::unordered_map<std::string, int32_t> added;
  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    if (!doc["added_tokens"].is_array()) fail(name + ": added_tokens is not a list");
    for (const auto& a : doc["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail(name + ": added token without content and id");
      std::string text = a["content"].get<std::string>();
      if (text.empty()) fail(name + ": empty added token");
      int32_t id = checked_id(a["id"], "added token '" + text + "'", name);
      added[text] = id;
      cfg.specials.push_back({text, id});
    }
  }
  MappedVocab v = read_vocab(model["vocab"], added, name);
  const json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = split_merge(merges[i], i, name);
    add_merge(v, a, b, int32_t(i), name);
  }
  v.tables.whole_piece_first = model.value("ignore_merges", false);
  cfg.bos = find_special(cfg.specials, {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<|endoftext|>"});
  cfg.eos = find_special(cfg.specials, {"<|end_of_text|>", "</s>", "<|endoftext|>"});
  return std::make_unique<BpeTokenizer>(std::move(cfg), std::move(v.tables), name);
}

}  // namespace

std::unique_ptr<Tokenizer> read_hf_tokenizer_json(std::string_view content, const std::string& name) {
  const json doc = parse_json_object(content, JsonKind::tokenizer, name + ": malformed tokenizer.json");
  try {
    return parse_hf(doc, name);
  } catch (const json::exception& e) {
    fail(name + ": malformed tokenizer.json: " + json_error_message(e));
  }
}

std::unique_ptr<Tokenizer> read_gpt2(std::string_view vocab_json, std::string_view merges_txt,
                                     const std::string& name) {
  MappedVocab v;
  const json vocab = parse_json_object(vocab_json, JsonKind::tokenizer, name + ": malformed vocab.json");
  try {
    v = read_vocab(vocab, {}, name);
  } catch (const json::exception& e) {
    fail(name + ": malformed vocab.json: " + json_error_message(e));
  }
  int32_t rank = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < merges_txt.size();) {
    size_t nl = merges_txt.find('\n', pos);
    if (nl == std::string_view::npos) nl = merges_txt.size();
    std::string line(merges_txt.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
      fail(name + ": merges line " + std::to_string(line_no) + " is not `a b`");
    add_merge(v, line.substr(0, sp), line.substr(sp + 1), rank++, name);
  }
  BpeTokenizer::Config cfg;
  cfg.kind = "gpt2-bpe";
  cfg.pattern = SplitPattern::kGpt2;
  // GPT-2's only special token ends documents and is also used to start them.
  auto eot = v.mapped_to_id.find("<|endoftext|>");
  if (eot != v.mapped_to_id.end()) {
    cfg.specials.push_back({"<|endoftext|>", eot->second});
    cfg.bos = cfg.eos = eot->second;
  }
  return std::make_unique<BpeTokenizer>(std::move(cfg), std::move(v.tables), name);
}

}  // namespace mt

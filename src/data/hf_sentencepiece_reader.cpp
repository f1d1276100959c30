// HF tokenizer.json (Llama 2 style, byte fallback) -> SentencePieceTokenizer with the merges
// ranked as listed, which is how HF's BPE model picks the pair to merge.
#include <algorithm>
#include <cstdio>
#include <iterator>

#include "core/error.h"
#include "data/hf_sentencepiece.h"
#include "data/hf_sentencepiece_writer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

using nlohmann::json;
using Type = SentencePieceTokenizer::PieceType;

bool absent(const json& obj, const char* key) { return !obj.contains(key) || obj[key].is_null(); }

bool is_byte_piece(const std::string& p) {
  unsigned b;
  char end;
  return p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X%c", &b, &end) == 2 && end == '>';
}

// The steps of a normalizer / decoder: a Sequence's list, or the one step itself.
std::vector<json> steps(const json& j, const char* list_key) {
  if (j.is_null()) return {};
  if (j.value("type", "") == "Sequence" && j.contains(list_key) && j[list_key].is_array())
    return j[list_key].get<std::vector<json>>();
  return {j};
}

bool replaces(const json& step, const std::string& from, const std::string& to, const char* kind = "String") {
  return step.value("type", "") == "Replace" && step.contains("pattern") && step["pattern"].is_object() &&
         step["pattern"].contains(kind) && step["pattern"].value(kind, "") == from &&
         step.value("content", "") == to;
}

// Split on the string " " with the piece kept on the left (Gemma 3's pre-tokenizer).
bool splits_on_space(const json& pre) {
  return pre.is_object() && pre.value("type", "") == "Split" && pre.contains("pattern") &&
         pre["pattern"].is_object() && pre["pattern"].value("String", "") == " " &&
         pre.value("behavior", "") == "MergedWithPrevious" && pre.value("invert", false) == false;
}

void read_spaces(const json& doc, SentencePieceTokenizer::Vocab& v, const std::string& name) {
  v.add_dummy_prefix = false;
  bool escaped = false;
  int squeeze_steps = 0;
  const json none;
  for (const json& s : steps(doc.contains("normalizer") ? doc["normalizer"] : none, "normalizers")) {
    if (s.value("type", "") == "Prepend" && s.value("prepend", "") == kSentencepieceSpace) v.add_dummy_prefix = true;
    else if (replaces(s, " ", kSentencepieceSpace)) escaped = true;
    // sentencepiece's remove_extra_whitespaces, as hf_sentencepiece_writer.cpp writes it.
    else if (std::any_of(std::begin(kSqueezeSteps), std::end(kSqueezeSteps),
                         [&](const auto& step) { return replaces(s, step.first, step.second, "Regex"); }))
      ++squeeze_steps;
    else fail(name + ": unsupported normalizer step for a byte-fallback BPE: " + s.dump().substr(0, 200));
  }
  const int all_steps = int(std::size(kSqueezeSteps));
  if (squeeze_steps != 0 && squeeze_steps != all_steps)
    fail(name + ": normalizer removes extra whitespace only partly (meshtrain reads the steps it writes)");
  v.remove_extra_whitespaces = squeeze_steps == all_steps;
  const json& pre = doc.contains("pre_tokenizer") ? doc["pre_tokenizer"] : none;
  if (escaped && !v.add_dummy_prefix && splits_on_space(pre)) {
    // Gemma 3: the normalizer has already written every space as "▁", so a Split on " " finds
    // nothing to split and each text between added tokens is one BPE word.
  } else if (!pre.is_null()) {
    if (escaped || v.add_dummy_prefix || pre.value("type", "") != "Metaspace" ||
        pre.value("replacement", kSentencepieceSpace) != kSentencepieceSpace)
      fail(name + ": unsupported pre_tokenizer for a byte-fallback BPE (expected none after a "
           "Prepend/Replace normalizer, or Metaspace with replacement \"\u2581\"): " + pre.dump().substr(0, 200));
    // Older files: add_prefix_space (true -> "always") and always split; newer: prepend_scheme and split.
    std::string scheme = pre.contains("prepend_scheme") ? pre.value("prepend_scheme", "always")
                         : pre.value("add_prefix_space", true) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
      fail(name + ": unknown Metaspace prepend_scheme '" + scheme + "'");
    v.add_dummy_prefix = scheme != "never";
    v.prefix_only_if_absent = true;
    v.prefix_first_only = scheme == "first";
    v.split_at_space = pre.value("split", true);
    escaped = true;
  }
  if (!escaped)
    fail(name + ": byte-fallback BPE without Replace \" \" -> \"\u2581\" or a Metaspace pre-tokenizer is not supported");
  for (const json& s : steps(doc.contains("decoder") ? doc["decoder"] : none, "decoders")) {
    std::string t = s.value("type", "");
    bool ok = t == "ByteFallback" || t == "Fuse" || t == "Metaspace" || replaces(s, kSentencepieceSpace, " ") ||
              (t == "Strip" && s.value("content", "") == " " && s.value("stop", 0) == 0);
    if (!ok) fail(name + ": unsupported decoder step for a byte-fallback BPE: " + s.dump().substr(0, 200));
  }
}

std::pair<std::string, std::string> split_piece_merge(const json& m, size_t rank, const std::string& name) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
      return {s.substr(0, sp), s.substr(sp + 1)};
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail(name + ": merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
}

}  // namespace

std::unique_ptr<Tokenizer> parse_hf_sentencepiece(const json& doc, const std::string& name) {
  const json& model = doc["model"];
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (!absent(model, key) && model[key] != 0.0 && model[key] != "")
      fail(name + ": model." + key + " is not supported");
  if (model.value("ignore_merges", false)) fail(name + ": ignore_merges with byte_fallback is not supported");
  const json& vocab = model["vocab"];
  if (!vocab.is_object() || vocab.empty()) fail(name + ": model.vocab is not an object of token -> id");
  SentencePieceTokenizer::Vocab v;
  v.pieces.resize(vocab.size());
  std::vector<bool> seen(vocab.size());
  for (const auto& [text, idv] : vocab.items()) {
    if (!idv.is_number_integer()) fail(name + ": id of vocab token '" + text + "' is not an integer");
    int64_t id = idv.get<int64_t>();
    if (id < 0 || id >= int64_t(vocab.size()) || seen[size_t(id)])
      fail(name + ": vocab ids must be 0.." + std::to_string(vocab.size() - 1) + " once each (token '" +
           text + "' has " + std::to_string(id) + ")");
    seen[size_t(id)] = true;
    v.pieces[size_t(id)] = text;
  }
  v.types.resize(v.pieces.size());
  for (size_t id = 0; id < v.pieces.size(); ++id)
    v.types[id] = is_byte_piece(v.pieces[id]) ? Type::byte : Type::normal;
  v.scores.assign(v.pieces.size(), 0.0f);  // HF ranks merges by list order, not by score
  v.unk = v.bos = v.eos = -1;
  if (!absent(doc, "added_tokens")) {
    if (!doc["added_tokens"].is_array()) fail(name + ": added_tokens is not a list");
    for (const auto& a : doc["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
          !a["id"].is_number_integer())
        fail(name + ": added token without content and id");
      std::string text = a["content"].get<std::string>();
      int64_t id = a["id"].get<int64_t>();
      if (text.empty()) fail(name + ": empty added token");
      if (id == int64_t(v.pieces.size()) && id <= kMaxTokenId) {  // added past the vocab (a pad token, say)
        v.pieces.push_back(text);
        v.types.push_back(Type::normal);
        v.scores.push_back(0.0f);
      }
      if (id < 0 || id >= int64_t(v.pieces.size()) || v.pieces[size_t(id)] != text)
        fail(name + ": added token '" + text + "' (id " + std::to_string(id) + ") does not match the vocab");
      v.types[size_t(id)] = a.value("special", true) ? Type::control : Type::user_defined;
    }
  }
  if (!absent(model, "unk_token")) {
    if (!model["unk_token"].is_string()) fail(name + ": model.unk_token is not a string");
    auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it == vocab.end()) fail(name + ": model.unk_token is not in the vocab");
    v.unk = it->get<int32_t>();
    v.types[size_t(v.unk)] = Type::unknown;
  }
  // Which token is BOS/EOS is not stored in tokenizer.json; sentencepiece's names (Gemma's) are the rule.
  for (size_t id = 0; id < v.pieces.size(); ++id) {
    if (v.types[id] != Type::control) continue;
    if (v.pieces[id] == "<s>" || v.pieces[id] == "<bos>") v.bos = int32_t(id);  // <bos>: Gemma
    if (v.pieces[id] == "</s>" || v.pieces[id] == "<eos>") v.eos = int32_t(id);
  }
  v.added_tokens_first = true;
  read_spaces(doc, v, name);
  const json& merges = model["merges"];
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) v.merges.push_back(split_piece_merge(merges[i], i, name));
  return std::make_unique<SentencePieceTokenizer>(std::move(v), name);
}

}  // namespace mt

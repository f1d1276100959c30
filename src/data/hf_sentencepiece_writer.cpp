#include "data/hf_sentencepiece_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "data/hf_tokenizer_json.h"
#include "data/unicode.h"

namespace mt {
namespace {

using ojson = nlohmann::ordered_json;
using Type = SentencePieceTokenizer::PieceType;

// Pieces with the space symbol HF expects (llama2.c's export stores " ").
std::vector<std::string> hf_pieces(const SentencePieceTokenizer::Vocab& v) {
  std::vector<std::string> out;
  out.reserve(v.pieces.size());
  for (size_t id = 0; id < v.pieces.size(); ++id) {
    std::string p;
    if (v.types[id] == Type::byte || v.space == kSentencepieceSpace) {
      p = v.pieces[id];
    } else {
      for (char c : v.pieces[id]) p += c == ' ' ? kSentencepieceSpace : std::string(1, c);
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool is_special(Type t) { return t == Type::control || t == Type::unknown; }

// sentencepiece merges any adjacent pair whose concatenation is a piece, best score first; HF
// merges listed pairs, lowest rank first. Listing every split of every normal piece into two
// pieces, pieces by descending score (ids on ties) and splits by (left id, right id), makes the
// two rules pick the same pair (as HF's SentencePieceExtractor does).
ojson merges(const SentencePieceTokenizer::Vocab& v, const std::vector<std::string>& pieces) {
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t id = 0; id < pieces.size(); ++id) id_of.emplace(pieces[id], int32_t(id));
  std::vector<int32_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v.scores[a] > v.scores[b]; });
  ojson out = ojson::array();
  for (int32_t id : order) {
    if (v.types[id] != Type::normal) continue;
    const std::string& p = pieces[id];
    std::vector<std::pair<int32_t, int32_t>> splits;
    for (size_t i = unicode::decode_utf8(p, 0).len; i < p.size(); i += unicode::decode_utf8(p, i).len) {
      auto l = id_of.find(p.substr(0, i)), r = id_of.find(p.substr(i));
      if (l != id_of.end() && r != id_of.end()) splits.emplace_back(l->second, r->second);
    }
    std::sort(splits.begin(), splits.end());
    for (auto [l, r] : splits) out.push_back(pieces[l] + " " + pieces[r]);
  }
  return out;
}

ojson replace(const ojson& pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", pattern}, {"content", content}};
}

}  // namespace

std::string hf_tokenizer_json(const SentencePieceTokenizer& tok) {
  const auto& v = tok.vocab();
  const std::vector<std::string> pieces = hf_pieces(v);
  ojson added = ojson::array();
  for (size_t id = 0; id < pieces.size(); ++id)
    if (is_special(v.types[id]) || v.types[id] == Type::user_defined)
      added.push_back(hf_added_token(int32_t(id), pieces[id], is_special(v.types[id])));
  ojson norm = ojson::array();
  if (v.remove_extra_whitespaces) {
    // sentencepiece's remove_extra_whitespaces: runs of spaces become one, leading spaces go, and
    // trailing spaces and U+2581 go (before the dummy prefix, so an all-space text stays empty).
    for (const auto& [pattern, content] : kSqueezeSteps) norm.push_back(replace({{"Regex", pattern}}, content));
  }
  if (v.add_dummy_prefix) norm.push_back({{"type", "Prepend"}, {"prepend", kSentencepieceSpace}});
  norm.push_back(replace({{"String", " "}}, kSentencepieceSpace));
  ojson post = nullptr;
  if (v.bos >= 0) post = hf_bos_post_processor(pieces[v.bos], v.bos);
  ojson decoders = {replace({{"String", kSentencepieceSpace}}, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  if (v.add_dummy_prefix || v.remove_extra_whitespaces)
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  ojson vocab = ojson::object();
  for (size_t id = 0; id < pieces.size(); ++id)
    if (!vocab.contains(pieces[id])) vocab[pieces[id]] = id;
  ojson doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", norm}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", post},
      {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", v.unk >= 0 ? ojson(pieces[v.unk]) : ojson(nullptr)},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges(v, pieces)}}}};
  return doc.dump(1) + "\n";
}

std::string hf_tokenizer_config_json(const SentencePieceTokenizer& tok) {
  const auto& v = tok.vocab();
  const std::vector<std::string> pieces = hf_pieces(v);
  auto name = [&](int32_t id) { return id >= 0 ? ojson(pieces[id]) : ojson(nullptr); };
  ojson decoder = ojson::object();
  for (size_t id = 0; id < pieces.size(); ++id)
    if (is_special(v.types[id]) || v.types[id] == Type::user_defined)
      decoder[std::to_string(id)] = hf_added_token_decoder_entry(pieces[id], is_special(v.types[id]));
  ojson doc = {{"add_bos_token", v.bos >= 0},
               {"add_eos_token", false},
               {"added_tokens_decoder", decoder},
               {"bos_token", name(v.bos)},
               {"eos_token", name(v.eos)},
               {"unk_token", name(v.unk)},
               {"pad_token", nullptr},
               {"clean_up_tokenization_spaces", false},
               // legacy: the dummy prefix goes before every text, as sentencepiece does.
               {"legacy", true},
               {"sp_model_kwargs", ojson::object()},
               {"spaces_between_special_tokens", false},
               {"tokenizer_class", "LlamaTokenizer"}};
  return doc.dump(2) + "\n";
}

}  // namespace mt

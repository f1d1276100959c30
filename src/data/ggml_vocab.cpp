#include "data/ggml_vocab.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_level.h"
#include "data/hf_byte_level_writer.h"
#include "data/sentencepiece_tokenizer.h"

namespace mt {

namespace {

using PieceType = SentencePieceTokenizer::PieceType;

const std::string kWordMarker = "\xE2\x96\x81";  // U+2581, sentencepiece's space symbol

// llama.cpp's names of the splits meshtrain implements.
constexpr const char* kPreLlama3 = "llama-bpe";
constexpr const char* kPreGpt2 = "gpt-2";
constexpr const char* kPreQwen2 = "qwen2";  // llama.cpp's name for the Qwen split (it applies no NFC)
constexpr const char* kPreDefault = "default";  // llama.cpp's fallback; any split is the same without merges

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

void pad_to(TokenizerInfo& info, int64_t vocab_size) {
  for (int64_t id = int64_t(info.tokens.size()); id < vocab_size; ++id) {
    info.tokens.push_back("[PAD" + std::to_string(id) + "]");
    if (!info.scores.empty()) info.scores.push_back(0.0f);
    info.token_types.push_back(kTokenUnused);
  }
}

int32_t ggml_type_of(PieceType t) {
  switch (t) {
    case PieceType::unknown: return kTokenUnknown;
    case PieceType::control: return kTokenControl;
    case PieceType::user_defined: return kTokenUserDefined;
    case PieceType::byte: return kTokenByte;
    case PieceType::normal: break;
  }
  return kTokenNormal;
}

// llama.cpp merges the adjacent pair whose joined piece has the best score; an HF vocabulary
// merges listed pairs by rank. Scoring each piece by the rank of the first merge that makes it
// orders them alike; pieces no merge makes score below every merge.
std::vector<float> scores_from_merges(const SentencePieceTokenizer::Vocab& v) {
  std::unordered_map<std::string, size_t> id_of;
  for (size_t id = 0; id < v.pieces.size(); ++id) id_of.emplace(v.pieces[id], id);
  std::vector<float> scores(v.pieces.size());
  std::vector<bool> made(v.pieces.size(), false);
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    auto it = id_of.find(v.merges[rank].first + v.merges[rank].second);
    if (it == id_of.end() || made[it->second]) continue;
    made[it->second] = true;
    scores[it->second] = -float(rank);
  }
  for (size_t id = 0; id < scores.size(); ++id)
    if (!made[id]) scores[id] = -float(v.merges.size() + id);
  return scores;
}

TokenizerInfo from_sentencepiece(const SentencePieceTokenizer& spm) {
  const auto& v = spm.vocab();
  TokenizerInfo info;
  info.model = "llama";
  info.scores = v.merges.empty() ? v.scores : scores_from_merges(v);
  for (size_t id = 0; id < v.pieces.size(); ++id) {
    const bool text = v.types[id] == PieceType::normal || v.types[id] == PieceType::user_defined;
    // llama2.c's files store the space symbol as " "; llama.cpp's "llama" model expects U+2581.
    info.tokens.push_back(text && v.space != kWordMarker ? replace_all(v.pieces[id], v.space, kWordMarker)
                                                         : v.pieces[id]);
    info.token_types.push_back(ggml_type_of(v.types[id]));
  }
  info.unk = v.unk, info.bos = v.bos, info.eos = v.eos;
  info.add_bos = v.bos >= 0 ? 1 : 0;  // as meshtrain's generate and data do
  info.add_eos = 0;
  info.add_space_prefix = v.add_dummy_prefix ? 1 : 0;
  info.remove_extra_whitespaces = v.remove_extra_whitespaces;
  return info;
}

TokenizerInfo from_byte_level(const BpeTokenizer& bpe) {
  const BpeTables& t = bpe.tables();
  TokenizerInfo info;
  info.model = "gpt2";
  std::unordered_map<int32_t, std::string> special;
  for (const auto& s : bpe.special_tokens()) special.emplace(s.id, s.text);
  for (int64_t id = 0; id < bpe.vocab_size(); ++id) {
    if (auto it = special.find(int32_t(id)); it != special.end()) {
      info.tokens.push_back(it->second);
      info.token_types.push_back(kTokenControl);
    } else if (size_t(id) < t.token_bytes.size() && !t.token_bytes[size_t(id)].empty()) {
      info.tokens.push_back(bytes_to_byte_level(t.token_bytes[size_t(id)]));
      info.token_types.push_back(kTokenNormal);
    } else {
      info.tokens.push_back("[PAD" + std::to_string(id) + "]");
      info.token_types.push_back(kTokenUnused);
    }
  }
  std::vector<std::tuple<int32_t, int32_t, int32_t>> merges;  // rank, left, right
  merges.reserve(t.merges.size());
  for (const auto& [key, m] : t.merges) merges.emplace_back(m.rank, int32_t(key >> 32), int32_t(uint32_t(key)));
  std::sort(merges.begin(), merges.end());
  for (const auto& [rank, l, r] : merges)
    info.merges.push_back(bytes_to_byte_level(t.token_bytes[size_t(l)]) + " " +
                          bytes_to_byte_level(t.token_bytes[size_t(r)]));
  switch (bpe.pattern()) {
    case SplitPattern::kLlama3: info.pre = kPreLlama3; break;
    case SplitPattern::kGpt2: info.pre = kPreGpt2; break;
    case SplitPattern::kQwen2: info.pre = kPreQwen2; break;
    case SplitPattern::kNone:
      if (!info.merges.empty())
        fail("the " + std::string(bpe.kind()) + " tokenizer merges whole texts without splitting them; "
             "llama.cpp has no pre-tokenizer that does (it knows llama-bpe and gpt-2 splits)");
      info.pre = kPreDefault;
      break;
  }
  info.bos = bpe.bos_id(), info.eos = bpe.eos_id();
  // GPT-2's bos and eos are one token, which it does not put in front of a text.
  info.add_bos = bpe.bos_id() >= 0 && bpe.bos_id() != bpe.eos_id() ? 1 : 0;
  info.add_eos = 0;
  return info;
}

PieceType piece_type_of(int32_t t) {
  switch (t) {
    case kTokenUnknown: return PieceType::unknown;
    case kTokenUserDefined: return PieceType::user_defined;
    case kTokenByte: return PieceType::byte;
    case kTokenControl:
    case kTokenUnused: return PieceType::control;  // never produced from text
    default: return PieceType::normal;
  }
}

std::unique_ptr<Tokenizer> sentencepiece_of(const TokenizerInfo& info, const std::string& source) {
  const size_t n = info.tokens.size();
  SentencePieceTokenizer::Vocab v;
  v.pieces = info.tokens;
  v.scores = info.scores.empty() ? std::vector<float>(n, 0.0f) : info.scores;
  for (size_t id = 0; id < n; ++id)
    v.types.push_back(info.token_types.empty() ? PieceType::normal : piece_type_of(info.token_types[id]));
  // llama.cpp's defaults for a "llama" vocabulary without the keys.
  v.unk = info.unk >= 0 ? info.unk : 0;
  v.bos = info.bos >= 0 ? info.bos : 1;
  v.eos = info.eos >= 0 ? info.eos : 2;
  v.add_dummy_prefix = info.add_space_prefix != 0;
  v.remove_extra_whitespaces = info.remove_extra_whitespaces;
  return std::make_unique<SentencePieceTokenizer>(std::move(v), source);
}

std::string bytes_of(const std::string& mapped, const std::string& source, const std::string& what) {
  auto b = byte_level_to_bytes(mapped);
  if (!b) fail(source + ": " + what + " '" + mapped + "' is not in GPT-2's byte-level characters");
  return *b;
}

std::unique_ptr<Tokenizer> byte_level_of(const TokenizerInfo& info, const std::string& source) {
  BpeTokenizer::Config cfg;
  cfg.kind = "gguf-bpe";
  if (info.pre == kPreLlama3 || info.pre == "llama3" || info.pre == "llama-v3") cfg.pattern = SplitPattern::kLlama3;
  else if (info.pre == kPreGpt2) cfg.pattern = SplitPattern::kGpt2;
  else if (info.pre == kPreQwen2) cfg.pattern = SplitPattern::kQwen2;
  else if ((info.pre.empty() || info.pre == kPreDefault) && info.merges.empty()) cfg.pattern = SplitPattern::kNone;
  else
    fail(source + ": tokenizer.ggml.pre '" + info.pre + "' is not a split meshtrain implements (" + kPreLlama3 +
         ", " + kPreGpt2 + ", " + kPreQwen2 + ", or none for a vocabulary without merges)");
  BpeTables t;
  // llama.cpp emits a Llama 3 piece that is itself a token whole, as tiktoken does.
  t.whole_piece_first = cfg.pattern == SplitPattern::kLlama3;
  for (size_t id = 0; id < info.tokens.size(); ++id) {
    const int32_t type = info.token_types.empty() ? kTokenNormal : info.token_types[id];
    if (type == kTokenUnused) continue;
    if (type == kTokenControl || type == kTokenUserDefined || type == kTokenUnknown)
      cfg.specials.push_back({info.tokens[id], int32_t(id)});
    else
      t.add_token(int32_t(id), bytes_of(info.tokens[id], source, "token " + std::to_string(id)), source);
  }
  for (size_t rank = 0; rank < info.merges.size(); ++rank) {
    const std::string& m = info.merges[rank];
    const size_t space = m.find(' ');
    const std::string what = "merge " + std::to_string(rank);
    if (space == std::string::npos) fail(source + ": " + what + " '" + m + "' is not 'left right'");
    const std::string l = bytes_of(m.substr(0, space), source, what), r = bytes_of(m.substr(space + 1), source, what);
    auto il = t.bytes_to_id.find(l), ir = t.bytes_to_id.find(r), ilr = t.bytes_to_id.find(l + r);
    if (il == t.bytes_to_id.end() || ir == t.bytes_to_id.end() || ilr == t.bytes_to_id.end())
      fail(source + ": " + what + " '" + m + "' uses or makes a token that is not in the vocabulary");
    t.add_merge(il->second, ir->second, int32_t(rank), ilr->second);
  }
  cfg.bos = info.bos, cfg.eos = info.eos;
  return std::make_unique<BpeTokenizer>(std::move(cfg), std::move(t), source);
}

}  // namespace

TokenizerInfo ggml_vocab_of(const Tokenizer& tok, int64_t vocab_size) {
  if (tok.vocab_size() > vocab_size)
    fail("the " + std::string(tok.kind()) + " tokenizer has " + std::to_string(tok.vocab_size()) +
         " tokens but the model's vocab_size is " + std::to_string(vocab_size));
  TokenizerInfo info;
  if (const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(&tok)) info = from_sentencepiece(*spm);
  else if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) info = from_byte_level(*bpe);
  else if (tok.kind() == "byte") info = from_byte_level(*byte_tokenizer_as_bpe());
  else fail("the " + std::string(tok.kind()) + " tokenizer has no llama.cpp form");
  pad_to(info, vocab_size);
  return info;
}

std::unique_ptr<Tokenizer> tokenizer_of_ggml_vocab(const TokenizerInfo& padded, const std::string& source) {
  if (!padded.token_types.empty() && padded.token_types.size() != padded.tokens.size())
    fail(source + ": tokenizer token types must have one entry per token");
  if (!padded.scores.empty() && padded.scores.size() != padded.tokens.size())
    fail(source + ": tokenizer scores must have one entry per token");
  // The unused "[PAD<id>]" ids at the end are the padding up to the model's vocab_size that
  // pad_to and llama.cpp's converters write, not the tokenizer's: its size ends before them, so a
  // model's rows past it are padding that generation never produces (Transformer::set_emittable_vocab).
  TokenizerInfo info = padded;
  const int64_t last_named = std::max({info.bos, info.eos, info.unk, info.pad});  // kept, if padding
  while (!info.token_types.empty() && info.token_types.back() == kTokenUnused &&
         int64_t(info.tokens.size()) - 1 > last_named &&
         info.tokens.back() == "[PAD" + std::to_string(info.tokens.size() - 1) + "]") {
    info.tokens.pop_back();
    info.token_types.pop_back();
    if (!info.scores.empty()) info.scores.pop_back();
  }
  if (info.model == "llama") return sentencepiece_of(info, source);
  if (info.model == "gpt2") return byte_level_of(info, source);
  fail(source + ": tokenizer.ggml.model '" + info.model + "' is not one meshtrain reads (llama, gpt2)");
}

}  // namespace mt

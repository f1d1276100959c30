// Sentencepiece BPE vocabularies (Llama 2, Mistral, TinyLlama, llama2.c), from any of the three
// files that carry one: sentencepiece's tokenizer.model, llama2.c's tokenizer.bin / tok512.bin,
// and an HF tokenizer.json with byte fallback (tokenizer_readers.h reads each into a Vocab).
//
// Encoding follows sentencepiece's BPE model: normalise (optionally squeeze spaces, add the dummy
// prefix, write spaces as the space symbol), split into UTF-8 characters (user-defined pieces
// whole), then repeatedly merge the adjacent pair that is best: by the score of the concatenated
// piece (sentencepiece, llama2.c) or by the rank of the pair in the merges list (HF), leftmost
// on ties. Characters that are not pieces become their bytes' <0xXX> tokens (byte fallback).
// Decoding turns the space symbol back into spaces, drops the dummy prefix of the first piece
// (at the start and after each BOS) and turns <0xXX> tokens into raw bytes.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // sentencepiece's piece types (unused pieces are refused by the readers).
  enum class PieceType : uint8_t { normal, unknown, control, user_defined, byte };

  struct Vocab {
    std::vector<std::string> pieces;  // by id, as stored: spaces written as `space`
    std::vector<float> scores;        // by id
    std::vector<PieceType> types;     // by id
    int32_t unk = 0, bos = 1, eos = 2;  // -1: none
    std::string space = "\xE2\x96\x81";  // U+2581 "▁"; llama2.c's export writes " "
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = false;
    // HF tokenizer.json: pairs merge in this list's order (ranks); empty: by score.
    std::vector<std::pair<std::string, std::string>> merges;
    // HF Metaspace pre-tokenizer: no dummy prefix when the text already starts with a space
    // (prepend_scheme "first"/"always"), and with split=true each space starts a new word.
    bool prefix_only_if_absent = false;
    bool split_at_space = false;
    // Metaspace prepend_scheme "first": no dummy prefix on text that follows a special token.
    bool prefix_first_only = false;
    // HF: user-defined pieces (added tokens) are split out of the raw text before normalising,
    // so the text after one gets its own dummy prefix; sentencepiece matches them afterwards.
    bool added_tokens_first = false;
    // llama2.c's characters: a byte plus up to three continuation bytes, valid or not (the same
    // as UTF-8 characters on valid text; invalid bytes are otherwise single characters).
    bool llama2c_chars = false;
  };

  // mt::Error (prefixed with `source`) if the vocabulary is inconsistent, a merge names an
  // unknown piece, or some byte has no <0xXX> token (byte fallback must spell any input).
  SentencePieceTokenizer(Vocab vocab, const std::string& source);

  std::string_view kind() const override { return "sentencepiece"; }
  std::vector<int32_t> encode(std::string_view text) const override { return encode_part(text, false); }
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return int64_t(v_.pieces.size()); }
  int32_t bos_id() const override { return v_.bos; }
  int32_t eos_id() const override { return v_.eos; }
  const Vocab& vocab() const { return v_; }

 protected:
  std::vector<int32_t> encode_part(std::string_view text, bool after_special) const override;

 private:
  struct Merge {
    int32_t rank, id;
  };
  // `prefix_len`: bytes of the dummy prefix at the start of the result (0 when none).
  std::string normalize(std::string_view text, bool after_special, size_t& prefix_len) const;
  void encode_normalized(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, size_t prefix_len, std::vector<int32_t>& out) const;
  void encode_chars(std::string_view text, size_t prefix_len, std::vector<int32_t>& out) const;
  int32_t lookup(std::string_view s) const;

  Vocab v_;
  // Normal and user-defined pieces: control, unknown and byte pieces are never produced from
  // text (real sentencepiece does not), so "<0x41>" or "<s>" in text stays plain text.
  std::unordered_map<std::string, int32_t> normal_ids_;
  std::vector<std::string> user_defined_;  // matched whole, the longest at a position
  LongestMatch user_defined_match_;        // of user_defined_ (data/longest_match.h)
  int32_t byte_ids_[256];
  std::vector<uint8_t> byte_of_;  // by id: the byte of a <0xXX> piece
  std::unordered_map<uint64_t, Merge> merge_table_;  // HF ranks, keyed by (left, right)
};

}  // namespace mt

// The tokenizer interface and the loader that picks an implementation from a file or directory.
// Implementations: ByteTokenizer (byte_tokenizer.h), byte-level BPE read from a tiktoken
// tokenizer.model, an HF tokenizer.json or GPT-2 vocab.json+merges.txt (bpe_tokenizer.h), and
// sentencepiece BPE read from a sentencepiece tokenizer.model, llama2.c's tokenizer.bin or an HF
// tokenizer.json with byte fallback (sentencepiece_tokenizer.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/longest_match.h"

namespace mt {

class Tokenizer {
 public:
  struct Special {
    std::string text;
    int32_t id;
  };

  virtual ~Tokenizer() = default;
  // "byte", "tiktoken", "hf-bpe", "gpt2-bpe", "gguf-bpe" (a GGUF file's, data/ggml_vocab.h) or
  // "sentencepiece".
  virtual std::string_view kind() const = 0;
  // Special-token strings in `text` are encoded as plain text, so user data can never inject
  // control tokens. No BOS/EOS is added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Like encode(), but occurrences of special-token strings become their ids (chat templates).
  // Where two specials start at the same place the longer wins.
  std::vector<int32_t> encode_with_specials(std::string_view text) const;
  // encode() of text that follows a special token when `after_special` (a chat template's text
  // between its special tokens; see encode_part).
  std::vector<int32_t> encode_segment(std::string_view text, bool after_special) const {
    return encode_part(text, after_special);
  }
  // mt::Error naming the id for an id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t bos_id() const { return -1; }  // -1: none
  virtual int32_t eos_id() const { return -1; }
  // Id of a special token by its text, or -1.
  int32_t token_to_id(std::string_view special) const;
  const std::vector<Special>& special_tokens() const { return specials_; }
  // The Jinja chat_template of the tokenizer_config.json found beside the tokenizer file ("" when
  // none): read only to recognise the model family's chat template (chat_templates.h).
  const std::string& chat_template() const { return chat_template_; }
  void set_chat_template(std::string jinja) { chat_template_ = std::move(jinja); }
  // What a chat template gets as bos_token / eos_token: tokenizer_config.json's strings, which may
  // differ from the text of bos_id() / eos_id() (Qwen3's eos_token is <|im_end|>, its EOS id
  // <|endoftext|>); "" when the config names none (then the ids' text stands in: chat_jinja.cpp).
  const std::string& config_bos_token() const { return config_bos_; }
  const std::string& config_eos_token() const { return config_eos_; }
  void set_config_tokens(std::string bos, std::string eos) {
    config_bos_ = std::move(bos);
    config_eos_ = std::move(eos);
  }

 protected:
  void set_special_tokens(std::vector<Special> specials);
  // encode() of the text between special tokens; `after_special` when the text does not start
  // the input (an HF Metaspace pre-tokenizer with prepend_scheme "first" adds no "▁" there).
  virtual std::vector<int32_t> encode_part(std::string_view text, bool after_special) const {
    return encode(text);
  }
  // Text of special token `id`, or nullptr.
  const std::string* special_text(int32_t id) const;

 private:
  std::vector<Special> specials_;  // longest text first
  LongestMatch special_match_;     // their texts, for encode_with_specials
  std::unordered_map<std::string, int32_t> by_text_;
  std::unordered_map<int32_t, size_t> by_id_;  // index into specials_
  std::string chat_template_;
  std::string config_bos_, config_eos_;
};

// Detects the format and loads it (see docs/tokenizers.md):
//   directory       -> tokenizer.byte, tokenizer.json, tokenizer.model, vocab.json+merges.txt,
//                      tokenizer.bin or tok*.bin inside it, first found in that order
//   *.json          -> HF tokenizer.json (vocab.json: GPT-2 with merges.txt next to it)
//   merges.txt      -> GPT-2 with vocab.json next to it
//   *.bin           -> llama2.c sentencepiece export
//   other           -> tiktoken if its first line is `base64 rank`, a sentencepiece protobuf
//                      if it is named *.model
// mt::Error naming the path when missing, unrecognised or malformed.
//   tokenizer.byte  -> the byte-level tokenizer (a marker file meshtrain writes next to models it
//                      trained with it; its content is ignored)
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// The file load_tokenizer(path) reads (for a GPT-2 pair: vocab.json, with merges.txt beside it).
std::string find_tokenizer_file(const std::string& path);

inline constexpr const char* kByteTokenizerFile = "tokenizer.byte";

}  // namespace mt

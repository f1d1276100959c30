// A tokenizer as llama.cpp describes it in a GGUF file's tokenizer.ggml.* metadata. Plain data,
// so that both the data floor (which turns a tokenizer into this and back, data/ggml_vocab.h) and
// the io floor (which writes and reads the GGUF keys, io/gguf_tokenizer.h) can hold it without
// knowing each other.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// llama.cpp's token types (llama_token_type).
enum GgufTokenType : int32_t {
  kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5,
  kTokenByte = 6,
};

struct TokenizerInfo {
  std::string model;                // "llama" (sentencepiece) or "gpt2" (byte-level BPE)
  std::vector<std::string> tokens;  // one per id; must match the model's vocab_size
  std::vector<float> scores;        // empty or one per token
  std::vector<int32_t> token_types; // empty or one per token (GgufTokenType)
  std::vector<std::string> merges;  // BPE only: "left right" in GPT-2's byte-level characters
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: not written
  std::string pre;                  // BPE pre-tokenizer name; empty: not written
  // -1: not written (llama.cpp's default for the model applies), else 0 / 1.
  int8_t add_bos = -1, add_eos = -1, add_space_prefix = -1;
  bool remove_extra_whitespaces = false;  // written only when set
};

}  // namespace mt

// Tokenizer metadata for a GGUF file (the tokenizer.ggml.* keys llama.cpp reads), and a reader
// that builds it from llama2.c's tokenizer.bin.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// llama.cpp's token types (llama_token_type): the ones a sentencepiece vocabulary uses.
enum GgufTokenType : int32_t {
  kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5,
  kTokenByte = 6,
};

struct TokenizerInfo {
  std::string model;                // "llama" (sentencepiece) or "gpt2" (BPE)
  std::vector<std::string> tokens;  // one per id; must match the model's vocab_size
  std::vector<float> scores;        // empty or one per token
  std::vector<int32_t> token_types; // empty or one per token (GgufTokenType)
  std::vector<std::string> merges;  // BPE only
  int32_t bos = -1, eos = -1;       // -1: not written
  std::string pre;                  // BPE pre-tokenizer name; empty: not written
};

// llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length and
// the bytes. The file has no count, so vocab_size says how many to read (-1: until the end).
// llama2.c's exporter replaced sentencepiece's U+2581 word marker with a space and renamed
// <s> / </s> to "\n<s>\n" / "\n</s>\n"; both are undone so that the pieces are sentencepiece's
// again, which is what llama.cpp's "llama" tokenizer expects. Types: id 0 unknown, ids 1 and 2
// control, <0xXX> byte, the rest normal; bos 1, eos 2.
TokenizerInfo tokenizer_info_from_llama2c(const std::string& tok_bin_path, int64_t vocab_size = -1);

}  // namespace mt

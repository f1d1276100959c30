// Parsers for each tokenizer file format. They take the file contents (so the fuzz target and
// tests can feed bytes directly) and the file name for messages; every problem with the input is
// an mt::Error that starts with that name. load_tokenizer() (tokenizer.h) reads the files.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "data/tokenizer.h"

namespace mt {

// Ids above this are rejected: no real vocabulary is near it, and it bounds memory on bad input.
inline constexpr int64_t kMaxTokenId = (1 << 20) - 1;

// tiktoken: lines `base64(token bytes) rank`, ranks 0..n-1 each once. The 256 Llama 3 special
// tokens follow at n..n+255 (<|begin_of_text|> = n is BOS, <|end_of_text|> = n+1 is EOS).
std::unique_ptr<Tokenizer> read_tiktoken(std::string_view content, const std::string& name);
// True if the first line looks like `base64 rank` (format detection).
bool looks_like_tiktoken(std::string_view content);

// HF tokenizer.json: byte-level BPE with a pre-tokenizer this project implements, or the Llama 2
// style of sentencepiece BPE with byte fallback (hf_sentencepiece_reader.cpp).
std::unique_ptr<Tokenizer> read_hf_tokenizer_json(std::string_view content, const std::string& name);

// GPT-2 release files: vocab.json (token -> id) and merges.txt (one `a b` merge per line).
std::unique_ptr<Tokenizer> read_gpt2(std::string_view vocab_json, std::string_view merges_txt,
                                     const std::string& name);

// llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length
// and the bytes, to the end of the file.
std::unique_ptr<Tokenizer> read_llama2c_tokenizer(std::string_view content, const std::string& name);

// sentencepiece's tokenizer.model (ModelProto protobuf), BPE with byte fallback as Llama 2 /
// Mistral / TinyLlama use; other model types and normalisation rules are refused.
std::unique_ptr<Tokenizer> read_sentencepiece_model(std::string_view content, const std::string& name);

}  // namespace mt

// A tokenizer in a GGUF file: the tokenizer.ggml.* keys llama.cpp reads, written from and read
// into a TokenizerInfo (core/tokenizer_info.h; data/ggml_vocab.h turns a tokenizer into one).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tokenizer_info.h"
#include "io/gguf_reader.h"
#include "io/gguf_types.h"

namespace mt {

// Appends the tokenizer.ggml.* keys of `tok` to `kvs`. mt::Error naming `path` when its token count
// is not vocab_size, a per-token list has another length, or a special id is beyond the tokens.
void append_tokenizer_keys(std::vector<GgufKV>& kvs, const TokenizerInfo& tok, int64_t vocab_size,
                           const std::string& path);

// The tokenizer a GGUF file carries, nullopt when it has no tokenizer.ggml.model. mt::Error
// naming the file and the key for a key of the wrong type or length.
std::optional<TokenizerInfo> read_tokenizer_keys(const GgufFile& g);

}  // namespace mt

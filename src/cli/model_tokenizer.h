// The tokenizer that goes with a model, wherever it lives: a GGUF file's own tokenizer.ggml.*
// metadata, or the tokenizer files in (or beside) an HF directory or llama2.c .bin. Here because
// it joins the io floor (GGUF) and the data floor (tokenizers), which do not know each other.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/tokenizer_info.h"
#include "data/tokenizer.h"

namespace mt::cli {

bool is_gguf_path(const std::string& path);

// The tokenizer a GGUF file carries, nullopt when it has none.
std::optional<TokenizerInfo> gguf_tokenizer_info(const std::string& gguf_path);

// Like load_tokenizer (data/tokenizer.h), and a *.gguf file gives its own tokenizer (mt::Error
// naming the file when it carries none).
std::unique_ptr<Tokenizer> load_any_tokenizer(const std::string& path);

}  // namespace mt::cli

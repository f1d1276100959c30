// Writing a tokenizer next to a model it was trained with (HF model directories, exports).
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

// Puts the tokenizer a model was trained with next to it: copies the tokenizer file(s) found at
// `tokenizer_path` (a GPT-2 pair as both files; an HF tokenizer.json with the tokenizer_config.json,
// special_tokens_map.json, tokenizer.model and tokenizer.bin beside it), or, when it is empty, writes the
// byte-level tokenizer's marker file. Every source but a tokenizer.json also gets an HF
// tokenizer.json and tokenizer_config.json written from it: sentencepiece (a .model, copied as
// tokenizer.model, or llama2.c's tokenizer.bin) by hf_sentencepiece_writer.h; tiktoken, a GPT-2
// pair and the byte tokenizer by hf_byte_level_writer.h. Returns the paths written.
std::vector<std::string> save_tokenizer_files(const std::string& tokenizer_path, const std::string& dir);
// The HF tokenizer.json and tokenizer_config.json of a tokenizer that has no files of its own (one
// read from a GGUF file's metadata): sentencepiece or byte-level BPE; mt::Error for another kind.
std::vector<std::string> save_tokenizer_files(const Tokenizer& tok, const std::string& dir);

}  // namespace mt

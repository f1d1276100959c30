// A tokenizer as llama.cpp's vocabulary (TokenizerInfo: what a GGUF file's tokenizer.ggml.* keys
// hold), and back, so that a GGUF file carries the tokenizer its model was trained with and
// meshtrain encodes with a GGUF file's own tokenizer as llama.cpp does.
//
// Sentencepiece vocabularies (tokenizer.model, llama2.c's tokenizer.bin, a Llama-2-style HF
// tokenizer.json) become llama.cpp's "llama" model: pieces with the U+2581 word marker, scores,
// token types, unknown/bos/eos ids, add_space_prefix. llama.cpp merges the pair whose piece scores
// best, so a vocabulary ranked by an HF merges list gets scores from it (-rank of the first merge
// that makes the piece). Byte-level BPE (tiktoken, a byte-level tokenizer.json, GPT-2's
// vocab.json + merges.txt, the byte tokenizer) becomes the "gpt2" model: tokens and merges in
// GPT-2's byte-level characters, specials as control tokens, and the pre-tokenizer by the name
// llama.cpp gives its split: "llama-bpe" (Llama 3) or "gpt-2".
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/tokenizer_info.h"
#include "data/tokenizer.h"

namespace mt {

// `vocab_size` tokens (the model's): ids the tokenizer does not use are written as "[PAD<id>]"
// of type unused, as llama.cpp's converter pads them. mt::Error when the tokenizer has more
// tokens than that, or when llama.cpp has no pre-tokenizer that splits like it.
TokenizerInfo ggml_vocab_of(const Tokenizer& tok, int64_t vocab_size);

// The tokenizer a TokenizerInfo describes ("llama" or "gpt2" with pre-tokenizer "llama-bpe",
// "gpt-2", or none for a vocabulary without merges). mt::Error prefixed with `source` for any
// other model or pre-tokenizer, and for a malformed vocabulary.
std::unique_ptr<Tokenizer> tokenizer_of_ggml_vocab(const TokenizerInfo& info, const std::string& source);

}  // namespace mt

// An HF-loadable tokenizer.json and tokenizer_config.json for a sentencepiece vocabulary, in the
// form HF's own Llama converter writes (a Prepend/Replace normalizer, BPE with byte fallback,
// merges derived from the pieces and ranked by score, a Replace/ByteFallback/Fuse/Strip decoder),
// so a model directory meshtrain writes from tokenizer.model or llama2.c's tokenizer.bin loads in
// transformers with AutoTokenizer.
#pragma once
#include <string>
#include <utility>

#include "data/sentencepiece_tokenizer.h"

namespace mt {

// SentencePiece's space symbol "▁" (U+2581), which the writer puts in and the reader recognises.
inline const std::string kSentencepieceSpace = "\xE2\x96\x81";

// The normalizer steps (Replace Regex -> content) that write sentencepiece's
// remove_extra_whitespaces for HF; the reader recognises exactly these.
inline constexpr std::pair<const char*, const char*> kSqueezeSteps[] = {
    {" {2,}", " "}, {"\\A ", ""}, {"[ \u2581]+\\z", ""}};  // \A, \z: not line anchors

std::string hf_tokenizer_json(const SentencePieceTokenizer& tok);
std::string hf_tokenizer_config_json(const SentencePieceTokenizer& tok);

}  // namespace mt

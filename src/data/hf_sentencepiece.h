// The Llama 2 style of HF tokenizer.json: sentencepiece BPE with byte fallback (<0xXX> tokens)
// and the space symbol "▁", added either by a normalizer (Prepend "▁" + Replace " " -> "▁",
// older files) or by a Metaspace pre-tokenizer (newer files); or Gemma 3's form: Replace " " -> "▁"
// alone (no prefix) and a Split on " " that finds nothing left to split. read_hf_tokenizer_json
// hands a parsed file with model.byte_fallback set here.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizer.h"

namespace mt {

std::unique_ptr<Tokenizer> parse_hf_sentencepiece(const nlohmann::json& doc, const std::string& name);

}  // namespace mt

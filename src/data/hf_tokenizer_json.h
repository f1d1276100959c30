// The parts of HF's tokenizer.json and tokenizer_config.json that every meshtrain writer spells the
// same way (hf_sentencepiece_writer, hf_byte_level_writer): an added token, its entry in
// tokenizer_config.json, and the post-processor that puts BOS before each text.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace mt {

// An entry of tokenizer.json's "added_tokens".
nlohmann::ordered_json hf_added_token(int32_t id, const std::string& content, bool special);
// The value for the id's key in tokenizer_config.json's "added_tokens_decoder".
nlohmann::ordered_json hf_added_token_decoder_entry(const std::string& content, bool special);
// A TemplateProcessing post-processor that prepends `bos` (token `bos_id`) to a text and to each
// text of a pair, as HF's Llama files do.
nlohmann::ordered_json hf_bos_post_processor(const std::string& bos, int32_t bos_id);

}  // namespace mt

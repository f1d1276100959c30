#include "data/hf_tokenizer_json.h"

namespace mt {

using ojson = nlohmann::ordered_json;

ojson hf_added_token(int32_t id, const std::string& content, bool special) {
  return {{"id", id},          {"content", content},       {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false},      {"special", special}};
}

ojson hf_added_token_decoder_entry(const std::string& content, bool special) {
  return {{"content", content}, {"lstrip", false},       {"normalized", false},
          {"rstrip", false},    {"single_word", false},  {"special", special}};
}

ojson hf_bos_post_processor(const std::string& bos, int32_t bos_id) {
  auto special = [&](int type) { return ojson{{"SpecialToken", {{"id", bos}, {"type_id", type}}}}; };
  auto seq = [](const char* s, int type) { return ojson{{"Sequence", {{"id", s}, {"type_id", type}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", {special(0), seq("A", 0)}},
          {"pair", {special(0), seq("A", 0), special(1), seq("B", 1)}},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

}  // namespace mt

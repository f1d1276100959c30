// libFuzzer target: the input as a Hugging Face config.json (parse_hf_config) and as a PEFT
// adapter_config.json (parse_peft_config). Built by scripts/fuzz.sh (clang++, libFuzzer, ASan,
// UBSan).
//
// Each must parse or throw mt::Error, never anything else (nlohmann's own type errors included).
// A config.json that parses must be one meshtrain accepts again after writing it back
// (hf_config_json), with the same values: what it read is what it would save.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "core/error.h"
#include "io/hf_config.h"
#include "io/peft_config.h"

namespace {

using fuzz::require;

bool same(const mt::ModelConfig& a, const mt::ModelConfig& b) {
  return a.hidden_size == b.hidden_size && a.intermediate_size == b.intermediate_size &&
         a.num_hidden_layers == b.num_hidden_layers && a.num_attention_heads == b.num_attention_heads &&
         a.num_key_value_heads == b.num_key_value_heads && a.vocab_size == b.vocab_size &&
         a.max_position_embeddings == b.max_position_embeddings && a.rms_norm_eps == b.rms_norm_eps &&
         a.rope_theta == b.rope_theta && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.attention_scale == b.attention_scale && a.rope_local_theta == b.rope_local_theta &&
         a.norm_weight_offset == b.norm_weight_offset && a.rope_scaling.linear == b.rope_scaling.linear &&
         a.rope_scaling.factor == b.rope_scaling.factor &&
         (a.rope_scaling.factor == 0.0f ||
          (a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
           a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor &&
           a.rope_scaling.original_max_position_embeddings == b.rope_scaling.original_max_position_embeddings));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const mt::ModelConfig c = mt::parse_hf_config(text, "fuzz/config.json");
    mt::ModelConfig again;
    try {
      again = mt::parse_hf_config(mt::hf_config_json(c, "bfloat16"), "written");
    } catch (const mt::Error&) {
      __builtin_trap();  // accepted on reading, refused once written back
    }
    require(same(c, again));
  } catch (const mt::Error&) {
  }
  try {
    const mt::LoraConfig lora = mt::parse_peft_config(text, "fuzz/adapter_config.json");
    require(lora.enabled && lora.rank > 0 && !lora.targets.empty());
  } catch (const mt::Error&) {
  }
  return 0;
}

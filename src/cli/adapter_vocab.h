// The vocabulary a loaded model answers with: an adapter that grew it (data.add_tokens: PEFT's
// modules_to_save embed_tokens and lm_head, with the grown tokenizer beside them), and the rules
// between a model's vocab_size and its tokenizer (a larger tokenizer is refused, a larger
// vocabulary is padding generation never produces).
#pragma once
#include <string>

#include "data/tokenizer.h"
#include "model/config.h"
#include "model/lora_config.h"
#include "model/transformer.h"

namespace mt::cli {

// `config` with as many vocabulary rows as the adapter's trained embedding has (more than the
// base's when it added tokens); `config` itself for an adapter without one.
ModelConfig config_for_adapter(ModelConfig config, const std::string& adapter_dir, const LoraConfig& lora);

// The adapter directory when it holds the tokenizer it was trained with and trained the embedding
// (its added tokens are there only), else "".
std::string adapter_tokenizer_dir(const std::string& adapter_dir);

// mt::Error naming both sizes when `tok` has more ids than the model's vocabulary (they would
// index past its embedding); otherwise the model generates only the tokenizer's ids
// (Transformer::set_emittable_vocab), the rest being padding.
void fit_model_to_tokenizer(Transformer& model, const Tokenizer& tok, const std::string& where);

}  // namespace mt::cli

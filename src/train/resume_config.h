// What a resumed run may change from the run that wrote its checkpoint. The saved weights, moments
// and sampler position only mean what they meant under the keys that define the model (its
// architecture, LoRA's rank, alpha and targets, the base's dtype), the compute precision, the
// optimizer's moment decay, and the data's split and packing (train.seed, train.seq_len, the data
// format, val_fraction), and the validation budget (train.eval_tokens: losses measured on other
// rows would not compare with the run's): those are refused, each named with its old and new value. Everything else
// may change (the run's length and so the lr schedule, the lr itself, batch size and gradient
// accumulation, which the sampler counts in rows, evaluation, logging, checkpointing, the mesh,
// paths of moved files): kResumeMayChange lists those keys.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "train/run_config.h"

namespace mt {

// The keys a resumed run may give other values than its checkpoint's run (the rest must match).
extern const std::vector<std::string_view> kResumeMayChange;

// mt::Error naming the checkpoint `where`, every key that changed and is not in kResumeMayChange
// ("model.rope_theta 10000 -> 500000"), and what may change instead. `saved_toml` is the config the
// checkpoint recorded.
void require_resumable_config(const RunConfig& now, const std::string& saved_toml, const std::string& where);

}  // namespace mt

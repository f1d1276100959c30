// What defines a run's math besides its config keys: the model as resolved (from the built-in
// config, or from the files at model.path) and the tokenizer. Recorded in every checkpoint's
// manifest, so that a resume refuses a model whose config.json or tokenizer changed since, naming
// the field; compared across the ranks at the start too (each host reads model.path itself).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"
#include "model/config.h"

namespace mt {

// (name, value as text) in a fixed order: every ModelConfig field that changes what the model
// computes (its family, shapes, norms, biases, positions, windows, experts and routing losses;
// not how a layout splits it, nor a run's capacity factor, a run key), then the tokenizer's kind,
// size, special ids, a hash of every id's text and of its chat template. Equal texts mean equal
// values (floats written with all their digits).
std::vector<std::pair<std::string, std::string>> model_identity(const ModelConfig& model, const Tokenizer& tok);

// Throws one line naming the first field whose value differs between a checkpoint's recorded
// identity and this run's (`where`: the checkpoint's directory).
void require_same_model_identity(const std::vector<std::pair<std::string, std::string>>& recorded,
                                 const std::vector<std::pair<std::string, std::string>>& now,
                                 const std::string& where);

}  // namespace mt

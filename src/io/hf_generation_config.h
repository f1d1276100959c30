// generation_config.json beside an HF model: where transformers' generate() reads the ids that
// start and end text (and any sampling defaults the model's authors chose).
#pragma once
#include <string>

namespace mt {

// `config_json`: the config.json written beside it. `source_json`: the generation_config.json of
// the directory the model was loaded from ("" for none; `source` names it in messages). A source's
// keys are all kept (a list of eos ids, temperature, top_p, ...), with the config's ids added
// where it has none; without one, the file is what transformers writes for a model whose
// config.json carries the ids: `_from_model_config` and the non-null bos, eos and pad ids.
std::string hf_generation_config_json(const std::string& config_json, const std::string& source_json,
                                      const std::string& source);

}  // namespace mt

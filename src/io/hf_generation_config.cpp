#include "io/hf_generation_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

std::string hf_generation_config_json(const std::string& config_json, const std::string& source_json,
                                      const std::string& source) {
  using json = nlohmann::ordered_json;
  const json config = json::parse(config_json);
  json j = json::object();
  if (source_json.empty()) {
    j["_from_model_config"] = true;
  } else {
    try {
      j = json::parse(source_json);
    } catch (const json::exception& e) {
      fail(source + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j.is_object()) fail(source + ": expected a JSON object");
  }
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null() && !j.contains(key)) j[key] = *it;
  }
  return j.dump(2) + "\n";
}

}  // namespace mt

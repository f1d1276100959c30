// Reading one key of a Hugging Face config.json with the checks a user needs: a wrong type or a
// missing required key is one line naming the key. Shared by the family readers (hf_config.cpp,
// hf_gemma3.cpp, gpt2_config.cpp).
#pragma once
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "core/clipped.h"
#include "core/error.h"

namespace mt::hf_json {

// Sets `out` from j[key] when present and not null; absent or null keeps out (or, when required,
// fails naming the key).
template <class V>
void read_key(const nlohmann::json& j, const char* key, V& out, const std::string& src, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(src + ": missing key '" + key + "'");
    return;
  }
  if constexpr (std::is_same_v<V, bool>) {
    if (!it->is_boolean()) fail(src + ": key '" + key + "' must be a boolean");
  } else if constexpr (std::is_integral_v<V>) {
    if (!it->is_number_integer()) fail(src + ": key '" + key + "' must be an integer");
  } else {
    if (!it->is_number()) fail(src + ": key '" + key + "' must be a number");
    // A double beyond float's range would become infinity (and be written back as null).
    if (!std::isfinite(it->get<V>())) fail(src + ": key '" + key + "' is out of range: " + it->dump());
  }
  out = it->get<V>();
}

// layer_types (Qwen2 / Qwen3, Gemma 3): whether each layer is "sliding_attention" (else
// "full_attention"); empty when absent or null. Checked whenever it is given, whether or not the
// config turns a window on: a list of another length than num_hidden_layers (`layers`) or another
// kind is a mistake that a reader using no window would otherwise pass over.
inline std::vector<bool> read_layer_types(const nlohmann::json& j, int64_t layers, const std::string& src) {
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_array() || int64_t(it->size()) != layers)
    fail(src + ": layer_types must be a list of num_hidden_layers (" + std::to_string(layers) + ") entries, got " +
         (it->is_array() ? std::to_string(it->size()) + ": " : "") + clipped(it->dump()));
  std::vector<bool> sliding(it->size());
  for (size_t l = 0; l < it->size(); ++l) {
    const nlohmann::json& kind = (*it)[l];
    if (kind != "sliding_attention" && kind != "full_attention")
      fail(src + ": layer_types[" + std::to_string(l) + "] " + clipped(kind.dump()) +
           " is not supported (full_attention or sliding_attention)");
    sliding[l] = kind == "sliding_attention";
  }
  return sliding;
}

// Whether j[key] claims something: present and neither null nor false.
inline bool set_true(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !(it->is_null() || (it->is_boolean() && !it->get<bool>()));
}

// The double whose shortest decimal is the float's shortest decimal, so that JSON shows what a
// user wrote (1e-05, 0.001) rather than every digit of the float widened to double.
inline double short_decimal(float v) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

}  // namespace mt::hf_json

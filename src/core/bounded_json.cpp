#include "core/bounded_json.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/clipped.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

namespace {

constexpr size_t kMiB = size_t(1) << 20;
// Deeper than any file meshtrain reads needs (a tokenizer.json nests ~6 levels, a chat example
// ~4), far below what costs time or memory; the same for every kind.
constexpr int kMaxDepth = 128;

// "20971520 bytes is over the 16 MiB limit for config.json"
std::string over_the_limit(uintmax_t bytes, const JsonLimits& limits) {
  return std::to_string(bytes) + " bytes is over the " + std::to_string(limits.max_bytes / kMiB) +
         " MiB limit for " + limits.name;
}

void check_size_and_depth(std::string_view text, const JsonLimits& limits, const std::string& source) {
  if (text.size() > limits.max_bytes) fail(source + ": " + over_the_limit(text.size(), limits));
  const size_t at = json_depth_exceeded_at(text, limits.max_depth);
  if (at != std::string_view::npos)
    fail(source + ": JSON nested deeper than " + std::to_string(limits.max_depth) + " levels at byte " +
         std::to_string(at));
}

template <class Json>
Json parse_checked(std::string_view text, JsonKind kind, const std::string& source) {
  check_size_and_depth(text, json_limits(kind), source);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    fail(source + ": not valid JSON (at byte " + std::to_string(e.byte) + "): " + json_error_message(e));
  } catch (const nlohmann::json::exception& e) {  // out_of_range for a number like 1e400
    fail(source + ": not valid JSON: " + json_error_message(e));
  }
}

}  // namespace

const JsonLimits& json_limits(JsonKind kind) {
  // The largest real files of each kind are far below these: config.json a few KB, the largest
  // tokenizer.json ~35 MB (Gemma 3), a manifest ~1 KB per tensor.
  static const JsonLimits kLimits[] = {
      {"config.json", 16 * kMiB, kMaxDepth},
      {"tokenizer files", 512 * kMiB, kMaxDepth},
      {"adapter_config.json", 16 * kMiB, kMaxDepth},
      {"checkpoint manifests", 256 * kMiB, kMaxDepth},
      {"safetensors indexes", 256 * kMiB, kMaxDepth},
      {"JSON values in safetensors metadata", 16 * kMiB, kMaxDepth},
      {"run_summary.json", 64 * kMiB, kMaxDepth},
      {"a metrics.jsonl line", 1 * kMiB, kMaxDepth},
      {"a data record", 64 * kMiB, kMaxDepth},
      // ~250 bytes a file with ?blobs=true: 32 MiB lists over 100,000 files, where the largest
      // model repositories hold a few thousand.
      {"the Hub API's answers", 32 * kMiB, kMaxDepth},
  };
  return kLimits[static_cast<size_t>(kind)];
}

size_t json_depth_exceeded_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

nlohmann::json parse_json(std::string_view text, JsonKind kind, const std::string& source) {
  return parse_checked<nlohmann::json>(text, kind, source);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, JsonKind kind, const std::string& source) {
  return parse_checked<nlohmann::ordered_json>(text, kind, source);
}

nlohmann::json parse_json_object(std::string_view text, JsonKind kind, const std::string& source) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) fail(source + ": not a JSON object (the text is empty)");
  const unsigned char c = static_cast<unsigned char>(text[first]);
  if (c != '{') {
    char shown[8];
    std::snprintf(shown, sizeof shown, c >= 0x20 && c < 0x7f ? "'%c'" : "0x%02x", c);
    fail(source + ": not a JSON object (it starts with " + shown + ")");
  }
  return parse_json(text, kind, source);
}

nlohmann::json parse_json_or_discarded(std::string_view text, JsonKind kind) {
  const JsonLimits& limits = json_limits(kind);
  if (text.size() > limits.max_bytes || json_depth_exceeded_at(text, limits.max_depth) != std::string_view::npos)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {  // out_of_range is thrown even without exceptions
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

std::string read_json_text(const std::string& path, JsonKind kind) {
  require_regular_file(path, "JSON file");
  const JsonLimits& limits = json_limits(kind);
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > limits.max_bytes) fail(path + ": " + over_the_limit(size, limits));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(path + ": cannot read it");
  return std::move(text).str();
}

nlohmann::json read_json_file(const std::string& path, JsonKind kind) {
  return parse_json(read_json_text(path, kind), kind, path);
}

std::string json_error_message(const nlohmann::json::exception& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (close != std::string::npos && m.rfind("[json.exception.", 0) == 0) m = m.substr(close + 2);
  return clipped(m, 200);
}

}  // namespace mt

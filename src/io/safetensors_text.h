// Formatting shared by the safetensors error messages, which must stay one line whatever a
// file contains.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/shape_string.h"

namespace mt {

// A name as a JSON string literal: quoted, with newlines and control characters escaped and
// invalid UTF-8 replaced, so a hostile name cannot break the one-line message.
inline std::string quote_name(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// nlohmann's message minus its "[json.exception...] " tag, cut short and made printable: the
// "last read" part quotes the file, which may hold anything.
inline std::string json_error_text(const std::exception& e) {
  std::string msg = e.what();
  if (size_t p = msg.find("] "); msg.rfind("[json.exception", 0) == 0 && p != std::string::npos)
    msg.erase(0, p + 2);
  if (msg.size() > 200) msg = msg.substr(0, 200) + "...";
  for (char& c : msg)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return msg;
}

}  // namespace mt

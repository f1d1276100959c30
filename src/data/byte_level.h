// GPT-2's byte-to-unicode mapping, used by vocab.json, merges.txt and byte-level tokenizer.json:
// each byte is written as one printable code point (printable Latin-1 bytes as themselves, the
// rest as U+0100 onwards) so that token strings contain no spaces or control characters.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace mt {

// The bytes a mapped token string stands for; nullopt if it contains a character outside the
// 256 mapped ones (or is not valid UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view mapped);
// The mapped string (UTF-8) of any bytes.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace mt

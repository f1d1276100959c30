// The few Unicode facts the tokenizers need: decoding one UTF-8 code point, the \p{L}, \p{N}
// and \s classes used by the pre-tokenizer patterns, and NFC (the Qwen tokenizers' normalizer). Letters and numbers come from a generated
// range table (scripts/gen_unicode_tables.py, which also writes the canonical combining classes and
// decompositions NFC needs, Unicode version in kUnicodeVersion); whitespace is
// the Unicode White_Space property, which is what \s means in the regex engines the reference
// tokenizers use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mt::unicode {

// One decoded unit of text. Invalid UTF-8 (stray continuation byte, truncated or overlong
// sequence, surrogate) decodes as a single byte with cp = kInvalid, so arbitrary bytes still
// split into units that cover the input exactly.
inline constexpr uint32_t kInvalid = 0xFFFFFFFF;
struct CodePoint {
  uint32_t cp;
  uint32_t len;  // bytes consumed, 1..4
};
CodePoint decode_utf8(std::string_view s, size_t pos);

bool is_letter(uint32_t cp);      // \p{L}
bool is_number(uint32_t cp);      // \p{N}
bool is_whitespace(uint32_t cp);  // \s (White_Space)

// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical
// composition; Hangul syllables algorithmically). Invalid UTF-8 bytes are kept as they are and
// block composition across them. Text that is already NFC comes back unchanged.
std::string nfc(std::string_view text);

const char* unicode_version();

}  // namespace mt::unicode

#include "data/pretokenize.h"

#include "data/unicode.h"

namespace mt {
namespace {

using unicode::CodePoint;

// Character classes of the patterns. "Other" is [^\s\p{L}\p{N}].
enum class Cls { kLetter, kNumber, kSpace, kOther };

Cls classify(uint32_t cp) {
  if (unicode::is_letter(cp)) return Cls::kLetter;
  if (unicode::is_number(cp)) return Cls::kNumber;
  if (unicode::is_whitespace(cp)) return Cls::kSpace;
  return Cls::kOther;
}

struct Scanner {
  std::string_view s;
  CodePoint at(size_t pos) const { return unicode::decode_utf8(s, pos); }
  Cls cls(size_t pos) const { return classify(at(pos).cp); }
  // End of the run of characters of class c starting at pos (pos itself may be outside it).
  size_t run_end(size_t pos, Cls c) const {
    while (pos < s.size()) {
      CodePoint u = at(pos);
      if (classify(u.cp) != c) break;
      pos += u.len;
    }
    return pos;
  }
};

bool is_ascii_ci(char c, char lower) { return c == lower || c == lower - 'a' + 'A'; }

// Length of a contraction suffix ('s 't 're 've 'm 'll 'd) right after an apostrophe at `pos`,
// or 0. Case-insensitive matching follows Unicode simple case folding, under which U+017F
// (long s) also matches 's'; no other letter of these suffixes has an extra fold.
size_t contraction_len(std::string_view s, size_t pos, bool ignore_case) {
  auto is = [&](size_t i, char lower) {
    if (i >= s.size()) return false;
    return ignore_case ? is_ascii_ci(s[i], lower) : s[i] == lower;
  };
  if (is(pos, 's') || is(pos, 't') || is(pos, 'm') || is(pos, 'd')) return 1;
  if (ignore_case && s.substr(pos, 2) == "\xC5\xBF") return 2;  // U+017F
  if ((is(pos, 'r') || is(pos, 'v')) && is(pos + 1, 'e')) return 2;
  if (is(pos, 'l') && is(pos + 1, 'l')) return 2;
  return 0;
}

// The whitespace alternatives shared by both patterns once nothing before them matched:
// \s+(?!\S) gives back the last whitespace character when a non-space follows, unless that
// would leave the match empty, in which case \s+ takes the single character.
size_t whitespace_end(const Scanner& sc, size_t pos) {
  size_t last_start = pos, end = pos;
  while (end < sc.s.size()) {
    CodePoint u = sc.at(end);
    if (!unicode::is_whitespace(u.cp)) break;
    last_start = end;
    end += u.len;
  }
  if (end == sc.s.size() || last_start == pos) return end;
  return last_start;
}

// Llama 3's pattern; Qwen's differs only in taking one digit at a time instead of up to three.
size_t llama3_end(std::string_view s, size_t pos, int max_digits) {
  Scanner sc{s};
  CodePoint c = sc.at(pos);
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c.cp == '\'')
    if (size_t n = contraction_len(s, pos + 1, true)) return pos + 1 + n;
  Cls k = classify(c.cp);
  // [^\r\n\p{L}\p{N}]?\p{L}+ : the optional prefix is any character but CR, LF, letter, number.
  if (k == Cls::kLetter) return sc.run_end(pos, Cls::kLetter);
  bool prefix_ok = k != Cls::kNumber && c.cp != '\r' && c.cp != '\n';
  if (prefix_ok && pos + c.len < s.size() && sc.cls(pos + c.len) == Cls::kLetter)
    return sc.run_end(pos + c.len, Cls::kLetter);
  // \p{N}{1,3} (Llama 3) or \p{N} (Qwen)
  if (k == Cls::kNumber) {
    size_t end = pos;
    for (int i = 0; i < max_digits && end < s.size(); ++i) {
      CodePoint u = sc.at(end);
      if (classify(u.cp) != Cls::kNumber) break;
      end += u.len;
    }
    return end;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t start = pos;
  if (c.cp == ' ' && pos + 1 < s.size() && sc.cls(pos + 1) == Cls::kOther) start = pos + 1;
  if (sc.cls(start) == Cls::kOther) {
    size_t end = sc.run_end(start, Cls::kOther);
    while (end < s.size() && (s[end] == '\r' || s[end] == '\n')) ++end;
    return end;
  }
  // Whitespace from here on. \s*[\r\n]+ : the whitespace run up to and including its last CR/LF.
  size_t end = pos, after_last_newline = 0;
  while (end < s.size()) {
    CodePoint u = sc.at(end);
    if (!unicode::is_whitespace(u.cp)) break;
    end += u.len;
    if (u.cp == '\r' || u.cp == '\n') after_last_newline = end;
  }
  if (after_last_newline) return after_last_newline;
  return whitespace_end(sc, pos);  // \s+(?!\S)|\s+
}

size_t gpt2_end(std::string_view s, size_t pos) {
  Scanner sc{s};
  CodePoint c = sc.at(pos);
  // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
  if (c.cp == '\'')
    if (size_t n = contraction_len(s, pos + 1, false)) return pos + 1 + n;
  // ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: a space joins a following non-space run.
  if (c.cp == ' ' && pos + 1 < s.size()) {
    Cls next = sc.cls(pos + 1);
    if (next != Cls::kSpace) return sc.run_end(pos + 1, next);
  }
  Cls k = classify(c.cp);
  if (k != Cls::kSpace) return sc.run_end(pos, k);
  return whitespace_end(sc, pos);  // \s+(?!\S)|\s+
}

}  // namespace

std::string_view split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::kLlama3:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case SplitPattern::kQwen2:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case SplitPattern::kGpt2:
      return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    case SplitPattern::kNone:
      return "";
  }
  return {};
}

size_t next_piece_end(SplitPattern p, std::string_view text, size_t pos) {
  switch (p) {
    case SplitPattern::kLlama3:
      return llama3_end(text, pos, 3);
    case SplitPattern::kQwen2:
      return llama3_end(text, pos, 1);
    case SplitPattern::kGpt2:
      return gpt2_end(text, pos);
    case SplitPattern::kNone:
      break;
  }
  return text.size();
}

}  // namespace mt

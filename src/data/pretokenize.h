// Pre-tokenizers: split text into the pieces that byte-level BPE encodes one at a time. Each
// pattern is the regex the reference tokenizer uses, implemented by hand as a scan over code
// points that reproduces regex alternation semantics exactly (the leftmost alternative that
// matches wins, quantifiers are greedy and backtrack, \s+(?!\S) leaves the last whitespace for
// the next piece). std::regex has no \p{L}/\p{N} and is slow, hence the hand-written matcher.
#pragma once
#include <cstddef>
#include <string_view>

namespace mt {

enum class SplitPattern {
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+            (Llama 3 / tiktoken cl100k-style)
  kLlama3,
  // The same with \p{N} in place of \p{N}{1,3}: every digit is its own piece (Qwen2, Qwen2.5,
  // Qwen3).
  kQwen2,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+   (GPT-2)
  kGpt2,
  // No split: the whole text is one piece (HF's ByteLevel pre-tokenizer without its regex, as
  // the byte tokenizer's tokenizer.json uses; with no merges every byte stays its own token).
  kNone,
};

// The regex source text of a pattern, as it appears in tokenizer.json ("" for kNone).
std::string_view split_pattern_regex(SplitPattern p);

// End (exclusive byte offset) of the piece that starts at `pos` (< text.size()). Pieces never
// are empty, so repeated calls cover the text exactly. Invalid UTF-8 bytes count as one
// character each that is neither letter, number nor whitespace.
size_t next_piece_end(SplitPattern p, std::string_view text, size_t pos);

}  // namespace mt

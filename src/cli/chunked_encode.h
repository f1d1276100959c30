// A long text encoded piece by piece (tokenize's lines, up to 16 MiB each), so that the
// tokenizer's working memory follows the piece (~1 MiB), not the text, and the time stays linear.
//
// Where the text is cut: only before a space that follows an ASCII letter or digit and precedes
// an ASCII letter ("...word| word..."). Every pre-tokenizer pattern the byte-level BPE tokenizers
// use (Llama 3 / cl100k, Qwen2, GPT-2) ends a piece there (a run of letters or digits stops at the
// space, and the space starts the next piece with the word after it), and NFC cannot join
// characters across it, so encoding the parts gives the ids of the whole. Tokenizers for which
// this is not so are never cut: sentencepiece (it adds a "▁" at the start of every text it
// encodes), a BPE without a split pattern (it merges whole texts), and, with specials, a tokenizer
// whose special tokens contain a space (the cut could fall inside one).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace mt::cli {

constexpr size_t kEncodeChunkBytes = size_t(1) << 20;

// Calls visit(ids) with the ids of `text`, in order, a part at a time: parts of about
// `chunk_bytes` cut where the ids cannot change (above), the whole text at once when the tokenizer
// cannot be cut. `specials`: encode_with_specials instead of encode.
void encode_in_chunks(const Tokenizer& tok, std::string_view text, bool specials,
                      const std::function<void(const std::vector<int32_t>&)>& visit,
                      size_t chunk_bytes = kEncodeChunkBytes);

}  // namespace mt::cli

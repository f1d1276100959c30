// An HF-loadable tokenizer.json and tokenizer_config.json for a byte-level BPE tokenizer (tiktoken,
// GPT-2's vocab.json + merges.txt, and the built-in byte tokenizer), in the form HF's converters
// write: vocab in GPT-2's byte-level characters, the split regex as a Split pre-tokenizer followed
// by ByteLevel without its regex, a ByteLevel decoder and the specials as added tokens. A model
// directory meshtrain writes then loads in transformers with AutoTokenizer.
#pragma once
#include <memory>
#include <string>

#include "data/bpe_tokenizer.h"

namespace mt {

// Merges are listed by the tables' rank, then by (left id, right id): for tiktoken that is every
// split of a token into two tokens at the token's rank (as HF's TikTokenConverter lists them, with
// ignore_merges so a piece that is a token is not merged), for GPT-2 the order of merges.txt.
// Writes the large vocabularies directly (Llama 3's 128k tokens take well under a second).
std::string hf_byte_level_tokenizer_json(const BpeTokenizer& tok);
// bos/eos, the added tokens, and PreTrainedTokenizerFast.
std::string hf_byte_level_tokenizer_config_json(const BpeTokenizer& tok);

// The byte tokenizer (byte_tokenizer.h) as the byte-level BPE that encodes identically: the 256
// bytes at id = byte value, no merges, no split, no specials.
std::unique_ptr<BpeTokenizer> byte_tokenizer_as_bpe();

}  // namespace mt

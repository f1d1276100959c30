// libFuzzer target for the tokenizers.
//  1. decode(encode(data)) == data for arbitrary bytes with the tiktoken_small tokenizer (also
//     with special-token recognition), loaded once from $MESHTRAIN_FUZZ_TOKENIZER (default
//     ../shared/data/tokenizers/tiktoken_small/tokenizer.model); skipped if the file is missing.
//  2. The input as a tokenizer file for each reader: it must load or throw mt::Error, never crash,
//     hang or throw anything else; whatever loads must encode and decode without crashing.
// Build (clang++ only, the main build uses g++):
//   clang++ -std=c++20 -O1 -g -Isrc -fsanitize=fuzzer,address,undefined \
//     fuzz/fuzz_tokenizers.cpp src/data/{unicode,pretokenize,bpe,bpe_tokenizer,byte_level,tokenizer,\
//     tiktoken_reader,hf_bpe_reader,sentencepiece_tokenizer,tokenizer_loader}.cpp -o fuzz_tokenizers
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/tokenizer_readers.h"

namespace {

const mt::Tokenizer* reference_tokenizer() {
  static std::unique_ptr<mt::Tokenizer> tok = [] {
    const char* env = std::getenv("MESHTRAIN_FUZZ_TOKENIZER");
    std::string path = env ? env : "../shared/data/tokenizers/tiktoken_small/tokenizer.model";
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "fuzz_tokenizers: %s missing, skipping the round-trip check\n", path.c_str());
      return std::unique_ptr<mt::Tokenizer>();
    }
    return mt::load_tokenizer(path);
  }();
  return tok.get();
}

void check_round_trip(const mt::Tokenizer& tok, const std::string& text) {
  if (tok.decode(tok.encode(text)) != text) {
    std::fprintf(stderr, "fuzz_tokenizers: encode/decode round trip failed\n");
    std::abort();
  }
  if (tok.decode(tok.encode_with_specials(text)) != text) {
    std::fprintf(stderr, "fuzz_tokenizers: round trip with specials failed\n");
    std::abort();
  }
}

// Whatever a reader accepted must at least encode and decode without crashing.
void exercise(const std::unique_ptr<mt::Tokenizer>& tok) {
  for (const char* s : {"Hello world", " \n\n  x1234 'll", "\xE6\x9D\xB1\xFF"}) {
    auto ids = tok->encode(s);
    try {
      tok->decode(ids);
    } catch (const mt::Error&) {
      // A malformed vocabulary may produce ids it cannot decode; a clean error is fine.
    }
  }
}

template <class F>
void expect_load_or_error(F&& load) {
  try {
    exercise(load());
  } catch (const mt::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  if (const mt::Tokenizer* tok = reference_tokenizer()) check_round_trip(*tok, in);
  expect_load_or_error([&] { return mt::read_tiktoken(in, "fuzz.model"); });
  expect_load_or_error([&] { return mt::read_hf_tokenizer_json(in, "fuzz.json"); });
  expect_load_or_error([&] { return mt::read_llama2c_tokenizer(in, "fuzz.bin"); });
  // GPT-2 takes two files: split the input at its first NUL (vocab.json, then merges.txt).
  size_t nul = in.find('\0');
  std::string vocab = in.substr(0, nul), merges = nul == std::string::npos ? "" : in.substr(nul + 1);
  expect_load_or_error([&] { return mt::read_gpt2(vocab, merges, "fuzz-vocab.json"); });
  return 0;
}

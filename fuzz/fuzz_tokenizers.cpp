// libFuzzer target for the tokenizers.
//  1. decode(encode(data)) == data for arbitrary bytes with the tiktoken_small tokenizer (also
//     with special-token recognition), loaded once from $MESHTRAIN_FUZZ_TOKENIZER (default
//     ../shared/data/tokenizers/tiktoken_small/tokenizer.model); skipped if the file is missing.
//     The same (without specials) with the sentencepiece fixture tests/data/sentencepiece/llama_bpe1000.model, for
//     inputs without U+2581 (sentencepiece's space symbol, which decodes as a space).
//  2. The input as a tokenizer file for each reader: it must load or throw mt::Error, never crash,
//     hang or throw anything else; whatever loads must encode and decode without crashing.
// Build (clang++ only, the main build uses g++):
//   clang++ -std=c++20 -O1 -g -Isrc -fsanitize=fuzzer,address,undefined \
//     fuzz/fuzz_tokenizers.cpp src/data/{unicode,pretokenize,bpe,bpe_tokenizer,byte_level,tokenizer,\
//     tiktoken_reader,hf_bpe_reader,sentencepiece_tokenizer,llama2c_tokenizer_reader,\
//     sentencepiece_model_reader,hf_sentencepiece_reader,tokenizer_loader,byte_tokenizer}.cpp \
//     src/core/*.cpp -o fuzz_tokenizers
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

const mt::Tokenizer* sentencepiece_tokenizer() {
  static std::unique_ptr<mt::Tokenizer> tok = [] {
    const std::string path = "tests/data/sentencepiece/llama_bpe1000.model";
    return std::filesystem::exists(path) ? mt::load_tokenizer(path) : std::unique_ptr<mt::Tokenizer>();
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
  // Plain encode only: sentencepiece decodes control tokens such as <s> to no text.
  if (const mt::Tokenizer* spm = sentencepiece_tokenizer();
      spm && in.find("\xE2\x96\x81") == std::string::npos && spm->decode(spm->encode(in)) != in) {
    std::fprintf(stderr, "fuzz_tokenizers: sentencepiece round trip failed\n");
    std::abort();
  }
  expect_load_or_error([&] { return mt::read_tiktoken(in, "fuzz.model"); });
  expect_load_or_error([&] { return mt::read_hf_tokenizer_json(in, "fuzz.json"); });
  expect_load_or_error([&] { return mt::read_llama2c_tokenizer(in, "fuzz.bin"); });
  expect_load_or_error([&] { return mt::read_sentencepiece_model(in, "fuzz-spm.model"); });
  // GPT-2 takes two files: split the input at its first NUL (vocab.json, then merges.txt).
  size_t nul = in.find('\0');
  std::string vocab = in.substr(0, nul), merges = nul == std::string::npos ? "" : in.substr(nul + 1);
  expect_load_or_error([&] { return mt::read_gpt2(vocab, merges, "fuzz-vocab.json"); });
  return 0;
}

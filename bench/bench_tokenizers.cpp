// Encoding speed of each tokenizer on tinyshakespeare (one thread), in MB/s of input text.
// Usage: bench_tokenizers [DATA_DIR]   (default: ../shared/data relative to the source tree)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/tokenizer.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data";
  std::ifstream in(dir + "/text/tinyshakespeare.txt", std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_tokenizers: cannot read %s/text/tinyshakespeare.txt\n", dir.c_str());
    return 1;
  }
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const char* paths[] = {"tokenizers/llama3/tokenizer.model", "tokenizers/tiktoken_small/tokenizer.model",
                         "tokenizers/tiktoken_small/tokenizer.json", "tokenizers/gpt2",
                         "stories260K/tok512.bin"};
  std::printf("%-42s %10s %10s %9s %9s\n", "tokenizer", "load s", "tokens", "MB/s", "MB/s warm");
  for (const char* rel : paths) {
    try {
      using clock = std::chrono::steady_clock;
      auto t0 = clock::now();
      auto tok = mt::load_tokenizer(dir + "/" + rel);
      auto t1 = clock::now();
      // First pass fills the piece cache; the second shows the steady state of a long run.
      size_t n = tok->encode(text).size();
      auto t2 = clock::now();
      tok->encode(text);
      auto t3 = clock::now();
      auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
      double mb = double(text.size()) / 1e6;
      std::printf("%-42s %10.2f %10zu %9.2f %9.2f\n", rel, secs(t0, t1), n, mb / secs(t1, t2),
                  mb / secs(t2, t3));
    } catch (const mt::Error& e) {
      std::printf("%-42s skipped: %s\n", rel, e.what());
    }
  }
  return 0;
}

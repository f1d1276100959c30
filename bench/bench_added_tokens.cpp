// Encoding time with many added tokens: issue 34's tokenizer (3000 added tokens "a"^k "b") on
// ~1 MB of text, beside the same text through a vocabulary without them. Before added tokens were
// matched by one automaton (data/longest_match.h) this took minutes; now it should be within a
// small factor of the plain case. Prints the times; asserts nothing (tests/test_added_tokens.cpp
// checks the ids).
// Usage: bench_added_tokens [COUNT] [MEGABYTES]   (default 3000 tokens, 1 MB)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "../tests/added_tokens_fixture.h"

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 3000;
  const double mb = argc > 2 ? std::atof(argv[2]) : 1.0;
  std::mt19937 rng(3);
  std::string text;
  while (double(text.size()) < mb * 1e6) text += std::string(1 + rng() % size_t(count), 'a') + "bxy";
  using clock = std::chrono::steady_clock;
  auto time_encode = [&](int added) {
    const mt::SentencePieceTokenizer tok(mt::testing::crafted_added_token_vocab(added), "<crafted>");
    const auto t0 = clock::now();
    const size_t n = tok.encode(text).size();
    return std::pair{std::chrono::duration<double>(clock::now() - t0).count(), n};
  };
  const auto [with, n_with] = time_encode(count);
  const auto [without, n_without] = time_encode(0);
  std::printf("%.2f MB of text: %d added tokens %.3f s (%zu ids), none %.3f s (%zu ids), ratio %.2f\n",
              double(text.size()) / 1e6, count, with, n_with, without, n_without, with / without);
  return 0;
}

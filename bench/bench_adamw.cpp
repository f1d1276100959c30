// Times the CPU AdamW update (kernels/cpu/adamw.h) over the built-in tiny model's trainable
// tensors (configs/tiny.toml: 128 wide, 344 intermediate, 4 blocks, 8 heads, 4 KV heads, vocab
// 256), the same elements as one tensor, and as tensors of 1024: whether the step costs per tensor
// or per element, and at what rate (docs/planner.md, "Pick against measured"). Prints thread CPU
// time, best of `reps` (a shared machine's wait for a core is not the kernel's). Usage:
// bench_adamw [reps]; run with OMP_NUM_THREADS=1 for one core's figure.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/adamw.h"

namespace {

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  const int64_t hidden = 128, inter = 344, kv = 64, vocab = 256, layers = 4;
  std::vector<int64_t> tiny = {vocab * hidden};  // embedding
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t n : {hidden * hidden, kv * hidden, kv * hidden, hidden * hidden, inter * hidden, inter * hidden,
                      inter * hidden, hidden, hidden})
      tiny.push_back(n);
  tiny.push_back(hidden);          // final norm
  tiny.push_back(vocab * hidden);  // lm_head
  int64_t total = 0;
  for (int64_t n : tiny) total += n;
  std::vector<int64_t> small(size_t(total / 1024), 1024);
  if (total % 1024) small.push_back(total % 1024);

  const size_t count = size_t(total);
  std::vector<float> w(count, 0.1f), g(count, 0.01f), m(count, 0.0f), v(count, 0.0f);
  std::vector<mt::bf16> w16(count);
  const mt::AdamWScalars s{0.9f, 0.95f, 1e-8f, 1e-3f, 0.1f, 0.999f, 1.0f};
  auto best_ms = [&](const std::vector<int64_t>& parts) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = cpu_ms();
      int64_t off = 0;
      for (int64_t n : parts) {
        mt::adamw_update(w.data() + off, w16.data() + off, g.data() + off, m.data() + off, v.data() + off, n, s);
        off += n;
      }
      best = std::min(best, cpu_ms() - t0);
    }
    return best;
  };
  std::printf("AdamW over %lld elements (the tiny model's), thread CPU time, best of %d:\n", (long long)total, reps);
  for (const auto& [name, parts] : {std::pair{"its tensors", tiny}, std::pair{"one tensor", std::vector<int64_t>{total}},
                                    std::pair{"tensors of 1024", small}}) {
    const double ms = best_ms(parts);
    std::printf("  %-16s %5zu tensors  %7.3f ms  %5.2f ns/element  %5.1f GB/s at 30 B/element\n", name, parts.size(), ms,
                1e6 * ms / double(total), 30.0 * double(total) / (ms * 1e6));
  }
}

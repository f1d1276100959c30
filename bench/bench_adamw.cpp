// Times the CPU AdamW update (kernels/cpu/adamw.h) over the built-in tiny model's trainable
// tensors (configs/tiny.toml: 128 wide, 344 intermediate, 4 blocks, 8 heads, 4 KV heads, vocab
// 256), the same elements as one tensor, and as tensors of 1024: whether the step costs per tensor
// or per element, and at what rate (docs/planner.md, "Pick against measured"). Then the gradient
// norm's sum of squares (kernels/cpu/sum_squares.h) over the same elements. Prints thread CPU
// time, best of `reps` (a shared machine's wait for a core is not the kernel's).
//
// With a second argument, also one tensor of that many elements (124700000: the reference
// shape's, issue 36; about 2.3 GB), timed both in thread CPU time and in wall time, so the
// figure can be set beside the step profile's optimizer line.
//
// Usage: bench_adamw [reps] [large_elements]; run with OMP_NUM_THREADS=1 for one core's figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/sum_squares.h"

namespace {

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Best {
  double cpu = 1e30, wall = 1e30;
};

// Best thread CPU and wall time of `reps` calls of f.
template <class F>
Best best_of(int reps, F&& f) {
  Best b;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_ms(), w0 = wall_ms();
    f();
    b.cpu = std::min(b.cpu, cpu_ms() - c0), b.wall = std::min(b.wall, wall_ms() - w0);
  }
  return b;
}

volatile double sink;  // keeps the sums of squares from being optimised away

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  const int64_t large = argc > 2 ? std::max(0LL, std::atoll(argv[2])) : 0;
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

  const size_t count = size_t(std::max(total, large));
  std::vector<float> w(count, 0.1f), g(count, 0.01f), m(count, 0.0f), v(count, 0.0f);
  std::vector<mt::bf16> w16(count);
  const mt::AdamWScalars s{0.9f, 0.95f, 1e-8f, 1e-3f, 0.1f, 0.999f, 1.0f};
  auto update = [&](const std::vector<int64_t>& parts) {
    int64_t off = 0;
    for (int64_t n : parts) {
      mt::adamw_update(w.data() + off, w16.data() + off, g.data() + off, m.data() + off, v.data() + off, n, s);
      off += n;
    }
  };
  std::printf("AdamW over %lld elements (the tiny model's), thread CPU time, best of %d:\n", (long long)total, reps);
  for (const auto& [name, parts] : {std::pair{"its tensors", tiny}, std::pair{"one tensor", std::vector<int64_t>{total}},
                                    std::pair{"tensors of 1024", small}}) {
    const double ms = best_of(reps, [&] { update(parts); }).cpu;
    std::printf("  %-16s %5zu tensors  %7.3f ms  %5.2f ns/element  %5.1f GB/s at 30 B/element\n", name, parts.size(), ms,
                1e6 * ms / double(total), 30.0 * double(total) / (ms * 1e6));
  }
  const double ss = best_of(reps, [&] { sink = mt::sum_squares(g.data(), total); }).cpu;
  std::printf("  %-16s %5d tensor   %7.3f ms  %5.2f ns/element  %5.1f GB/s at 4 B/element\n", "sum of squares", 1, ss,
              1e6 * ss / double(total), 4.0 * double(total) / (ss * 1e6));

  if (large > 0) {
    const int large_reps = std::max(1, std::min(reps, 5));
    std::printf("One tensor of %lld elements, best of %d (thread CPU time of the calling thread; wall time):\n",
                (long long)large, large_reps);
    const Best a = best_of(large_reps, [&] { update({large}); });
    std::printf("  %-16s cpu %8.1f ms  wall %8.1f ms  %5.2f ns/element  %5.1f GB/s at 30 B/element (wall)\n", "AdamW",
                a.cpu, a.wall, 1e6 * a.wall / double(large), 30.0 * double(large) / (a.wall * 1e6));
    const Best q = best_of(large_reps, [&] { sink = mt::sum_squares(g.data(), large); });
    std::printf("  %-16s cpu %8.1f ms  wall %8.1f ms  %5.2f ns/element  %5.1f GB/s at 4 B/element (wall)\n",
                "sum of squares", q.cpu, q.wall, 1e6 * q.wall / double(large), 4.0 * double(large) / (q.wall * 1e6));
  }
}

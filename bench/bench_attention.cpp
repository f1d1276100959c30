// Times attention_forward / attention_backward (bf16 by default) and prints ms and GFLOP/s.
// Usage: bench_attention [B T Hq Hkv D [iters [f32]]]; default is the reference shape
// B=4 T=512 Hq=12 Hkv=4 D=64. Run with OMP_NUM_THREADS set to the thread count of interest.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/attention.h"

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

template <class T>
void run(const mt::AttentionShape& s, int iters) {
  const size_t nq = size_t(s.B * s.T * s.Hq * s.D), nk = size_t(s.B * s.T * s.Hkv * s.D);
  std::vector<T> q(nq), k(nk), v(nk), out(nq), dout(nq), dq(nq), dk(nk), dv(nk);
  std::vector<float> lse(size_t(s.B * s.Hq * s.T));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto* vec : {&q, &dout})
    for (auto& x : *vec) x = mt::from_float<T>(nd(rng));
  for (auto* vec : {&k, &v})
    for (auto& x : *vec) x = mt::from_float<T>(nd(rng));

  // Best of iters (the machine is shared; the minimum is the least disturbed run).
  double fwd = 1e30, bwd = 1e30;
  for (int it = 0; it <= iters; ++it) {
    double t0 = now_ms();
    mt::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), nullptr, s);
    double t1 = now_ms();
    mt::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(),
                           q.data(), k.data(), v.data(), nullptr, s);
    double t2 = now_ms();
    if (it == 0) continue;  // warm-up
    fwd = std::min(fwd, t1 - t0);
    bwd = std::min(bwd, t2 - t1);
  }
  // Causal: half of the T x T products are done.
  const double f_fwd = 2.0 * 2.0 * double(s.B * s.Hq) * double(s.T) * double(s.T) * double(s.D) / 2;
  const double f_bwd = 2.5 * f_fwd;
  std::printf("B=%lld T=%lld Hq=%lld Hkv=%lld D=%lld %s threads=%d (best of %d)\n",
              (long long)s.B, (long long)s.T, (long long)s.Hq, (long long)s.Hkv, (long long)s.D,
              sizeof(T) == 2 ? "bf16" : "f32", omp_get_max_threads(), iters);
  std::printf("forward  %8.2f ms  %7.1f GFLOP/s\n", fwd, f_fwd / fwd * 1e-6);
  std::printf("backward %8.2f ms  %7.1f GFLOP/s\n", bwd, f_bwd / bwd * 1e-6);
  std::printf("total    %8.2f ms  %7.1f GFLOP/s\n", fwd + bwd, (f_fwd + f_bwd) / (fwd + bwd) * 1e-6);
}

}  // namespace

int main(int argc, char** argv) {
  mt::AttentionShape s{4, 512, 12, 4, 64};
  if (argc >= 6) {
    s = {std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
         std::atoll(argv[5])};
  }
  const int iters = argc >= 7 ? std::atoi(argv[6]) : 5;
  if (argc >= 8 && std::strcmp(argv[7], "f32") == 0)
    run<float>(s, iters);
  else
    run<mt::bf16>(s, iters);
  return 0;
}

// Times attention_forward / attention_backward (bf16 by default) and prints ms and GFLOP/s.
// Usage: bench_attention [B T Hq Hkv D [iters [f32]]]; default is the reference shape
// B=4 T=512 Hq=12 Hkv=4 D=64. Run with OMP_NUM_THREADS set to the thread count of interest.
// bf16 runs take the tile products MESHTRAIN_ATTENTION_BF16 picks (kernels/cpu/attention_bf16.h),
// named on the first line.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16.h"

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
// CPU time of the whole process (all threads): on a shared machine wall time includes waiting
// for a core, CPU time does not; CPU ms / threads is what the wall time would be on idle cores.
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
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
  double fwd = 1e30, bwd = 1e30, fwd_cpu = 1e30, bwd_cpu = 1e30;
  for (int it = 0; it <= iters; ++it) {
    double t0 = now_ms(), c0 = cpu_ms();
    mt::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), nullptr, s);
    double t1 = now_ms(), c1 = cpu_ms();
    mt::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(),
                           q.data(), k.data(), v.data(), nullptr, s);
    double t2 = now_ms(), c2 = cpu_ms();
    if (it == 0) continue;  // warm-up
    fwd = std::min(fwd, t1 - t0), fwd_cpu = std::min(fwd_cpu, c1 - c0);
    bwd = std::min(bwd, t2 - t1), bwd_cpu = std::min(bwd_cpu, c2 - c1);
  }
  // Causal: half of the T x T products are done.
  const double f_fwd = 2.0 * 2.0 * double(s.B * s.Hq) * double(s.T) * double(s.T) * double(s.D) / 2;
  const double f_bwd = 2.5 * f_fwd;
  std::printf("B=%lld T=%lld Hq=%lld Hkv=%lld D=%lld %s products=%s threads=%d (best of %d)\n",
              (long long)s.B, (long long)s.T, (long long)s.Hq, (long long)s.Hkv, (long long)s.D,
              sizeof(T) == 2 ? "bf16" : "f32",
              sizeof(T) == 2 ? mt::attn::bf16_path_name(mt::attn::bf16_path()) : "fp32",
              omp_get_max_threads(), iters);
  const double nt = omp_get_max_threads();
  auto line = [&](const char* what, double ms, double cpu, double flop) {
    std::printf("%-8s %8.2f ms wall %7.1f GFLOP/s | %8.2f ms cpu/thread %7.1f GFLOP/s\n", what, ms,
                flop / ms * 1e-6, cpu / nt, flop / (cpu / nt) * 1e-6);
  };
  line("forward", fwd, fwd_cpu, f_fwd);
  line("backward", bwd, bwd_cpu, f_bwd);
  line("total", fwd + bwd, fwd_cpu + bwd_cpu, f_fwd + f_bwd);
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

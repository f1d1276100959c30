#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <dnnl.hpp>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "kernels/cpu/gemm_skinny.h"

namespace mt {

namespace {

dnnl::memory::data_type to_dnnl(DType t) {
  return t == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<std::string, dnnl::matmul> cache;
  std::mutex mutex;
  int64_t created = 0;
};

Engine& engine() {
  static Engine e;
  return e;
}

std::string key_of(const GemmArgs& a) {
  return std::to_string(a.M) + ',' + std::to_string(a.N) + ',' + std::to_string(a.K) + ',' +
         std::to_string(a.trans_a) + std::to_string(a.trans_b) + ',' + std::to_string(a.lda) + ',' +
         std::to_string(a.ldb) + ',' + std::to_string(a.ldc) + ',' +
         std::to_string(int(a.ab_type)) + std::to_string(int(a.c_type)) + ',' +
         std::to_string(a.alpha) + ',' + std::to_string(a.accumulate);
}

dnnl::matmul make_primitive(const GemmArgs& a, Engine& e) {
  using dims = dnnl::memory::dims;
  auto ab = to_dnnl(a.ab_type);
  dnnl::memory::desc amd(dims{a.M, a.K}, ab, a.trans_a ? dims{1, a.lda} : dims{a.lda, 1});
  dnnl::memory::desc bmd(dims{a.K, a.N}, ab, a.trans_b ? dims{1, a.ldb} : dims{a.ldb, 1});
  dnnl::memory::desc cmd(dims{a.M, a.N}, to_dnnl(a.c_type), dims{a.ldc, 1});
  dnnl::primitive_attr attr;
  if (a.alpha != 1.0f) attr.set_output_scales(0, {a.alpha});
  if (a.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), attr, e.engine);
  ++e.created;
  return dnnl::matmul(pd);
}

// The sizes a dimension of n is cut into: a multiple of kLarge, a multiple of kSmall, the rest.
// oneDNN primitives are made per shape (JIT code, slow to create) and cached by it; a mixture of
// experts' GEMMs have as many rows as tokens chose the expert, a count that changes every step,
// which would make a primitive per count: slow, and a cache without bound. Cut this way a
// dimension takes at most three calls and about n / kLarge + 2 kLarge / kSmall shapes; the
// dense model's sizes (multiples of kLarge, or under kSmall) stay one call. The rows of a pass
// are M when A is not transposed (a layer's forward and input gradient: x or dy times W) and K
// when it is (a weight gradient, dy^T x); the other dimensions are the layer's, fixed, and are
// left whole.
constexpr int64_t kLarge = 256, kSmall = 16;
std::vector<int64_t> cached_sizes(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t unit : {kLarge, kSmall, int64_t(1)}) {
    const int64_t part = n / unit * unit;
    if (part > 0) out.push_back(part);
    n -= part;
  }
  return out;
}

void run_gemm(const GemmArgs& a);
bool widens(const GemmArgs& a);
bool direct_skinny(const GemmArgs& a);
void widened_gemm(const GemmArgs& a);

}  // namespace

void gemm(const GemmArgs& a) {
  MT_CHECK(a.M > 0 && a.N > 0 && a.K > 0, "gemm sizes must be positive");
  MT_CHECK(a.c_type == DType::f32 || a.ab_type == DType::bf16, "bf16 output needs bf16 inputs");
  if (direct_skinny(a)) return;
  // Widened before any cut: one f32 GEMM of any shape, so each operand is widened (and a
  // weight streamed) once, not once per piece.
  if (widens(a)) return widened_gemm(a);
  const int64_t ab = int64_t(dtype_size(a.ab_type)), c = int64_t(dtype_size(a.c_type));
  const std::vector<int64_t> ms = a.trans_a ? std::vector<int64_t>{a.M} : cached_sizes(a.M);
  const std::vector<int64_t> ks = a.trans_a ? cached_sizes(a.K) : std::vector<int64_t>{a.K};
  if (ms.size() == 1 && ks.size() == 1) return run_gemm(a);
  // Rows of C (and of op(A)) in pieces, each whole over K; then K in pieces, accumulated: every
  // element of C is one sum over K either way, only the order of its partial sums may differ.
  int64_t m0 = 0;
  for (int64_t m : ms) {
    int64_t k0 = 0;
    for (int64_t k : ks) {
      GemmArgs p = a;
      p.M = m, p.K = k;
      p.A = static_cast<const char*>(a.A) + ab * (a.trans_a ? k0 * a.lda + m0 : m0 * a.lda + k0);
      p.B = static_cast<const char*>(a.B) + ab * (a.trans_b ? k0 : k0 * a.ldb);
      p.C = static_cast<char*>(a.C) + c * m0 * a.ldc;
      p.accumulate = a.accumulate || k0 > 0;
      run_gemm(p);
      k0 += k;
    }
    m0 += m;
  }
}

namespace {

// Whether oneDNN has a bf16 matmul on this CPU: it needs AVX-512 (oneDNN 2.6 makes none on an
// AVX2-only x86, such as an AMD EPYC of the Zen 2/3 generations). Asked once, by making one.
bool bf16_matmul_available(Engine& e) {
  static const bool available = [&] {
    GemmArgs probe;
    probe.M = probe.N = probe.K = 16;
    probe.lda = probe.ldb = probe.ldc = 16;
    probe.ab_type = DType::bf16;
    try {
      make_primitive(probe, e);
      --e.created;  // a probe, not a primitive of the run's (gemm_primitives_created)
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

// The stored block of an operand, `rows` x `cols` with leading dimension ld, widened to a packed
// f32 copy (exact: every bf16 is a float). Only a block of 4M elements or more (a dense layer's
// weight or a 2048-token input) is split over the threads: an expert's 1.5M-element weight stays on
// one, since every parallel region waits for all the threads, and on a loaded machine for one
// descheduled; two more regions a product made a mixture of experts' products 3x slower at load 12
// (docs/benchmarks.md, "On an AVX2 machine").
constexpr int64_t kParallelWidening = int64_t(1) << 22;
const float* widened(std::vector<float>& out, const void* src, int64_t rows, int64_t cols, int64_t ld) {
  out.resize(size_t(rows * cols));
  const bf16* s = static_cast<const bf16*>(src);
  float* d = out.data();
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelWidening)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d[r * cols + c] = to_float(s[r * ld + c]);
  return d;
}

// A bf16 GEMM where oneDNN has none: the operands widened to f32 and one f32 GEMM, which
// accumulates in f32 as oneDNN's bf16 GEMM does (only the order of the partial sums may differ);
// a bf16 output is accumulated in f32 and rounded once, as there. The f32 GEMM is oneDNN's
// sgemm, which takes its sizes at run time: a mixture of experts' row counts, which change every
// step, need neither a primitive each nor the cut into cached sizes (which widened and streamed
// an expert's weight once per piece: a 137-row product took two passes over it).
// a's product in f32 by oneDNN's sgemm (sizes at run time; one thread inside a parallel region),
// on the given operands, which may be a's own or widened copies of them.
void sgemm(const GemmArgs& a, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  const dnnl_status_t st = dnnl_sgemm(a.trans_a ? 'T' : 'N', a.trans_b ? 'T' : 'N', a.M, a.N, a.K, a.alpha, A, lda, B,
                                      ldb, a.accumulate ? 1.0f : 0.0f, C, ldc);
  MT_CHECK(st == dnnl_success, "oneDNN sgemm failed");
}

struct WidenedScratch {
  std::vector<float> a, b, c;
};
thread_local WidenedScratch widened_scratch;

void widened_gemm(const GemmArgs& a) {
  std::vector<float>& wa = widened_scratch.a;
  std::vector<float>& wb = widened_scratch.b;
  std::vector<float>& wc = widened_scratch.c;
  const int64_t a_cols = a.trans_a ? a.M : a.K, b_cols = a.trans_b ? a.K : a.N;
  const float* A = widened(wa, a.A, a.trans_a ? a.K : a.M, a_cols, a.lda);
  const float* B = widened(wb, a.B, a.trans_b ? a.N : a.K, b_cols, a.ldb);
  float* C = static_cast<float*>(a.C);
  int64_t ldc = a.ldc;
  if (a.c_type == DType::bf16) {
    if (a.accumulate) widened(wc, a.C, a.M, a.N, a.ldc);
    else wc.resize(size_t(a.M * a.N));
    C = wc.data(), ldc = a.N;
  }
  sgemm(a, A, a_cols, B, b_cols, C, ldc);
  if (a.c_type == DType::f32) return;
  bf16* c = static_cast<bf16*>(a.C);
#pragma omp parallel for schedule(static) if (a.M * a.N >= kParallelWidening)
  for (int64_t r = 0; r < a.M; ++r)
    for (int64_t j = 0; j < a.N; ++j) c[r * a.ldc + j] = float_to_bf16(wc[size_t(r * a.N + j)]);
}

std::atomic<bool> forced_widening{false};

bool widens(const GemmArgs& a) {
  return a.ab_type == DType::bf16 && (forced_widening || !bf16_matmul_available(engine()));
}

// A skinny product (a LoRA adapter's: gemm_skinny.h) by the direct kernels, where oneDNN would run
// it as an f32 sgemm, widened or not; a native bf16 matmul (AVX-512, AMX) keeps it. Returns
// whether it ran.
bool direct_skinny(const GemmArgs& a) { return (a.ab_type == DType::f32 || widens(a)) && skinny_gemm(a); }

void run_gemm(const GemmArgs& a) {
  Engine& e = engine();
  dnnl::matmul* prim;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    std::string key = key_of(a);
    auto it = e.cache.find(key);
    if (it == e.cache.end()) it = e.cache.emplace(key, make_primitive(a, e)).first;
    prim = &it->second;
  }
  auto pd = prim->get_primitive_desc();
  dnnl::matmul::primitive_desc mpd(const_cast<dnnl_primitive_desc_t>(pd));
  dnnl::memory A(mpd.src_desc(), e.engine, const_cast<void*>(a.A));
  dnnl::memory B(mpd.weights_desc(), e.engine, const_cast<void*>(a.B));
  dnnl::memory C(mpd.dst_desc(), e.engine, a.C);
  prim->execute(e.stream, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
  e.stream.wait();
}

// A product on the calling thread alone: oneDNN's sgemm runs on one thread inside a parallel
// region, and so do widened()'s loops (a nested region of one).
void one_thread_gemm(const GemmArgs& a) {
  MT_CHECK(a.M > 0 && a.N > 0 && a.K > 0, "gemm sizes must be positive");
  if (direct_skinny(a)) return;
  if (a.ab_type == DType::bf16) return widened_gemm(a);
  sgemm(a, static_cast<const float*>(a.A), a.lda, static_cast<const float*>(a.B), a.ldb, static_cast<float*>(a.C), a.ldc);
}

}  // namespace

void gemm_group(std::span<const GemmArgs> group) {
  const bool side_by_side = group.size() > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() &&
                            std::all_of(group.begin(), group.end(), [](const GemmArgs& a) {
                              return a.ab_type == DType::f32 || widens(a);
                            });
  if (!side_by_side) {
    for (const GemmArgs& a : group) gemm(a);
    return;
  }
  // Largest first, so that the last products to start are the small ones and the threads finish
  // together (the order changes no result: each product is whole on one thread).
  std::vector<size_t> order(group.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto work = [&](size_t i) { return double(group[i].M) * double(group[i].N) * double(group[i].K); };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return work(x) > work(y); });
  std::exception_ptr failed;  // an exception must not leave the parallel region
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < order.size(); ++i) {
    try {
      one_thread_gemm(group[order[i]]);
    } catch (...) {
#pragma omp critical(mt_gemm_group_failure)
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
}

int64_t gemm_primitives_created() { return engine().created; }

bool bf16_gemm_native() { return bf16_matmul_available(engine()) && !forced_widening; }
void force_widened_bf16_gemm(bool on) { forced_widening = on; }
void release_widened_gemm_scratch() {
  // gemm_group widens on every OpenMP thread, and the runtime keeps its threads: each frees its own.
#pragma omp parallel
  {
    widened_scratch = {};
    release_skinny_gemm_scratch();
  }
}

template <class T>
void linear_forward(T* y, const T* x, const T* w, int64_t M, int64_t out, int64_t in, float alpha,
                    bool accumulate) {
  GemmArgs g;
  g.M = M, g.N = out, g.K = in;
  g.A = x, g.lda = in;
  g.B = w, g.ldb = in, g.trans_b = true;
  g.C = y, g.ldc = out;
  g.ab_type = g.c_type = dtype_of<T>();
  g.alpha = alpha, g.accumulate = accumulate;
  gemm(g);
}

template <class T>
void linear_backward_input(T* dx, const T* dy, const T* w, int64_t M, int64_t out, int64_t in,
                           float alpha, bool accumulate) {
  GemmArgs g;
  g.M = M, g.N = in, g.K = out;
  g.A = dy, g.lda = out;
  g.B = w, g.ldb = in;
  g.C = dx, g.ldc = in;
  g.ab_type = g.c_type = dtype_of<T>();
  g.alpha = alpha, g.accumulate = accumulate;
  gemm(g);
}

template <class T>
void linear_backward_weight(float* dw, const T* dy, const T* x, int64_t M, int64_t out, int64_t in,
                            float alpha) {
  GemmArgs g;
  g.M = out, g.N = in, g.K = M;
  g.A = dy, g.lda = out, g.trans_a = true;
  g.B = x, g.ldb = in;
  g.C = dw, g.ldc = in;
  g.ab_type = dtype_of<T>();
  g.c_type = DType::f32;
  g.alpha = alpha, g.accumulate = true;
  gemm(g);
}

#define MT_INSTANTIATE(T)                                                                     \
  template void linear_forward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, float,   \
                                  bool);                                                      \
  template void linear_backward_input<T>(T*, const T*, const T*, int64_t, int64_t, int64_t,   \
                                         float, bool);                                        \
  template void linear_backward_weight<T>(float*, const T*, const T*, int64_t, int64_t,       \
                                          int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt

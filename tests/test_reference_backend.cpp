// The reference backend (plain loops, double accumulation) as the oracle of the other backends
// (the CPU always, CUDA when built and a GPU is present: available_backends.h): every op runs on
// the backend under test and on the reference from the same inputs and the results are compared,
// f32 to a tight relative tolerance and bf16 to a few bf16 ulps. The reference's own backward ops are checked
// against central finite differences of its forward ops, so the oracle does not rest on itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "available_backends.h"
#include "backend/device_buffer.h"
#include "backend_tensors.h"
#include "backend/reference_backend.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/rope_frequencies.h"
#include "finite_diff.h"

namespace mt {
namespace {

using Vec = std::vector<float>;
using test::random_normal;

// Tolerances, relative to an element's expected value plus the same fraction of the tensor's
// largest magnitude (a sum of terms of mixed signs may cancel to far below its terms).
constexpr double kF32 = 1e-5;        // f32 results: a few float roundings over long sums
constexpr double kBf16 = 3.0 / 256;  // bf16 results: three ulps (an ulp is 2^-8 .. 2^-7 relative)
double tol(DType t) { return t == DType::bf16 ? kBf16 : kF32; }

// One side of a comparison: the backend under test, or the reference.
using Side = test::BackendTensors;
using test::expect_close;

void expect_equal(const Vec& actual, const Vec& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << what << " [" << i << "]";
}

std::vector<int32_t> random_ints(size_t n, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

const char* dname(DType t) { return dtype_name(t); }

// ---- each available backend against the reference --------------------------------------------

// The backend under test is the parameter; one that this build or machine lacks is skipped, the
// skip message saying why.
class BackendOps : public test::BackendParamTest {};

TEST_P(BackendOps, MatmulMatchesReference) {
  const int64_t M = 37, N = 23, K = 129;
  for (DType ab : {DType::f32, DType::bf16})
    for (DType ct : {DType::f32, ab})
      for (int trans = 0; trans < 4; ++trans)
        for (bool acc : {false, true}) {
          const bool ta = trans & 1, tb = trans & 2;
          const Vec a = random_normal(M * K, 1), b = random_normal(K * N, 2),
                    c = random_normal(M * N, 3);
          Vec res[2];
          int s = 0;
          for (Backend* be : {&tested(), &reference_backend()}) {
            Side side(*be);
            Tensor A = side.make(ab, ta ? K : M, ta ? M : K, a);
            Tensor B = side.make(ab, tb ? N : K, tb ? K : N, b);
            Tensor C = side.make(ct, M, N, c);
            be->matmul(C, A, ta, B, tb, 0.5f, acc);
            res[s++] = side.get(C);
          }
          expect_close(res[0], res[1], tol(ct),
                       std::string("matmul ") + dname(ab) + "->" + dname(ct) + " ta " +
                           std::to_string(ta) + " tb " + std::to_string(tb) + " acc " +
                           std::to_string(acc));
        }
}

struct AttnCase {
  AttentionDims d;
  bool segments;
};

// Two documents per row, split at a row-dependent point (so rows differ).
std::vector<int32_t> two_documents(const AttentionDims& d) {
  std::vector<int32_t> seg(size_t(d.B * d.T));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < d.T; ++t) seg[size_t(b * d.T + t)] = t < (d.T / 3 + 5 * b) ? 7 : 9;
  return seg;
}

TEST_P(BackendOps, AttentionMatchesReference) {
  // GQA (Hq != Hkv), rows longer than one 64-key tile, head sizes not a power of two.
  // Sliding windows: narrower than a tile (whole tiles skipped), with and without documents.
  const AttnCase cases[] = {{{2, 37, 4, 2, 16}, true}, {{1, 70, 3, 1, 24}, false},
                            {{2, 19, 2, 2, 8}, true},   {{1, 150, 4, 2, 8, 40}, false},
                            {{2, 70, 4, 2, 8, 9}, true}};
  for (const AttnCase& c : cases)
    for (DType dt : {DType::f32, DType::bf16}) {
      const AttentionDims& d = c.d;
      const int64_t N = d.B * d.T;
      const Vec q = random_normal(N * d.Hq * d.D, 11), k = random_normal(N * d.Hkv * d.D, 12),
                v = random_normal(N * d.Hkv * d.D, 13), dout = random_normal(N * d.Hq * d.D, 14);
      const std::vector<int32_t> seg = two_documents(d);
      Vec out[2], lse[2], dq[2], dk[2], dv[2];
      int s = 0;
      for (Backend* be : {&tested(), &reference_backend()}) {
        Side side(*be);
        Tensor Q = side.make(dt, N, d.Hq * d.D, q), K = side.make(dt, N, d.Hkv * d.D, k);
        Tensor V = side.make(dt, N, d.Hkv * d.D, v), dO = side.make(dt, N, d.Hq * d.D, dout);
        Tensor O = side.make(dt, N, d.Hq * d.D), L = side.make(DType::f32, 1, N * d.Hq);
        Tensor dQ = side.make(dt, N, d.Hq * d.D), dK = side.make(dt, N, d.Hkv * d.D);
        Tensor dV = side.make(dt, N, d.Hkv * d.D);
        Tensor S = c.segments ? side.make_i32(seg) : Tensor{};
        be->attention_forward(O, L, Q, K, V, S, d);
        be->attention_backward(dQ, dK, dV, dO, O, L, Q, K, V, S, d);
        out[s] = side.get(O), lse[s] = side.get(L);
        dq[s] = side.get(dQ), dk[s] = side.get(dK), dv[s] = side.get(dV);
        ++s;
      }
      // The CPU and CUDA kernels keep lse as [B, Hq, T] (kernels/cpu/attention.h,
      // kernels/cuda/attention.h), the reference [B, T, Hq].
      Vec tested_lse(lse[0].size());
      for (int64_t b = 0; b < d.B; ++b)
        for (int64_t t = 0; t < d.T; ++t)
          for (int64_t h = 0; h < d.Hq; ++h)
            tested_lse[size_t((b * d.T + t) * d.Hq + h)] = lse[0][size_t((b * d.Hq + h) * d.T + t)];
      const std::string what = std::string("attention ") + dname(dt) + " T " +
                               std::to_string(d.T) + (c.segments ? " segments" : "") +
                               " window " + std::to_string(d.window);
      expect_close(out[0], out[1], tol(dt), what + " out");
      expect_close(tested_lse, lse[1], 1e-5, what + " lse");
      expect_close(dq[0], dq[1], tol(dt), what + " dq");
      expect_close(dk[0], dk[1], tol(dt), what + " dk");
      expect_close(dv[0], dv[1], tol(dt), what + " dv");
    }
}

// bf16 keys with f32 key and value gradients (backend.h: context parallelism sums the ranks'
// partial gradients of the whole rows' keys before rounding them once). The f32 gradients are the
// sums the bf16 form rounds: each rounds to exactly the bf16 run's element, and most are not bf16
// values themselves; dq is the bf16 run's, bit for bit; both agree with the reference's f32
// gradients from the same bf16 inputs. Whole rows (cp = 1) and a cp rank's queries over the whole
// sequence (cp = 2, rank 1, two documents).
TEST_P(BackendOps, AttentionKeyGradientsInF32FromBf16Keys) {
  AttentionDims whole{2, 70, 4, 2, 16};
  AttentionDims share{2, 36, 4, 2, 8};
  share.cp = 2, share.cp_rank = 1;
  for (const AttentionDims& d : {whole, share}) {
    const int64_t N = d.B * d.T, Nk = d.B * d.keys(), qw = d.Hq * d.D, kw = d.Hkv * d.D;
    const Vec q = random_normal(N * qw, 31), k = random_normal(Nk * kw, 32), v = random_normal(Nk * kw, 33),
              dout = random_normal(N * qw, 34);
    std::vector<int32_t> seg(static_cast<size_t>(Nk));
    for (int64_t i = 0; i < Nk; ++i) seg[size_t(i)] = i % d.keys() < d.keys() / 3 + 1 ? 7 : 9;
    Vec dq[3], dk[3], dv[3];  // tested bf16 gradients, tested f32 dk / dv, reference f32 dk / dv
    int s = 0;
    for (Backend* be : {&tested(), &tested(), &reference_backend()}) {
      Side side(*be);
      const DType gt = s == 0 ? DType::bf16 : DType::f32;
      Tensor Q = side.make(DType::bf16, N, qw, q), K = side.make(DType::bf16, Nk, kw, k);
      Tensor V = side.make(DType::bf16, Nk, kw, v), dO = side.make(DType::bf16, N, qw, dout);
      Tensor O = side.make(DType::bf16, N, qw), L = side.make(DType::f32, 1, N * d.Hq);
      Tensor dQ = side.make(DType::bf16, N, qw), dK = side.make(gt, Nk, kw), dV = side.make(gt, Nk, kw);
      const Tensor S = side.make_i32(seg);
      be->attention_forward(O, L, Q, K, V, S, d);
      be->attention_backward(dQ, dK, dV, dO, O, L, Q, K, V, S, d);
      dq[s] = side.get(dQ), dk[s] = side.get(dK), dv[s] = side.get(dV);
      ++s;
    }
    const std::string what = "attention f32 key gradients, cp " + std::to_string(d.cp);
    expect_equal(dq[1], dq[0], what + " dq");
    for (Vec* g : {dk, dv}) {
      int64_t unrounded = 0;
      for (size_t i = 0; i < g[0].size(); ++i) {
        ASSERT_EQ(to_float(float_to_bf16(g[1][i])), g[0][i]) << what << " [" << i << "]";
        unrounded += to_float(float_to_bf16(g[1][i])) != g[1][i];
      }
      EXPECT_GT(unrounded, int64_t(g[0].size()) / 2) << what << ": the f32 gradients were rounded to bf16";
      expect_close(g[1], g[2], tol(DType::bf16), what + (g == dk ? " dk" : " dv"));
    }
  }
}

// LoRA dropout on a context-parallel share (DropoutMask::cp): the same elements kept and scaled
// as the reference keeps, whose masks tests/test_lora_dropout.cpp checks against the whole rows.
TEST_P(BackendOps, DropoutOfAContextParallelShareMatchesReference) {
  const int64_t rows = 3 * 12, cols = 40;  // three sequences' shares of 12 tokens
  const Vec x = random_normal(rows * cols, 41), y0 = random_normal(rows * cols, 42);
  const DropoutMask m{.key = 5, .p = 0.3f, .row0 = 12, .col0 = 7, .cp = 3, .cp_rank = 1, .share_len = 12};
  for (bool accumulate : {false, true}) {
    Vec y[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor X = side.make(DType::f32, rows, cols, x), Y = side.make(DType::f32, rows, cols, y0);
      be->dropout(Y, X, m, accumulate);
      y[s++] = side.get(Y);
    }
    expect_close(y[0], y[1], kF32, std::string("cp dropout accumulate ") + (accumulate ? "on" : "off"));
  }
}

TEST_P(BackendOps, DecodeAttentionMatchesReference) {
  // A short cache, and one long enough that the CUDA kernel splits it into three key ranges
  // (kernels/cuda/decode_attention.h) merged afterwards.
  const int64_t Hq = 6, Hkv = 2, D = 12, cache_rows = 720;
  for (const int64_t len : {int64_t(13), int64_t(700)})
  for (DType dt : {DType::f32, DType::bf16}) {
    const Vec q = random_normal(Hq * D, 21), kc = random_normal(cache_rows * Hkv * D, 22),
              vc = random_normal(cache_rows * Hkv * D, 23);
    Vec out[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor Q = side.make(dt, 1, Hq * D, q), O = side.make(dt, 1, Hq * D);
      Tensor K = side.make(DType::f32, cache_rows, Hkv * D, kc);
      Tensor V = side.make(DType::f32, cache_rows, Hkv * D, vc);
      be->decode_attention(O, Q, K, V, len, Hq, Hkv);
      out[s++] = side.get(O);
    }
    expect_close(out[0], out[1], tol(dt), std::string("decode attention ") + dname(dt) + " over " +
                                              std::to_string(len) + " keys");
  }
}

TEST_P(BackendOps, RmsNormMatchesReference) {
  const int64_t N = 7, C = 45;
  const Vec x = random_normal(N * C, 31), w = random_normal(C, 32), g = random_normal(N * C, 33),
            dx0 = random_normal(N * C, 34), dw0 = random_normal(C, 35);
  for (DType dt : {DType::f32, DType::bf16})
    for (bool frozen : {false, true}) {
      Vec out[2], rstd[2], dx[2], dw[2];
      int s = 0;
      for (Backend* be : {&tested(), &reference_backend()}) {
        Side side(*be);
        Tensor X = side.make(DType::f32, N, C, x), W = side.make(DType::f32, 1, C, w);
        Tensor O = side.make(dt, N, C), R = side.make(DType::f32, 1, N);
        Tensor G = side.make(dt, N, C, g), dX = side.make(DType::f32, N, C, dx0);
        Tensor dW = frozen ? Tensor{} : side.make(DType::f32, 1, C, dw0);
        be->rmsnorm_forward(O, R, X, W, 1e-5f);
        be->rmsnorm_backward(dX, dW, G, X, W, R);  // accumulates onto dx0 and dw0
        out[s] = side.get(O), rstd[s] = side.get(R), dx[s] = side.get(dX);
        if (!frozen) dw[s] = side.get(dW);
        ++s;
      }
      const std::string what = std::string("rmsnorm ") + dname(dt);
      expect_close(out[0], out[1], tol(dt), what + " out");
      expect_close(rstd[0], rstd[1], kF32, what + " rstd");
      expect_close(dx[0], dx[1], kF32, what + " dx");  // f32 gradient whatever dout's dtype
      expect_close(dw[0], dw[1], kF32, what + " dw");
    }
}

// The columns of each row split over two devices (OLMoE's whole-projection q/k norm under tensor
// parallelism): each half's partial row dots, summed between the halves as reduce_sum would, then
// the summed forms give the unsplit reference norm's output, rstd and gradients (the reference's
// own backward is checked against finite differences below).
TEST_P(BackendOps, SplitRmsNormMatchesTheWholeRowsReference) {
  const int64_t N = 7, C = 45, halves[2] = {20, 25};  // uneven halves: the width, not a half's, is the mean's
  const Vec x = random_normal(N * C, 131), w = random_normal(C, 132), g = random_normal(N * C, 133),
            dx0 = random_normal(N * C, 134), dw0 = random_normal(C, 135);
  auto columns = [&](const Vec& v, int64_t rows, int64_t first, int64_t cols) {
    Vec out;
    for (int64_t n = 0; n < rows; ++n)
      out.insert(out.end(), v.begin() + n * C + first, v.begin() + n * C + first + cols);
    return out;
  };
  auto place = [&](Vec& whole, const Vec& part, int64_t rows, int64_t first, int64_t cols) {
    for (int64_t n = 0; n < rows; ++n)
      std::copy(part.begin() + n * cols, part.begin() + (n + 1) * cols, whole.begin() + n * C + first);
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (bool frozen : {false, true}) {
      // The whole rows on the reference.
      Side ref(reference_backend());
      Tensor X = ref.make(DType::f32, N, C, x), W = ref.make(DType::f32, 1, C, w);
      Tensor O = ref.make(dt, N, C), R = ref.make(DType::f32, 1, N);
      Tensor G = ref.make(dt, N, C, g), dX = ref.make(DType::f32, N, C, dx0);
      Tensor dW = frozen ? Tensor{} : ref.make(DType::f32, 1, C, dw0);
      reference_backend().rmsnorm_forward(O, R, X, W, 1e-5f, 0.5f);
      reference_backend().rmsnorm_backward(dX, dW, G, X, W, R, 0.5f);
      const Vec g_rounded = ref.get(G);  // bf16's dout as the halves receive it
      for (Backend* be : {&tested(), &reference_backend()}) {
        Side side(*be);
        Tensor parts_x[2], parts_w[2], parts_r[2], parts_g[2];
        Vec sums(size_t(N), 0.0f), dots(size_t(N), 0.0f);
        int64_t first = 0;
        for (int h = 0; h < 2; ++h) {
          const int64_t c = halves[h];
          parts_x[h] = side.make(DType::f32, N, c, columns(x, N, first, c));
          parts_w[h] = side.make(DType::f32, 1, c, columns(w, 1, first, c));
          parts_g[h] = side.make(dt, N, c, columns(g_rounded, N, first, c));
          parts_r[h] = side.make(DType::f32, 1, N);
          be->rmsnorm_row_dots(parts_r[h], parts_x[h], parts_x[h], Tensor{});
          Tensor D = side.make(DType::f32, 1, N);
          be->rmsnorm_row_dots(D, parts_x[h], parts_g[h], parts_w[h], 0.5f);
          const Vec s = side.get(parts_r[h]), d = side.get(D);
          for (int64_t n = 0; n < N; ++n) sums[size_t(n)] += s[size_t(n)], dots[size_t(n)] += d[size_t(n)];
          first += c;
        }
        Vec out(static_cast<size_t>(N * C)), dx(static_cast<size_t>(N * C)), dw(static_cast<size_t>(C)), rstd;
        first = 0;
        for (int h = 0; h < 2; ++h) {
          const int64_t c = halves[h];
          Tensor R2 = side.make(DType::f32, 1, N, sums), D = side.make(DType::f32, 1, N, dots);
          Tensor O2 = side.make(dt, N, c), dX2 = side.make(DType::f32, N, c, columns(dx0, N, first, c));
          Tensor dW2 = frozen ? Tensor{} : side.make(DType::f32, 1, c, columns(dw0, 1, first, c));
          be->rmsnorm_forward_summed(O2, R2, parts_x[h], parts_w[h], C, 1e-5f, 0.5f);
          be->rmsnorm_backward_summed(dX2, dW2, parts_g[h], parts_x[h], parts_w[h], R2, D, C, 0.5f);
          place(out, side.get(O2), N, first, c);
          place(dx, side.get(dX2), N, first, c);
          if (!frozen) place(dw, side.get(dW2), 1, first, c);
          rstd = side.get(R2);
          first += c;
        }
        const std::string what = std::string("split rmsnorm on ") + be->name() + " " + dname(dt);
        expect_close(out, ref.get(O), tol(dt), what + " out");
        expect_close(rstd, ref.get(R), kF32, what + " rstd");
        expect_close(dx, ref.get(dX), kF32, what + " dx");
        if (!frozen) expect_close(dw, ref.get(dW), kF32, what + " dw");
      }
    }
}

TEST_P(BackendOps, RopeMatchesReference) {
  const int64_t N = 9, heads = 3, D = 10, max_pos = 32;  // D/2 = 5: no power of two
  Vec cos(size_t(max_pos * D / 2)), sin(cos.size());
  rope_tables(cos.data(), sin.data(), max_pos, D, 10000.0f, {});
  const std::vector<int32_t> pos = random_ints(N, 0, max_pos - 1, 41);
  const Vec x = random_normal(N * heads * D, 42);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec fwd[2], bwd[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor X = side.make(dt, N, heads * D, x), P = side.make_i32(pos);
      Tensor Cs = side.make(DType::f32, max_pos, D / 2, cos);
      Tensor Sn = side.make(DType::f32, max_pos, D / 2, sin);
      be->rope_forward(X, Cs, Sn, P, heads);
      fwd[s] = side.get(X);
      be->rope_backward(X, Cs, Sn, P, heads);  // the inverse rotation: back to x
      bwd[s++] = side.get(X);
    }
    const std::string what = std::string("rope ") + dname(dt);
    expect_close(fwd[0], fwd[1], tol(dt), what + " forward");
    expect_close(bwd[0], bwd[1], tol(dt), what + " backward");
    Vec xr = x;
    if (dt == DType::bf16)
      for (float& e : xr) e = to_float(float_to_bf16(e));
    expect_close(bwd[1], xr, 2 * tol(dt), what + " backward undoes forward");
  }
}

TEST_P(BackendOps, SwiGluMatchesReference) {
  const int64_t R = 13, C = 29;
  const Vec g = random_normal(R * C, 51, 2.0f), u = random_normal(R * C, 52),
            dh = random_normal(R * C, 53);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec h[2], dg[2], du[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor G = side.make(dt, R, C, g), U = side.make(dt, R, C, u), dH = side.make(dt, R, C, dh);
      Tensor H = side.make(dt, R, C), dG = side.make(dt, R, C), dU = side.make(dt, R, C);
      be->swiglu_forward(H, G, U);
      be->swiglu_backward(dG, dU, dH, G, U);
      h[s] = side.get(H), dg[s] = side.get(dG), du[s++] = side.get(dU);
    }
    const std::string what = std::string("swiglu ") + dname(dt);
    expect_close(h[0], h[1], tol(dt), what + " h");
    expect_close(dg[0], dg[1], tol(dt), what + " dgate");
    expect_close(du[0], du[1], tol(dt), what + " dup");
  }
}

TEST_P(BackendOps, LayerNormMatchesReference) {
  // Rows enough to thread the CPU kernel (N * C above its threshold), C not a power of two; x
  // off-centre so the mean matters.
  for (auto [N, C] : {std::pair<int64_t, int64_t>{7, 45}, {70, 515}}) {
    Vec x = random_normal(N * C, 36, 2.0f);
    for (float& v : x) v += 1.5f;
    const Vec w = random_normal(C, 37), b = random_normal(C, 38), g = random_normal(N * C, 39),
              dx0 = random_normal(N * C, 40), dw0 = random_normal(C, 41), db0 = random_normal(C, 42);
    for (DType dt : {DType::f32, DType::bf16})
      for (bool frozen : {false, true}) {
        Vec out[2], mean[2], rstd[2], dx[2], dw[2], db[2];
        int s = 0;
        for (Backend* be : {&tested(), &reference_backend()}) {
          Side side(*be);
          Tensor X = side.make(DType::f32, N, C, x), W = side.make(DType::f32, 1, C, w);
          Tensor B = side.make(DType::f32, 1, C, b);
          Tensor O = side.make(dt, N, C), M = side.make(DType::f32, 1, N), R = side.make(DType::f32, 1, N);
          Tensor G = side.make(dt, N, C, g), dX = side.make(DType::f32, N, C, dx0);
          Tensor dW = frozen ? Tensor{} : side.make(DType::f32, 1, C, dw0);
          Tensor dB = frozen ? Tensor{} : side.make(DType::f32, 1, C, db0);
          be->layernorm_forward(O, M, R, X, W, B, 1e-5f);
          be->layernorm_backward(dX, dW, dB, G, X, W, M, R);  // accumulates onto dx0, dw0, db0
          out[s] = side.get(O), mean[s] = side.get(M), rstd[s] = side.get(R), dx[s] = side.get(dX);
          if (!frozen) dw[s] = side.get(dW), db[s] = side.get(dB);
          ++s;
        }
        const std::string what = "layernorm " + std::to_string(N) + "x" + std::to_string(C) + " " + dname(dt);
        expect_close(out[0], out[1], tol(dt), what + " out");
        expect_close(mean[0], mean[1], kF32, what + " mean");
        expect_close(rstd[0], rstd[1], kF32, what + " rstd");
        expect_close(dx[0], dx[1], kF32, what + " dx");  // f32 gradient whatever dout's dtype
        expect_close(dw[0], dw[1], kF32, what + " dw");
        expect_close(db[0], db[1], kF32, what + " db");
      }
  }
}

TEST_P(BackendOps, GeluMatchesReference) {
  const int64_t R = 13, C = 29;
  const Vec x = random_normal(R * C, 56, 2.5f), dh = random_normal(R * C, 57);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec h[2], dx[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor X = side.make(dt, R, C, x), dH = side.make(dt, R, C, dh);
      Tensor H = side.make(dt, R, C), dX = side.make(dt, R, C);
      be->gelu_forward(H, X);
      be->gelu_backward(dX, dH, X);
      h[s] = side.get(H), dx[s++] = side.get(dX);
    }
    const std::string what = std::string("gelu ") + dname(dt);
    expect_close(h[0], h[1], tol(dt), what + " h");
    expect_close(dx[0], dx[1], tol(dt), what + " dx");
  }
}

TEST_P(BackendOps, BiasMatchesReference) {
  // More columns than one 256-column strip of the CPU backward, rows enough to thread it.
  const int64_t R = 300, C = 333;
  const Vec y = random_normal(R * C, 61), b = random_normal(C, 62), dy = random_normal(R * C, 63),
            db = random_normal(C, 64);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec out[2], grad[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor Y = side.make(dt, R, C, y), dY = side.make(dt, R, C, dy);
      Tensor B = side.make(DType::f32, 1, C, b), dB = side.make(DType::f32, 1, C, db);
      be->bias_add(Y, B);
      be->bias_backward(dB, dY);  // accumulates onto db's values
      out[s] = side.get(Y), grad[s++] = side.get(dB);
    }
    const std::string what = std::string("bias ") + dname(dt);
    expect_close(out[0], out[1], tol(dt), what + " y");
    expect_close(grad[0], grad[1], kF32, what + " db");
  }
}

TEST_P(BackendOps, BiasBackwardIsDeterministic) {
  const int64_t R = 1000, C = 700;
  const Vec dy = random_normal(R * C, 65);
  Vec first;
  for (int run = 0; run < 2; ++run) {
    Side side(tested());
    Tensor dY = side.make(DType::f32, R, C, dy), dB = side.make(DType::f32, 1, C);
    tested().bias_backward(dB, dY);
    if (run == 0) first = side.get(dB);
    else expect_equal(side.get(dB), first, "bias backward, second run");
  }
}

TEST(ReferenceBackend, BiasRejectsAWrongWidth) {
  Side side(reference_backend());
  Tensor Y = side.make(DType::f32, 3, 5), B = side.make(DType::f32, 1, 4);
  try {
    reference_backend().bias_add(Y, B);
    FAIL() << "a 4-element bias on 5 columns was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bias_add"), std::string::npos) << e.what();
  }
}

TEST_P(BackendOps, EmbeddingMatchesReference) {
  // The table holds vocabulary rows [5, 16) of a vocabulary of 21; tokens repeat.
  const int64_t N = 17, C = 19, row0 = 5, rows = 11;
  const std::vector<int32_t> tok = random_ints(N, 0, 20, 61);
  const Vec table = random_normal(rows * C, 62), dout = random_normal(N * C, 63),
            dtable0 = random_normal(rows * C, 64);
  Vec out[2], dtable[2];
  int s = 0;
  for (Backend* be : {&tested(), &reference_backend()}) {
    Side side(*be);
    Tensor T = side.make(DType::f32, rows, C, table), tk = side.make_i32(tok);
    Tensor O = side.make(DType::f32, N, C, random_normal(N * C, 65));  // overwritten
    Tensor dO = side.make(DType::f32, N, C, dout), dT = side.make(DType::f32, rows, C, dtable0);
    be->embedding_forward(O, tk, T, row0);
    be->embedding_backward(dT, tk, dO, row0);
    out[s] = side.get(O), dtable[s++] = side.get(dT);
  }
  expect_equal(out[0], out[1], "embedding forward");
  expect_close(dtable[0], dtable[1], kF32, "embedding backward");
  for (int64_t n = 0; n < N; ++n) {  // tokens outside the table give zero rows
    if (tok[size_t(n)] < row0 || tok[size_t(n)] >= row0 + rows) {
      EXPECT_EQ(out[1][size_t(n * C)], 0.0f) << n;
    }
  }
}

// A frozen embedding under bf16 keeps only its bf16 copy, which the lookup reads: rows widened
// exactly (equal to the reference's), zeros for tokens another device holds.
TEST_P(BackendOps, EmbeddingFromABf16TableMatchesReference) {
  const int64_t N = 17, C = 19, row0 = 5, rows = 11;
  const std::vector<int32_t> tok = random_ints(N, 0, 20, 71);
  const Vec table = random_normal(rows * C, 72);
  Vec out[2];
  int s = 0;
  for (Backend* be : {&tested(), &reference_backend()}) {
    Side side(*be);
    Tensor T = side.make(DType::bf16, rows, C, table), tk = side.make_i32(tok);
    Tensor O = side.make(DType::f32, N, C, random_normal(N * C, 73));  // overwritten
    be->embedding_forward(O, tk, T, row0);
    out[s++] = side.get(O);
  }
  expect_equal(out[0], out[1], "embedding forward from bf16");
  for (int64_t n = 0; n < N; ++n) {
    const int64_t r = tok[size_t(n)] - row0;
    const float want = r >= 0 && r < rows ? to_float(from_float<bf16>(table[size_t(r * C)])) : 0.0f;
    EXPECT_EQ(out[1][size_t(n * C)], want) << n;
  }
}

// Cross-entropy, whole rows and split over three devices' vocabulary slices (reductions done here).
struct CeResult {
  Vec losses, dlogits;
  double total;
};

CeResult cross_entropy_whole(Backend& be, DType dt, const Vec& x, const std::vector<int32_t>& t,
                             int64_t V, float scale, bool in_place) {
  Side side(be);
  const int64_t N = int64_t(t.size());
  Tensor X = side.make(dt, N, V, x), T = side.make_i32(t), L = side.make(DType::f32, 1, N);
  Tensor D = in_place ? X : side.make(dt, N, V);
  const double total = be.cross_entropy(L, D, X, T, scale);
  return {side.get(L), side.get(D), total};
}

CeResult cross_entropy_split(Backend& be, DType dt, const Vec& x, const std::vector<int32_t>& t,
                             int64_t V, float scale, const std::vector<int64_t>& cuts) {
  Side side(be);
  const int64_t N = int64_t(t.size());
  const Tensor T = side.make_i32(t);
  std::vector<Tensor> parts, maxes, sums;
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int64_t v0 = cuts[p], w = cuts[p + 1] - v0;
    Vec slice(size_t(N * w));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < w; ++c) slice[size_t(n * w + c)] = x[size_t(n * V + v0 + c)];
    parts.push_back(side.make(dt, N, w, slice));
    maxes.push_back(side.make(DType::f32, 1, N));
    sums.push_back(side.make(DType::f32, 1, 2 * N));
  }
  Vec m(size_t(N), -INFINITY), s(size_t(2 * N), 0.0f);
  for (size_t p = 0; p < parts.size(); ++p) {
    be.cross_entropy_row_max(maxes[p], parts[p], T);
    const Vec mp = side.get(maxes[p]);
    for (size_t n = 0; n < mp.size(); ++n) m[n] = std::max(m[n], mp[n]);
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    side.set(maxes[p], m);
    be.cross_entropy_row_sums(sums[p], parts[p], T, maxes[p], cuts[p]);
    const Vec sp = side.get(sums[p]);
    for (size_t i = 0; i < sp.size(); ++i) s[i] += sp[i];
  }
  CeResult r{{}, Vec(size_t(N * V)), 0.0};
  for (size_t p = 0; p < parts.size(); ++p) {
    side.set(sums[p], s);
    Tensor L = side.make(DType::f32, 1, N);
    r.total = be.cross_entropy_finish(L, parts[p], parts[p], T, maxes[p], sums[p], cuts[p], scale);
    r.losses = side.get(L);
    const Vec d = side.get(parts[p]);
    const int64_t v0 = cuts[p], w = cuts[p + 1] - v0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < w; ++c) r.dlogits[size_t(n * V + v0 + c)] = d[size_t(n * w + c)];
  }
  return r;
}

TEST_P(BackendOps, CrossEntropyMatchesReference) {
  const int64_t N = 9, V = 157;
  Vec x = random_normal(N * V, 71, 3.0f);
  x[size_t(4 * V + 100)] = 80.0f;  // a naive exp of this row would overflow f32
  const std::vector<int32_t> t = {3, -1, 156, 0, 100, 77, -5, 49, 50};  // two ignored rows
  const float scale = 0.3f;
  const std::vector<int64_t> cuts = {0, 50, 101, V};  // targets on every side of every cut
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string what = std::string("cross-entropy ") + dname(dt);
    const CeResult ref = cross_entropy_whole(reference_backend(), dt, x, t, V, scale, false);
    for (bool in_place : {false, true}) {
      const CeResult got = cross_entropy_whole(tested(), dt, x, t, V, scale, in_place);
      const CeResult ref2 = cross_entropy_whole(reference_backend(), dt, x, t, V, scale, in_place);
      expect_close(got.losses, ref.losses, kF32, what + " losses");
      expect_close(got.dlogits, ref.dlogits, tol(dt), what + " dlogits");
      expect_equal(ref2.dlogits, ref.dlogits, what + " in place");
      EXPECT_NEAR(got.total, ref.total, kF32 * ref.total) << what;
    }
    for (Backend* be : {&tested(), &reference_backend()}) {
      const CeResult vp = cross_entropy_split(*be, dt, x, t, V, scale, cuts);
      const std::string w = what + " vocabulary-parallel on " + be->name();
      expect_close(vp.losses, ref.losses, kF32, w + " losses");
      expect_close(vp.dlogits, ref.dlogits, tol(dt), w + " dlogits");
      EXPECT_NEAR(vp.total, ref.total, kF32 * ref.total) << w;
    }
    for (size_t n : {1, 6})
      EXPECT_EQ(ref.losses[n], 0.0f) << "ignored row " << n;
  }
}

TEST(ReferenceBackend, CrossEntropyRejectsTargetOutsideVocabulary) {
  Side side(reference_backend());
  Tensor X = side.make(DType::f32, 2, 5, random_normal(10, 72)), L = side.make(DType::f32, 1, 2);
  EXPECT_THROW(reference_backend().cross_entropy(L, {}, X, side.make_i32({1, 5}), 1.0f), Error);
}

TEST_P(BackendOps, ElementwiseAndLayoutMatchReference) {
  const int64_t R = 5, C = 27, n = R * C;
  const Vec x = random_normal(n, 81), delta = random_normal(n, 82, 0.1f);
  const std::vector<int64_t> widths = {4, 16, 7};
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec res[2], conv[2], back[2], sum[2], blocks[2][3], joined[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor X = side.make(DType::f32, R, C, x), dX = side.make(dt, R, C, delta);
      Tensor Y = side.make(DType::f32, R, C), Cv = side.make(dt, R, C);
      Tensor Bk = side.make(DType::f32, R, C);
      be->residual_add(Y, X, dX);
      be->convert(Cv, Y);   // f32 -> dt
      be->convert(Bk, Cv);  // and back to f32
      Tensor A = side.make(DType::f32, R, C, x);
      be->add(A, Y);
      res[s] = side.get(Y), conv[s] = side.get(Cv), back[s] = side.get(Bk), sum[s] = side.get(A);
      std::vector<Tensor> bt;
      for (int64_t w : widths) bt.push_back(side.make(dt, R, w));
      be->split_columns(dX, bt);
      for (size_t i = 0; i < bt.size(); ++i) blocks[s][i] = side.get(bt[i]);
      Tensor J = side.make(dt, R, C);
      be->concat_columns(J, bt);
      joined[s++] = side.get(J);
    }
    const std::string what = std::string(" ") + dname(dt);
    expect_close(res[0], res[1], kF32 / 4, "residual_add" + what);  // one rounding each
    expect_equal(conv[0], conv[1], "convert" + what);             // round to nearest even
    expect_equal(back[0], back[1], "convert back" + what);
    expect_close(sum[0], sum[1], kF32 / 4, "add" + what);
    for (size_t i = 0; i < widths.size(); ++i)
      expect_equal(blocks[0][i], blocks[1][i], "split" + what);
    expect_equal(joined[0], joined[1], "concat" + what);
    Vec dr = delta;
    if (dt == DType::bf16)
      for (float& e : dr) e = to_float(float_to_bf16(e));
    expect_equal(joined[1], dr, "concat undoes split" + what);
  }
}

TEST(ReferenceBackend, ConvertRoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between two bf16 values: the tie goes to the even one (1.0), a value
  // just above it goes up.
  const Vec x = {1.0f + 1.0f / 256, 1.0f + 1.0f / 256 + 1.0f / 65536, 1.0f + 3.0f / 256, -2.5f};
  Side side(reference_backend());
  Tensor X = side.make(DType::f32, 1, 4, x), H = side.make(DType::bf16, 1, 4);
  reference_backend().convert(H, X);
  expect_equal(side.get(H), {1.0f, 1.0f + 1.0f / 128, 1.0f + 4.0f / 256, -2.5f}, "bf16 rounding");
}

TEST_P(BackendOps, CopyBoxMatchesReference) {
  // A [6, 10, 4] tensor: src holds rows [1, 5) x cols [2, 10), dst [0, 6) x [0, 7); the region
  // [2, 5) x [3, 7) x [1, 3) is partial in every dimension.
  const TensorBox src_box{{1, 2, 0}, {5, 10, 4}}, dst_box{{0, 0, 0}, {6, 7, 4}};
  const TensorBox region{{2, 3, 1}, {5, 7, 3}};
  for (DType dt : {DType::f32, DType::bf16}) {
    const Vec src = random_normal(size_t(src_box.numel()), 91);
    const Vec dst0 = random_normal(size_t(dst_box.numel()), 92);
    Vec out[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor S = side.make(dt, 1, src_box.numel(), src);
      Tensor D = side.make(dt, 1, dst_box.numel(), dst0);
      be->copy_box(S, src_box, D, dst_box, region);
      out[s++] = side.get(D);
    }
    expect_equal(out[0], out[1], std::string("copy_box ") + dname(dt));
  }
  Side side(reference_backend());
  Tensor S = side.make(DType::f32, 1, src_box.numel());
  Tensor D = side.make(DType::f32, 1, dst_box.numel());
  const TensorBox outside{{0, 0, 0}, {2, 2, 2}};  // not within src_box
  EXPECT_THROW(reference_backend().copy_box(S, src_box, D, dst_box, outside), Error);
}

TEST_P(BackendOps, AdamWAndSumSquaresMatchReference) {
  const int64_t n = 1001;
  const Vec w = random_normal(n, 101), g = random_normal(n, 102), m = random_normal(n, 103, 0.1f);
  Vec v = random_normal(n, 104, 0.1f);
  for (float& e : v) e = e * e;
  const AdamWHyper h{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f};
  for (bool decay : {false, true}) {
    Vec W[2], W16[2], M[2], V[2];
    double ss[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      Tensor tw = side.make(DType::f32, 1, n, w), tg = side.make(DType::f32, 1, n, g);
      Tensor tm = side.make(DType::f32, 1, n, m), tv = side.make(DType::f32, 1, n, v);
      Tensor t16 = side.make(DType::bf16, 1, n);
      be->adamw_update(tw, t16, tg, tm, tv, decay, h);
      W[s] = side.get(tw), W16[s] = side.get(t16), M[s] = side.get(tm), V[s] = side.get(tv);
      ss[s++] = be->sum_squares(tg);
    }
    const std::string what = std::string("adamw decay ") + (decay ? "on" : "off");
    expect_close(W[0], W[1], 1e-6, what + " master");
    expect_close(M[0], M[1], 1e-6, what + " m");
    expect_close(V[0], V[1], 1e-6, what + " v");
    expect_close(W16[0], W16[1], kBf16, what + " master16");
    EXPECT_NEAR(ss[0], ss[1], 1e-6 * ss[1]) << "sum_squares";
  }
}

// ---- the reference's backward ops against finite differences of its forward ops -------------

// A loss L = sum(out * R) over one output, computed by the reference backend from host inputs.
using Forward = std::function<Vec(const Vec&)>;
double projected(const Forward& f, const Vec& x, const Vec& r) { return test::projection(f(x), r); }

// FD tolerances: f32 outputs of O(1) under a step of 1e-3 leave ~1e-4 of rounding noise.
constexpr double kFdRel = 2e-3, kFdAbs = 3e-4;

class ReferenceAttentionWindow : public ::testing::TestWithParam<int64_t> {};

// The causal form (window 0) and sliding windows of 1 and 3 keys, over two documents.
TEST_P(ReferenceAttentionWindow, BackwardMatchesFiniteDifferences) {
  const AttentionDims d{1, 6, 4, 2, 4, GetParam()};
  const int64_t N = d.B * d.T, nq = N * d.Hq * d.D, nk = N * d.Hkv * d.D;
  const std::vector<int32_t> seg = {0, 0, 0, 1, 1, 1};
  Vec in[3] = {random_normal(nq, 111), random_normal(nk, 112), random_normal(nk, 113)};
  const Vec r = random_normal(nq, 114);
  Backend& be = reference_backend();
  // out as a function of input `which` (q, k or v) with the other two fixed.
  auto forward = [&](int which) -> Forward {
    return [&, which](const Vec& x) {
      Side side(be);
      Vec a[3] = {in[0], in[1], in[2]};
      a[which] = x;
      Tensor Q = side.make(DType::f32, N, d.Hq * d.D, a[0]);
      Tensor K = side.make(DType::f32, N, d.Hkv * d.D, a[1]);
      Tensor V = side.make(DType::f32, N, d.Hkv * d.D, a[2]);
      Tensor O = side.make(DType::f32, N, d.Hq * d.D), L = side.make(DType::f32, 1, N * d.Hq);
      be.attention_forward(O, L, Q, K, V, side.make_i32(seg), d);
      return side.get(O);
    };
  };
  Side side(be);
  Tensor Q = side.make(DType::f32, N, d.Hq * d.D, in[0]);
  Tensor K = side.make(DType::f32, N, d.Hkv * d.D, in[1]);
  Tensor V = side.make(DType::f32, N, d.Hkv * d.D, in[2]);
  Tensor O = side.make(DType::f32, N, d.Hq * d.D), L = side.make(DType::f32, 1, N * d.Hq);
  Tensor dO = side.make(DType::f32, N, d.Hq * d.D, r), S = side.make_i32(seg);
  Tensor grads[3] = {side.make(DType::f32, N, d.Hq * d.D), side.make(DType::f32, N, d.Hkv * d.D),
                     side.make(DType::f32, N, d.Hkv * d.D)};
  be.attention_forward(O, L, Q, K, V, S, d);
  be.attention_backward(grads[0], grads[1], grads[2], dO, O, L, Q, K, V, S, d);
  const char* names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    const Forward f = forward(i);
    const auto num = test::central_diff([&](const Vec& x) { return projected(f, x, r); }, in[i]);
    test::expect_grad_near(side.get(grads[i]), num, std::string("attention ") + names[i], kFdRel,
                           kFdAbs);
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, ReferenceAttentionWindow, ::testing::Values(0, 1, 3));

TEST(ReferenceBackend, BiasBackwardMatchesFiniteDifferences) {
  const int64_t R = 5, C = 7;
  const Vec y = random_normal(R * C, 151), b = random_normal(C, 152), r = random_normal(R * C, 153);
  Backend& be = reference_backend();
  Side side(be);
  auto forward = [&](const Vec& bv) {
    Tensor Y = side.make(DType::f32, R, C, y);
    be.bias_add(Y, side.make(DType::f32, 1, C, bv));
    return side.get(Y);
  };
  Tensor dB = side.make(DType::f32, 1, C);
  be.bias_backward(dB, side.make(DType::f32, R, C, r));
  test::expect_grad_near(side.get(dB), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v), r);
                         }, b), "bias db", kFdRel, kFdAbs);
}

TEST(ReferenceBackend, RmsNormBackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 7;
  const Vec x = random_normal(N * C, 121), w = random_normal(C, 122), r = random_normal(N * C, 123);
  Backend& be = reference_backend();
  auto forward = [&](const Vec& xv, const Vec& wv) {
    Side side(be);
    Tensor X = side.make(DType::f32, N, C, xv), W = side.make(DType::f32, 1, C, wv);
    Tensor O = side.make(DType::f32, N, C), R = side.make(DType::f32, 1, N);
    be.rmsnorm_forward(O, R, X, W, 1e-5f);
    return side.get(O);
  };
  Side side(be);
  Tensor X = side.make(DType::f32, N, C, x), W = side.make(DType::f32, 1, C, w);
  Tensor O = side.make(DType::f32, N, C), R = side.make(DType::f32, 1, N);
  Tensor G = side.make(DType::f32, N, C, r);
  Tensor dX = side.make(DType::f32, N, C), dW = side.make(DType::f32, 1, C);
  be.rmsnorm_forward(O, R, X, W, 1e-5f);
  be.rmsnorm_backward(dX, dW, G, X, W, R);
  test::expect_grad_near(side.get(dX), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v, w), r);
                         }, x), "rmsnorm dx", kFdRel, kFdAbs);
  test::expect_grad_near(side.get(dW), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(x, v), r);
                         }, w), "rmsnorm dw", kFdRel, kFdAbs);
}

TEST(ReferenceBackend, RopeBackwardMatchesFiniteDifferences) {
  const int64_t N = 4, heads = 2, D = 6, max_pos = 16;
  Vec cos(size_t(max_pos * D / 2)), sin(cos.size());
  rope_tables(cos.data(), sin.data(), max_pos, D, 10000.0f, {});
  const std::vector<int32_t> pos = {0, 3, 15, 7};
  const Vec x = random_normal(N * heads * D, 131), r = random_normal(N * heads * D, 132);
  Backend& be = reference_backend();
  Side side(be);
  Tensor Cs = side.make(DType::f32, max_pos, D / 2, cos);
  Tensor Sn = side.make(DType::f32, max_pos, D / 2, sin);
  Tensor P = side.make_i32(pos);
  auto forward = [&](const Vec& v) {
    Tensor X = side.make(DType::f32, N, heads * D, v);
    be.rope_forward(X, Cs, Sn, P, heads);
    return side.get(X);
  };
  Tensor dX = side.make(DType::f32, N, heads * D, r);
  be.rope_backward(dX, Cs, Sn, P, heads);
  test::expect_grad_near(side.get(dX), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v), r);
                         }, x), "rope", kFdRel, kFdAbs);
  // A position beyond the tables is an error, not a read past them.
  Tensor X = side.make(DType::f32, N, heads * D, x);
  EXPECT_THROW(be.rope_forward(X, Cs, Sn, side.make_i32({0, 1, 16, 2}), heads), Error);
}

TEST(ReferenceBackend, SwiGluBackwardMatchesFiniteDifferences) {
  const int64_t n = 23;
  const Vec g = random_normal(n, 141, 2.0f), u = random_normal(n, 142), r = random_normal(n, 143);
  Backend& be = reference_backend();
  Side side(be);
  auto forward = [&](const Vec& gv, const Vec& uv) {
    Tensor H = side.make(DType::f32, 1, n);
    be.swiglu_forward(H, side.make(DType::f32, 1, n, gv), side.make(DType::f32, 1, n, uv));
    return side.get(H);
  };
  Tensor dG = side.make(DType::f32, 1, n), dU = side.make(DType::f32, 1, n);
  be.swiglu_backward(dG, dU, side.make(DType::f32, 1, n, r), side.make(DType::f32, 1, n, g),
                     side.make(DType::f32, 1, n, u));
  test::expect_grad_near(side.get(dG), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v, u), r);
                         }, g), "swiglu dgate", kFdRel, kFdAbs);
  test::expect_grad_near(side.get(dU), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(g, v), r);
                         }, u), "swiglu dup", kFdRel, kFdAbs);
}

TEST(ReferenceBackend, LayerNormBackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 7;
  Vec x = random_normal(N * C, 125);
  for (float& v : x) v += 0.75f;
  const Vec w = random_normal(C, 126), b = random_normal(C, 127), r = random_normal(N * C, 128);
  Backend& be = reference_backend();
  auto forward = [&](const Vec& xv, const Vec& wv, const Vec& bv) {
    Side side(be);
    Tensor X = side.make(DType::f32, N, C, xv), W = side.make(DType::f32, 1, C, wv);
    Tensor B = side.make(DType::f32, 1, C, bv), O = side.make(DType::f32, N, C);
    Tensor M = side.make(DType::f32, 1, N), R = side.make(DType::f32, 1, N);
    be.layernorm_forward(O, M, R, X, W, B, 1e-5f);
    return side.get(O);
  };
  Side side(be);
  Tensor X = side.make(DType::f32, N, C, x), W = side.make(DType::f32, 1, C, w);
  Tensor B = side.make(DType::f32, 1, C, b), O = side.make(DType::f32, N, C);
  Tensor M = side.make(DType::f32, 1, N), R = side.make(DType::f32, 1, N);
  Tensor G = side.make(DType::f32, N, C, r);
  Tensor dX = side.make(DType::f32, N, C), dW = side.make(DType::f32, 1, C), dB = side.make(DType::f32, 1, C);
  be.layernorm_forward(O, M, R, X, W, B, 1e-5f);
  be.layernorm_backward(dX, dW, dB, G, X, W, M, R);
  test::expect_grad_near(side.get(dX), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v, w, b), r);
                         }, x), "layernorm dx", kFdRel, kFdAbs);
  test::expect_grad_near(side.get(dW), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(x, v, b), r);
                         }, w), "layernorm dw", kFdRel, kFdAbs);
  test::expect_grad_near(side.get(dB), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(x, w, v), r);
                         }, b), "layernorm db", kFdRel, kFdAbs);
}

TEST(ReferenceBackend, GeluBackwardMatchesFiniteDifferences) {
  const int64_t n = 23;
  const Vec x = random_normal(n, 144, 2.0f), r = random_normal(n, 145);
  Backend& be = reference_backend();
  Side side(be);
  auto forward = [&](const Vec& xv) {
    Tensor H = side.make(DType::f32, 1, n);
    be.gelu_forward(H, side.make(DType::f32, 1, n, xv));
    return side.get(H);
  };
  Tensor dX = side.make(DType::f32, 1, n);
  be.gelu_backward(dX, side.make(DType::f32, 1, n, r), side.make(DType::f32, 1, n, x));
  test::expect_grad_near(side.get(dX), test::central_diff([&](const Vec& v) {
                           return test::projection(forward(v), r);
                         }, x), "gelu dx", kFdRel, kFdAbs);
  // The values themselves: gelu(0) = 0, gelu(x) -> x for large x, and HF's gelu_new at 1
  // (0.8411919906082768, 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715))).
  Tensor X = side.make(DType::f32, 1, 3, {0.0f, 1.0f, 8.0f}), H = side.make(DType::f32, 1, 3);
  be.gelu_forward(H, X);
  const Vec h = side.get(H);
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_NEAR(h[1], 0.8411919906082768, 1e-7);
  EXPECT_NEAR(h[2], 8.0, 1e-6);
}

TEST(ReferenceBackend, CrossEntropyBackwardMatchesFiniteDifferences) {
  // The loss is the sum of the row losses; its gradient is dlogits with grad_scale 1.
  const int64_t N = 3, V = 11;
  const Vec x = random_normal(N * V, 151, 2.0f);
  const std::vector<int32_t> t = {10, -1, 0};
  Backend& be = reference_backend();
  Side side(be);
  Tensor T = side.make_i32(t), L = side.make(DType::f32, 1, N);
  auto loss = [&](const Vec& v) {
    return be.cross_entropy(L, {}, side.make(DType::f32, N, V, v), T, 1.0f);
  };
  Tensor X = side.make(DType::f32, N, V, x), D = side.make(DType::f32, N, V);
  be.cross_entropy(L, D, X, T, 1.0f);
  test::expect_grad_near(side.get(D), test::central_diff(loss, x), "cross-entropy dlogits",
                         kFdRel, kFdAbs);
}

// ---- device tags and memory ------------------------------------------------------------------

TEST(ReferenceBackend, RejectsTensorsOfAnotherBackend) {
  Side cpu(cpu_backend()), ref(reference_backend());
  EXPECT_EQ(reference_backend().device(), (Device{DeviceKind::reference, 0}));
  const Vec a = random_normal(12, 161);
  Tensor on_cpu = cpu.make(DType::f32, 3, 4, a);
  Tensor on_ref = ref.make(DType::f32, 3, 4, a);
  Tensor out = ref.make(DType::f32, 3, 4);
  EXPECT_THROW(reference_backend().swiglu_forward(out, on_cpu, on_ref), Error);
  EXPECT_THROW(reference_backend().add(out, on_cpu), Error);
  EXPECT_THROW(reference_backend().copy_to_host(Vec(12).data(), on_cpu), Error);
  EXPECT_THROW(cpu_backend().add(on_cpu, on_ref), Error);  // and the other way round
  try {
    reference_backend().residual_add(out, on_ref, on_cpu);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("handed to the reference backend"), std::string::npos)
        << e.what();
  }
}

TEST(ReferenceBackend, MemoryIsZeroedAndCounted) {
  const size_t before = memory_stats::current_bytes();
  {
    DeviceBuffer b(reference_backend(), DType::f32, 100);
    EXPECT_GE(memory_stats::current_bytes(), before + 400);
    EXPECT_EQ(b.tensor().device, reference_backend().device());
    Vec h(100, 1.0f);
    reference_backend().copy_to_host(h.data(), b.tensor());
    for (float e : h) ASSERT_EQ(e, 0.0f);
  }
  EXPECT_EQ(memory_stats::current_bytes(), before);
}

TEST_P(BackendOps, MemoryIsZeroedAndCounted) {
  const size_t before = memory_stats::current_bytes();
  {
    DeviceBuffer b(tested(), DType::f32, 100);
    EXPECT_GE(memory_stats::current_bytes(), before + 400);
    EXPECT_EQ(b.tensor().device, tested().device());
    Vec h(100, 1.0f);
    tested().copy_to_host(h.data(), b.tensor());
    for (float e : h) ASSERT_EQ(e, 0.0f);
  }
  EXPECT_EQ(memory_stats::current_bytes(), before);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendOps,
                         ::testing::ValuesIn(test::comparison_backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mt

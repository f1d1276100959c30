// The backend ops Gemma 3 adds (docs/model-families.md, "Gemma 3"): GeGLU, RMSNorm with a weight
// offset (out = x * rstd * (1 + w)), an attention scale other than 1/sqrt(D) (query_pre_attn_scalar)
// in the training and the decoding attention, and the f32 scale of the embedding lookup. Each
// backward against central finite differences of its own forward, on the reference and on the CPU
// backend; every backend (the CPU always, CUDA when present) against the reference in f32 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "available_backends.h"
#include "backend/device_buffer.h"
#include "backend_tensors.h"
#include "backend/reference_backend.h"
#include "core/bf16.h"
#include "finite_diff.h"

namespace mt {
namespace {

using Vec = std::vector<float>;
using test::random_normal;

// Finite differences in f32 on tiny shapes (as test_reference_backend.cpp's).
constexpr double kFdRel = 1e-2, kFdAbs = 1e-3;

using test::BackendTensors;
using test::expect_close;

double tolerance(DType t) { return t == DType::bf16 ? 3.0 / 256 : 1e-5; }

// ---- backward against finite differences, on the reference and on the CPU ---------------------

class GemmaOpsFiniteDifferences : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& be() { return GetParam() == "cpu" ? cpu_backend() : reference_backend(); }
};

TEST_P(GemmaOpsFiniteDifferences, OffsetRmsNorm) {
  const int64_t N = 3, C = 7;
  // Weights near 0, as Gemma's are stored (1 + w is applied): the offset must matter.
  const Vec x = random_normal(N * C, 201), w = random_normal(C, 202, 0.3f), r = random_normal(N * C, 203);
  BackendTensors b(be());
  auto forward = [&](const Vec& xv, const Vec& wv) {
    Tensor O = b.make(DType::f32, N, C), R = b.make(DType::f32, 1, N);
    be().rmsnorm_forward(O, R, b.make(DType::f32, N, C, xv), b.make(DType::f32, 1, C, wv), 1e-6f, 1.0f);
    return b.get(O);
  };
  Tensor X = b.make(DType::f32, N, C, x), W = b.make(DType::f32, 1, C, w);
  Tensor O = b.make(DType::f32, N, C), R = b.make(DType::f32, 1, N);
  Tensor dX = b.make(DType::f32, N, C), dW = b.make(DType::f32, 1, C);
  be().rmsnorm_forward(O, R, X, W, 1e-6f, 1.0f);
  be().rmsnorm_backward(dX, dW, b.make(DType::f32, N, C, r), X, W, R, 1.0f);
  test::expect_grad_near(b.get(dX), test::central_diff([&](const Vec& v) { return test::projection(forward(v, w), r); }, x),
                         "offset rmsnorm dx", kFdRel, kFdAbs);
  test::expect_grad_near(b.get(dW), test::central_diff([&](const Vec& v) { return test::projection(forward(x, v), r); }, w),
                         "offset rmsnorm dw", kFdRel, kFdAbs);
  // The offset is applied: with w -> w + 1 and no offset the output is the same.
  Vec w1 = w;
  for (float& v : w1) v += 1.0f;
  Tensor O0 = b.make(DType::f32, N, C), R0 = b.make(DType::f32, 1, N);
  be().rmsnorm_forward(O0, R0, X, b.make(DType::f32, 1, C, w1), 1e-6f);
  expect_close(b.get(O), b.get(O0), 1e-6, "offset 1 is w + 1");
}

TEST_P(GemmaOpsFiniteDifferences, GeGlu) {
  const int64_t n = 29;
  const Vec g = random_normal(n, 211, 2.0f), u = random_normal(n, 212), r = random_normal(n, 213);
  BackendTensors b(be());
  auto forward = [&](const Vec& gv, const Vec& uv) {
    Tensor H = b.make(DType::f32, 1, n);
    be().geglu_forward(H, b.make(DType::f32, 1, n, gv), b.make(DType::f32, 1, n, uv));
    return b.get(H);
  };
  Tensor dG = b.make(DType::f32, 1, n), dU = b.make(DType::f32, 1, n);
  be().geglu_backward(dG, dU, b.make(DType::f32, 1, n, r), b.make(DType::f32, 1, n, g), b.make(DType::f32, 1, n, u));
  test::expect_grad_near(b.get(dG), test::central_diff([&](const Vec& v) { return test::projection(forward(v, u), r); }, g),
                         "geglu dgate", kFdRel, kFdAbs);
  test::expect_grad_near(b.get(dU), test::central_diff([&](const Vec& v) { return test::projection(forward(g, v), r); }, u),
                         "geglu dup", kFdRel, kFdAbs);
  // The forward is the tanh GeLU, written out here in double.
  const Vec h = forward(g, u);
  for (int64_t i = 0; i < n; ++i) {
    const double a = g[size_t(i)];
    const double gelu = 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (a + 0.044715 * a * a * a)));
    EXPECT_NEAR(h[size_t(i)], gelu * u[size_t(i)], 1e-5 * (1.0 + std::fabs(gelu * u[size_t(i)]))) << i;
  }
}

// dq and dk carry the scale: the backward of a scaled attention against finite differences, and
// its forward equal to the default scale's on q multiplied by scale * sqrt(D).
TEST_P(GemmaOpsFiniteDifferences, ScaledAttention) {
  const AttentionDims d{1, 6, 2, 1, 4, /*window=*/3, /*cp=*/1, /*cp_rank=*/0, /*scale=*/0.2f};
  const int64_t N = d.B * d.T, qw = d.Hq * d.D, kw = d.Hkv * d.D;
  const Vec in[3] = {random_normal(N * qw, 221), random_normal(N * kw, 222), random_normal(N * kw, 223)};
  const Vec r = random_normal(N * qw, 224);
  BackendTensors b(be());
  auto forward = [&](int which, const Vec& v, const AttentionDims& dims) {
    const Vec& q = which == 0 ? v : in[0];
    const Vec& k = which == 1 ? v : in[1];
    const Vec& vv = which == 2 ? v : in[2];
    Tensor O = b.make(DType::f32, N, qw), L = b.make(DType::f32, 1, N * d.Hq);
    be().attention_forward(O, L, b.make(DType::f32, N, qw, q), b.make(DType::f32, N, kw, k),
                           b.make(DType::f32, N, kw, vv), Tensor{}, dims);
    return b.get(O);
  };
  Tensor Q = b.make(DType::f32, N, qw, in[0]), K = b.make(DType::f32, N, kw, in[1]), V = b.make(DType::f32, N, kw, in[2]);
  Tensor O = b.make(DType::f32, N, qw), L = b.make(DType::f32, 1, N * d.Hq);
  Tensor grads[3] = {b.make(DType::f32, N, qw), b.make(DType::f32, N, kw), b.make(DType::f32, N, kw)};
  be().attention_forward(O, L, Q, K, V, Tensor{}, d);
  be().attention_backward(grads[0], grads[1], grads[2], b.make(DType::f32, N, qw, r), O, L, Q, K, V, Tensor{}, d);
  const char* names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i)
    test::expect_grad_near(b.get(grads[i]), test::central_diff([&](const Vec& v) { return test::projection(forward(i, v, d), r); }, in[i]),
                           std::string("scaled attention ") + names[i], kFdRel, kFdAbs);
  Vec q_scaled = in[0];
  for (float& v : q_scaled) v *= d.scale * std::sqrt(float(d.D));
  AttentionDims plain = d;
  plain.scale = 0.0f;
  expect_close(b.get(O), forward(0, q_scaled, plain), 1e-5, "scale = default on q * scale * sqrt(D)");
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmaOpsFiniteDifferences, ::testing::Values("reference", "cpu"),
                         [](const auto& info) { return info.param; });

// ---- each available backend against the reference ----------------------------------------------

class GemmaBackendOps : public test::BackendParamTest {};

TEST_P(GemmaBackendOps, GeGluMatchesReference) {
  const int64_t R = 13, C = 29;
  const Vec g = random_normal(R * C, 231, 2.0f), u = random_normal(R * C, 232), dh = random_normal(R * C, 233);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec h[2], dg[2], du[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      BackendTensors b(*be);
      Tensor G = b.make(dt, R, C, g), U = b.make(dt, R, C, u), dH = b.make(dt, R, C, dh);
      Tensor H = b.make(dt, R, C), dG = b.make(dt, R, C), dU = b.make(dt, R, C);
      be->geglu_forward(H, G, U);
      be->geglu_backward(dG, dU, dH, G, U);
      h[s] = b.get(H), dg[s] = b.get(dG), du[s++] = b.get(dU);
    }
    const std::string what = std::string("geglu ") + dtype_name(dt);
    expect_close(h[0], h[1], tolerance(dt), what + " h");
    expect_close(dg[0], dg[1], tolerance(dt), what + " dgate");
    expect_close(du[0], du[1], tolerance(dt), what + " dup");
  }
}

TEST_P(GemmaBackendOps, OffsetRmsNormMatchesReference) {
  const int64_t N = 7, C = 45;
  const Vec x = random_normal(N * C, 241), w = random_normal(C, 242, 0.3f), g = random_normal(N * C, 243),
            dx0 = random_normal(N * C, 244), dw0 = random_normal(C, 245);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec out[2], dx[2], dw[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      BackendTensors b(*be);
      Tensor X = b.make(DType::f32, N, C, x), W = b.make(DType::f32, 1, C, w);
      Tensor O = b.make(dt, N, C), R = b.make(DType::f32, 1, N);
      Tensor dX = b.make(DType::f32, N, C, dx0), dW = b.make(DType::f32, 1, C, dw0);
      be->rmsnorm_forward(O, R, X, W, 1e-6f, 1.0f);
      be->rmsnorm_backward(dX, dW, b.make(dt, N, C, g), X, W, R, 1.0f);
      out[s] = b.get(O), dx[s] = b.get(dX), dw[s++] = b.get(dW);
    }
    const std::string what = std::string("offset rmsnorm ") + dtype_name(dt);
    expect_close(out[0], out[1], tolerance(dt), what + " out");
    expect_close(dx[0], dx[1], 1e-5, what + " dx");
    expect_close(dw[0], dw[1], 1e-5, what + " dw");
  }
}

TEST_P(GemmaBackendOps, ScaledAttentionMatchesReference) {
  // Gemma 3 27B's shape of scale: query_pre_attn_scalar 168 over head_dim 128 (here D = 16).
  const float scale = 1.0f / std::sqrt(168.0f);
  for (const AttentionDims& d : {AttentionDims{2, 37, 4, 2, 16, 0, 1, 0, scale}, AttentionDims{1, 90, 2, 1, 16, 9, 1, 0, scale}})
    for (DType dt : {DType::f32, DType::bf16}) {
      const int64_t N = d.B * d.T, qw = d.Hq * d.D, kw = d.Hkv * d.D;
      const Vec q = random_normal(N * qw, 251), k = random_normal(N * kw, 252), v = random_normal(N * kw, 253),
                dout = random_normal(N * qw, 254);
      Vec out[2], dq[2], dk[2], dv[2];
      int s = 0;
      for (Backend* be : {&tested(), &reference_backend()}) {
        BackendTensors b(*be);
        Tensor Q = b.make(dt, N, qw, q), K = b.make(dt, N, kw, k), V = b.make(dt, N, kw, v);
        Tensor O = b.make(dt, N, qw), L = b.make(DType::f32, 1, N * d.Hq);
        Tensor dQ = b.make(dt, N, qw), dK = b.make(dt, N, kw), dV = b.make(dt, N, kw);
        be->attention_forward(O, L, Q, K, V, Tensor{}, d);
        be->attention_backward(dQ, dK, dV, b.make(dt, N, qw, dout), O, L, Q, K, V, Tensor{}, d);
        out[s] = b.get(O), dq[s] = b.get(dQ), dk[s] = b.get(dK), dv[s++] = b.get(dV);
      }
      const std::string what = std::string("scaled attention ") + dtype_name(dt) + " window " + std::to_string(d.window);
      expect_close(out[0], out[1], tolerance(dt), what + " out");
      expect_close(dq[0], dq[1], tolerance(dt), what + " dq");
      expect_close(dk[0], dk[1], tolerance(dt), what + " dk");
      expect_close(dv[0], dv[1], tolerance(dt), what + " dv");
    }
}

TEST_P(GemmaBackendOps, ScaledDecodeAttentionMatchesReference) {
  const int64_t Hq = 4, Hkv = 2, D = 16, len = 11, rows = 16;
  const float scale = 1.0f / std::sqrt(168.0f);
  for (DType dt : {DType::f32, DType::bf16}) {
    const Vec q = random_normal(Hq * D, 261), kc = random_normal(rows * Hkv * D, 262), vc = random_normal(rows * Hkv * D, 263);
    Vec out[3];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      BackendTensors b(*be);
      Tensor O = b.make(dt, 1, Hq * D);
      be->decode_attention(O, b.make(dt, 1, Hq * D, q), b.make(DType::f32, rows, Hkv * D, kc),
                           b.make(DType::f32, rows, Hkv * D, vc), len, Hq, Hkv, scale);
      out[s++] = b.get(O);
    }
    {  // the default scale gives another result: the scale is not ignored
      BackendTensors b(reference_backend());
      Tensor O = b.make(dt, 1, Hq * D);
      reference_backend().decode_attention(O, b.make(dt, 1, Hq * D, q), b.make(DType::f32, rows, Hkv * D, kc),
                                           b.make(DType::f32, rows, Hkv * D, vc), len, Hq, Hkv);
      out[2] = b.get(O);
    }
    expect_close(out[0], out[1], tolerance(dt), std::string("scaled decode attention ") + dtype_name(dt));
    double diff = 0.0;
    for (size_t i = 0; i < out[1].size(); ++i) diff = std::max(diff, double(std::fabs(out[1][i] - out[2][i])));
    EXPECT_GT(diff, 1e-3) << "the decode scale made no difference";
  }
}

TEST_P(GemmaBackendOps, ScaleMatchesReference) {
  const Vec x = random_normal(300, 271);
  Vec out[2];
  int s = 0;
  for (Backend* be : {&tested(), &reference_backend()}) {
    BackendTensors b(*be);
    Tensor X = b.make(DType::f32, 10, 30, x);
    be->scale(X, 45.25f);
    out[s++] = b.get(X);
  }
  expect_close(out[0], out[1], 1e-7, "scale");
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[1][i], x[i] * 45.25f) << i;
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmaBackendOps, ::testing::ValuesIn(test::comparison_backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mt

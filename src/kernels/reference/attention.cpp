#include "kernels/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/device_math/cp_positions.h"
#include "kernels/reference/values.h"

namespace mt::ref {

namespace {

// Index helpers over the [B, T, H, D] layouts.
struct Layout {
  const AttentionSizes& s;
  size_t q(int64_t b, int64_t t, int64_t h) const {
    return size_t(((b * s.T + t) * s.Hq + h) * s.D);
  }
  size_t kv(int64_t b, int64_t t, int64_t h) const {
    return size_t(((b * s.keys() + t) * s.Hkv + h) * s.D);
  }
  int64_t kv_head(int64_t h) const { return h / (s.Hq / s.Hkv); }
  // The key position of query i: the last key it may see.
  int64_t pos(int64_t i) const { return dm::cp_query_position(i, s.T, s.cp, s.cp_rank); }
};

double dot(const double* x, const double* y, int64_t n) {
  double d = 0.0;
  for (int64_t i = 0; i < n; ++i) d += x[i] * y[i];
  return d;
}

// Softmax probabilities of query (b, i, h) over keys 0..pos(i): p[j] for visible keys, 0 for
// masked ones. Returns the log-sum-exp of the visible scaled scores.
double query_softmax(std::vector<double>& p, const std::vector<double>& Q,
                     const std::vector<double>& K, const std::vector<int32_t>& seg,
                     const Layout& L, int64_t b, int64_t i, int64_t h) {
  const AttentionSizes& s = L.s;
  const double scale = s.scale > 0.0 ? s.scale : 1.0 / std::sqrt(double(s.D));
  const double kMasked = -std::numeric_limits<double>::infinity();
  double mx = kMasked;
  const int64_t pi = L.pos(i), row = b * s.keys();
  for (int64_t j = 0; j <= pi; ++j) {
    const bool in_window = s.window <= 0 || pi - j < s.window;
    const bool visible =
        in_window && (seg.empty() || seg[size_t(row + j)] == seg[size_t(row + pi)]);
    p[size_t(j)] = visible ? scale * dot(&Q[L.q(b, i, h)], &K[L.kv(b, j, L.kv_head(h))], s.D)
                           : kMasked;
    mx = std::max(mx, p[size_t(j)]);
  }
  // The query always sees itself (same document), so mx is finite.
  double sum = 0.0;
  for (int64_t j = 0; j <= pi; ++j) sum += std::exp(p[size_t(j)] - mx);
  for (int64_t j = 0; j <= pi; ++j) p[size_t(j)] = std::exp(p[size_t(j)] - mx) / sum;
  return mx + std::log(sum);
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& segments, const AttentionSizes& s) {
  const std::vector<double> Q = load(q), K = load(k), V = load(v);
  const std::vector<int32_t> seg = segments ? load_i32(segments) : std::vector<int32_t>{};
  std::vector<double> O(Q.size(), 0.0), lse_v(size_t(s.B * s.T * s.Hq));
  std::vector<double> p(size_t(s.keys()));
  const Layout L{s};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.T; ++i)
      for (int64_t h = 0; h < s.Hq; ++h) {
        lse_v[size_t((b * s.T + i) * s.Hq + h)] = query_softmax(p, Q, K, seg, L, b, i, h);
        double* o = &O[L.q(b, i, h)];
        for (int64_t j = 0; j <= L.pos(i); ++j) {
          const double* vj = &V[L.kv(b, j, L.kv_head(h))];
          for (int64_t e = 0; e < s.D; ++e) o[e] += p[size_t(j)] * vj[e];
        }
      }
  store(out, O);
  store(lse, lse_v);
}

// With P = softmax(S), S = scale Q K^T (masked), O = P V and upstream gradient dO:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),
//   dQ = scale dS K,  dK = scale dS^T Q.
// KV heads shared by several query heads sum the contributions of all of them.
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& segments, const AttentionSizes& s) {
  const std::vector<double> Q = load(q), K = load(k), V = load(v), dO = load(dout);
  const std::vector<int32_t> seg = segments ? load_i32(segments) : std::vector<int32_t>{};
  std::vector<double> dQ(Q.size(), 0.0), dK(K.size(), 0.0), dV(V.size(), 0.0);
  std::vector<double> p(size_t(s.keys())), dp(size_t(s.keys()));
  const double scale = s.scale > 0.0 ? s.scale : 1.0 / std::sqrt(double(s.D));
  const Layout L{s};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.T; ++i)
      for (int64_t h = 0; h < s.Hq; ++h) {
        query_softmax(p, Q, K, seg, L, b, i, h);
        const int64_t g = L.kv_head(h);
        const double* doi = &dO[L.q(b, i, h)];
        double row = 0.0;  // rowsum(P * dP)
        const int64_t pi = L.pos(i);
        for (int64_t j = 0; j <= pi; ++j) {
          dp[size_t(j)] = dot(doi, &V[L.kv(b, j, g)], s.D);
          row += p[size_t(j)] * dp[size_t(j)];
        }
        for (int64_t j = 0; j <= pi; ++j) {
          const double pj = p[size_t(j)];
          if (pj == 0.0) continue;  // masked key (or an underflowed probability)
          const double ds = pj * (dp[size_t(j)] - row);
          for (int64_t e = 0; e < s.D; ++e) {
            dV[L.kv(b, j, g) + size_t(e)] += pj * doi[e];
            dQ[L.q(b, i, h) + size_t(e)] += scale * ds * K[L.kv(b, j, g) + size_t(e)];
            dK[L.kv(b, j, g) + size_t(e)] += scale * ds * Q[L.q(b, i, h) + size_t(e)];
          }
        }
      }
  store(dq, dQ);
  store(dk, dK);
  store(dv, dV);
}

void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                      const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv, double scale) {
  const std::vector<double> Q = load(q), K = load(k_cache), V = load(v_cache);
  const int64_t D = q.numel() / Hq, row = Hkv * D;
  if (!(scale > 0.0)) scale = 1.0 / std::sqrt(double(D));
  std::vector<double> O(Q.size(), 0.0), w(static_cast<size_t>(len));
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t g = h / (Hq / Hkv);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < len; ++j) {
      w[size_t(j)] = scale * dot(&Q[size_t(h * D)], &K[size_t(j * row + g * D)], D);
      mx = std::max(mx, w[size_t(j)]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < len; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
    for (int64_t j = 0; j < len; ++j)
      for (int64_t e = 0; e < D; ++e)
        O[size_t(h * D + e)] += w[size_t(j)] / sum * V[size_t(j * row + g * D + e)];
  }
  store(out, O);
}

}  // namespace mt::ref

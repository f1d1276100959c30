#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt {

MoeRouting route_tokens(const float* logits, int64_t N, const MoeRoutingConfig& cfg) {
  const int64_t E = cfg.experts, k = cfg.top_k;
  MT_CHECK(E >= 1 && k >= 1 && k <= E, "moe routing: top_k must be in [1, experts]");
  MoeRouting r;
  r.N = N, r.E = E, r.k = k;
  r.probs.resize(size_t(N * E));
  r.lse.resize(size_t(N));
  r.expert.resize(size_t(N * k));
  r.weights.resize(size_t(N * k));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const float* z = logits + n * E;
    double top = z[0];
    for (int64_t e = 1; e < E; ++e) top = std::max(top, double(z[e]));
    double sum = 0.0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(double(z[e]) - top);
    r.lse[size_t(n)] = top + std::log(sum);
    float* p = r.probs.data() + n * E;
    for (int64_t e = 0; e < E; ++e) p[e] = float(std::exp(double(z[e]) - top) / sum);
    // The k largest, the lower index first among equals (what a stable sort by descending p puts
    // first; only the k are sorted: 8 of Qwen3-MoE's 128 experts, a quarter of the time).
    for (int64_t e = 0; e < E; ++e) order[size_t(e)] = int32_t(e);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double chosen = 0.0;
    for (int64_t j = 0; j < k; ++j) chosen += double(p[order[size_t(j)]]);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[size_t(j)];
      r.expert[size_t(n * k + j)] = e;
      r.weights[size_t(n * k + j)] = cfg.renormalize ? float(double(p[e]) / chosen) : p[e];
    }
  }
  // Expert order: a stable counting sort of the choices (n, j) by expert, token order kept.
  const int64_t capacity =
      cfg.capacity_factor > 0.0 ? int64_t(std::ceil(cfg.capacity_factor * double(N * k) / double(E))) : N * k;
  std::vector<int64_t> count(size_t(E), 0);
  r.slots.assign(size_t(N * k), -1);
  std::vector<int64_t> kept_rank(size_t(N * k), -1);
  for (int64_t i = 0; i < N * k; ++i) {
    const int32_t e = r.expert[size_t(i)];
    if (count[size_t(e)] >= capacity) {
      ++r.dropped;
      continue;
    }
    kept_rank[size_t(i)] = count[size_t(e)]++;
  }
  r.offsets.assign(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) r.offsets[size_t(e + 1)] = r.offsets[size_t(e)] + count[size_t(e)];
  r.token_of_row.assign(size_t(r.rows()), 0);
  for (int64_t i = 0; i < N * k; ++i) {
    if (kept_rank[size_t(i)] < 0) continue;
    const int64_t row = r.offsets[size_t(r.expert[size_t(i)])] + kept_rank[size_t(i)];
    r.slots[size_t(i)] = int32_t(row);
    r.token_of_row[size_t(row)] = int32_t(i / k);
  }
  return r;
}

void add_balance_stats(MoeBalanceStats& s, const MoeRouting& r, const uint8_t* counted) {
  if (s.choices.empty()) s.resize(r.E);
  MT_CHECK(int64_t(s.choices.size()) == r.E, "moe balance statistics of another expert count");
  for (int64_t n = 0; n < r.N; ++n) {
    if (counted && !counted[n]) continue;
    s.tokens += 1.0;
    s.z_sum += r.lse[size_t(n)] * r.lse[size_t(n)];
    for (int64_t j = 0; j < r.k; ++j) s.choices[size_t(r.expert[size_t(n * r.k + j)])] += 1.0;
    for (int64_t e = 0; e < r.E; ++e) s.prob_sum[size_t(e)] += double(r.probs[size_t(n * r.E + e)]);
  }
}

std::vector<double> pack_balance_stats(const MoeBalanceStats& s, int64_t E, double extra) {
  std::vector<double> v(size_t(packed_balance_size(E)), 0.0);
  if (!s.choices.empty()) {
    MT_CHECK(int64_t(s.choices.size()) == E, "moe balance statistics of another expert count");
    std::copy(s.choices.begin(), s.choices.end(), v.begin());
    std::copy(s.prob_sum.begin(), s.prob_sum.end(), v.begin() + E);
  }
  v[size_t(2 * E)] = s.tokens, v[size_t(2 * E + 1)] = s.z_sum, v[size_t(2 * E + 2)] = extra;
  return v;
}

double unpack_balance_stats(MoeBalanceStats& s, const std::vector<double>& v, int64_t E) {
  MT_CHECK(int64_t(v.size()) == packed_balance_size(E), "packed moe balance statistics of another expert count");
  s.resize(E);
  std::copy(v.begin(), v.begin() + E, s.choices.begin());
  std::copy(v.begin() + E, v.begin() + 2 * E, s.prob_sum.begin());
  s.tokens = v[size_t(2 * E)], s.z_sum = v[size_t(2 * E + 1)];
  return v[size_t(2 * E + 2)];
}

double load_balancing_loss(const MoeBalanceStats& s) {
  if (s.tokens <= 0.0) return 0.0;
  double sum = 0.0;
  for (size_t e = 0; e < s.choices.size(); ++e) sum += s.choices[e] * s.prob_sum[e];
  return double(s.choices.size()) * sum / (s.tokens * s.tokens);
}

double router_z_loss(const MoeBalanceStats& s) { return s.tokens > 0.0 ? s.z_sum / s.tokens : 0.0; }

void route_backward(float* dlogits, const MoeRouting& r, const float* dweights,
                    const MoeRoutingConfig& cfg, const MoeBalanceStats& stats, const uint8_t* counted,
                    double aux_coef, double z_coef, double loss_scale) {
  const int64_t E = r.E, k = r.k;
  const bool balance = aux_coef != 0.0 && stats.tokens > 0.0;
  const bool z = z_coef != 0.0 && stats.tokens > 0.0;
  std::vector<double> dp(static_cast<size_t>(E));
  for (int64_t n = 0; n < r.N; ++n) {
    const float* p = r.probs.data() + n * E;
    std::fill(dp.begin(), dp.end(), 0.0);
    // The combine weights: w_j = p_j / S (renormalised, S the chosen p's sum) or p_j.
    double S = 0.0, dot = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double pj = p[r.expert[size_t(n * k + j)]];
      S += pj;
      dot += double(dweights[n * k + j]) * pj;
    }
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = r.expert[size_t(n * k + j)];
      const double dw = dweights[n * k + j];
      dp[size_t(e)] += cfg.renormalize ? dw / S - dot / (S * S) : dw;
    }
    const bool seen = !counted || counted[n];
    // d aux / d p_e = E f_e / (tokens) with f_e's counts fixed (HF: the top-k mask carries no
    // gradient): E * choices_e / tokens^2.
    if (balance && seen)
      for (int64_t e = 0; e < E; ++e)
        dp[size_t(e)] += aux_coef * loss_scale * double(E) * stats.choices[size_t(e)] / (stats.tokens * stats.tokens);
    // Through the softmax: dz_e = p_e (dp_e - sum_f p_f dp_f).
    double pdp = 0.0;
    for (int64_t e = 0; e < E; ++e) pdp += double(p[e]) * dp[size_t(e)];
    // d z-loss / d z_e = 2 lse p_e / tokens.
    const double zc = z && seen ? z_coef * loss_scale * 2.0 * r.lse[size_t(n)] / stats.tokens : 0.0;
    for (int64_t e = 0; e < E; ++e)
      dlogits[n * E + e] = float(double(p[e]) * (dp[size_t(e)] - pdp) + zc * double(p[e]));
  }
}

}  // namespace mt

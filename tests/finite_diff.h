// Shared helpers for checking backward kernels against central finite differences of their
// forward, run in f32 on tiny shapes. The loss is a random projection L = sum(out * R) evaluated
// in double, so its gradient with respect to out is exactly R.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mt::test {

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

template <class A, class B>
double projection(const A& out, const B& r) {
  double s = 0.0;
  for (size_t i = 0; i < r.size(); ++i) s += double(out[i]) * double(r[i]);
  return s;
}

// d loss / d x[i] by central differences. The step actually taken is measured after rounding
// x +- eps to float, so float rounding of x does not bias the quotient.
template <class Loss>
std::vector<double> central_diff(Loss&& loss, std::vector<float> x, float eps = 1e-3f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i], xp = x0 + eps, xm = x0 - eps;
    x[i] = xp;
    const double lp = loss(x);
    x[i] = xm;
    const double lm = loss(x);
    x[i] = x0;
    g[i] = (lp - lm) / (double(xp) - double(xm));
  }
  return g;
}

// |analytic - numeric| <= atol + rtol * |numeric| for every coordinate.
template <class G>
void expect_grad_near(const G& analytic, const std::vector<double>& numeric,
                      const std::string& what, double rtol = 1e-2, double atol = 1e-3) {
  ASSERT_EQ(size_t(analytic.size()), numeric.size()) << what;
  for (size_t i = 0; i < numeric.size(); ++i)
    EXPECT_NEAR(double(analytic[i]), numeric[i], atol + rtol * std::fabs(numeric[i]))
        << what << " [" << i << "]";
}

// Each x[i] of an input that `loss` reads in place (by the caller's capture) nudged by +-eps:
// (L(x + eps) - L(x - eps)) / 2 eps must equal grad[i] to within rel * (1 + |difference|). For
// kernels whose inputs are awkward to pass (attention's q, k and v, laid out for the kernel).
template <class Loss>
void expect_grad_matches_nudges(std::vector<float>& x, const std::vector<float>& grad, Loss&& loss,
                                const std::string& what, float eps = 1e-2f, double rel = 2e-3) {
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    x[i] = x0 + eps;
    const double lp = loss();
    x[i] = x0 - eps;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2.0 * eps);
    EXPECT_NEAR(grad[i], fd, rel * (1.0 + std::abs(fd))) << what << "[" << i << "]";
  }
}

}  // namespace mt::test

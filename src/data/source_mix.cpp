#include "data/source_mix.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace mt {

namespace {
constexpr int64_t kMixUnit = int64_t(1) << 32;
}  // namespace

MixSchedule::MixSchedule(const std::vector<double>& weights) {
  if (weights.empty()) fail("mix schedule: no sources");
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || !(weights[i] > 0))
      fail("mix schedule: source " + std::to_string(i + 1) + "'s weight must be finite and > 0, got " +
           std::to_string(weights[i]));
    total += weights[i];
  }
  // Integer shares, so that the schedule is the same wherever it runs (no floating-point sums
  // drifting over millions of rows); what rounding leaves over goes to the largest weight.
  int64_t given = 0;
  size_t largest = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t q = std::max<int64_t>(1, std::llround(weights[i] / total * double(kMixUnit)));
    quota_.push_back(q);
    given += q;
    if (weights[i] > weights[largest]) largest = i;
  }
  quota_[largest] += kMixUnit - given;
  if (quota_[largest] <= 0) fail("mix schedule: weights too far apart to hold (a share below 2^-32)");
  credit_.assign(quota_.size(), 0);
  counts_.assign(quota_.size(), 0);
}

double MixSchedule::share(size_t i) const { return double(quota_[i]) / double(kMixUnit); }

size_t MixSchedule::next() {
  // Each source earns its quota; the one owed most gives the row and pays one row's worth. The
  // credits always sum to 0, so they stay within a few rows' worth (no overflow).
  size_t best = 0;
  for (size_t i = 0; i < quota_.size(); ++i) {
    credit_[i] += quota_[i];
    if (credit_[i] > credit_[best]) best = i;
  }
  credit_[best] -= kMixUnit;
  ++counts_[best];
  ++rows_;
  return best;
}

void MixSchedule::seek(int64_t rows) {
  if (rows < 0) fail("mix schedule: cannot seek to a negative row count " + std::to_string(rows));
  credit_.assign(quota_.size(), 0);
  counts_.assign(quota_.size(), 0);
  rows_ = 0;
  while (rows_ < rows) next();
}

}  // namespace mt

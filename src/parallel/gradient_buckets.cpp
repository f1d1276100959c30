#include "parallel/gradient_buckets.h"

#include <chrono>
#include <iomanip>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/profile.h"

namespace mt::parallel {

GradientBuckets::GradientBuckets(Comm& group, std::vector<GradRange> units, int64_t bucket_bytes)
    : group_(group), units_(std::move(units)), done_(units_.size(), 0), bucket_bytes_(bucket_bytes) {
  const int64_t limit = bucket_bytes / int64_t(sizeof(float));
  for (int u = int(units_.size()) - 1; u >= 0; --u) {
    const GradRange& r = units_[size_t(u)];
    if (r.size() == 0) continue;
    MT_CHECK(r.begin >= 0 && r.begin < r.end, "gradient range of unit " + std::to_string(u));
    if (!buckets_.empty()) {
      Bucket& b = buckets_.back();
      // Units run last to first, so a bucket grows towards lower addresses when the store is in
      // unit order; anything else starts a bucket of its own.
      const bool continues = r.end == b.range.begin;
      if (continues && (limit == 0 || b.range.size() + r.size() <= limit)) {
        b.range.begin = r.begin;
        b.first_unit = u;
        continue;
      }
    }
    Bucket b;
    b.range = r;
    b.first_unit = b.last_unit = u;
    buckets_.push_back(std::move(b));
  }
}

void GradientBuckets::begin_step(int64_t micro_batches) {
  MT_CHECK(micro_batches > 0, "a step without micro-batches");
  micro_batches_ = micro_batches;
  std::fill(done_.begin(), done_.end(), 0);
  for (Bucket& b : buckets_) {
    MT_CHECK(!b.request, "a gradient bucket of the last step was never waited for");
    b.issued = false;
  }
}

void GradientBuckets::issue(Bucket& b, float* grads) {
  if (in_flight_.size() >= kMaxInFlight) {  // the oldest first: its staging is then reused
    const auto t0 = std::chrono::steady_clock::now();
    MT_PROFILE("dp gradient bucket (wait)");
    buckets_[in_flight_.front()].request->wait();
    buckets_[in_flight_.front()].request.reset();
    in_flight_.pop_front();
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  MT_PROFILE("dp gradient bucket (issue)");
  b.request = group_.iall_reduce_sum(grads + b.range.begin, b.range.size());
  b.issued = true;
  in_flight_.push_back(size_t(&b - buckets_.data()));
}

void GradientBuckets::unit_done(int unit, float* grads) {
  if (unit < 0 || size_t(unit) >= done_.size()) return;
  if (++done_[size_t(unit)] != micro_batches_ || bucket_bytes_ == 0) return;
  for (Bucket& b : buckets_) {
    if (b.issued || unit < b.first_unit || unit > b.last_unit) continue;
    bool all_final = true;
    for (int u = b.first_unit; u <= b.last_unit; ++u)
      all_final = all_final && (units_[size_t(u)].size() == 0 || done_[size_t(u)] >= micro_batches_);
    if (all_final) issue(b, grads);
  }
}

double GradientBuckets::finish(float* grads) {
  for (Bucket& b : buckets_)
    if (!b.issued) issue(b, grads);
  const auto t0 = std::chrono::steady_clock::now();
  {
    MT_PROFILE("dp gradient bucket (wait)");
    for (size_t i : in_flight_) {
      buckets_[i].request->wait();
      buckets_[i].request.reset();
    }
    in_flight_.clear();
  }
  const double waited = waited_s_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  waited_s_ = 0.0;
  return waited;
}

std::string GradientBuckets::describe() const {
  if (bucket_bytes_ == 0 || buckets_.size() <= 1) return "one all-reduce of every gradient after the backward";
  std::ostringstream mb;
  mb << std::setprecision(3) << double(bucket_bytes_) / 1e6;
  return std::to_string(buckets_.size()) + " buckets of up to " + mb.str() +
         " MB, each all-reduced during the backward once its gradients are final";
}

}  // namespace mt::parallel

#include "parallel/flight_recorder.h"

#include <cstdio>

namespace mt::parallel {

const char* collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::barrier: return "barrier";
    case CollectiveOp::all_reduce_sum: return "all_reduce_sum";
    case CollectiveOp::all_reduce_max: return "all_reduce_max";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter_sum: return "reduce_scatter_sum";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::split: return "split";
    case CollectiveOp::send: return "send";
    case CollectiveOp::recv: return "recv";
  }
  return "unknown collective";
}

namespace {

std::string elements(const CollectiveSignature& s) {
  switch (s.kind) {
    case ElemKind::f32: return "f32";
    case ElemKind::f64: return "f64";
    case ElemKind::i64: return "i64";
    case ElemKind::raw: break;
  }
  return std::to_string(s.elem_bytes) + "-byte";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

}  // namespace

std::string describe(const CollectiveSignature& s) {
  std::string out = std::string(collective_name(s.op)) + " #" + std::to_string(s.seq);
  if (s.op == CollectiveOp::barrier || s.op == CollectiveOp::split) return out;
  out += " (" + elements(s) + " x " + std::to_string(s.count) + ", " +
         std::to_string(s.count * s.elem_bytes) + " bytes";
  if (s.op == CollectiveOp::broadcast) out += ", root " + std::to_string(s.root);
  if (s.op == CollectiveOp::send) out += ", to rank " + std::to_string(s.root);
  if (s.op == CollectiveOp::recv) out += ", from rank " + std::to_string(s.root);
  return out + ")";
}

std::string describe(const CollectiveRecord& r) {
  std::string text = describe(r.sig);
  const size_t space = text.find(' ', text.find('#'));  // after "#N", before the signature
  text.insert(space == std::string::npos ? text.size() : space, " on " + r.group);
  return (r.waiting ? "the wait for " : "") + text;
}

void FlightRecorder::enter(CollectiveRecord r) {
  r.started = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  current_ = std::move(r);
}

void FlightRecorder::leave() {
  std::lock_guard lock(mutex_);
  if (!current_) return;
  current_->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - current_->started).count();
  CollectiveTotal& total = totals_[{current_->group, collective_name(current_->sig.op)}];
  if (!current_->waiting) total.calls += 1, total.bytes += current_->sig.count * current_->sig.elem_bytes;
  total.seconds += current_->seconds;
  done_.push_back(std::move(*current_));
  current_.reset();
  if (done_.size() > keep_) done_.pop_front();
}

std::optional<CollectiveRecord> FlightRecorder::blocked() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::string FlightRecorder::history() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const CollectiveRecord& r : done_) out += "  " + describe(r) + " in " + seconds_text(r.seconds) + " s\n";
  return out;
}

CollectiveTotals FlightRecorder::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

void FlightRecorder::reset_totals() {
  std::lock_guard lock(mutex_);
  totals_.clear();
}

}  // namespace mt::parallel

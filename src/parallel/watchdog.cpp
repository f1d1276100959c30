#include "parallel/watchdog.h"

#include <algorithm>
#include <cstdio>

namespace mt::parallel {

Watchdog::Watchdog(const FlightRecorder& recorder, double timeout_s, std::string label,
                   std::string setting, OnStuck on_stuck)
    : recorder_(recorder),
      timeout_s_(timeout_s),
      label_(std::move(label)),
      setting_(std::move(setting)),
      on_stuck_(std::move(on_stuck)),
      thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::watch() {
  // Look ten times per timeout (at most once a second): the report comes within 10% of it.
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 10.0));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    const std::optional<CollectiveRecord> r = recorder_.blocked();
    if (!r) continue;
    const double blocked =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - r->started).count();
    if (blocked < timeout_s_) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", blocked);
    const bool p2p = r->sig.op == CollectiveOp::send || r->sig.op == CollectiveOp::recv;
    const std::string missing = p2p ? "rank " + std::to_string(r->sig.root) + " of " + r->group +
                                          " never matched it (stopped, dead, or elsewhere)"
                                    : "the other ranks of " + r->group +
                                          " never joined it (stopped, dead, or in another collective)";
    on_stuck_(label_ + " stuck in " + describe(*r) + " for " + seconds + " s (" + setting_ +
              "); " + missing + ". Aborting the job.\n" +
              label_ + "'s last finished collectives, oldest first:\n" + recorder_.history());
    return;
  }
}

}  // namespace mt::parallel

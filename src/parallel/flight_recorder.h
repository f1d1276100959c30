// What this rank's collectives are doing, as a flight recorder keeps it: the collective the rank
// is blocked in now (if any) and the last few it finished, each with its group, sequence number
// and signature. The communicating thread writes; the watchdog thread reads, so every access
// takes the lock (uncontended: tens of nanoseconds beside a collective's microseconds).
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace mt::parallel {

enum class CollectiveOp : int64_t {
  barrier = 1, all_reduce_sum, all_reduce_max, all_gather, reduce_scatter_sum, broadcast, split,
  send, recv,  // point to point: `root` is the peer; numbered apart from the collectives
};

// How the elements are read: raw (any dtype moved as bytes of elem_bytes each) or a number type.
enum class ElemKind : int64_t { raw = 0, f32, f64, i64 };

// A collective's signature: every rank of the group must call it with the same one. Plain
// int64s, so that the collective checks can gather it as it is.
struct CollectiveSignature {
  int64_t seq = 0;  // 1, 2, ... per group, in call order
  CollectiveOp op = CollectiveOp::barrier;
  ElemKind kind = ElemKind::raw;
  int64_t elem_bytes = 0;
  int64_t count = 0;  // elements (a rank's block, for gathers and scatters)
  int64_t root = 0;   // broadcast's root, send / recv's peer, else 0
  bool operator==(const CollectiveSignature&) const = default;
};

// "all_reduce_sum #12 (f32 x 10, 40 bytes)"
std::string describe(const CollectiveSignature& s);

struct CollectiveRecord {
  std::string group;  // Comm::name()
  CollectiveSignature sig;
  bool waiting = false;  // in the wait of a non-blocking collective issued earlier
  std::chrono::steady_clock::time_point started{};
  double seconds = 0.0;  // how long it blocked (finished records)
};

// "all_reduce_sum #12 on dp (f32 x 1, 4 bytes)"
std::string describe(const CollectiveRecord& r);

// "all_reduce_sum", "all_gather", ...
const char* collective_name(CollectiveOp op);

// One group's one kind of collective, summed over a run (the report's time per collective).
struct CollectiveTotal {
  int64_t calls = 0;    // issued (a non-blocking one counts once, at its issue)
  int64_t bytes = 0;    // this rank's block of each call, summed
  double seconds = 0.0; // blocked in it: the calls, and the waits of the non-blocking ones
};
// Keyed by (group name, collective name).
using CollectiveTotals = std::map<std::pair<std::string, std::string>, CollectiveTotal>;

class FlightRecorder {
 public:
  // Keeps the last `keep` finished collectives.
  explicit FlightRecorder(size_t keep = 8) : keep_(keep) {}

  // The communicating thread, entering and leaving a blocking call.
  void enter(CollectiveRecord r);
  void leave();

  // Any thread: the collective this rank is blocked in, if any.
  std::optional<CollectiveRecord> blocked() const;
  // The last finished collectives, oldest first, one per line: "  all_gather #3 on fsdp (...) in 0.002 s".
  std::string history() const;

  // Every finished collective since the last reset_totals(), per group name and collective name.
  CollectiveTotals totals() const;
  void reset_totals();

 private:
  const size_t keep_;
  mutable std::mutex mutex_;
  std::optional<CollectiveRecord> current_;
  std::deque<CollectiveRecord> done_;
  CollectiveTotals totals_;
};

}  // namespace mt::parallel

// Optional per-op wall-clock accounting for the benchmark's breakdown. Off by default; when off a
// scope costs one branch. Not thread-safe by design: ops are entered from the main thread only
// (each op parallelises inside itself). Only the outermost scope records, so nested scopes (a
// recomputed block inside "recompute") are never counted twice and the totals add up.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace mt::profile {

void enable(bool on);
bool enabled();
void reset();
void add(const char* name, double seconds);
int& depth();
const std::map<std::string, double>& totals();  // seconds per op name
// The totals as a table, largest first, per step (divided by `steps`), with each op's share of
// `wall_seconds` and the unaccounted rest.
std::string table(double wall_seconds, int64_t steps);

class Scope {
 public:
  explicit Scope(const char* name) : name_(enabled() && depth() == 0 ? name : nullptr) {
    ++depth();
    if (name_) t0_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    --depth();
    if (name_)
      add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  const char* name_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace mt::profile

#define MT_PROFILE_CAT2(a, b) a##b
#define MT_PROFILE_CAT(a, b) MT_PROFILE_CAT2(a, b)
#define MT_PROFILE(name) ::mt::profile::Scope MT_PROFILE_CAT(mt_profile_scope_, __LINE__)(name)

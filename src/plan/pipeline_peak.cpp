#include "plan/pipeline_peak.h"

#include <map>
#include <mutex>
#include <tuple>

namespace mt::plan {

int64_t pipeline_peak_buffers(parallel::PipelineSchedule schedule, int stages, int stage, int64_t micro,
                              int chunks) {
  using Key = std::tuple<int, int, int, int64_t, int>;
  static std::mutex mu;
  static std::map<Key, int64_t> known;
  const Key key{int(schedule), stages, stage, micro, chunks};
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  const int64_t peak = int64_t(parallel::pipeline_buffers(schedule, stages, stage, micro, chunks).peak_allocated);
  const std::lock_guard<std::mutex> lock(mu);
  if (known.size() >= 100000) known.clear();  // bounded: a long-lived process asks about few layouts
  known.emplace(key, peak);
  return peak;
}

}  // namespace mt::plan

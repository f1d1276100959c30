#include "plan/search.h"

#include <algorithm>

#include "core/error.h"

namespace mt::plan {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

}  // namespace

SearchResult search_layouts(const PlanInput& base, int64_t devices, int64_t max_micro_batch) {
  if (devices <= 0) fail("device count must be > 0, got " + std::to_string(devices));
  SearchResult out;
  for (int64_t tp : divisors(devices))
    for (int64_t pp : divisors(devices / tp))
      for (int64_t fsdp : divisors(devices / tp / pp)) {
        PlanInput in = base;
        in.mesh = {devices / tp / pp / fsdp, fsdp, tp, pp};
        std::vector<StageParams> stages;
        try {
          in.micro_batch = 1;
          validate(in);
          stages = stage_params(in);  // throws when a tensor dimension does not divide
        } catch (const Error&) {
          out.invalid += 1;
          continue;
        }
        const int64_t per_rank = in.global_batch / in.data_parallel();
        for (int64_t mb = 1; mb <= std::min(per_rank, max_micro_batch); mb *= 2) {
          if (per_rank % mb != 0) continue;
          for (bool ckpt : {false, true}) {
            in.micro_batch = mb;
            in.checkpointing = ckpt;
            out.considered += 1;
            Candidate c{in, peak_memory(in, stages), step_time(in, stages)};
            (c.memory.fits() ? out.ranked : out.too_big).push_back(std::move(c));
          }
        }
      }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.time.tokens_per_s > b.time.tokens_per_s;
  });
  return out;
}

}  // namespace mt::plan

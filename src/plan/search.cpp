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

// The micro-batches the search tries for a layout with `per_rank` sequences a step on each
// data-parallel rank.
std::vector<int64_t> micro_batches(const SearchSpace& space, int64_t per_rank) {
  if (space.grad_accum > 0)
    return per_rank % space.grad_accum == 0 ? std::vector<int64_t>{per_rank / space.grad_accum}
                                            : std::vector<int64_t>{};
  std::vector<int64_t> out;
  for (int64_t mb = 1; mb <= std::min(per_rank, space.max_micro_batch); mb *= 2)
    if (per_rank % mb == 0) out.push_back(mb);
  return out;
}

// The cp sizes tried among `devices` ranks: those that cut the sequence into 2 cp equal chunks, as
// the trainer requires.
std::vector<int64_t> context_splits(const PlanInput& base, int64_t devices) {
  std::vector<int64_t> out;
  for (int64_t cp : divisors(devices))
    if (cp == 1 || base.seq % (2 * cp) == 0) out.push_back(cp);
  return out;
}

// The ep sizes tried among `devices` ranks: those dividing a mixture of experts' experts (each ep
// rank holds whole experts, the same number, as the trainer requires); 1 alone for a dense model.
std::vector<int64_t> expert_splits(const PlanInput& base, int64_t devices) {
  const int64_t experts = base.model.config.num_experts;
  if (!base.model.config.moe()) return {1};
  std::vector<int64_t> out;
  for (int64_t ep : divisors(devices))
    if (experts % ep == 0) out.push_back(ep);
  return out;
}

}  // namespace

SearchResult search_layouts(const PlanInput& base, int64_t devices, const SearchSpace& space) {
  if (devices <= 0) fail("device count must be > 0, got " + std::to_string(devices));
  if (space.grad_accum < 0) fail("micro-batches per step must be >= 0, got " + std::to_string(space.grad_accum));
  SearchResult out;
  // A mixture of experts under tensor parallelism is refused by the trainer
  // (train/run_layout.h check_moe_layout): not searched, its experts split over ep and fsdp instead.
  const bool moe = base.model.config.moe();
  out.tp_skipped = moe;
  for (int64_t tp : divisors(devices)) {
    if (moe && tp > 1) continue;
    for (int64_t pp : divisors(devices / tp))
      for (int64_t cp : context_splits(base, devices / tp / pp))
        for (int64_t ep : expert_splits(base, devices / tp / pp / cp))
          for (int64_t fsdp : divisors(devices / tp / pp / cp / ep)) {
            PlanInput in = base;
            in.mesh = {devices / tp / pp / cp / ep / fsdp, fsdp, tp, pp, cp, ep};
            const int64_t per_rank = in.global_batch / in.data_parallel();
            const std::vector<int64_t> tried = micro_batches(space, per_rank);
            std::vector<StageParams> stages;
            try {
              if (tried.empty()) fail("no micro-batch divides the batch");
              in.micro_batch = tried.front();
              validate(in);
              stages = stage_params(in);  // throws when a tensor dimension does not divide
            } catch (const Error&) {
              out.invalid += 1;
              continue;
            }
            for (int64_t mb : tried) {
              for (bool ckpt : {false, true}) {
                if (!space.vary_checkpointing && ckpt != base.checkpointing) continue;
                in.micro_batch = mb;
                in.checkpointing = ckpt;
                out.considered += 1;
                Candidate c{in, peak_memory(in, stages), step_time(in, stages)};
                (c.memory.fits() ? out.ranked : out.too_big).push_back(std::move(c));
              }
            }
          }
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.time.tokens_per_s > b.time.tokens_per_s;
  });
  return out;
}

}  // namespace mt::plan

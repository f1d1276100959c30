#include "plan/search.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"

namespace mt::plan {
namespace {

// Ascending. Up to sqrt(n) and their cofactors: counting to n itself took minutes for 10^12.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i <= n / i; ++i)
    if (n % i == 0) {
      low.push_back(i);
      if (i != n / i) high.push_back(n / i);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
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
  if (devices <= 0 || devices > kMaxSearchDevices)
    fail("device count must be in [1, " + std::to_string(kMaxSearchDevices) + "], got " + std::to_string(devices));
  if (space.grad_accum < 0) fail("micro-batches per step must be >= 0, got " + std::to_string(space.grad_accum));
  SearchResult out;
  // The meshes first, with two of validate()'s rules that cost nothing (tp divides the heads, the
  // data-parallel ranks divide the global batch), so that what is evaluated can be counted and
  // bounded before any of it is priced: a large device count with a large batch had millions.
  const ModelConfig& mc = base.model.config;
  std::vector<parallel::MeshShape> meshes;
  for (int64_t tp : divisors(devices)) {
    if (mc.num_attention_heads % tp != 0 || mc.num_key_value_heads % tp != 0) {
      for (int64_t pp : divisors(devices / tp))
        for (int64_t cp : context_splits(base, devices / tp / pp))
          out.invalid += int64_t(divisors(devices / tp / pp / cp).size());
      continue;
    }
    for (int64_t pp : divisors(devices / tp))
      for (int64_t cp : context_splits(base, devices / tp / pp)) {
        const int64_t data_ranks = devices / tp / pp / cp;
        if (base.global_batch % data_ranks != 0) {
          out.invalid += int64_t(divisors(data_ranks).size());
          continue;
        }
        for (int64_t ep : expert_splits(base, data_ranks))
          for (int64_t fsdp : divisors(data_ranks / ep)) meshes.push_back({data_ranks / ep / fsdp, fsdp, tp, pp, cp, ep});
        if (int64_t(meshes.size()) > kMaxSearchMeshes)
          fail("more than " + std::to_string(kMaxSearchMeshes) + " layouts of " + std::to_string(devices) +
               " devices divide the model and the global batch of " + std::to_string(base.global_batch) +
               ", more than the search prices; give fewer devices or a global batch with fewer factors");
      }
  }
  // Pricing a pipelined layout builds each stage's schedule (pp x pp x micro-batches steps, once
  // per pipeline shape: plan/pipeline_peak.h remembers them), which a large global batch over
  // many stages made minutes. What the search would spend is bounded before anything is priced.
  std::set<std::pair<int64_t, int64_t>> pipelines;  // (pp, micro-batches)
  double work = 0;
  for (const parallel::MeshShape& mesh : meshes) {
    const int64_t per_rank = base.global_batch / mesh.batch_ranks();
    for (int64_t mb : micro_batches(space, per_rank)) {
      work += (space.vary_checkpointing ? 2.0 : 1.0) * kSearchWorkPerCandidate;
      // More stages than blocks is refused by validate() before any pricing: it costs nothing.
      const bool priced = mesh.pp * base.pp_virtual <= int64_t(mc.num_hidden_layers);
      if (mesh.pp > 1 && priced && pipelines.insert({mesh.pp, per_rank / mb}).second)
        work += kSearchWorkPerPipelineStep * double(mesh.pp) * double(mesh.pp) * double(per_rank / mb) *
                double(base.pp_virtual);
    }
  }
  if (work > kMaxSearchWork)
    fail("pricing the " + std::to_string(meshes.size()) + " layouts of " + std::to_string(devices) +
         " devices would take about " + std::to_string(int64_t(work / kSearchWorkPerSecond)) +
         " s (global batch " + std::to_string(base.global_batch) + ", pipelines of many micro-batches); give a " +
         "smaller global batch, --grad-accum, or fewer devices");
  for (const parallel::MeshShape& mesh : meshes) {
    PlanInput in = base;
    in.mesh = mesh;
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
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.time.tokens_per_s > b.time.tokens_per_s;
  });
  return out;
}

}  // namespace mt::plan

#include "parallel/shard_plan.h"

#include "core/error.h"
#include "core/nf4.h"
#include "parallel/expert_parallel.h"

namespace mt::parallel {

std::vector<ShardedParam> shard_params(const std::vector<ParamShape>& params, bool lora_training,
                                       const PartitionRules& rules, const MeshShape& mesh, bool nf4_base) {
  const PartitionRules effective = nf4_base ? rules.after(nf4_base_rules()) : rules;
  std::vector<ShardedParam> out;
  out.reserve(params.size());
  for (const auto& p : params) {
    const PartitionRule& rule = effective.match(p.name);
    out.push_back({p, !lora_training || p.adapter, nf4_base && quantized_in_qlora(p),
                   make_layout(p.name, p.shape, rule.spec, mesh)});
    if (p.expert >= 0 && mesh.ep > 1) {
      if (p.experts % mesh.ep != 0)
        fail("mesh ep=" + std::to_string(mesh.ep) + " does not divide the model's " + std::to_string(p.experts) +
             " experts (each ep rank holds whole experts, the same number on each)");
      out.back().layout.ep_owner = expert_owner(p.expert, p.experts, mesh.ep);
    }
  }
  return out;
}

bool StageSplit::holds(int stage, const std::string& name) const {
  return blocks.empty() || stage_holds(config, blocks, stage, chunks)[size_t(param_unit(name, config))];
}

std::vector<int> StageSplit::stages_holding(const std::string& name) const {
  std::vector<int> out;
  for (int s = 0; s < int(stages()); ++s)
    if (holds(s, name)) out.push_back(s);
  return out;
}

std::vector<RankBytes> bytes_per_rank(const std::vector<ShardedParam>& params, const MeshShape& mesh,
                                      const StageSplit& stages) {
  MT_CHECK(stages.stages() == mesh.pp, "one block count per pipeline stage");
  std::vector<RankBytes> out(size_t(mesh.world()));
  for (int64_t r = 0; r < mesh.world(); ++r) {
    RankBytes& b = out[size_t(r)];
    b.rank = r;
    const int stage = int(coords_of(mesh, r)[size_t(Axis::pp)]);
    for (const auto& p : params) {
      if (!stages.holds(stage, p.param.name) || !p.layout.held_by(r)) continue;
      // From the rank's own ranges rather than local_shape, so a future uneven policy stays exact.
      int64_t n = 1;
      for (size_t d = 0; d < p.layout.shape.size(); ++d) n *= p.layout.range(r, d).size();
      b.elements += n;
      if (p.trainable) b.trainable_elements += n;
      if (p.nf4) {
        b.nf4_elements += n;
        b.nf4_bytes += int64_t(nf4::tensor_bytes(p.layout.range(r, 0).size(), p.layout.range(r, 1).size()));
      }
    }
  }
  return out;
}

RankBytes unsharded_bytes(const std::vector<ShardedParam>& params) {
  RankBytes b;
  for (const auto& p : params) {
    b.elements += p.param.numel();
    if (p.trainable) b.trainable_elements += p.param.numel();
    if (p.nf4) {
      b.nf4_elements += p.param.numel();
      b.nf4_bytes += int64_t(nf4::tensor_bytes(p.param.shape[0], p.param.shape[1]));
    }
  }
  return b;
}

}  // namespace mt::parallel

#include "plan/plan_input.h"

#include <algorithm>

#include "core/error.h"
#include "model/moe.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_plan.h"
#include "parallel/vocab_padding.h"
#include "train/run_layout.h"

namespace mt::plan {

BaseDtype parse_base_dtype(const std::string& name) {
  if (name == "bf16") return BaseDtype::bf16;
  if (name == "nf4") return BaseDtype::nf4;
  fail("base dtype must be bf16 or nf4, got '" + name + "'");
}

const char* base_dtype_name(BaseDtype d) { return d == BaseDtype::nf4 ? "nf4" : "bf16"; }

double PlanInput::expert_load() const {
  const ModelConfig& c = model.config;
  if (!c.moe() || mesh.ep <= 1 || c.moe_capacity_factor <= 0.0f) return moe_imbalance;
  const int64_t N = micro_tokens();
  const ModelConfig held = parallel::expert_parallel_config(c, mesh.ep, 0);
  return std::min(moe_imbalance, double(moe_expert_rows(held, N)) / double(N * c.num_experts_per_tok));
}

void validate(const PlanInput& in) {
  auto positive = [](int64_t v, const char* what) {
    if (v <= 0) fail(std::string(what) + " must be > 0, got " + std::to_string(v));
  };
  positive(in.seq, "sequence length");
  positive(in.global_batch, "global batch");
  positive(in.micro_batch, "micro-batch");
  if (in.base_dtype == BaseDtype::nf4 && !in.lora.enabled)
    fail("an nf4 base needs LoRA mode: only a frozen base can be stored in 4 bits");
  if (!(in.moe_imbalance >= 1.0) || in.moe_imbalance > 1e6)
    fail("MoE imbalance factor must be between 1 (balanced) and 1e6, got " + std::to_string(in.moe_imbalance));
  if (in.zero < 0 || in.zero > 3) fail("ZeRO level must be 0, 1, 2 or 3, got " + std::to_string(in.zero));
  const auto& m = in.mesh;
  const auto& c = in.model.config;
  // The trainer's rule (parallel::sequence_share): every row is cut into 2 cp equal chunks.
  if (m.cp > 1 && in.seq % (2 * m.cp) != 0)
    fail("mesh " + m.str() + ": sequence length " + std::to_string(in.seq) + " is not divisible by 2 x cp = " +
         std::to_string(2 * m.cp) + " (context parallelism cuts every sequence into 2 cp equal chunks)");
  const int64_t per_step = in.micro_batch * in.data_parallel();
  if (in.global_batch % per_step != 0)
    fail("global batch " + std::to_string(in.global_batch) + " is not divisible by micro-batch x dp x fsdp x ep = " +
         std::to_string(per_step));
  parallel::check_virtual_stages(in.pp_schedule, int(m.pp), int(in.pp_virtual), in.micro_batches());
  stage_blocks(in);  // throws when the model cannot be split into pp stages as asked
  check_moe_layout(c, m);  // the trainer's refusal of an ep that does not divide the experts
  if (c.num_attention_heads % m.tp != 0 || c.num_key_value_heads % m.tp != 0)
    fail(in.model.name + ": " + std::to_string(c.num_attention_heads) + " heads / " +
         std::to_string(c.num_key_value_heads) + " KV heads are not divisible by tp=" + std::to_string(m.tp));
  if (in.seq > c.max_position_embeddings)
    fail("sequence length " + std::to_string(in.seq) + " exceeds " + in.model.name + "'s " +
         std::to_string(c.max_position_embeddings) + " positions");
}

ElemCount& ElemCount::operator+=(const ElemCount& o) {
  local += o.local, local_trainable += o.local_trainable;
  gathered += o.gathered, gathered_trainable += o.gathered_trainable;
  local_nf4 += o.local_nf4, gathered_nf4 += o.gathered_nf4;
  local_expert_trainable += o.local_expert_trainable;
  return *this;
}

ElemCount ElemCount::times(int64_t k) const {
  return {local * k,     local_trainable * k, gathered * k, gathered_trainable * k,
          local_nf4 * k, gathered_nf4 * k,    local_expert_trainable * k};
}

namespace {

// A frozen projection matrix of a transformer layer under an NF4 base (see BaseDtype), as the
// trainer chooses them (quantized_in_qlora: an MoE layer's router is kept in the compute dtype).
bool stored_nf4(const parallel::ShardedParam& p, const PlanInput& in) {
  return in.base_dtype == BaseDtype::nf4 && !p.trainable && quantized_in_qlora(p.param);
}

}  // namespace

ElemCount count_elems(const std::vector<ParamShape>& params, const PlanInput& in) {
  ElemCount e;
  // As the trainer lays them out: a vocabulary tp does not divide padded (parallel/vocab_padding.h).
  const auto sharded = parallel::shard_params(parallel::laid_out_shapes(params, in.mesh.tp),
                                              in.lora.enabled, model_rules(), in.mesh);
  for (const auto& p : sharded) {
    // Under ep rank 0 holds ep coordinate 0's experts only; every rank holds as many (ep divides
    // them), so its count is every rank's.
    if (!p.layout.held_by(0)) continue;
    // Rank 0's block, from the same ranges bytes_per_rank sums (every rank's block is equal).
    int64_t n = 1;
    bool by_fsdp = false;
    for (size_t d = 0; d < p.layout.shape.size(); ++d) n *= p.layout.range(0, d).size();
    for (const auto& axes : p.layout.spec.dims)
      by_fsdp = by_fsdp || std::find(axes.begin(), axes.end(), parallel::Axis::fsdp) != axes.end();
    // Split over fsdp: over fsdp x cp (parallel::shard_spec), gathered from as many blocks.
    const int64_t g = by_fsdp ? n * in.mesh.shards() : n;
    e.local += n, e.gathered += g;
    if (p.trainable) e.local_trainable += n, e.gathered_trainable += g;
    if (p.trainable && p.layout.ep_owner >= 0) e.local_expert_trainable += n;
    if (stored_nf4(p, in)) e.local_nf4 += n, e.gathered_nf4 += g;
  }
  return e;
}

std::vector<int64_t> stage_blocks(const PlanInput& in) {
  if (in.mesh.pp == 1) return {in.model.layers()};
  return parallel::pipeline_blocks(in.model.config, in.mesh.pp * in.pp_virtual, in.pp_blocks, in.pp_virtual);
}

std::vector<StageParams> stage_params(const PlanInput& in) {
  const ModelParts parts = model_parts(in.model, in.lora);
  const ElemCount first = count_elems(parts.first, in), layer = count_elems(parts.layer, in);
  const ElemCount last = count_elems(parts.last, in), copy = count_elems(parts.head_copy, in);
  const std::vector<int64_t> blocks = stage_blocks(in);
  const int64_t head_unit = in.model.layers() + 1;
  auto bigger = [](const ElemCount& a, const ElemCount& b) { return a.gathered >= b.gathered ? a : b; };
  std::vector<StageParams> out;
  for (int64_t k = 0; k < in.mesh.pp; ++k) {
    // The units the trainer stores on the stage (units 0 = embedding, 1..L = blocks, L + 1 = final
    // norm and head): the embedding on the first stage, a tied copy of it on the last.
    const std::vector<bool> held = parallel::stage_holds(in.model.config, blocks, int(k), int(in.pp_virtual));
    StageParams s;
    s.index = k;
    s.first = parallel::stage_units(blocks, int(k)).first == 0;
    s.last = held[size_t(head_unit)];
    s.layers = std::count(held.begin() + 1, held.begin() + head_unit, true);
    for (size_t c = size_t(k); c < blocks.size(); c += size_t(in.mesh.pp))  // its chunks k, k + pp, ...
      s.chunk_layers = std::max(s.chunk_layers, blocks[c]);
    s.params = layer.times(s.layers);
    s.max_unit = s.layer_unit = layer;
    if (s.first) s.params += first, s.max_unit = bigger(s.max_unit, first);
    if (s.last) {
      ElemCount head = last;
      if (held[0] && !s.first) head += copy;
      s.params += head, s.max_unit = bigger(s.max_unit, head);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace mt::plan

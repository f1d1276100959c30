#include "plan/memory_model.h"

#include <algorithm>

#include "backend/cpu_attention_scratch.h"
#include "backend/cuda_group_streams.h"
#include "model/block.h"
#include "model/norm.h"
#include "model/transformer.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_plan.h"
#include "parallel/vocab_padding.h"
#include "plan/gather_pool.h"
#include "plan/pipeline_peak.h"

namespace mt::plan {

double MemoryBreakdown::item(const std::string& name) const {
  for (const auto& i : items)
    if (i.name == name) return i.bytes;
  return 0.0;
}

namespace {

// One block at a tensor-parallel rank's widths, as parallel::tensor_parallel_config makes it: its
// share of the heads (of the same head_dim), of the KV heads and of the MLP; the hidden size whole.
// At least one of each where tp exceeds them (the search may try such a layout; the trainer
// refuses it).
ModelConfig tp_local_block(const ModelConfig& c, int64_t tp) {
  ModelConfig local = c;
  local.head_dim_override = c.head_dim();
  local.num_attention_heads = std::max<int64_t>(1, c.num_attention_heads / tp);
  local.num_key_value_heads = std::max<int64_t>(1, c.num_key_value_heads / tp);
  local.intermediate_size = std::max<int64_t>(1, c.intermediate_size / tp);
  local.head_shards = tp;  // a whole-projection q/k norm's weight gradient and row sums (model/split_qk_norm.h)
  // Every expert split as the MLP is (expert tensor parallelism: tensor_parallel_config).
  if (c.moe()) local.moe_intermediate_size = std::max<int64_t>(1, c.moe_intermediate_size / tp);
  return local;
}

// Every family (one block, described by the config): the engine's arenas (model/transformer.cpp
// Runner::plan) for a run of `layers` blocks at once (the whole model, or a pipeline stage's
// largest chunk), the head's rows only when `last` holds it. Per token a block saves what model/block.cpp's
// block_activation_sizes lists (q and the attention output heads x head_dim wide, k and v the KV
// width, Qwen3's f32 q and k before their norms and the norms' rstd); tensor parallelism shards
// what is per head or per MLP column and keeps the rest whole (norm outputs, the f32 residual,
// the LoRA adapters' inputs), and sequence parallelism splits the residual stream's rows of what
// is whole (BlockActivationSizes::t_split, f_split: the norms' outputs and statistics, the f32
// residuals) over the tp ranks. The attention keeps its log-sum-exp per query and head only, never
// scores, so a sliding window changes no memory. Under ep the sizes are those of an ep rank's model
// (parallel::expert_parallel_config, as the sharded model builds it): its MoE activations and
// scratch keep room for ep x its own tokens' routed rows, or what a capacity factor lets an ep
// rank receive (model/moe.h moe_expert_rows).
ActivationBytes block_activations(const PlanInput& in, int64_t layers, bool first, bool last) {
  const ModelConfig c = parallel::expert_parallel_config(in.model.config, in.mesh.ep, 0);
  const double tp = double(in.mesh.tp), N = double(in.micro_tokens());
  const double S = double(in.sequence_shards());
  const double t = in.precision == Precision::bf16 ? 2.0 : 4.0;
  const double C = double(c.hidden_size);
  const auto on = lora_targets_mask(in.lora);
  const int64_t rank = in.lora.enabled ? in.lora.rank : 0;
  // The whole part: the block's sizes with no heads and no MLP (what is left does not split).
  ModelConfig unsplit = c;
  unsplit.head_dim_override = c.head_dim();
  unsplit.num_attention_heads = unsplit.num_key_value_heads = unsplit.intermediate_size = 0;
  const BlockActivationSizes all = block_activation_sizes(c, in.lora.rank, on);
  const BlockActivationSizes whole = block_activation_sizes(unsplit, in.lora.rank, on);
  const double t_elems = double(whole.t_elems - whole.t_split) + double(whole.t_split) / S +
                         double(all.t_elems - whole.t_elems) / tp;
  const double f_elems = double(whole.f_elems - whole.f_split) + double(whole.f_split) / S +
                         double(all.f_elems - whole.f_elems) / tp;
  // The experts' rows: moe_expert_rows of N, which a capacity factor bounds under ep, each at the
  // tp-local expert's widths (its gate, up and h split over tp like the MLP's; measured: pricing
  // them whole put a tp = 2 rank's peak 2.9% over on the Mixtral-like test model).
  const double expert_rows = double(moe_expert_rows(c, int64_t(N)));
  const BlockActivationSizes row = block_activation_sizes(tp_local_block(c, in.mesh.tp), in.lora.rank, on);
  const double block = N * (t * t_elems + 4.0 * f_elems) +
                       expert_rows * (t * double(row.t_per_expert_row) + 4.0 * double(row.f_per_expert_row));
  // The residual stream into and out of each block, its gradient, the recompute target under
  // checkpointing (a share of the rows under sequence parallelism); with the head, the final
  // norm's output (whole: the head reads every row), its rstd (and a LayerNorm's mean) and the
  // per-token losses; under sequence parallelism the embedding's rows whole (f32).
  const double head_f32 = 1.0 + double(norm_saved_per_token(c)) / S;
  const double residual = 4.0 * N * C * double(layers + 2 + (in.checkpointing ? 1 : 0)) / S +
                          (last ? 4.0 * head_f32 * N + t * N * C : 0.0) +
                          (first && S > 1.0 ? 4.0 * N * C : 0.0);
  ActivationBytes a;
  a.layer = block;
  a.per_micro_batch = residual + (in.checkpointing ? 0.0 : double(layers) * block);
  // Scratch of one block at the tp-local widths: the compute-dtype regions, and the f32 ones of
  // the q/k norms' backward.
  const ModelConfig local = tp_local_block(c, in.mesh.tp);
  const bool lora_dropout = in.lora.enabled && in.lora.dropout > 0.0f;  // scratch for dropped inputs
  a.shared = t * double(block_scratch_elems(local, int64_t(N), rank, lora_dropout, S > 1.0)) +
             4.0 * double(block_scratch_f32_elems(local, int64_t(N))) + (in.checkpointing ? block : 0.0);
  if (last) {
    const double V = double(c.vocab_size) / tp;
    const double rows = std::clamp(double(int64_t(1) << 25) / double(c.vocab_size), 1.0, N);
    a.logits = t * rows * (V + 2.0 * double(std::max<int64_t>(in.lora.enabled ? in.lora.rank : 0, 1)) +
                           (lora_dropout ? C : 0.0));
  }
  return a;
}

// A unit's requests of the sharded model's pool (plan/gather_pool.h) from its elements on this rank
// and gathered: what fsdp x cp splits, whole (the gathered less the local elements are the other
// ranks' blocks of it), in the dtypes parallel/sharded_model.cpp gathers them in: under mixed
// precision a matrix's bf16 copy, a trained embedding's f32 master (its lookup reads the master; a
// tied one also its bf16 copy, for the head), NF4 records as they are; f32 masters in fp32. The
// rank's blocks are sent from the shard store itself unless they lie in more than one store or
// kind (LoRA's frozen base beside its adapters, NF4 records beside bf16 copies, a tied embedding's
// two copies), which a send buffer then stages.
GatherUnit gather_unit(const PlanInput& in, const ElemCount& u, bool embedding, int64_t ranks) {
  GatherUnit g;
  if (ranks <= 1 || u.gathered == u.local) return g;
  const auto whole = [&](int64_t gathered, int64_t local) { return (gathered - local) / (ranks - 1) * ranks; };
  const int64_t trained = whole(u.gathered_trainable, u.local_trainable), nf4 = whole(u.gathered_nf4, u.local_nf4);
  const int64_t plain = whole(u.gathered, u.local) - trained - nf4;  // frozen, in the compute dtype
  const bool bf16 = in.precision == Precision::bf16, tied = in.model.config.tie_word_embeddings;
  if (!bf16) {
    g.master = 4 * (trained + plain);
  } else if (embedding) {
    g.master = 4 * trained;
    g.compute = 2 * plain + (tied ? 2 * trained : 0);
  } else {
    g.compute = 2 * (trained + plain);
  }
  g.quant = int64_t(kNf4BytesPerWeight * double(nf4) + 0.5);
  g.direct_send = int(trained > 0) + int(plain > 0) + int(nf4 > 0) + int(bf16 && embedding && tied && trained > 0) <= 1;
  g.grad = 4 * trained;
  return g;
}

// Of `ps` on a tp rank, the trained elements whose gradient is a partial sum over tp, which
// finish_gradients sums in one packed block (parallel/sharded_model.cpp marks them): a LoRA A
// whose base's rows tp splits (it sees this rank's rows of the output gradient only) and, under
// sequence parallelism, the sequence-split ones (the norms').
int64_t tp_partial_elems(const PlanInput& in, const std::vector<ParamShape>& ps) {
  if (in.mesh.tp <= 1) return 0;
  const auto sharded = parallel::shard_params(parallel::laid_out_shapes(ps, in.mesh.tp), in.lora.enabled,
                                              model_rules(), in.mesh);
  const auto rows_split = [&](const std::string& name) {
    for (const auto& b : sharded)
      if (b.param.name == name && !b.layout.spec.dims.empty()) {
        const auto& axes = b.layout.spec.dims[0];
        return std::find(axes.begin(), axes.end(), parallel::Axis::tp) != axes.end();
      }
    return false;
  };
  int64_t n = 0;
  for (const auto& p : sharded) {
    if (!p.trainable || !p.layout.held_by(0)) continue;
    const std::string& name = p.param.name;
    bool partial = in.sequence_parallel && sequence_split_gradient(name);
    if (const size_t a = name.find(".lora_A.weight"); a != std::string::npos) {
      std::string base = name.substr(0, a) + ".weight";
      if (base == "lm_head.weight" && in.model.config.tie_word_embeddings) base = kEmbedName;
      if (const size_t fused = base.find("self_attn.c_attn."); fused != std::string::npos)
        base = base.substr(0, fused) + "self_attn.q_proj.weight";  // GPT-2's shared A: q's rows
      partial = rows_split(base);
    }
    if (!partial) continue;
    int64_t e = 1;
    for (size_t d = 0; d < p.layout.shape.size(); ++d) e *= p.layout.range(0, d).size();
    n += e;
  }
  return n;
}

// The pool of the stage's rank over a run: its units in forward order (the embedding's and the
// head's where it holds them, else none), and the gradients finish_gradients packs at the end of a
// step, one block at a time (parallel/fsdp_units.cpp): those not split over fsdp x cp, summed over
// the shard ranks and ep (the experts' assumed split), under ep the split non-expert ones, under tp
// the partial sums.
GatherPoolBytes gather_pool(const PlanInput& in, const StageParams& s) {
  const ModelParts parts = model_parts(in.model, in.lora);
  const int64_t ranks = in.mesh.shards();
  GatherPoolRun run;
  run.ranks = ranks;
  run.tied_head = in.model.config.tie_word_embeddings && s.first && s.last;
  run.micro_batches = std::clamp<int64_t>(in.micro_batches(), 1, 2);  // the pool is settled after two
  run.units.push_back(s.first ? gather_unit(in, count_elems(parts.first, in), true, ranks) : GatherUnit{});
  const GatherUnit layer = gather_unit(in, s.layer_unit, false, ranks);
  for (int64_t l = 0; l < s.chunk_layers; ++l) run.units.push_back(layer);
  if (s.last) {
    ElemCount head = count_elems(parts.last, in);
    if (!s.first) head += count_elems(parts.head_copy, in);
    run.units.push_back(gather_unit(in, head, false, ranks));
  } else {
    run.units.push_back(GatherUnit{});
  }
  const ElemCount& e = s.params;
  const int64_t split = ranks > 1 ? (e.gathered_trainable - e.local_trainable) / (ranks - 1) : 0;
  const int64_t unsplit = e.local_trainable - split;
  const int64_t unsplit_dense = unsplit - (ranks > 1 ? 0 : e.local_expert_trainable);
  if (ranks * in.mesh.ep > 1 && unsplit_dense > 0) run.sums.push_back(4 * unsplit_dense);
  if (in.mesh.ep > 1 && ranks > 1 && split > e.local_expert_trainable) run.sums.push_back(4 * (split - e.local_expert_trainable));
  const int64_t partial = tp_partial_elems(in, parts.layer) * s.layers + (s.first ? tp_partial_elems(in, parts.first) : 0) +
                          (s.last ? tp_partial_elems(in, parts.last) : 0);
  if (partial > 0) run.sums.push_back(4 * partial);
  return gather_pool_bytes(run);
}

}  // namespace

ActivationBytes activation_bytes(const PlanInput& in, int64_t layers, bool first_stage, bool last_stage) {
  return block_activations(in, layers, first_stage, last_stage);
}

double cp_exchange_bytes(const PlanInput& in) {
  const int64_t cp = in.mesh.cp;
  if (cp <= 1) return 0.0;
  const double elem = in.precision == Precision::bf16 ? 2.0 : 4.0;
  // A rank's K (or V) elements: its tokens x the tp-local KV width. Gathered, the whole rows are
  // cp times that: keys and values (2) and the all-gather's staging (1) in the compute dtype,
  // their gradients (2, f32: summed over the ranks before rounding), the f32 send staging of the
  // reduce-scatter (cp shares) and its f32 receive buffer (one share). The document ids gathered
  // beside them are i32 words of one column, held in the same staging (no separate term).
  const double share = double(in.micro_tokens()) * double(in.model.config.kv_dim() / in.mesh.tp);
  return double(cp) * share * (3.0 * elem + 12.0) + 4.0 * share;
}

MemoryBreakdown memory_per_device(const PlanInput& in, const StageParams& s) {
  const bool bf16 = in.precision == Precision::bf16;
  const double dp = double(in.mesh.dp);
  auto z = [&](int level) { return in.zero >= level ? dp : 1.0; };  // ZeRO divides over dp
  const ElemCount& e = s.params;
  const double frozen = double(e.local - e.local_trainable), train = double(e.local_trainable);
  const double wbytes = bf16 ? 2.0 : 4.0;  // bf16 copy for the GEMMs (fp32: the weight itself)

  MemoryBreakdown m;
  m.stage = s.index;
  m.capacity = in.cluster.memory_bytes;
  auto add = [&](const char* name, double bytes) { m.items.push_back({name, bytes}); };
  const double master = bf16 ? 4.0 * train / z(1) : 0.0;
  // The frozen weights at their storage: NF4 matrices (see BaseDtype), the rest the compute copy.
  auto frozen_bytes = [&](double all_frozen, double nf4) {
    return wbytes * (all_frozen - nf4) + kNf4BytesPerWeight * nf4;
  };
  if (in.lora.enabled) {
    add("weights", frozen_bytes(frozen, double(e.local_nf4)) / z(3));
    // The GEMMs run on bf16: one layer's NF4 matrices are dequantised at a time, into scratch
    // that is reused layer after layer (no whole-model bf16 copy).
    // An MoE layer's experts run one after another: one expert's three matrices, not all of them
    // (of the rank's own experts under ep: those the layer's gathered unit holds).
    const auto& mc = in.model.config;
    const int64_t held_experts = mc.moe() ? mc.num_experts / in.mesh.ep : 0;
    const double idle_experts =
        mc.moe() ? double(held_experts - 1) * 3.0 * double(mc.moe_intermediate_size * mc.hidden_size) : 0.0;
    if (e.local_nf4 > 0)
      add("nf4 dequant scratch", wbytes * (double(e.gathered_nf4) / double(s.layers) - idle_experts));
    add("lora params", wbytes * train / z(3) + master);
    add("lora grads+optimizer", 4.0 * train / z(2) + 8.0 * train / z(1));
  } else {
    // Counted as `meshtrain shard` counts them (parallel::bytes_per_rank): a bf16 copy of every
    // trained tensor. The engine keeps none of the norms' and an untied trained embedding's (read
    // in f32): 68 KB over on the tiny MoE test models (0.5%), not corrected here so that the two
    // counts stay one.
    add("weights", wbytes * train / z(3));
    add("grads", 4.0 * train / z(2));
    add("master", master);
    add("optimizer", 8.0 * train / z(1));
  }

  const double N = double(in.micro_tokens()), h = double(in.model.hidden());
  if (in.mesh.pp > 1) {
    // This engine's stage (parallel/pipeline.h): one micro-batch's activations at a time, its
    // forward recomputed in the backward, in the model's arena, which the runner plans for the
    // stage's units alone (its largest chunk's blocks, the head's buffers on the stage holding it:
    // Transformer::set_units); beside it the pipeline's own buffers of a residual stream each in
    // the compute dtype (bf16 under mixed precision: the model rounds the stream where it is cut),
    // as many as the schedule's orders keep at once (parallel::pipeline_buffers: kept inputs, the
    // in-flight micro-batches; outputs until their send completes at the next forward, gradients
    // until known received; the received gradient), counted at the moment a receive's buffer
    // exists beside the sends it then releases (peak_allocated).
    const ActivationBytes a = activation_bytes(in, s.chunk_layers, s.first, s.last);
    add("activations", a.per_micro_batch + a.shared);
    add("logits+loss", a.logits);
    const int64_t peak = pipeline_peak_buffers(in.pp_schedule, int(in.mesh.pp), int(s.index), in.micro_batches(),
                                               int(in.pp_virtual));
    add("pipeline buffers", double(peak) * (bf16 ? 2.0 : 4.0) * N * h / double(in.sequence_shards()));
  } else {
    // Without a pipeline, one micro-batch's: micro-batches accumulate one after another.
    const ActivationBytes a = activation_bytes(in, s.layers, s.first, s.last);
    add("activations", a.per_micro_batch + a.shared);
    add("logits+loss", a.logits);
  }
  // RoPE tables: f32 cos and sin of every position (max_position_embeddings x head_dim/2 each),
  // built whole on every rank by model/transformer.cpp's runner, a second pair for Gemma 3's local
  // layers. The runner builds them for learned positions too (GPT-2's), unused there.
  const auto& mc = in.model.config;
  const double rope_pairs = mc.rope_local_theta > 0.0f ? 2.0 : 1.0;
  add("rope tables", rope_pairs * 4.0 * double(mc.max_position_embeddings) * double(mc.head_dim()));
  // On a CPU host (the CPU backend) the attention kernels allocate their tiles and the backward's
  // accumulators beside the arenas, while the rest is held: the kernels' own count, for one thread
  // (each further OpenMP thread of a rank adds its tiles and dQ accumulator again: the planner
  // does not know a rank's threads; the MoePlanner tests run one). On a GPU cluster not priced.
  if (in.cluster.host_cores > 0) {
    AttentionShape a{in.micro_batch, in.seq / in.mesh.cp, std::max<int64_t>(1, mc.num_attention_heads / in.mesh.tp),
                     std::max<int64_t>(1, mc.num_key_value_heads / in.mesh.tp), mc.head_dim()};
    a.cp = in.mesh.cp;
    add("attention scratch", double(cpu_attention_scratch_bytes(a, 1)));
  }

  // The sharded model's pool (fsdp x cp gathers, unit gradients, their collectives' staging, the
  // end-of-step sums), replayed with its own rule: plan/gather_pool.h. Under ZeRO-3 (no trainer
  // runs it) the gathers over dp are priced as the largest unit's weights twice (received,
  // unpacked), the next one prefetched, its f32 gradients and their reduce-scatter's staging.
  double comm = 0.0;
  const bool zero3 = in.zero >= 3 && in.mesh.dp > 1;
  const GatherPoolBytes pool = zero3 ? GatherPoolBytes{} : gather_pool(in, s);
  comm += pool.total - (in.mesh.ep > 1 ? pool.sums : 0.0);  // ep's sum is an item of its own (below)
  const double unit_train = double(s.max_unit.gathered_trainable);
  if (zero3) {
    const auto unit_bytes = [&](const ElemCount& u) {
      const double all = double(u.gathered), trained = double(u.gathered_trainable);
      return frozen_bytes(all - trained, double(u.gathered_nf4)) + wbytes * trained;
    };
    comm += 2.0 * unit_bytes(s.max_unit) + std::min(unit_bytes(s.layer_unit), unit_bytes(s.max_unit)) +
            8.0 * unit_train + 4.0 * unit_train / double(in.mesh.shards() * in.mesh.dp);
  }
  // Under sequence parallelism a bf16 reduce-scatter also receives its share in f32 beside it.
  if (in.mesh.tp > 1) comm += 2.0 * 2.0 * N * h + (bf16 && in.sequence_shards() > 1 ? 4.0 * N * h / double(in.mesh.tp) : 0.0);
  // The dp gradient buckets' staging (parallel/mpi_comm.cpp): up to three buckets in flight,
  // each as large as train.dp_bucket_mb or the unit it holds when that is larger, never more than
  // the rank's gradients (one bucket of them all with dp_bucket_bytes 0). A transport that reduces
  // in place (NCCL) stages nothing: priced the same, at most 3 buckets over. The cp ranks are no
  // replicas (they hold other blocks: fsdp x cp shards) and stage nothing.
  if (in.mesh.dp > 1 && in.zero < 3) {
    const double grads = 4.0 * double(s.params.local_trainable);
    const double unit_grads = 4.0 * unit_train / double(in.mesh.shards());
    comm += in.dp_bucket_bytes > 0 ? std::min(grads, kBucketsInFlight * std::max(in.dp_bucket_bytes, unit_grads))
                                   : grads;
  }
  add("comm buffers", comm);
  // Under ep the ep ranks are replicas of every tensor but the experts: once the backward has ended
  // the sharded model sums those gradients over ep, packed into one f32 block of its scratch pool
  // (parallel/fsdp_units.cpp finish_gradients): what that block adds to the pool, priced by the
  // replay above (none where a block the gathers left free can hold it). The MoePlanner test
  // measures it on ep = 2: without it the peak fell 4-10% short.
  if (in.mesh.ep > 1) add("ep gradient sum", pool.sums);
  // Parameters, gradients and optimizer state are sharded over fsdp x cp (the state items above,
  // from count_elems); a cp rank's activations are those of its seq / cp tokens (micro_tokens),
  // plus the exchange of the whole rows' K/V.
  if (in.mesh.cp > 1) add("cp K/V exchange", cp_exchange_bytes(in));
  // On an accelerator (the CUDA backend, and its HIP build) an MoE layer's expert products run as
  // groups over side streams, whose cuBLASLt workspaces (3 x 32 MiB) the first group makes, before
  // the step's peak, and which stay (backend/cuda_group_streams.h). None where a rank's products
  // never group: one expert a rank (ep = the experts), or 4-bit experts (QLoRA: such a product
  // runs on the backend's stream). On a CPU host the products run one by one.
  const bool groups =
      mc.moe() && mc.num_experts / in.mesh.ep >= 2 && !(in.lora.enabled && in.base_dtype == BaseDtype::nf4);
  if (in.cluster.host_cores == 0 && groups) add("expert stream workspaces", cuda_group_workspace_bytes());
  add("overhead", in.cluster.runtime_overhead_bytes);
  for (const auto& i : m.items) m.total += i.bytes;
  return m;
}

double base_weight_bytes(const PlanInput& in) {
  const double wbytes = in.precision == Precision::bf16 ? 2.0 : 4.0;
  const bool nf4 = in.lora.enabled && in.base_dtype == BaseDtype::nf4;
  const ModelParts parts = model_parts(in.model, in.lora);
  auto bytes = [&](const std::vector<ParamShape>& ps, bool layer) {
    double b = 0.0;
    for (const auto& p : ps)
      if (!p.adapter) b += double(p.numel()) * (nf4 && layer && quantized_in_qlora(p) ? kNf4BytesPerWeight : wbytes);
    return b;
  };
  return bytes(parts.first, false) + double(in.model.layers()) * bytes(parts.layer, true) + bytes(parts.last, false);
}

MemoryBreakdown peak_memory(const PlanInput& in) { return peak_memory(in, stage_params(in)); }

MemoryBreakdown peak_memory(const PlanInput& in, const std::vector<StageParams>& stages) {
  MemoryBreakdown best;
  best.total = -1.0;
  for (const auto& s : stages) {
    MemoryBreakdown m = memory_per_device(in, s);
    if (m.total > best.total) best = std::move(m);
  }
  return best;
}

}  // namespace mt::plan

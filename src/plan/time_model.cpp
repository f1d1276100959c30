#include "plan/time_model.h"

#include <algorithm>

#include "model/transformer.h"
#include "plan/collectives.h"
#include "plan/expert_traffic.h"
#include "plan/memory_model.h"
#include "train/flops.h"

namespace mt::plan {

double gemm_efficiency(const Cluster& c, double m, double n, double k) {
  const double d = std::min({m, n, k});
  return c.gemm_efficiency * d / (d + c.gemm_half_dim);
}

double gemm_seconds(const Cluster& c, double m, double n, double k) {
  return 2.0 * m * n * k / (c.peak_flops * gemm_efficiency(c, m, n, k));
}

namespace {

struct LinearShape {
  double out, in;      // this rank's block: [out, in]
  bool trainable;
  double rows = 1.0;   // of the micro-batch's N tokens, the share each product runs over
  double count = 1.0;  // products of this shape (an MoE layer's experts: those the rank holds)
  double load = 1.0;   // a factor on their time: the busiest ep rank's rows over the mean
};

// One layer's linear maps at the tp-local sizes, base then adapters: a dense layer's seven (six
// for a GeLU MLP), or with `moe` the attention's four, the router [E, C] over every token and the
// experts. The experts' products are priced as the routing were balanced: each of the E experts
// takes N k / E of the micro-batch's N tokens (its own GEMMs, each at the efficiency its smallest
// dimension gives, gemm_efficiency: fewer rows, lower efficiency). Under ep a rank holds E / ep of
// them and computes them over the rows of the ep group's ep N tokens, N k ep / E rows each (N k in
// all, as without ep), times the imbalance factor (PlanInput::moe_imbalance), which the all-to-all
// makes every rank wait for. The router is frozen under LoRA (as the trainer keeps it), trained in
// full training.
std::vector<LinearShape> layer_linears(const PlanInput& in, bool moe) {
  const auto& c = in.model.config;
  const double tp = double(in.mesh.tp), C = double(c.hidden_size), I = double(c.intermediate_size);
  const bool base_trains = !in.lora.enabled;
  std::vector<LinearShape> out;
  // q and o are heads x head_dim wide (hidden_size in LLaMA; 8192 against 5120 in Qwen3-32B).
  const double q = double(c.q_dim()), kv = double(c.kv_dim());
  LinearShape proj[kNumProj] = {{q / tp, C, base_trains},  {kv / tp, C, base_trains},
                                {kv / tp, C, base_trains}, {C, q / tp, base_trains},
                                {I / tp, C, base_trains},  {I / tp, C, base_trains},
                                {C, I / tp, base_trains}};
  if (moe) {
    const double E = double(c.num_experts), ep = double(in.mesh.ep);
    const double share = double(c.num_experts_per_tok) * ep / E, held = E / ep;
    const double load = in.mesh.ep > 1 ? in.expert_load() : 1.0;
    const double Ie = double(c.moe_intermediate_size) / tp;
    proj[kGate] = {Ie, C, base_trains, share, held, load};
    proj[kUp] = {Ie, C, base_trains, share, held, load};
    proj[kDown] = {C, Ie, base_trains, share, held, load};
    out.push_back({E, C, base_trains});  // the router
  }
  for (int p = 0; p < kNumProj; ++p)
    if (proj_exists(Proj(p), c)) out.push_back(proj[p]);  // a GeLU MLP (GPT-2) has no gate
  const auto on = lora_targets_mask(in.lora);
  const double r = double(in.lora.rank);
  for (int p = 0; p < kNumProj; ++p) {
    if (!on[p] || !proj_exists(Proj(p), c)) continue;
    const LinearShape& b = proj[p];
    out.push_back({r, b.in, true, b.rows, b.count, b.load}), out.push_back({b.out, r, true, b.rows, b.count, b.load});
  }
  return out;
}

// Keys one query is scored against, averaged over the layers and the positions of a sequence
// (train/flops.h attended_keys: min(window, position) under a sliding window).
double mean_attended_keys(const ModelConfig& c, int64_t seq) {
  double keys = 0.0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) keys += attended_keys(c.attention_window(l), seq);
  return keys / double(c.num_hidden_layers) / double(seq);
}

// Bytes the bias adds of one layer move per token (Qwen2's q/k/v biases; o and the MLP's where a
// family has them): the output read and written in the forward; in the backward its gradient read
// once more for the bias's gradient when the bias trains. Row-parallel outputs (o, down) are
// whole on every tensor-parallel rank, the others split.
std::pair<double, double> bias_bytes_per_token(const PlanInput& in) {
  const auto& c = in.model.config;
  const double t = in.precision == Precision::bf16 ? 2.0 : 4.0, tp = double(in.mesh.tp);
  double elems = 0.0;
  for (int p = 0; p < kNumProj; ++p) {
    if (!proj_has_bias(Proj(p), c)) continue;
    const double out = double(proj_dims(Proj(p), c).first);
    elems += (p == kO || p == kDown) ? out : out / tp;
  }
  return {2.0 * t * elems, in.lora.enabled ? 0.0 : t * elems};
}

// Forward and backward seconds of linear maps over N tokens: backward is dX, plus dW if trainable.
std::pair<double, double> linear_seconds(const Cluster& cl, const std::vector<LinearShape>& ls, double N) {
  double f = 0.0, b = 0.0;
  for (const auto& l : ls) {
    const double t = l.count * l.load * gemm_seconds(cl, N * l.rows, l.out, l.in);
    f += t;
    b += l.trainable ? 2.0 * t : t;
  }
  return {f, b};
}

struct StageMicroBatch {
  double forward = 0.0, backward = 0.0;  // compute of one micro-batch (recompute inside forward)
  double tp = 0.0, fsdp = 0.0, pp = 0.0, cp = 0.0, ep = 0.0;
};

// Context parallelism's traffic for one micro-batch over `layers` layers whose forward runs
// `forward_runs` times in all (recompute included), as parallel/context_parallel.cpp moves it:
// every forward all-gathers the whole rows' K and V (compute dtype) over the cp group; the
// backward gathers them again (they are not kept) and reduce-scatters dK and dV in f32. The
// gather runs before the attention that needs it and nothing else runs meanwhile, so all of it is
// exposed. (Document ids of packed rows, i32 and one column, are left out: 1/kv_width of K's.)
double context_parallel_seconds(const PlanInput& in, double layers, double forward_runs) {
  const auto& mesh = in.mesh;
  if (mesh.cp <= 1) return 0.0;
  const Link link = axis_link(mesh, parallel::Axis::cp, in.cluster);
  const double act = in.precision == Precision::bf16 ? 2.0 : 4.0;
  const double whole = double(in.micro_batch) * double(in.seq) * double(in.model.config.kv_dim() / mesh.tp);
  const double gather = 2.0 * ring_all_gather(act * whole, mesh.cp, link);  // K and V
  const double scatter = 2.0 * ring_reduce_scatter(4.0 * whole, mesh.cp, link);
  return (forward_runs + layers) * gather + layers * scatter;
}

StageMicroBatch stage_micro_batch(const PlanInput& in, const StageParams& s) {
  const Cluster& cl = in.cluster;
  const auto& c = in.model.config;
  const auto& mesh = in.mesh;
  const double N = double(in.micro_tokens()), C = double(c.hidden_size), tp = double(mesh.tp);
  const double act = in.precision == Precision::bf16 ? 2.0 : 4.0;
  StageMicroBatch r;

  // One layer: linears, causal flash attention (4·Q flops per query-key pair scored: about half
  // the T x T square, or the band a sliding window leaves), elementwise traffic (norms, q/k norms,
  // RoPE, the MLP's gate, residual adds: the bytes the layer saves), bias adds.
  // A mixture of experts' layers are its MoE layers' products, its dense ones' (mlp_only_layers)
  // the MLP's, in the model's proportion.
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.moe_layer(l) ? 1 : 0;
  const double moe_share = double(moe_layers) / double(c.num_hidden_layers);
  double lf = 0.0, lb = 0.0;
  for (const bool moe : {false, true}) {
    const double share = moe ? moe_share : 1.0 - moe_share;
    if (share <= 0.0) continue;
    const auto [f, b] = linear_seconds(cl, layer_linears(in, moe), N);
    lf += share * f, lb += share * b;
  }
  const double att_flops = 4.0 * N * mean_attended_keys(c, in.seq) * double(c.q_dim()) / tp;
  const double att = att_flops / (cl.peak_flops * cl.attention_efficiency);
  // The bytes a layer saves of the rows it computes: under ep a rank keeps room for ep x its N k
  // routed rows (memory_model.cpp) but, the routing balanced, computes N k of them, as without ep.
  PlanInput computed = in;
  computed.mesh.ep = 1;
  const double elem = activation_bytes(computed, 1, false, false).layer * kElementwiseTraffic / cl.memory_bandwidth;
  const auto [bias_f, bias_b] = bias_bytes_per_token(in);
  const double layer_f = lf + att + 0.5 * elem + N * bias_f / cl.memory_bandwidth;
  const double layer_b = lb + kAttentionBackwardRatio * att + 0.5 * elem + N * bias_b / cl.memory_bandwidth;
  const double L = double(s.layers);
  // Forward runs of a layer in all: with checkpointing twice; this engine's pipeline stages keep
  // only each micro-batch's input and run the forward again in the backward (parallel/pipeline.h),
  // but the last chunk runs both at once.
  double forward_layers = L * (in.checkpointing ? 2.0 : 1.0);
  if (in.mesh.pp > 1)
    forward_layers += L - (s.last ? double(stage_blocks(in).back()) : 0.0);
  // Preference training's forwards before the training pass (train/preference_step.h).
  const double extra = double(in.extra_forwards);
  forward_layers += extra * L;
  r.forward = forward_layers * layer_f;
  r.backward = L * layer_b;
  r.cp = context_parallel_seconds(in, L, forward_layers);
  // The stage's MoE layers in the model's proportion, as their compute above.
  r.ep = expert_parallel_seconds(in, moe_share * forward_layers, moe_share * L);
  if (s.last) {
    const double V = double(c.vocab_size) / tp;
    std::vector<LinearShape> head = {{V, C, !in.lora.enabled}};
    if (lora_targets_head(in.lora)) head.push_back({double(in.lora.rank), C, true}), head.push_back({V, double(in.lora.rank), true});
    auto [hf, hb] = linear_seconds(cl, head, N);
    r.forward += (1.0 + extra) * hf, r.backward += hb;
  }

  // Tensor parallel: Megatron's two all-reduces per layer forward, two backward, two more when
  // the forward is recomputed; one for the embedding, one for the head's input gradient. Under
  // sequence parallelism each is an all-gather and a reduce-scatter (the same ring traffic), and
  // the backward gathers the two norms' outputs again (one all-reduce's worth a layer) and the
  // embedding's input gradient (one more).
  if (mesh.tp > 1) {
    const Link link = axis_link(mesh, parallel::Axis::tp, cl);
    const bool sp = in.sequence_shards() > 1;
    const double per_layer = 4.0 + (sp ? 1.0 : 0.0) + (in.checkpointing ? 2.0 : 0.0) + 2.0 * extra;
    const double count = L * per_layer + (s.first ? (sp ? 2.0 : 1.0) : 0.0) + (s.last ? 1.0 : 0.0);
    r.tp = count * ring_all_reduce(act * N * C, mesh.tp, link);
  }
  // Sharded weights: gathered for forward and again for backward, gradients reduce-scattered,
  // once per micro-batch and unit (layer, embedding, head); over fsdp x cp (parallel::shard_spec:
  // the group spans the ranks of fsdp's, so its link is fsdp's), and over dp under ZeRO-3.
  const double wbytes = in.precision == Precision::bf16 ? 2.0 : 4.0;
  const double units = L + (s.first ? 1.0 : 0.0) + (s.last ? 1.0 : 0.0);
  // An NF4 base travels in its 4-bit blocks.
  auto gathers = [&](parallel::Axis axis, int64_t n, double gathered, double gathered_nf4, double gathered_trainable) {
    if (n <= 1) return 0.0;
    const Link link = axis_link(mesh, axis, cl);
    const double extra_latency = (units - 1.0) * double(n - 1) * link.latency;
    const double bytes = wbytes * (gathered - gathered_nf4) + kNf4BytesPerWeight * gathered_nf4;
    return (2.0 + extra) * (ring_all_gather(bytes, n, link) + extra_latency) +
           ring_reduce_scatter(4.0 * gathered_trainable, n, link) + extra_latency;
  };
  r.fsdp = gathers(parallel::Axis::fsdp, mesh.shards(), double(s.params.gathered), double(s.params.gathered_nf4),
                   double(s.params.gathered_trainable));
  if (in.zero >= 3)
    r.fsdp += gathers(parallel::Axis::dp, mesh.dp, double(s.params.local), double(s.params.local_nf4),
                      double(s.params.local_trainable));
  // An activation forward and its gradient back per chunk, in the compute dtype (pipeline.cpp).
  if (mesh.pp > 1)
    r.pp = (2.0 + extra) * double(in.pp_virtual) * point_to_point(wbytes * N * C, axis_link(mesh, parallel::Axis::pp, cl));
  return r;
}

}  // namespace

TimeBreakdown step_time(const PlanInput& in) { return step_time(in, stage_params(in)); }

TimeBreakdown step_time(const PlanInput& given, const std::vector<StageParams>& stages) {
  validate(given);
  // On a shared host every rank is priced with its share of the host (hardware.h rank_share).
  PlanInput in = given;
  in.cluster = rank_share(given.cluster, given.mesh.world());
  // What of the fsdp and dp traffic may hide behind compute: none without overlap, else the
  // cluster's measured fraction (1 on accelerators).
  const double hide = in.overlap ? in.cluster.comm_overlap : 0.0;
  const int64_t m = in.micro_batches(), p = in.mesh.pp;
  TimeBreakdown t;
  t.micro_batches = m;

  // The slowest stage sets the pipeline's pace.
  StageMicroBatch worst;
  double worst_t = -1.0;
  const StageParams* most_trainable = &stages[0];
  for (const auto& s : stages) {
    const StageMicroBatch r = stage_micro_batch(in, s);
    const double compute = r.forward + r.backward;
    const double fsdp_exposed = r.fsdp - std::min(hide * r.fsdp, compute);
    const double total = compute + r.tp + r.pp + r.cp + r.ep + fsdp_exposed;
    if (total > worst_t) worst_t = total, worst = r;
    if (s.params.local_trainable > most_trainable->params.local_trainable) most_trainable = &s;
  }
  const double compute = worst.forward + worst.backward;
  t.compute = double(m) * compute;
  t.tp = double(m) * worst.tp;
  t.pp = double(m) * worst.pp;
  t.cp = double(m) * worst.cp;
  t.ep = double(m) * worst.ep;
  t.fsdp = double(m) * worst.fsdp;
  t.fsdp_exposed = double(m) * (worst.fsdp - std::min(hide * worst.fsdp, compute));
  // Interleaved (v chunks per stage): a chunk's ops are 1/v of a stage's, so the fill and drain
  // take (p - 1) chunk-times of v m (Narayanan et al. 2021).
  const double v = double(in.pp_virtual);
  t.bubble = double(p - 1) * worst_t / v;
  t.bubble_fraction = double(p - 1) / (v * double(m) + double(p - 1));

  // Data parallel, once per step: all-reduce of the gradients, or (ZeRO 1-2) reduce-scatter of the
  // gradients and all-gather of the updated bf16 weights, over dp only: the cp ranks' partials are
  // summed by the reduce-scatters over fsdp x cp above (parallel/fsdp_units.cpp). Under ZeRO-3 the
  // gradients are reduce-scattered over dp with the fsdp traffic and nothing is left here. The
  // reduction runs in buckets during the last micro-batch's backward (parallel/gradient_buckets.h),
  // hidden but for what outlasts the backward and the last bucket, which can only start when the
  // backward ends; without buckets (dp_bucket_bytes 0) none of it is. Of what could hide, only the
  // cluster's comm_overlap does (none on a shared host). The gather waits for the optimizer.
  const double train = double(most_trainable->params.local_trainable);
  const double wbytes = in.precision == Precision::bf16 ? 2.0 : 4.0;
  const int64_t replicas = in.zero < 3 ? in.mesh.dp : 1;
  if (replicas > 1) {
    const Link link = axis_link(in.mesh, parallel::Axis::dp, in.cluster);
    const double shard = train;
    const double reduce = in.zero == 0 ? ring_all_reduce(4.0 * shard, replicas, link)
                                       : ring_reduce_scatter(4.0 * shard, replicas, link);
    const double gather = in.zero == 0 ? 0.0 : ring_all_gather(wbytes * train, replicas, link);
    t.dp = reduce + gather;
    const double last_bucket = in.dp_bucket_bytes > 0 ? std::min(1.0, in.dp_bucket_bytes / (4.0 * shard)) : 1.0;
    t.dp_exposed = reduce - std::min(hide * reduce * (1.0 - last_bucket), worst.backward) + gather;
  }
  // Under ep the ep ranks are replicas of every tensor but the experts: after the dp reduction the
  // sharded model sums those gradients over ep too (parallel/fsdp_units.cpp finish_gradients), one
  // all-reduce once the backward has ended, nothing hidden.
  if (in.mesh.ep > 1) {
    const double shared = train - double(most_trainable->params.local_expert_trainable);
    const double reduce = ring_all_reduce(4.0 * shared, in.mesh.ep, axis_link(in.mesh, parallel::Axis::ep, in.cluster));
    t.dp += reduce, t.dp_exposed += reduce;
  }
  const double opt_shard = in.zero >= 1 ? double(in.mesh.dp) : 1.0;
  t.optimizer = train / opt_shard * kOptimizerBytes / in.cluster.memory_bandwidth;

  t.step = t.compute + t.tp + t.pp + t.cp + t.ep + t.fsdp_exposed + t.bubble + t.dp_exposed + t.optimizer;
  const double tokens = double(in.global_batch) * double(in.seq);
  const double devices = double(in.mesh.world());
  t.tokens_per_s = tokens / t.step;
  t.model_flops = model_flops_per_token(in.model, in.lora, in.seq) * tokens;
  t.tflops_per_device = t.model_flops / t.step / devices / 1e12;
  t.mfu = t.model_flops / t.step / devices / in.cluster.peak_flops;
  t.megatron_flops = megatron_flops(in.global_batch, in.seq, in.model.layers(), in.model.hidden(),
                                    in.model.vocab(), in.checkpointing);
  t.megatron_fraction = t.megatron_flops / t.step / devices / in.cluster.peak_flops;
  return t;
}

}  // namespace mt::plan

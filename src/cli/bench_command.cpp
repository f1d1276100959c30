// meshtrain bench: this machine's bf16 GEMM throughput, then training throughput (tokens/s, MFU,
// peak memory, per-op time, and the GEMMs at the step's own shapes) on the reference shape or a
// preset cut to --layers blocks, full and LoRA (rank 8 or --lora-rank), bf16 mixed or fp32
// (--precision); under mpirun -n 2,
// `--what p2p`, the point-to-point time between the two ranks and its alpha-beta fit (the link a
// shared host's cluster TOML takes). Figures are printed, never
// asserted: machines are shared and noisy.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/profile.h"
#include <nlohmann/json.hpp>

#include "backend/device_buffer.h"
#include "core/work_gate.h"
#include "model/transformer.h"
#include "io/family_presets.h"
#include "model/presets.h"
#include "parallel/comm.h"
#include "train/adamw.h"
#include "train/flops.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/step.h"

namespace mt::cli {

namespace {

struct BenchOptions {
  std::string what = "all";
  int64_t steps = 4;
  int64_t batch = 4, seq = 512;
  bool checkpointing = false;
  double peak_gflops = 0.0;
  std::vector<int64_t> p2p_bytes = {4096, 65536, 1 << 20, 16 << 20};
  std::string preset = "reference";  // model/presets.h
  int64_t layers = 0;                // 0: the preset's
  int64_t lora_rank = 8;
  std::string precision = "bf16";    // of the training runs: bf16 (mixed) or fp32
  std::string json;                  // where to write the figures; empty: nowhere
  DeviceOption device;
};

// The figures of one run of bench, for --json.
nlohmann::json figures = nlohmann::json::object();

ModelConfig bench_shape(const BenchOptions& o) {
  ModelConfig c = published_preset(o.preset);
  if (o.layers > 0) c.num_hidden_layers = o.layers;
  c.max_position_embeddings = std::max(c.max_position_embeddings, o.seq);
  return c;
}

// A mixture of experts' dense twin: every MLP a dense SwiGLU of the k chosen experts' width
// together (k x moe_intermediate_size), so a token's MLP does the same FLOPs as its k experts
// (less the router's E x hidden). What an MoE layer's time is judged against.
ModelConfig dense_twin(ModelConfig c) {
  c.intermediate_size = c.num_experts_per_tok * c.moe_intermediate_size;
  c.num_experts = 0;
  c.mlp_only_layers.clear();
  return c;
}

// Seconds a step spends in the MLP half of the blocks, from the per-op profile: an MoE layer's
// ops ("moe ...") or a dense MLP's products and activation.
double mlp_seconds(const std::map<std::string, double>& totals) {
  static const char* dense[] = {"gemm fwd gate", "gemm fwd up", "gemm fwd down", "gemm bwd gate", "gemm bwd up",
                                "gemm bwd down", "swiglu forward", "swiglu backward"};
  double s = 0.0;
  for (const auto& [name, t] : totals) {
    bool mlp = name.rfind("moe ", 0) == 0;
    for (const char* d : dense) mlp = mlp || name == d;
    if (mlp) s += t;
  }
  return s;
}

// Seconds a step spends in its GEMMs, from the per-op profile: the projections' products
// ("gemm fwd/bwd ..."), the LM head's, the adapters', and an MoE layer's experts (whose ops hold
// their SwiGLU too, a few percent of them). The step's "GEMM roofline" is its tokens over this
// time: what it would reach were its GEMMs, at the speed they ran, all it did (issue 36's measure:
// a step within ~90% of it).
double gemm_seconds(const std::map<std::string, double>& totals) {
  double s = 0.0;
  for (const auto& [name, t] : totals)
    if (name.rfind("gemm ", 0) == 0 || name.rfind("lm_head ", 0) == 0 || name == "lora adapters" ||
        name == "moe experts" || name == "moe experts backward")
      s += t;
  return s;
}

struct TrainingFigures {
  double ms_per_step = 0.0, mlp_ms_per_step = 0.0;
};

// The bf16 products of one training step's linear layers at their own shapes (forward y = x W^T
// for the tokens of a step), each timed on `backend` for about `seconds`: what the step's GEMMs
// can reach, beside what the step reaches. Returns {name, TFLOP/s} pairs.
nlohmann::json bench_step_gemms(Backend& backend, const ModelConfig& c, int64_t tokens, double seconds) {
  const int64_t h = c.hidden_size, d = c.head_dim();
  struct Shape {
    const char* name;
    int64_t n, m;  // output features, rows
  };
  std::vector<Shape> outs = {{"q/o", c.num_attention_heads * d, tokens}, {"k/v", c.num_key_value_heads * d, tokens}};
  if (c.moe())  // one expert's rows when the routing spreads the tokens' choices evenly
    outs.push_back({"expert", c.moe_intermediate_size, std::max<int64_t>(1, tokens * c.num_experts_per_tok / c.num_experts)});
  else
    outs.push_back({"gate/up/down", c.intermediate_size, tokens});
  outs.push_back({"lm_head", c.vocab_size, tokens});
  std::printf("  GEMMs at this step's shapes (bf16, forward, %ld tokens):\n", long(tokens));
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, n, m] : outs) {
    DeviceBuffer x(backend, DType::bf16, m * h), w(backend, DType::bf16, n * h), y(backend, DType::f32, m * n);
    const Tensor xt = x.tensor().view(m, h), wt = w.tensor().view(n, h), yt = y.tensor().view(m, n);
    backend.linear_forward(yt, xt, wt);  // warm-up (the library picks its algorithm)
    backend.synchronize();
    int64_t reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double dt = 0.0;
    while (dt < seconds) {
      backend.linear_forward(yt, xt, wt);
      backend.synchronize();
      ++reps;
      dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double tflops = 2.0 * double(m) * double(h) * double(n) * double(reps) / dt / 1e12;
    std::printf("    %-12s [%ld x %ld] x [%ld x %ld]^T: %9.3f TFLOP/s\n", name, long(m), long(h), long(n),
                long(h), tflops);
    out.push_back({{"name", name}, {"m", m}, {"k", h}, {"n", n}, {"tflops", tflops}});
  }
  return out;
}

double bench_gemm() {
  std::printf("== bf16 GEMM throughput (%d threads; mean over ~1 s per size)\n", omp_get_max_threads());
  double best = 0.0;
  for (int64_t n : {1024, 2048, 4096}) {
    double f = measure_gemm_flops(n, 1.0, true);
    best = std::max(best, f);
    std::printf("  bf16 %5ld^3: %7.1f GFLOP/s\n", long(n), f / 1e9);
  }
  std::printf("  f32  %5d^3: %7.1f GFLOP/s (for reference)\n", 2048,
              measure_gemm_flops(2048, 1.0, false) / 1e9);
  std::printf("  peak used for MFU: %.1f GFLOP/s\n", best / 1e9);
  return best;
}

// One training run on `c`; its figures go into --json under `key`.
TrainingFigures bench_training(const BenchOptions& o, const ModelConfig& c, const std::string& shape, bool lora_on,
                               double peak, Backend& backend, const std::string& key) {
  LoraConfig lora;
  lora.enabled = lora_on;
  lora.rank = o.lora_rank;
  lora.alpha = 2.0f * float(o.lora_rank);
  if (c.model_type == "gpt2") lora.targets = {"c_attn", "c_proj", "c_fc"};  // GPT-2's modules
  const bool bf16 = o.precision == "bf16";
  memory_stats::reset_peak();
  memory_stats::reset_peak_rss();
  size_t rss_before = memory_stats::peak_rss_bytes();

  auto model = std::make_unique<Transformer>(c, bf16 ? Precision::bf16 : Precision::fp32, lora,
                                            /*own_storage=*/true, backend);
  model->init_weights(1);
  model->set_activation_checkpointing(o.checkpointing);
  OptimConfig oc;
  AdamW opt(model->trainable(), oc);
  std::mt19937 rng(42);
  std::vector<int32_t> tokens(size_t(o.batch * o.seq)), targets(tokens.size());
  for (auto& t : tokens) t = int32_t(rng() % c.vocab_size);
  for (auto& t : targets) t = int32_t(rng() % c.vocab_size);
  ModelInput in;
  in.tokens = tokens.data(), in.targets = targets.data(), in.B = o.batch, in.T = o.seq;

  FlopCount flops = training_flops(c, lora, o.seq);
  std::string adapted;
  for (const std::string& t : lora.targets) adapted += (adapted.empty() ? "" : ",") + t;
  const std::string kind = lora_on ? "LoRA r" + std::to_string(o.lora_rank) + " on " + adapted : "full";
  std::printf("\n== training, %s, %s, %s%s: batch %ld x seq %ld\n", shape.c_str(), bf16 ? "bf16 mixed" : "fp32",
              kind.c_str(),
              o.checkpointing ? ", activation checkpointing" : "", long(o.batch), long(o.seq));
  std::printf("  parameters: %ld base (%ld in matmuls), %ld trainable\n", long(model->base().numel()),
              long(flops.matmul_params), long(model->trainable().trainable_numel()));
  std::printf("  FLOPs/token: %.1f M = %s\n", flops.per_token / 1e6, flops.formula.c_str());
  if (c.moe())
    std::printf("  experts: %ld of %ld a token (width %ld), about %.0f rows per expert per layer and step\n",
                long(c.num_experts_per_tok), long(c.num_experts), long(c.moe_intermediate_size),
                double(o.batch * o.seq * c.num_experts_per_tok) / double(c.num_experts));

  train_step(*model, opt, {in}, oc, 0, lr_at(0, o.steps + 1, oc));  // warm-up: builds the GEMM primitives
  profile::reset();
  profile::enable(true);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 1; s <= o.steps; ++s) train_step(*model, opt, {in}, oc, s, lr_at(s, o.steps + 1, oc));
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile::enable(false);

  double tps = double(o.steps * o.batch * o.seq) / dt;
  std::printf("  %.0f tokens/s, %.0f ms/step, %.1f GFLOP/s, MFU %.1f%% of %.0f GFLOP/s\n", tps,
              1e3 * dt / double(o.steps), tps * flops.per_token / 1e9,
              100.0 * tps * flops.per_token / peak, peak / 1e9);
  std::printf("  peak memory: tensors %s (params+grads+optimizer %s, activations %s), process RSS %s\n",
              format_bytes(int64_t(memory_stats::peak_bytes())).c_str(),
              format_bytes(int64_t(model->base().bytes() + model->adapters().bytes() + opt.state_bytes())).c_str(),
              format_bytes(int64_t(model->activation_bytes())).c_str(),
              format_bytes(int64_t(std::max(memory_stats::peak_rss_bytes(), rss_before))).c_str());
  std::printf("  time per step by op:\n%s", profile::table(dt, o.steps).c_str());
  const double gemm_s = gemm_seconds(profile::totals());
  const double roofline_tps = gemm_s > 0.0 ? double(o.steps * o.batch * o.seq) / gemm_s : 0.0;
  if (gemm_s > 0.0)
    std::printf("  GEMM roofline: the GEMMs took %.0f of the %.0f ms a step (%.1f%%): %.0f tokens/s were they the "
                "whole step; the step reaches %.1f%% of that\n",
                1e3 * gemm_s / double(o.steps), 1e3 * dt / double(o.steps), 100.0 * gemm_s / dt, roofline_tps,
                100.0 * tps / roofline_tps);
  const TrainingFigures out{1e3 * dt / double(o.steps), 1e3 * mlp_seconds(profile::totals()) / double(o.steps)};
  nlohmann::json gemms = bench_step_gemms(model->backend(), c, o.batch * o.seq, 0.5);
  figures[key] = {
      {"shape", shape}, {"kind", kind}, {"precision", o.precision}, {"batch", o.batch}, {"seq", o.seq}, {"steps", o.steps},
      {"tokens_per_s", tps}, {"ms_per_step", 1e3 * dt / double(o.steps)},
      {"mfu", tps * flops.per_token / peak}, {"peak_gflops", peak / 1e9},
      {"peak_tensor_bytes", memory_stats::peak_bytes()}, {"gemms_at_step_shapes", gemms},
      {"profile", profile::table(dt, o.steps)}, {"mlp_ms_per_step", out.mlp_ms_per_step},
      {"gemm_ms_per_step", 1e3 * gemm_s / double(o.steps)}, {"gemm_roofline_tokens_per_s", roofline_tps},
      {"share_of_gemm_roofline", roofline_tps > 0.0 ? tps / roofline_tps : 0.0}};
  return out;
}

// The run of `kind` (full or LoRA) on the bench's shape; for a mixture of experts, then on its
// dense twin, and how the MoE layers' MLP time compares with the twin's (issue 32's target: an MoE
// layer within 1.5x a dense layer of the same active FLOPs).
void bench_kind(const BenchOptions& o, bool lora_on, double peak, Backend& backend) {
  const ModelConfig c = bench_shape(o);
  const std::string shape =
      o.preset + " shape" + (o.layers > 0 ? " cut to " + std::to_string(o.layers) + " blocks" : std::string());
  const std::string key = lora_on ? "lora" : "full";
  const TrainingFigures moe = bench_training(o, c, shape, lora_on, peak, backend, key);
  if (!c.moe()) return;
  const TrainingFigures dense = bench_training(o, dense_twin(c), shape + ", dense twin (MLP of k x " +
                                               std::to_string(c.moe_intermediate_size) + ")", lora_on, peak, backend,
                                               key + "_dense_twin");
  const double ratio = dense.mlp_ms_per_step > 0.0 ? moe.mlp_ms_per_step / dense.mlp_ms_per_step : 0.0;
  std::printf("\n== %s: MLP half of the blocks %.0f ms/step with experts, %.0f ms/step dense twin: %.2fx "
              "(steps %.0f vs %.0f ms)\n",
              lora_on ? "LoRA" : "full", moe.mlp_ms_per_step, dense.mlp_ms_per_step, ratio, moe.ms_per_step,
              dense.ms_per_step);
  figures[std::string(lora_on ? "lora" : "full") + "_moe_vs_dense_mlp"] = ratio;
}

struct P2pFit {
  double latency = 0.0, bandwidth = 0.0;  // seconds, bytes/s; bandwidth 0: no fit
};

// t = latency + bytes / bandwidth by least squares of the relative error (weights 1/t^2, so the
// small messages that set the latency count as much as the large ones that set the bandwidth):
// the alpha-beta model the planner prices links with (plan/collectives.h). A fitted latency at or
// below zero gives way to the smallest message's one-way time (an upper bound).
P2pFit fit_alpha_beta(const std::vector<std::pair<double, double>>& times) {
  if (times.size() < 2) return {};
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : times) {
    const double w = 1.0 / (y * y);
    sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  const double den = sw * sxx - sx * sx;
  if (den <= 0.0) return {};
  const double slope = (sw * sxy - sx * sy) / den;
  if (slope <= 0.0) return {};
  double latency = (sy - slope * sx) / sw;
  if (latency <= 0.0)
    latency = std::min_element(times.begin(), times.end())->second;  // the smallest size's time
  return {latency, 1.0 / slope};
}

// A ping-pong between the two ranks of the world (rank 0 sends, rank 1 sends the bytes back) with
// the blocking send / recv the pipeline's stages use: the one-way time of a message is half the
// round trip. scripts/pp_bench.sh divides a stage's sent bytes by the rate at the stage's message
// size to know how long its sends take when nothing hides them.
// Returns whether this is rank 0 (the one that prints and writes --json).
bool bench_p2p(const std::vector<int64_t>& sizes) {
  auto comm = parallel::make_world_comm();
  if (comm->size() != 2)
    fail("bench --what p2p needs two ranks (mpirun -n 2 meshtrain bench --what p2p), got " +
         std::to_string(comm->size()));
  const int peer = 1 - comm->rank();
  std::vector<std::pair<double, double>> times;  // bytes, one-way seconds
  if (comm->rank() == 0) std::printf("== point-to-point, 2 ranks, blocking send/recv ping-pong\n");
  for (int64_t bytes : sizes) {
    std::vector<char> buf(size_t(bytes), 1);
    // About 256 MiB each way, within [20, 2000] round trips: small messages repeat enough to
    // average the clock away, large ones stay quick. The first tenth warms the path up, untimed.
    const int64_t trips = std::clamp<int64_t>((int64_t(256) << 20) / bytes, 20, 2000);
    const int64_t warm = trips / 10;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < warm + trips; ++i) {
      if (i == warm) {
        comm->barrier();
        t0 = std::chrono::steady_clock::now();
      }
      if (comm->rank() == 0) {
        comm->send_bytes(buf.data(), bytes, peer, 0);
        comm->recv_bytes(buf.data(), bytes, peer, 0);
      } else {
        comm->recv_bytes(buf.data(), bytes, peer, 0);
        comm->send_bytes(buf.data(), bytes, peer, 0);
      }
    }
    double one_way = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                     double(2 * trips);
    if (comm->rank() == 0)
      std::printf("  %10ld bytes: one-way %9.2f us, %8.3f GB/s (%ld round trips)\n", long(bytes),
                  one_way * 1e6, double(bytes) / one_way / 1e9, long(trips));
    times.push_back({double(bytes), one_way});
  }
  if (comm->rank() != 0) return false;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [bytes, t] : times) rows.push_back({{"bytes", bytes}, {"one_way_s", t}});
  figures["p2p"] = rows;
  const P2pFit fit = fit_alpha_beta(times);
  if (fit.bandwidth <= 0.0) {
    std::printf("  (no alpha-beta fit: give --p2p-bytes at least two sizes whose times grow with the size)\n");
    return true;
  }
  std::printf("  alpha-beta fit (least squares of the relative error): latency %.2f us, bandwidth %.3f GB/s\n",
              fit.latency * 1e6, fit.bandwidth / 1e9);
  std::printf("  as a shared host's link in a cluster TOML (docs/planner.md, \"This machine\"):\n"
              "    [intra]\n    bandwidth_gbs = %.3g\n    latency_us = %.3g\n",
              fit.bandwidth / 1e9, fit.latency * 1e6);
  figures["p2p_fit"] = {{"latency_s", fit.latency}, {"bandwidth_bytes_per_s", fit.bandwidth}};
  return true;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* sub = app.add_subcommand(
      "bench", "Measure GEMM and training throughput on this machine, or (--what p2p) the time between two ranks");
  sub->add_option("--what", o->what, "gemm, full, lora, all (these three) or p2p (under mpirun -n 2)")
      ->check(CLI::IsMember({"gemm", "full", "lora", "all", "p2p"}));
  sub->add_option("--steps", o->steps, "timed training steps")->check(CLI::PositiveNumber);
  sub->add_option("--batch", o->batch, "sequences per step")->check(CLI::PositiveNumber);
  sub->add_option("--seq", o->seq, "sequence length")->check(CLI::Range(1, 2048));
  sub->add_flag("--checkpointing", o->checkpointing, "recompute each block in backward");
  sub->add_option("--peak-gflops", o->peak_gflops, "MFU denominator in GFLOP/s; 0: the measured GEMM peak");
  sub->add_option("--p2p-bytes", o->p2p_bytes, "message sizes of --what p2p, in bytes")
      ->check(CLI::PositiveNumber);
  sub->add_option("--preset", o->preset,
                  "model shape of the training runs (reference, an 8B..405B preset, GPT-2's sizes, or a family's "
                  "published shape: Gemma 3, Qwen, Mistral, the mixtures of experts, whose dense twin runs next)")
      ->check(CLI::IsMember(published_preset_names()));
  sub->add_option("--layers", o->layers, "cut the shape to this many blocks (0: the preset's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--lora-rank", o->lora_rank, "rank of the LoRA run's adapters")->check(CLI::PositiveNumber);
  sub->add_option("--precision", o->precision, "of the training runs: bf16 (mixed) or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  sub->add_option("--json", o->json, "also write the figures to this JSON file (default: none)");
  o->device.add_to(sub, "cpu");
  return [o] {
    const DeviceBackend backend = o->device.open();
    work_gate::reached("bench");
    auto write_json = [&] {
      if (o->json.empty()) return;
      std::ofstream f(o->json);
      f << figures.dump(2) << "\n";
      if (!f) fail("bench --json: cannot write " + o->json);
    };
    if (o->what == "p2p") {
      if (bench_p2p(o->p2p_bytes)) write_json();
      return 0;
    }
    double peak = o->peak_gflops * 1e9;
    // Without --peak-gflops, MFU is against the measured bf16 GEMM peak: this CPU's over the sizes of
    // bench_gemm, or a GPU's at one large square size (its dense datasheet peak is the honest
    // denominator there: H100/H200 --peak-gflops 989000).
    const bool on_cpu = &*backend == &cpu_backend();
    if (on_cpu && (o->what == "gemm" || o->what == "all" || peak <= 0.0)) peak = bench_gemm();
    if (!on_cpu && (o->what == "gemm" || o->what == "all" || peak <= 0.0)) {
      const double measured = measure_gemm_flops(4096, 1.0, true, *backend);
      std::printf("== bf16 GEMM throughput on %s: 4096^3 %.1f TFLOP/s\n", backend->name(), measured / 1e12);
      if (peak <= 0.0) peak = measured;
    }
    if (o->what == "full" || o->what == "all") bench_kind(*o, false, peak, *backend);
    if (o->what == "lora" || o->what == "all") bench_kind(*o, true, peak, *backend);
    write_json();
    return 0;
  };
}

}  // namespace mt::cli

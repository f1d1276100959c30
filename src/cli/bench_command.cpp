// meshtrain bench: this machine's bf16 GEMM throughput, then training throughput (tokens/s, MFU,
// peak memory, per-op time) on the reference shape, full bf16 and LoRA rank 8; under mpirun -n 2,
// `--what p2p`, the point-to-point time between the two ranks. Figures are printed, never
// asserted: machines are shared and noisy.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/profile.h"
#include "model/llama.h"
#include "model/presets.h"
#include "parallel/comm.h"
#include "train/adamw.h"
#include "train/flops.h"
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
  DeviceOption device;
};

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

void bench_training(const BenchOptions& o, bool lora_on, double peak, Backend& backend) {
  LlamaConfig c = llama_preset("reference");
  LoraConfig lora;
  lora.enabled = lora_on;
  lora.rank = 8;
  lora.alpha = 16.0f;
  memory_stats::reset_peak();
  memory_stats::reset_peak_rss();
  size_t rss_before = memory_stats::peak_rss_bytes();

  auto model = std::make_unique<LlamaModel>(c, Precision::bf16, lora, /*own_storage=*/true, backend);
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
  std::printf("\n== training, reference shape, bf16 mixed, %s%s: batch %ld x seq %ld\n",
              lora_on ? "LoRA r8 on q,k,v,o,gate,up,down" : "full",
              o.checkpointing ? ", activation checkpointing" : "", long(o.batch), long(o.seq));
  std::printf("  parameters: %ld base (%ld in matmuls), %ld trainable\n", long(model->base().numel()),
              long(flops.matmul_params), long(model->trainable().trainable_numel()));
  std::printf("  FLOPs/token: %.1f M = %s\n", flops.per_token / 1e6, flops.formula.c_str());

  train_step(*model, opt, {in}, oc, 0, o.steps + 1);  // warm-up: builds the GEMM primitives
  profile::reset();
  profile::enable(true);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 1; s <= o.steps; ++s) train_step(*model, opt, {in}, oc, s, o.steps + 1);
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
}

// A ping-pong between the two ranks of the world (rank 0 sends, rank 1 sends the bytes back) with
// the blocking send / recv the pipeline's stages use: the one-way time of a message is half the
// round trip. scripts/pp_bench.sh divides a stage's sent bytes by the rate at the stage's message
// size to know how long its sends take when nothing hides them.
void bench_p2p(const std::vector<int64_t>& sizes) {
  auto comm = parallel::make_world_comm();
  if (comm->size() != 2)
    fail("bench --what p2p needs two ranks (mpirun -n 2 meshtrain bench --what p2p), got " +
         std::to_string(comm->size()));
  const int peer = 1 - comm->rank();
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
  }
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
  o->device.add_to(sub, "cpu");
  return [o] {
    const DeviceBackend backend = o->device.open();
    if (o->what == "p2p") {
      bench_p2p(o->p2p_bytes);
      return 0;
    }
    double peak = o->peak_gflops * 1e9;
    if (o->what == "gemm" || o->what == "all" || peak <= 0.0) peak = bench_gemm();
    if (o->what == "full" || o->what == "all") bench_training(*o, false, peak, *backend);
    if (o->what == "lora" || o->what == "all") bench_training(*o, true, peak, *backend);
    return 0;
  };
}

}  // namespace mt::cli

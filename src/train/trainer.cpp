#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/memory_stats.h"
#include "core/profile.h"
#include "core/atomic_file.h"
#include "data/tokenizer_files.h"
#include "model/llama.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/mesh.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/flops.h"
#include "train/metrics.h"
#include "train/step.h"
#include "train/placed_model.h"
#include "train/training_data.h"

namespace mt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Mean validation loss over up to max_batches fixed batches, each split over the data-parallel
// ranks like training batches; a batch whose rows do not divide (the last, partial one) is
// counted by the group's first rank alone, so every token counts once. A sharded model's forward
// is collective, so there every rank runs that batch and only the first one counts it.
double evaluate(LlamaModel& model, TrainingData& data, int64_t max_batches, parallel::DataParallel& dp,
                bool collective) {
  LossSum total;
  PackedBatch b;
  data.reset_validation();
  for (int64_t i = 0; i < max_batches && data.next_validation(b); ++i) {
    LossSum s;
    if (b.batch_size % dp.ranks() == 0) {
      s = model.forward_loss(input_of(dp.slice(b)));
    } else if (dp.rank() == 0 || collective) {
      s = model.forward_loss(input_of(b));
      if (dp.rank() != 0) s = LossSum{};  // ran only to keep the collectives in step
    }
    total.sum += s.sum, total.count += s.count;
  }
  total.sum = dp.sum_loss(total.sum);
  total.count = dp.sum_count(total.count);
  return total.count ? total.sum / double(total.count) : std::nan("");
}

// Where progress goes: rank 0 prints, the others stay quiet.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

}  // namespace

TrainSummary train(const RunConfig& cfg, std::ostream& out) {
  if (cfg.train.threads > 0) omp_set_num_threads(int(cfg.train.threads));
  const auto& tc = cfg.train;
  // The mesh: refused before any work when it does not match the ranks launched.
  std::unique_ptr<parallel::Comm> world = parallel::make_world_comm();
  cfg.mesh.check_world(world->size());
  if (cfg.mesh.pp > 1)
    fail("mesh " + cfg.mesh.str() + ": pipeline parallelism (pp) is not implemented yet; use dp, "
         "fsdp and tp");
  parallel::Mesh mesh(*world, cfg.mesh);
  parallel::DataParallel dp(mesh.data_parallel());
  if (tc.batch_size % dp.ranks() != 0)
    fail("train.batch_size (" + std::to_string(tc.batch_size) + ") must be divisible by dp x fsdp (" +
         std::to_string(dp.ranks()) + ")");
  const bool leader = world->rank() == 0;  // prints and writes files
  NullBuffer null_buffer;
  std::ostream quiet(&null_buffer);
  std::ostream& log = leader ? out : quiet;
  auto tok = run_tokenizer(cfg);
  auto data = open_training_data(cfg, *tok, log);
  PlacedModel placed(cfg, mesh, dp, *tok, log);
  LlamaModel& model = placed.model();
  AdamW optimizer(placed.trainable(), cfg.optim);

  const FlopCount flops = training_flops(placed.full_config(), cfg.lora, tc.seq_len);
  const double peak = tc.peak_gflops > 0 ? tc.peak_gflops * 1e9
                                         : measure_gemm_flops(2048, 0.5, /*bf16=*/true);
  const int64_t tokens_per_step = tc.batch_size * tc.grad_accum * tc.seq_len;

  log << "meshtrain: " << (cfg.lora.enabled ? "LoRA" : "full") << " training, "
      << (tc.precision == Precision::bf16 ? "bf16 mixed" : "fp32") << ", "
      << (cfg.model_path.empty() ? "new model" : cfg.model_path) << ", "
      << placed.base_numel() << " base parameters, " << placed.trainable_numel() << " trainable"
      << (placed.sharded() ? ", sharded over mesh " + cfg.mesh.str() + " (" +
                                 std::to_string(placed.trainable().trainable_numel()) + " trainable on this rank)"
                           : std::string())
      << "\n"
      << "data: " << data->describe() << ", " << tok->kind() << " tokenizer\n"
      << "batch: " << tc.batch_size << " x " << tc.seq_len << " tokens x " << tc.grad_accum
      << " micro-batches = " << tokens_per_step << " tokens/step"
      << (dp.ranks() > 1 ? " over " + std::to_string(dp.ranks()) + " data-parallel ranks (mesh " +
                               cfg.mesh.str() + ")" : std::string())
      << (tc.activation_checkpointing ? ", activation checkpointing" : "") << "\n"
      << "MFU basis: " << flops.per_token / 1e6 << " MFLOP/token (" << flops.formula
      << ") over peak " << peak / 1e9 << " GFLOP/s ("
      << (tc.peak_gflops > 0 ? "given" : "measured bf16 GEMM") << ")\n";

  const std::string out_dir = cfg.output.dir;
  TrainSummary summary;
  std::unique_ptr<JsonlWriter> metrics;
  if (leader) {
    std::filesystem::create_directories(out_dir);
    const std::string config_path = out_dir + "/run.toml";
    write_file_atomically(config_path, [&](std::ostream& os) { os << to_toml(cfg); });
    summary.files_written.push_back(config_path);
    metrics = std::make_unique<JsonlWriter>(out_dir + "/metrics.jsonl", /*append=*/!tc.resume.empty());
    summary.files_written.push_back(metrics->path());
  }

  int64_t start_step = 0;
  if (!tc.resume.empty()) {
    const std::string dir = resolve_checkpoint(tc.resume, out_dir);
    const CheckpointState state = load_checkpoint(dir, placed.held_tensors(optimizer), optimizer,
                                                  cfg.lora.enabled);
    placed.refresh_compute_copies();
    data->restore(state.sampler);
    start_step = state.step;
    if (start_step >= tc.steps)
      fail(dir + ": checkpoint is at step " + std::to_string(start_step) + ", train.steps is " +
           std::to_string(tc.steps) + ": nothing left to do");
    log << "resumed from " << dir << " at step " << start_step << "\n";
  }

  const int64_t eval_batches = 8;
  summary.val_loss_before = data->has_validation() ? evaluate(model, *data, eval_batches, dp, placed.sharded()) : std::nan("");
  if (data->has_validation()) log << "validation loss before: " << summary.val_loss_before << "\n";

  auto t_start = Clock::now();
  profile::reset();
  double timed_seconds = 0.0;
  int64_t timed_tokens = 0;
  for (int64_t step = start_step; step < tc.steps; ++step) {
    auto t0 = Clock::now();
    std::vector<PackedBatch> micro;
    std::vector<ModelInput> inputs;
    // Every rank draws the same global batch and keeps its own rows.
    for (int64_t k = 0; k < tc.grad_accum; ++k)
      micro.push_back(dp.ranks() > 1 ? dp.slice(data->next()) : data->next());
    for (const PackedBatch& b : micro) inputs.push_back(input_of(b));
    // The first step builds the GEMM primitives: profile the steady state only.
    profile::enable(tc.profile && step > start_step);
    if (step == start_step + 1) placed.reset_comm_stats();  // steady state, as the timings
    const StepResult r = train_step(model, optimizer, inputs, cfg.optim, step, tc.steps, placed.sync());
    const double dt = seconds_since(t0);
    if (step > start_step || tc.steps - start_step == 1) timed_seconds += dt, timed_tokens += tokens_per_step;
    summary.losses.push_back(r.loss);

    StepMetrics m;
    m.step = step + 1;
    m.total_steps = tc.steps;
    m.loss = r.loss;
    m.lr = r.lr;
    m.tokens_per_s = double(tokens_per_step) / dt;
    m.mfu = m.tokens_per_s * flops.per_token / (peak * world->size());  // peak is per process
    m.peak_mem_bytes = int64_t(memory_stats::peak_rss_bytes());
    m.elapsed_s = seconds_since(t_start);
    m.eta_s = m.elapsed_s / double(step + 1 - start_step) * double(tc.steps - step - 1);
    auto j = step_json(m);
    j["grad_norm"] = r.grad_norm;
    j["counted_tokens"] = r.counted_tokens;
    j["peak_tensor_bytes"] = memory_stats::peak_bytes();
    if (metrics) metrics->write(j);
    if ((step + 1) % tc.log_every == 0 || step + 1 == tc.steps) log << format_progress_line(m) << "\n";
    const int64_t every = cfg.output.checkpoint_every;
    if (every > 0 && ((step + 1) % every == 0 || step + 1 == tc.steps)) {
      const std::string dir = save_checkpoint(out_dir, {step + 1, data->state()},
                                              placed.held_tensors(optimizer), optimizer,
                                              {to_toml(cfg), cfg.mesh.str(), cfg.lora.enabled},
                                              cfg.output.keep_checkpoints, *world);
      log << "checkpoint: " << dir << "\n";
    }
    log.flush();
  }

  profile::enable(false);
  if (tc.profile && timed_seconds > 0)
    log << "time per step by op (steps after the first):\n"
        << profile::table(timed_seconds, std::max<int64_t>(1, tc.steps - start_step - 1));
  summary.tokens_per_s = timed_seconds > 0 ? double(timed_tokens) / timed_seconds : 0.0;
  const int64_t steady_steps = tc.steps - start_step - 1;
  if (placed.sharded() && steady_steps > 0)
    summary.fsdp_wait_s_per_step = placed.exposed_comm_seconds() / double(steady_steps);
  summary.mfu = summary.tokens_per_s * flops.per_token / (peak * world->size());
  summary.val_loss_after = data->has_validation() ? evaluate(model, *data, eval_batches, dp, placed.sharded()) : std::nan("");
  summary.peak_rss_bytes = memory_stats::peak_rss_bytes();
  // The largest rank's peak is what a machine must hold: gather every rank's.
  std::vector<int64_t> peaks(size_t(world->size()), 0);
  peaks[size_t(world->rank())] = int64_t(summary.peak_rss_bytes);
  world->all_reduce_sum(peaks.data(), int64_t(peaks.size()));
  summary.peak_rss_max_rank_bytes = size_t(*std::max_element(peaks.begin(), peaks.end()));
  summary.peak_tensor_bytes = memory_stats::peak_bytes();

  for (auto& f : placed.export_model(out_dir + (cfg.lora.enabled ? "/adapter" : "/model")))  // collective
    summary.files_written.push_back(f);
  if (leader && !cfg.lora.enabled) {
    for (auto& f : save_tokenizer_files(tokenizer_source(cfg), out_dir + "/model"))
      summary.files_written.push_back(f);
  }

  log << "done: " << tc.steps << " steps, final loss " << summary.losses.back();
  if (data->has_validation())
    log << ", validation loss " << summary.val_loss_before << " -> " << summary.val_loss_after;
  log << "\n"
      << "throughput: " << std::lround(summary.tokens_per_s) << " tokens/s, MFU "
      << std::round(summary.mfu * 1000.0) / 10.0 << "%, peak memory "
      << format_bytes(int64_t(summary.peak_rss_bytes)) << " (tensors "
      << format_bytes(int64_t(summary.peak_tensor_bytes)) << ")"
      << (world->size() > 1 ? ", largest rank " + format_bytes(int64_t(summary.peak_rss_max_rank_bytes))
                            : std::string())
      << "\n";
  if (placed.sharded())
    log << "FSDP collectives: " << std::round(summary.fsdp_wait_s_per_step * 1e4) / 10.0
        << " ms/step spent waiting (rank 0; gathers " << (tc.fsdp_prefetch ? "prefetched" : "not prefetched")
        << ")\n";
  log << "wrote:\n";
  for (const auto& f : summary.files_written) log << "  " << f << "\n";
  return summary;
}

}  // namespace mt

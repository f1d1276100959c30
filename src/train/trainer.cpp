#include "train/trainer.h"
#include "train/thread_count.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/profile.h"
#include "data/chat_jinja.h"
#include "data/tokenizer_files.h"
#include "io/adapter_template.h"
#include "model/transformer.h"
#include "parallel/checked_comm.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/device_comms.h"
#include "train/comm_report.h"
#include "parallel/launch_env.h"
#include "parallel/mesh.h"
#include "parallel/rank_places.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_manifest.h"
#include "train/device_choice.h"
#include "train/flops.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/placed_model.h"
#include "train/preference_data.h"
#include "train/preference_step.h"
#include "train/reference_logps.h"
#include "train/resume_config.h"
#include "train/model_identity.h"
#include "train/resumed_run_config.h"
#include "train/run_agreement.h"
#include "train/run_directory.h"
#include "train/run_layout.h"
#include "train/run_summary.h"
#include "train/sequence_length.h"
#include "train/step.h"
#include "train/stop_signals.h"
#include "train/training_data.h"

namespace mt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What the run trains, as its first and last log lines and run_summary.json name it.
const char* training_mode(const RunConfig& cfg) {
  return !cfg.lora.enabled ? "full" : cfg.lora.quantized_base() ? "QLoRA (an NF4 base)" : "LoRA";
}

// The square GEMM that measures this machine's bf16 FLOP/s, the MFU basis.
int64_t gemm_measure_size(Backend& backend) { return &backend == &cpu_backend() ? 2048 : 4096; }

// That measurement made before a run allocates anything of its own: its buffers and the CPU's
// widened operands are freed and the process's peaks restarted after it, so that the peak memory
// a run reports is the run's. (The built-in run on an AVX2 CPU reported 163 MiB measuring, 59 MiB
// given train.peak_gflops; now 68 MiB: what stays is library code the 2048^2 kernels touched,
// file-backed pages, ~3 MB at the model's load.)
float gemm_gflops_before_the_run(Backend& backend) {
  const double flops = measure_gemm_flops(gemm_measure_size(backend), 0.5, /*bf16=*/true, backend);
  backend.release_scratch();
  memory_stats::restart_peaks();
  return float(flops / 1e9);
}

// Where progress goes: rank 0 prints, the others stay quiet.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

// The world, refused before any work when the ranks were given different configs or the mesh
// does not match the ranks launched. With several ranks every collective is numbered and watched
// (parallel/checked_comm.h); the signature checks start once the ranks agree on whether to make them.
std::unique_ptr<parallel::Comm> open_world(const RunConfig& cfg) {
  const parallel::MeshShape& shape = cfg.mesh;
  std::unique_ptr<parallel::Comm> world = parallel::make_world_comm();
  if (world->size() > 1) {
    auto checked = std::make_unique<parallel::CheckedComm>(
        std::move(world), cfg.train.collective_timeout, "train.collective_timeout");
    require_same_run_config(cfg, *checked);
    checked->check_signatures(cfg.train.debug_collectives);
    world = std::move(checked);
  }
  shape.check_world(world->size());
  if (world->size() > 1) parallel::set_comm_progress(parallel::parse_comm_progress(cfg.train.comm_progress));
  return world;
}

// Whether the mesh gathers parameters over fsdp x cp or splits them over tp: the runs whose FSDP
// wait is reported (a pipeline alone has no gathers).
bool gathers_or_splits(const parallel::MeshShape& m) { return m.shards() > 1 || m.tp > 1; }

// The group (dp x fsdp x ep) that shares out each batch's rows, and the cp ranks that share out each
// row, refused before any work when they cannot split the batch or its rows evenly.
parallel::DataParallel data_parallel(parallel::Mesh& mesh, const RunConfig& cfg) {
  parallel::Comm& group = mesh.data_parallel();
  check_batch_split(cfg.train.batch_size, group.size());
  check_context_split(cfg, mesh.shape().cp);
  check_sequence_split(cfg, mesh.shape());
  return parallel::DataParallel(group, mesh.token_parallel(), mesh.axis(parallel::Axis::cp));
}

// The device twins of the mesh's groups (train.device_comm), attached before any device buffer
// travels; a device comm this build or backend cannot give is refused before anything is written.
struct DeviceComms {
  DeviceComms(parallel::Mesh& mesh, Backend& backend, const TrainConfig& tc)
      : how(parallel::attach_device_comms(
            mesh, backend, parallel::parse_device_comm(tc.device_comm, "train.device_comm"))) {}
  std::string how;  // for the log
};

// Setup: everything the step loop and the finish work with. The members are built in the order
// they are declared, which is the order the work must happen in (the mesh is checked before
// anything loads, the model is placed before the optimizer takes its trainable tensors); the
// model keeps references to the mesh and its data-parallel group, so a run never moves.
struct TrainingRun {
  // Builds the members (claiming output.dir before the model loads), logs the run's header, resumes
  // from train.resume if given, writes run.toml and opens metrics.jsonl, and measures the
  // validation loss the finish compares against.
  TrainingRun(const RunConfig& cfg, const StopSignals& stop, std::ostream& out, Backend& backend);
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // A copy: with train.epochs the run's steps are known only once the data is open.
  RunConfig cfg;
  const TrainConfig& tc;
  Backend& backend;  // the device the model, the optimizer and the activations live on
  const StopSignals& stop;
  std::unique_ptr<parallel::Comm> world;
  parallel::Mesh mesh;
  DeviceComms device_comms;
  // This machine's bf16 GEMM FLOP/s when the run measures it at its start (0 when given or
  // recorded): measured first, before the tokenizer, the data and the model, and the process's
  // peaks restarted after it, so that its buffers are not reported as the run's memory.
  const float measured_gflops;
  parallel::DataParallel dp;
  const bool leader;  // prints and writes files
  NullBuffer null_buffer;
  std::ostream quiet{&null_buffer};
  std::ostream& log;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TrainingData> data;
  // Claimed once the inputs are known to open (a bad data path is named as such, leaving the
  // directory untouched) and before the model, the slow part, loads.
  RunDirectory run_dir;
  PlacedModel placed;
  AdamW optimizer;
  // The model and tokenizer trained, as every checkpoint records them (train/model_identity.h).
  const std::vector<std::pair<std::string, std::string>> identity;
  const FlopCount flops;
  // FLOP/s of one process, the MFU denominator: one per run (resolve_peak), a float number of
  // GFLOP/s so that the checkpoints' record of it (train.peak_gflops) reads back to the same value.
  double peak = 0.0;
  const int64_t tokens_per_step;
  std::unique_ptr<JsonlWriter> metrics;  // rank 0's
  int64_t start_step = 0;                // a resumed run's checkpoint step
  SegmentStart segment_start;            // that step and the rows drawn by then (checkpoints record it)
  // The lr of each step: fresh, or as a resumed run continues its checkpoint's (train/lr_schedule.h).
  LrSchedule lr_schedule;
  // output.keep_best: the lowest validation loss of a checkpoint so far (rank 0's).
  double best_val_loss = std::numeric_limits<double>::infinity();
  // train.eval_every: the validation loss measured after the last step, which the finish reports.
  double last_step_val_loss = std::nan("");
  TrainSummary summary;                  // filled in as the run goes
  // Preference training (TrainConfig::preference): its loss, where its reference comes from,
  // the reference log-probabilities of every sequence of the data when precomputed (indexed as
  // PreferenceData::last_sequences), and the metrics of the last validation.
  PreferenceSetup pref;
  std::vector<CompletionLogp> reference;
  PreferenceMetrics val_preference;

  PreferenceData& preference_data() { return static_cast<PreferenceData&>(*data); }
  // A forward of one micro-batch as the model is placed (a pipeline's is collective over its stages).
  LossSum forward(const ModelInput& in) {
    parallel::Pipeline* pipeline = placed.pipeline();
    return pipeline ? pipeline->forward_loss(in) : placed.model().forward_loss(in);
  }

 private:
  void log_header();
  void open_outputs();
  float resume();
  void resolve_peak(float recorded_gflops);
  void restore_best();
  void prepare_reference();
};

// Preference training's setup from the config: the loss and its keys, the reference model
// (preference.reference "auto": the adapters off under LoRA, else precomputed), and whether this
// rank's forwards compute the tokens' losses (a pipeline's last stage holds the head).
PreferenceSetup preference_setup(const RunConfig& cfg, PlacedModel& placed) {
  PreferenceSetup s;
  if (!cfg.train.preference()) return s;
  s.loss = preference_loss_config(cfg);
  const std::string& given = cfg.preference.reference;
  const std::string how = given != "auto" ? given : cfg.lora.enabled ? "adapters_off" : "precomputed";
  s.reference = !needs_reference(s.loss.loss) ? ReferenceSource::kNone
                : how == "adapters_off"        ? ReferenceSource::kAdaptersOff
                                               : ReferenceSource::kGiven;
  if (const parallel::Pipeline* pipeline = placed.pipeline())
    s.holds_loss = pipeline->stage() == int(pipeline->blocks().size()) / pipeline->chunks() - 1;
  return s;
}

// This rank's rows of a batch whose rows the data-parallel ranks do not divide (a validation set's
// last, partial one): ceil(B / n) rows on every rank, rank r's [r * m, (r + 1) * m) of the B, then
// stand-ins (copies of row 0 whose targets count nothing) up to m. So no rank runs more rows than
// a whole batch's share (the memory a training micro-batch has), and every rank runs as many as
// its peers: an ep group's ranks receive rows sized by their own tokens (model/moe.h
// moe_expert_rows). Under cp each row is then split as DataParallel::slice's are.
PackedBatch padded_slice(const parallel::DataParallel& dp, const PackedBatch& full) {
  const int64_t n = dp.ranks(), B = full.batch_size, T = full.seq_len;
  const int64_t rows = (B + n - 1) / n, first = std::min<int64_t>(B, dp.rank() * rows);
  const int64_t own = std::min<int64_t>(B, first + rows) - first;
  auto cut = [&](const std::vector<int32_t>& v, bool targets) {
    if (v.empty()) return v;
    std::vector<int32_t> out(v.begin() + first * T, v.begin() + (first + own) * T);
    for (int64_t r = own; r < rows; ++r) {  // a stand-in: row 0 again, no target counted
      if (targets)
        out.insert(out.end(), size_t(T), -1);
      else
        out.insert(out.end(), v.begin(), v.begin() + T);
    }
    return out;
  };
  PackedBatch out;
  out.tokens = cut(full.tokens, false);
  out.targets = cut(full.targets, true);
  out.positions = cut(full.positions, false);
  out.segments = cut(full.segments, false);
  // A stand-in is padding throughout, so a mixture of experts' routing losses (which count the
  // tokens that are not padding, as HF's attention mask) do not see it either.
  if (own < rows) {
    out.padding = full.padding.empty() ? std::vector<int32_t>(size_t(own * T), 0)
                                       : std::vector<int32_t>(full.padding.begin() + first * T,
                                                              full.padding.begin() + (first + own) * T);
    out.padding.resize(size_t(rows * T), 1);
  } else {
    out.padding = cut(full.padding, false);
  }
  out.batch_size = rows;
  out.seq_len = T;
  return dp.sequence(out);
}

// Collective: the completion log-probability of each row of batch `b` (every rank's copy of it),
// its rows split over the data-parallel ranks, and summed over the ranks so that every rank
// returns all of them. A batch the ranks do not divide (validation's last, partial one; the
// reference pass's last) is shared out as plain validation's is, ceil(B / n) rows a rank with
// stand-ins after the batch's last row (padded_slice): they count no token, and their places past
// the B rows are dropped. (Run whole on every rank, as it was, such a batch held B rows'
// activations on each, more than a training micro-batch's share.)
std::vector<CompletionLogp> batch_logps(TrainingRun& run, const PackedBatch& b, bool adapters_off) {
  parallel::DataParallel& dp = run.dp;
  const int64_t n = dp.ranks(), share = (b.batch_size + n - 1) / n;
  const PackedBatch local = b.batch_size % n == 0 ? dp.slice(b) : padded_slice(dp, b);
  ModelInput in = input_of(local);
  in.noise.first_row = dp.rank() * share;
  std::vector<CompletionLogp> all =
      completion_logps({in}, share * n, adapters_off, run.pref.holds_loss, run.placed.sync(),
                       [&](const ModelInput& m) { return run.forward(m); });
  all.resize(size_t(b.batch_size));
  return all;
}

// Collective: the preference loss over the held-out pairs, their metrics into run.val_preference.
double preference_validation(TrainingRun& run) {
  PreferenceData& data = run.preference_data();
  data.reset_validation();
  const PreferenceResult r = pairs_loss(
      data, [&](PackedBatch& b) { return data.next_validation(b); }, run.pref.loss, run.pref.reference,
      run.reference, [&](const PackedBatch& b, bool adapters_off) { return batch_logps(run, b, adapters_off); });
  run.val_preference = r.metrics;
  return r.loss;
}

// Mean validation loss over the held-out set's first rows, train.eval_tokens of them whatever the
// batch size (NaN when the data has none), in batches of train.batch_size rows (the memory a
// training micro-batch has), each split over the data-parallel ranks like training batches; a batch
// whose rows do not divide (the last, partial one) is shared out too, ceil(rows / ranks) a rank with
// stand-in rows that count nothing (padded_slice), so every token counts once and no
// rank holds more activations than a training micro-batch's. (Run whole on every rank, as it was,
// 3 rows of a 4-row batch made a 4-rank fsdp x ep run's peak 3 rows' activations, 21% over the
// plan: docs/planner.md.) A sharded model's forward is collective: every rank runs every batch.
double validation_loss(TrainingRun& run) {
  if (!run.data->has_validation()) return std::nan("");
  if (run.tc.preference()) return preference_validation(run);
  Transformer& model = run.placed.model();
  parallel::Pipeline* pipeline = run.placed.pipeline();
  const auto forward_loss = [&](const ModelInput& in) {
    return pipeline ? pipeline->forward_loss(in) : model.forward_loss(in);
  };
  parallel::DataParallel& dp = run.dp;
  LossSum total;
  PackedBatch b;
  run.data->reset_validation();
  while (run.data->next_validation(b)) {
    const LossSum s = forward_loss(input_of(b.batch_size % dp.ranks() == 0 ? dp.slice(b) : padded_slice(dp, b)));
    total.sum += s.sum, total.count += s.count;
  }
  total.sum = dp.sum_loss(total.sum);
  total.count = dp.sum_count(total.count);
  return total.count ? total.sum / double(total.count) : std::nan("");
}

// train.epochs as steps: every step takes batch_size x grad_accum rows of the epoch's; the last
// step may run into the next epoch (the samplers continue there).
int64_t steps_for_epochs(const TrainConfig& tc, int64_t rows_per_epoch, std::ostream& log) {
  const int64_t rows_per_step = tc.batch_size * tc.grad_accum;  // bounded by the config's check
  const double steps = std::ceil(double(tc.epochs) * double(rows_per_epoch) / double(rows_per_step));
  if (!(steps >= 1)) fail("train.epochs = " + std::to_string(tc.epochs) + " of " + std::to_string(rows_per_epoch) +
                          " rows per epoch is less than one step; give train.steps or more data");
  if (steps > 0x1p40)
    fail("train.epochs = " + std::to_string(tc.epochs) + " is " + std::to_string(steps) +
         " steps, more than train.steps may be (2^40)");
  log << "epochs: " << tc.epochs << " x " << rows_per_epoch << " rows / (" << tc.batch_size << " x "
      << tc.grad_accum << " rows a step) = " << int64_t(steps) << " steps\n";
  return int64_t(steps);
}

TrainingRun::TrainingRun(const RunConfig& cfg, const StopSignals& stop, std::ostream& out, Backend& backend)
    : cfg(cfg),
      tc(this->cfg.train),
      backend(backend),
      stop(stop),
      world(open_world(cfg)),
      mesh(*world, cfg.mesh),
      device_comms(mesh, backend, tc),
      measured_gflops(tc.peak_gflops <= 0 && tc.resume.empty() ? gemm_gflops_before_the_run(backend) : 0.0f),
      dp(data_parallel(mesh, this->cfg)),
      leader(world->rank() == 0),
      log(leader ? out : quiet),
      tok(run_tokenizer(cfg)),
      data(open_training_data(cfg, *tok, log)),
      run_dir(cfg, *world, log),
      placed(cfg, mesh, dp, *tok, log, backend),
      optimizer(placed.trainable(), cfg.optim),
      identity(model_identity(placed.full_config(), *tok)),
      flops(training_flops(placed.full_config(), cfg.lora, tc.seq_len)),
      tokens_per_step(mul_or_fail(mul_or_fail(tc.batch_size, tc.grad_accum, "train.batch_size x train.grad_accum"),
                                  tc.seq_len, "the tokens of a step")),
      lr_schedule(fresh_lr_schedule(cfg.optim, tc.steps)),
      pref(preference_setup(cfg, placed)) {
  if (tc.epochs > 0) {
    this->cfg.train.steps = steps_for_epochs(tc, data->rows_per_epoch(), log);
    lr_schedule = fresh_lr_schedule(this->cfg.optim, tc.steps);
    // A run by steps is warned by the train command; this one's steps are known only now.
    if (const std::string w = warmup_warning(lr_schedule); !w.empty() && tc.resume.empty()) log << w << "\n";
  }
  if (tc.eval_every > 0 && !data->has_validation())
    fail("train.eval_every = " + std::to_string(tc.eval_every) +
         " but the data has no held-out validation set; set data.val_fraction > 0");
  log_header();
  resolve_peak(tc.resume.empty() ? 0.0f : resume());
  open_outputs();
  prepare_reference();
  summary.val_loss_before = validation_loss(*this);
  if (data->has_validation()) log << "validation loss before: " << summary.val_loss_before << "\n";
}

void TrainingRun::log_header() {
  // Every rank runs the header (the others into a null stream), so the gather of places is
  // collective.
  if (world->size() > 1) {
    const parallel::LaunchEnv env = parallel::read_launch_env();
    log << "world: "
        << parallel::describe_rank_places(parallel::gather_rank_places(*world, env), env.launcher)
        << "\n"
        << "device buffers travel by " << device_comms.how << " (train.device_comm = \""
        << tc.device_comm << "\"); non-blocking collectives moved by "
        << (tc.comm_progress == "thread" ? "a communication thread"
            : tc.comm_progress == "ops"  ? "the compute ops"
                                         : "their waits only")
        << " (train.comm_progress = \"" << tc.comm_progress << "\")\n";
    if (const std::string how = placed.describe_gradient_reduction(); !how.empty())
      log << "data-parallel gradients: " << how << " (train.dp_bucket_mb = " << tc.dp_bucket_mb << ")\n";
  }
  log << "meshtrain: " << training_mode(cfg) << " training, "
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
      << (data->has_validation() ? "validation: " + std::to_string(data->num_validation_rows()) + " held-out rows of " +
                                       std::to_string(tc.seq_len) + " tokens (train.eval_tokens = " +
                                       std::to_string(tc.eval_tokens) + ")\n"
                                 : std::string())
      << (backend.device().kind != DeviceKind::cpu ? "device: " + std::string(backend.name()) + "\n" : "");
}

// One MFU basis per run, so that MFU does not jump at a resume: train.peak_gflops when given;
// else the peak a resumed run's checkpoint recorded (measured at the run's first start); else
// this machine's bf16 GEMM, measured now. Every checkpoint records it (checkpoint()).
void TrainingRun::resolve_peak(float recorded_gflops) {
  std::string source = "given";
  float gflops = tc.peak_gflops;
  if (gflops <= 0 && recorded_gflops > 0) {
    gflops = recorded_gflops;
    source = "measured at the run's first start, recorded in its checkpoint";
  } else if (gflops <= 0 && measured_gflops > 0) {
    gflops = measured_gflops;
    source = "measured bf16 GEMM";
  } else if (gflops <= 0) {  // a resume from a checkpoint that recorded none
    gflops = float(measure_gemm_flops(gemm_measure_size(backend), 0.5, /*bf16=*/true, backend) / 1e9);
    source = "measured bf16 GEMM now: the checkpoint recorded none";
  }
  peak = double(gflops) * 1e9;
  log << "MFU basis: " << flops.per_token / 1e6 << " MFLOP/token (" << flops.formula << ") over peak "
      << peak / 1e9 << " GFLOP/s (" << source << ")\n";
}

// A resumed run appends to the metrics of the steps up to its checkpoint (RunDirectory::rewind_to
// has dropped any after it).
void TrainingRun::open_outputs() {
  if (!leader) return;
  std::filesystem::create_directories(cfg.output.dir);
  const std::string config_path = cfg.output.dir + "/run.toml";
  // Replacing another run is a decision for the command line that made it, not one a rerun of
  // run.toml should repeat silently, so the record says overwrite = false.
  RunConfig recorded = cfg;
  recorded.output.overwrite = false;
  make_input_paths_absolute(recorded);  // run.toml's paths would be read relative to output.dir
  write_file_atomically(config_path, [&](std::ostream& os) { os << to_toml(recorded); });
  summary.files_written.push_back(config_path);
  metrics = std::make_unique<JsonlWriter>(cfg.output.dir + "/metrics.jsonl",
                                          /*append=*/!tc.resume.empty());
  // A resumed run's summary is of the run it resumes until this one ends and writes its own.
  std::filesystem::remove(cfg.output.dir + "/run_summary.json");
  summary.files_written.push_back(metrics->path());
}

// Returns the MFU basis the checkpoint recorded, in GFLOP/s (0: none, a checkpoint written before
// it was recorded).
float TrainingRun::resume() {
  const std::string dir = resolve_checkpoint(tc.resume, cfg.output.dir);
  // What this run changes from the run it resumes (before open_outputs rewrites run.toml).
  if (leader)
    if (const std::string note = resume_note(cfg); !note.empty()) log << note << "\n";
  // The config first: a changed model key would otherwise surface as a tensor of another shape.
  const CheckpointManifest manifest = read_checkpoint_manifest(dir);
  require_resumable_config(cfg, manifest.config, dir);
  // And the model those keys do not name: config.json, the weights' directory, the tokenizer.
  if (!manifest.model.empty())
    require_same_model_identity(manifest.model, identity, dir);
  // A precomputed reference is the starting model's: read back (the trained model cannot give it).
  if (tc.preference() && pref.reference == ReferenceSource::kGiven)
    reference = read_reference_logps(reference_logps_path(cfg.output.dir), preference_data().sequences());
  const std::vector<HeldTensor> held = placed.held_tensors(optimizer);
  const CheckpointState state = load_checkpoint(dir, held, optimizer, cfg.lora.enabled);
  placed.refresh_compute_copies();
  // Each rank read the checkpoint itself (on several hosts, its own copy): replicas that loaded
  // different values would drift apart silently.
  placed.require_equal_replicas("each rank loads the checkpoint itself, " + dir + ": give every rank the same copy",
                                moment_blocks(held, optimizer));
  data->restore(state.sampler);
  start_step = state.step;
  segment_start = {state.step, state.sampler.rows_drawn};
  if (start_step >= tc.steps)
    fail(dir + ": checkpoint is at step " + std::to_string(start_step) + ", train.steps is " +
         std::to_string(tc.steps) + ": nothing left to do");
  // The schedule the checkpoint was trained under, continued, or re-planned from here when its
  // keys changed (a longer train.steps): the steps taken keep their lr.
  const RunConfig saved = parse_run_config(manifest.config, {}, dir + " (its recorded config)");
  // A run by epochs records no steps: its length is the same count of its data's rows.
  const int64_t saved_steps =
      saved.train.epochs > 0 ? steps_for_epochs(saved.train, data->rows_per_epoch(), quiet) : saved.train.steps;
  LrSchedule saved_schedule = fresh_lr_schedule(saved.optim, saved_steps);
  if (manifest.lr_decay) saved_schedule.decay = *manifest.lr_decay;
  const ResumedLrSchedule resumed = resumed_lr_schedule(saved_schedule, lr_schedule, start_step);
  lr_schedule = resumed.schedule;
  if (!resumed.note.empty()) log << resumed.note << "\n";
  run_dir.rewind_to(start_step, log);
  if (cfg.output.keep_best && leader) restore_best();
  log << "resumed from " << dir << " at step " << start_step << "\n";
  return saved.train.peak_gflops;
}

// A resumed run's best so far: the lowest validation loss metrics.jsonl records for a step whose
// checkpoint is still there (the rewind may have dropped the one `best` named), named in `best`
// again.
// Preference training with a precomputed reference: at the run's start, every sequence's completion
// log-probability under the starting model (one pass over the data, in batches of
// train.batch_size rows), written with the run; a resumed run reads them back.
void TrainingRun::prepare_reference() {
  if (!tc.preference()) return;
  log << "preference: " << tc.method << " (" << preference_loss_name(pref.loss.loss) << " loss as TRL 0.11 computes it), beta "
      << pref.loss.beta << ", reference: "
      << (pref.reference == ReferenceSource::kNone          ? "none (the loss needs none)"
          : pref.reference == ReferenceSource::kAdaptersOff ? "the base with the adapters off, a forward a step"
                                                            : "precomputed with the starting model")
      << "\n";
  if (pref.reference != ReferenceSource::kGiven) return;
  PreferenceData& pairs = preference_data();
  const std::string path = reference_logps_path(cfg.output.dir);
  if (!tc.resume.empty()) {  // read by resume(), before the run's files changed
    log << "reference log-probabilities: " << path << " (computed at the run's start)\n";
    return;
  }
  const auto t0 = Clock::now();
  reference.assign(size_t(pairs.sequences()), CompletionLogp{});
  PackedBatch b;
  while (pairs.next_of_all(b, tc.batch_size)) {
    const std::vector<int64_t> ids = pairs.last_sequences();
    const std::vector<CompletionLogp> got = batch_logps(*this, b, false);
    for (size_t i = 0; i < ids.size(); ++i) reference[size_t(ids[i])] = got[i];
  }
  if (leader) {
    write_reference_logps(path, reference);
    summary.files_written.push_back(path);
  }
  log << "reference log-probabilities: " << reference.size() << " sequences in " << std::round(seconds_since(t0) * 10) / 10
      << " s -> " << path << "\n";
}

void TrainingRun::restore_best() {
  const std::map<int64_t, double> val = read_val_losses(cfg.output.dir + "/metrics.jsonl");
  int64_t best_step = -1;
  for (const StoredCheckpoint& c : list_checkpoints(cfg.output.dir)) {
    const auto it = val.find(c.step);
    if (it != val.end() && it->second < best_val_loss) best_val_loss = it->second, best_step = c.step;
  }
  set_best(cfg.output.dir, best_step);
}

// The steady state's time and tokens: every step after the first (which builds the GEMM
// primitives), or the first when it is the only one.
struct StepTiming {
  double seconds = 0.0;
  int64_t tokens = 0;
};

// Step `step` (0-based) took `dt` seconds and left the model at validation loss `val_loss` (NaN
// when not evaluated): its line in metrics.jsonl, and its progress line every train.log_every
// steps, at each evaluation and at the last.
//
// The first line of each segment (the run's start, and each resume) also says where the segment
// started (segment_start_step), the validation loss there (val_loss_start) and its MFU basis
// (peak_flops): `meshtrain report` plots the whole run's validation from step 0 and its elapsed
// time and throughput over every segment, whose step times (step_s) every line records.
void report_step(TrainingRun& run, int64_t step, const StepResult& r, double dt,
                 Clock::time_point t_start, double val_loss) {
  const TrainConfig& tc = run.tc;
  StepMetrics m;
  m.step = step + 1;
  m.total_steps = tc.steps;
  m.loss = r.loss;
  m.val_loss = val_loss;
  m.lr = r.lr;
  m.tokens_per_s = double(run.tokens_per_step) / dt;
  // peak is per process
  m.mfu = m.tokens_per_s * run.flops.per_token / (run.peak * run.world->size());
  m.peak_mem_bytes = int64_t(memory_stats::peak_rss_bytes());
  m.routing_loss = r.routing_loss;
  m.preference = r.preference;
  if (std::isfinite(val_loss)) m.val_preference = run.val_preference;
  // With a capacity factor: the choices it dropped this step, over every rank and MoE layer.
  if (run.placed.model().config().moe_capacity_factor > 0.0f) m.moe_dropped = r.dropped_choices;
  m.elapsed_s = seconds_since(t_start);
  m.eta_s = m.elapsed_s / double(step + 1 - run.start_step) * double(tc.steps - step - 1);
  auto j = step_json(m);
  j["step_s"] = dt;
  if (step == run.start_step) {
    j["segment_start_step"] = run.start_step;
    if (std::isfinite(run.summary.val_loss_before)) j["val_loss_start"] = run.summary.val_loss_before;
    j["peak_flops"] = run.peak;
  }
  j["grad_norm"] = r.grad_norm;
  j["counted_tokens"] = r.counted_tokens;
  j["peak_tensor_bytes"] = memory_stats::peak_bytes();
  if (const parallel::Pipeline* pipeline = run.placed.pipeline()) {  // this rank's, stage 0's
    const parallel::PipelineTiming& t = pipeline->step_timing();
    j["pp_compute_s"] = t.compute_s, j["pp_recv_wait_s"] = t.recv_wait_s;
    j["pp_send_wait_s"] = t.send_wait_s, j["pp_sent_bytes"] = t.sent_bytes;
  }
  if (run.metrics) run.metrics->write(j);
  if ((step + 1) % tc.log_every == 0 || step + 1 == tc.steps || std::isfinite(val_loss))
    run.log << format_progress_line(m) << "\n";
}

// Collective: every rank saves what it holds of the model and the optimizer state; `best` names
// it in checkpoints/best too. Returns the checkpoint's directory.
std::string checkpoint(TrainingRun& run, int64_t steps_done, bool best) {
  const RunConfig& cfg = run.cfg;
  // The run's MFU basis goes with it, for a resume to reuse (TrainingRun::resolve_peak).
  RunConfig recorded = cfg;
  recorded.train.peak_gflops = float(run.peak / 1e9);
  const std::string dir = save_checkpoint(cfg.output.dir, {steps_done, run.data->state()},
                                          run.placed.held_tensors(run.optimizer), run.optimizer,
                                          {to_toml(recorded), cfg.mesh.str(), cfg.lora.enabled, best,
                                           run.placed.pipeline() ? run.placed.pipeline()->blocks()
                                                                 : std::vector<int64_t>{},
                                           run.lr_schedule.decay, run.identity, run.segment_start},
                                          cfg.output.keep_checkpoints, *run.world);
  run.log << "checkpoint: " << dir << (best ? " (best validation loss so far)" : "") << "\n";
  return dir;
}

// Collective, once a step: the stop signal any rank has seen (its number; 0: none). A signal
// reaches one rank or all of them at different moments; this one all-reduce makes every rank stop
// after the same step.
int agreed_stop_signal(TrainingRun& run) {
  float sig = run.stop.requested() ? float(run.stop.first_signal_number()) : 0.0f;
  if (run.world->size() > 1) run.world->all_reduce_max(&sig, 1);
  return int(sig);
}

// `s` as one shell word: as it is when it holds only characters no shell treats specially, else in
// single quotes.
std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command that continues a stopped run from its run.toml (the directory absolute, so it works
// from any directory), under the launcher and number of ranks it ran with.
std::string resume_command(const TrainingRun& run) {
  namespace fs = std::filesystem;
  const std::string dir = fs::absolute(run.cfg.output.dir).lexically_normal().string();
  std::string launch;
  if (run.world->size() > 1) {
    const parallel::Launcher l = parallel::read_launch_env().launcher;
    launch = (l == parallel::Launcher::srun ? "srun -n " : "mpirun -n ") + std::to_string(run.world->size()) + " ";
  }
  return launch + "meshtrain train --resume " + shell_word(dir);
}

// After a stop signal: the checkpoint of the steps done (unless this step just wrote one), and the
// line saying where the run stopped and how to continue.
void stop_after(TrainingRun& run, int64_t steps_done, int sig, const std::string& saved) {
  const std::string dir = saved.empty() ? checkpoint(run, steps_done, false) : saved;
  run.log << "stopped: " << signal_name(sig) << " after step " << steps_done << " of " << run.tc.steps
          << ", checkpoint " << dir << "; resume with: " << resume_command(run) << "\n";
  run.log.flush();
  // Every rank exits 3 next, and mpirun ends the job at the first non-zero exit: the line above
  // must be out before any rank leaves.
  run.world->barrier();
  run.summary.stopped = true;
}

// Collective: whether `val_loss` is the lowest so far. Rank 0 judges and every rank follows it,
// so that all of them take part in the save even where their sums rounded differently.
bool is_new_best(TrainingRun& run, double val_loss) {
  int64_t better = run.leader && val_loss < run.best_val_loss ? 1 : 0;
  run.world->all_reduce_sum(&better, 1);
  if (better && run.leader) run.best_val_loss = val_loss;
  return better != 0;
}

// The step loop, from the start (or the resumed) step to train.steps, with a validation loss every
// train.eval_every steps and at the last, and a checkpoint every output.checkpoint_every steps,
// at the last, and (output.keep_best) at each new lowest validation loss. A step's time leaves out
// its validation. A stop signal ends the loop after the step in flight, with a checkpoint
// (summary.stopped).
StepTiming run_steps(TrainingRun& run) {
  const TrainConfig& tc = run.tc;
  const int64_t every = run.cfg.output.checkpoint_every;
  const int64_t eval_every = tc.eval_every;
  auto t_start = Clock::now();
  profile::reset();
  StepTiming timed;
  for (int64_t step = run.start_step; step < tc.steps; ++step) {
    auto t0 = Clock::now();
    std::vector<PackedBatch> micro;
    std::vector<ModelInput> inputs;
    std::vector<int64_t> sequences;  // preference training: the sequence of each row of the step
    // Every rank draws the same global batch and keeps its own rows.
    for (int64_t k = 0; k < tc.grad_accum; ++k) {
      PackedBatch b = run.data->next();
      if (run.tc.preference()) {
        const std::vector<int64_t>& ids = run.preference_data().last_sequences();
        sequences.insert(sequences.end(), ids.begin(), ids.end());
      }
      micro.push_back(run.dp.splits() ? run.dp.slice(b) : std::move(b));
    }
    for (const PackedBatch& b : micro) inputs.push_back(input_of(b));
    // A training pass: LoRA dropout draws its masks from (seed, step, row of the step's batch,
    // a token's true position in it: a cp rank's share keys by where its tokens sit).
    parallel::Comm& cp = run.mesh.axis(parallel::Axis::cp);
    for (size_t k = 0; k < inputs.size(); ++k)
      inputs[k].noise = {.on = true, .seed = tc.seed, .step = step,
                         .first_row = int64_t(k) * tc.batch_size + run.dp.rank() * (tc.batch_size / run.dp.ranks()),
                         .cp = cp.size(), .cp_rank = cp.rank()};
    // The first step builds the GEMM primitives: profile the steady state only. Always, for
    // run_summary.json (two clock reads and a table update per op, against the op's
    // microseconds to milliseconds); train.profile also prints it.
    profile::enable(step > run.start_step);
    if (step == run.start_step + 1) {  // steady state, as the timings
      run.placed.reset_comm_stats();
      if (auto* checked = dynamic_cast<parallel::CheckedComm*>(run.world.get()))
        checked->reset_collective_totals();
    }
    RunMicroBatches through_stages;
    if (parallel::Pipeline* pipeline = run.placed.pipeline())
      through_stages = [pipeline](const std::vector<ModelInput>& micro, float grad_scale) {
        return pipeline->forward_backward(micro, grad_scale);
      };
    StepResult r;
    if (run.tc.preference()) {
      std::vector<CompletionLogp> given;
      if (run.pref.reference == ReferenceSource::kGiven)
        for (int64_t id : sequences) given.push_back(run.reference[size_t(id)]);
      r = preference_step(run.placed.model(), run.optimizer, inputs, int64_t(sequences.size()), run.pref, given,
                          run.cfg.optim, step, run.lr_schedule.at(step), run.placed.sync(), through_stages,
                          [&](const ModelInput& in) { return run.forward(in); });
    } else {
      r = train_step(run.placed.model(), run.optimizer, inputs, run.cfg.optim, step, run.lr_schedule.at(step),
                     run.placed.sync(), through_stages);
    }
    const double dt = seconds_since(t0);
    if (step > run.start_step || tc.steps - run.start_step == 1)
      timed.seconds += dt, timed.tokens += run.tokens_per_step;
    run.summary.losses.push_back(r.loss);
    const bool last = step + 1 == tc.steps;
    // The last step is evaluated whenever there is held-out data, eval_every or not, so that its
    // line in metrics.jsonl carries the run's final validation loss.
    const bool evaluate = (eval_every > 0 && (step + 1) % eval_every == 0) || (last && run.data->has_validation());
    if (evaluate) profile::enable(false);  // the op profile is of the training steps
    const double val_loss = evaluate ? validation_loss(run) : std::nan("");
    if (last) run.last_step_val_loss = val_loss;
    report_step(run, step, r, dt, t_start, val_loss);
    const bool best = evaluate && run.cfg.output.keep_best && is_new_best(run, val_loss);
    std::string saved;
    if (best || (every > 0 && ((step + 1) % every == 0 || last))) saved = checkpoint(run, step + 1, best);
    run.log.flush();
    if (last) break;  // a signal now only finishes what little is left
    if (const int sig = agreed_stop_signal(run)) {
      stop_after(run, step + 1, sig, saved);
      break;
    }
  }
  return timed;
}

// Collective: rank 0 writes the trained model (or the PEFT adapter) and, for a whole model, the
// tokenizer files beside it.
void export_trained_model(TrainingRun& run) {
  const RunConfig& cfg = run.cfg;
  const std::string dir = cfg.output.dir + (cfg.lora.enabled ? "/adapter" : "/model");
  for (auto& f : run.placed.export_model(dir))
    run.summary.files_written.push_back(f);
  // The template the adapter was trained with, for generate --adapter (io/adapter_template.h).
  if (run.leader && cfg.lora.enabled)
    run.summary.files_written.push_back(write_adapter_template(dir, run.data->prompt_template(), user_chat_template(cfg)));
  // An adapter of a grown vocabulary (data.add_tokens) carries the tokenizer with the new tokens:
  // its embedding's rows are theirs, and generate / export --adapter read it from there.
  if (run.leader && (!cfg.lora.enabled || !cfg.data.add_tokens.empty())) {
    for (auto& f : save_tokenizer_files(tokenizer_source(cfg), dir))
      run.summary.files_written.push_back(f);
    // The user's chat template goes with the tokenizer, so generate prompts as the run trained.
    if (!cfg.data.chat_template.empty())
      run.summary.files_written.push_back(write_chat_template_beside(dir, user_chat_template(cfg)));
  }
}

void log_summary(TrainingRun& run) {
  const TrainSummary& summary = run.summary;
  std::ostream& log = run.log;
  log << "done: " << run.tc.steps << " steps of " << training_mode(run.cfg) << " training, final loss "
      << summary.losses.back();
  if (run.data->has_validation())
    log << ", validation loss " << summary.val_loss_before << " -> " << summary.val_loss_after;
  log << "\n"
      << "throughput: " << std::lround(summary.tokens_per_s) << " tokens/s, MFU "
      << std::round(summary.mfu * 1000.0) / 10.0 << "%, peak memory "
      << format_bytes(int64_t(summary.peak_rss_bytes)) << " (tensors "
      << format_bytes(int64_t(summary.peak_tensor_bytes)) << ")"
      << (run.world->size() > 1
              ? ", largest rank " + format_bytes(int64_t(summary.peak_rss_max_rank_bytes))
              : std::string())
      << "\n";
  if (!summary.group_comm.empty())
    log << "communication per step (rank 0; exposed: blocked in the calls and waits; transfer: the same "
           "bytes moved alone after the run):\n"
        << format_group_comm(summary.group_comm);
  if (gathers_or_splits(run.cfg.mesh))
    log << "FSDP collectives: " << std::round(summary.fsdp_wait_s_per_step * 1e4) / 10.0
        << " ms/step spent waiting (rank 0; gathers "
        << (run.tc.fsdp_prefetch ? "prefetched" : "not prefetched") << ")\n";
  log << "wrote:\n";
  for (const auto& f : summary.files_written) log << "  " << f << "\n";
}

// Collective: every rank's stage and time in the pipeline over the timed steps (empty without pp).
std::vector<std::pair<int64_t, parallel::PipelineTiming>> pipeline_per_rank(TrainingRun& run) {
  const parallel::Pipeline* pipeline = run.placed.pipeline();
  if (!pipeline) return {};
  const size_t ranks = size_t(run.world->size()), rank = size_t(run.world->rank());
  constexpr size_t k = 7;  // figures per rank
  std::vector<double> all(k * ranks, 0.0);
  const parallel::PipelineTiming& t = pipeline->total_timing();
  const double mine[k] = {double(pipeline->stage()), t.compute_s, t.recv_wait_s, t.send_wait_s,
                          double(t.sent_bytes), double(t.peak_in_flight), double(t.peak_buffer_bytes)};
  std::copy(mine, mine + k, all.begin() + ptrdiff_t(k * rank));
  run.world->all_reduce_sum(all.data(), int64_t(all.size()));
  std::vector<std::pair<int64_t, parallel::PipelineTiming>> out;
  for (size_t r = 0; r < ranks; ++r) {
    const double* a = &all[k * r];
    parallel::PipelineTiming pt{a[1], a[2], a[3], int64_t(a[4])};
    pt.peak_in_flight = int64_t(a[5]), pt.peak_buffer_bytes = int64_t(a[6]);
    out.push_back({int64_t(a[0]), pt});
  }
  return out;
}

// Collective: rank 0's run_summary.json (train/run_summary.h): every rank's peak memory and time
// in the pipeline, and the time per op and per collective of the steps after the first
// (`collectives`, taken as the step loop ended).
void write_summary_file(TrainingRun& run, const StepTiming& timed, const std::vector<int64_t>& rss,
                        const std::vector<int64_t>& tensors,
                        parallel::CollectiveTotals collectives) {
  auto pipeline = pipeline_per_rank(run);
  if (!run.leader) return;
  RunSummaryRecord r;
  r.mesh = run.cfg.mesh.str();
  r.mode = training_mode(run.cfg);
  r.world_size = run.world->size();
  r.timed_steps = std::max<int64_t>(0, run.tc.steps - run.start_step - 1);
  r.timed_seconds = timed.seconds;
  r.tokens_per_s = run.summary.tokens_per_s;
  r.mfu = run.summary.mfu;
  r.peak_flops = run.peak;
  r.val_loss_start = run.summary.val_loss_before;
  r.val_loss_end = run.summary.val_loss_after;
  r.peak_rss_bytes = rss;
  r.peak_tensor_bytes = tensors;
  r.op_seconds = profile::totals();
  r.collectives = std::move(collectives);
  r.pipeline = std::move(pipeline);
  const std::string path = run.cfg.output.dir + "/run_summary.json";
  write_run_summary(path, r);
  run.summary.files_written.push_back(path);
}

// Finish: the summary's throughput, validation and memory figures, the trained model written
// out, and the closing lines of the log.
void finish_run(TrainingRun& run, const StepTiming& timed) {
  const TrainConfig& tc = run.tc;
  TrainSummary& summary = run.summary;
  profile::enable(false);
  parallel::CollectiveTotals collectives;
  if (auto* checked = dynamic_cast<parallel::CheckedComm*>(run.world.get()))
    collectives = checked->collective_totals();
  if (tc.profile && timed.seconds > 0)
    run.log << "time per step by op (steps after the first):\n"
            << profile::table(timed.seconds, std::max<int64_t>(1, tc.steps - run.start_step - 1));
  summary.tokens_per_s = timed.seconds > 0 ? double(timed.tokens) / timed.seconds : 0.0;
  const int64_t steady_steps = tc.steps - run.start_step - 1;
  if (gathers_or_splits(run.cfg.mesh) && steady_steps > 0)
    summary.fsdp_wait_s_per_step = run.placed.exposed_comm_seconds() / double(steady_steps);
  summary.mfu = summary.tokens_per_s * run.flops.per_token / (run.peak * run.world->size());
  // The model has not changed since the last step's evaluation, if there was one.
  summary.val_loss_after =
      std::isnan(run.last_step_val_loss) ? validation_loss(run) : run.last_step_val_loss;
  summary.peak_rss_bytes = memory_stats::peak_rss_bytes();
  summary.peak_tensor_bytes = memory_stats::peak_bytes();
  // The largest rank's peak is what a machine must hold: gather every rank's (the process's, then
  // its tensors').
  const size_t ranks = size_t(run.world->size()), rank = size_t(run.world->rank());
  std::vector<int64_t> peaks(2 * ranks, 0);
  peaks[rank] = int64_t(summary.peak_rss_bytes);
  peaks[ranks + rank] = int64_t(summary.peak_tensor_bytes);
  run.world->all_reduce_sum(peaks.data(), int64_t(peaks.size()));
  const std::vector<int64_t> rss(peaks.begin(), peaks.begin() + ptrdiff_t(ranks));
  const std::vector<int64_t> tensors(peaks.begin() + ptrdiff_t(ranks), peaks.end());
  summary.peak_rss_max_rank_bytes = size_t(*std::max_element(rss.begin(), rss.end()));
  // After the peaks: the probes' buffers are not the run's.
  if (run.world->size() > 1 && steady_steps > 0)
    summary.group_comm = measure_group_comm(run.mesh, collectives, steady_steps);
  write_summary_file(run, timed, rss, tensors, std::move(collectives));
  export_trained_model(run);
  log_summary(run);
}

}  // namespace

TrainSummary train(const RunConfig& cfg, std::ostream& out) {
  const DeviceBackend backend = open_device_backend(
      local_device_request(cfg.train.device, "train.device", cfg.train.share_gpu));
  return train(cfg, out, *backend);
}

TrainSummary train(const RunConfig& given, std::ostream& out, Backend& backend) {
  // A length not given is chosen here when the caller has not (meshtrain train chooses it before
  // its memory check); every rank chooses the same from the same data.
  RunConfig cfg = given;
  if (const std::string why = settle_seq_len(cfg); !why.empty() && parallel::read_launch_env().rank <= 0)
    out << why << "\n";
  require_threads_fit_machine(cfg.train.threads);
  if (cfg.train.threads > 0) omp_set_num_threads(int(cfg.train.threads));
  // From here a stop signal is a graceful stop (a signal while the run loads takes effect after its
  // first step).
  const StopSignals stop(cfg.train.stop_timeout);
  TrainingRun run(cfg, stop, out, backend);
  const StepTiming timed = run_steps(run);
  if (!run.summary.stopped) finish_run(run, timed);
  return std::move(run.summary);
}

}  // namespace mt

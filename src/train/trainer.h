// A training run, on one process or over a mesh of MPI ranks, in three parts (trainer.cpp): setup
// builds the mesh and data, claims output.dir (train/run_directory.h), builds the placed model and
// optimizer, resumes from a checkpoint, writes run.toml and measures the validation loss; the
// step loop runs micro-batches -> forward/backward -> clip -> AdamW with progress lines,
// metrics.jsonl, the validation loss every train.eval_every steps and checkpoints; the finish
// measures the validation loss again (or reuses the last step's) and writes the trained model or
// adapter.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "train/comm_report.h"
#include "train/run_config.h"

namespace mt {

struct TrainSummary {
  std::vector<double> losses;  // mean training loss per step
  double val_loss_before = 0.0, val_loss_after = 0.0;
  double tokens_per_s = 0.0;   // mean over steps after the first (which builds GEMM primitives)
  double mfu = 0.0;
  size_t peak_rss_bytes = 0;            // this rank
  size_t peak_rss_max_rank_bytes = 0;   // the largest over all ranks
  double fsdp_wait_s_per_step = 0.0;    // sharded runs: time blocked in FSDP collectives
  std::vector<GroupComm> group_comm;    // several ranks: per group, exposed vs transfer time
  size_t peak_tensor_bytes = 0;
  std::vector<std::string> files_written;
  // A stop signal ended the run early, after a checkpoint (train/stop_signals.h); the finish (the
  // final validation, the trained model) did not run.
  bool stopped = false;
};

// Runs the whole job described by cfg, printing progress to `log`, on the device of
// cfg.train.device (backend/backend_factory.h: refused before anything is written when it cannot
// be opened). Throws mt::Error on bad input. SIGTERM, SIGINT and SIGUSR1 stop it gracefully for its
// duration (summary.stopped).
TrainSummary train(const RunConfig& cfg, std::ostream& log);
// The same on a backend the caller opened (the train command, which names --device in errors).
// The model, its gradients, the optimizer and the activations all live in its memory.
TrainSummary train(const RunConfig& cfg, std::ostream& log, Backend& backend);

}  // namespace mt

// `meshtrain train --mesh auto` (mesh.auto = true): the planner chooses the run's mesh. The search is
// `meshtrain plan --search`'s (plan/search.h) over the layouts of the ranks launched, for this run's
// model, mode, precision, sequence length and batch, with what the user fixed kept fixed: the global
// batch (train.batch_size x train.grad_accum: each micro-batch's rows are shared out over dp x fsdp x ep),
// the micro-batches per step and activation checkpointing. Only the mesh varies, so every axis the
// search enumerates joins the choice without a change here. Layouts the trainer would refuse are
// dropped by asking the trainer's own checks (train/run_layout.h), so the choice always trains.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/available_memory.h"
#include "plan/search.h"
#include "train/run_config.h"

namespace mt::plan {

// The machine a run is planned for: `name_or_path` (a preset or a cluster TOML, as `plan --cluster`;
// a shared host's memory divided among `ranks_on_host`) when not empty; otherwise this machine, the `cpu` cluster (a shared host: each rank is priced
// with its share of the host's cores, hardware.h rank_share) at this host's core count, with the
// memory check's share of `available` per rank (run_memory.h: kUsableMemoryFraction of it,
// divided among `ranks_on_host`), and `host_load` processes of other work beside the ranks
// (hardware.h host_load: the caller's reading of the tasks of other work running on this host now).
// Under train.device = cuda this machine's GPUs are not described to the planner: mt::Error asking
// for --cluster.
Cluster run_cluster(const std::string& name_or_path, const std::string& device, const AvailableMemory& available,
                    int64_t ranks_on_host, double host_load = 0.0);

struct MeshChoice {
  Candidate chosen;                  // the fastest layout that fits and that the trainer accepts
  std::optional<Candidate> runner_up;  // a faster one that does not fit, else the next fastest that does
  int64_t fit = 0;                   // layouts that fit and that the trainer accepts
  int64_t too_big = 0;               // layouts the trainer accepts that do not fit
  int64_t refused = 0;               // layouts the planner priced that the trainer refuses
  std::string first_refusal;         // the trainer's reason for the first of those, "mesh: why"
};

// The search for `world` ranks on `cluster`. mt::Error, one line, when no layout fits: the smallest
// world size (at the same memory per rank) that would, or what to change when none up to 8 x world
// (at least 64) does.
MeshChoice choose_mesh(const RunConfig& cfg, const ModelConfig& shape, const Cluster& cluster, int64_t world);

// What rank 0 prints before training: the chosen mesh with its predicted memory per rank and step
// time, and the runner-up with why it lost.
std::string describe_choice(const MeshChoice& choice);

}  // namespace mt::plan

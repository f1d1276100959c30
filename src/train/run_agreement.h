// The checks a multi-rank run makes before any work: every rank was given the same run config,
// and every rank resolved the same model and tokenizer. Ranks that differ would hang (different
// train.steps or seq_len under FSDP), fail with MPI_ERR_TRUNCATE, or train replicas that silently
// drift apart (different optim.lr or train.seed under dp); refused here instead, naming what differs.
#pragma once
#include "data/tokenizer.h"
#include "model/config.h"
#include "model/lora_config.h"
#include "parallel/comm.h"
#include "train/run_config.h"

namespace mt {

// Collective over `world`: every key of the config schema but those marked per_rank (the rank's
// own host: train.peak_gflops, data.cache_dir) must have the same resolved value
// on every rank; otherwise throws on every rank, naming each key and the ranks' values.
void require_same_run_config(const RunConfig& cfg, parallel::Comm& world);

// Collective over `world`: the model each rank resolved (from its config, or from the files at
// model.path, which each host reads for itself) has the same identity (train/model_identity.h:
// every field of the architecture, the tokenizer's vocabulary) and parameter names and shapes;
// otherwise throws on every rank, naming them.
void require_same_model(const ModelConfig& shape, const LoraConfig& lora, const Tokenizer& tok,
                        parallel::Comm& world);

}  // namespace mt

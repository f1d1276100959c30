#include "train/resume_config.h"

#include <algorithm>

#include "core/error.h"
#include "train/config_schema.h"
#include "train/config_values.h"

namespace mt {

const std::vector<std::string_view> kResumeMayChange = {
    // Files that moved (their contents are the user's to keep).
    "model.path", "data.path", "data.tokenizer", "data.cache_dir",
    // The schedule and the step's size: the run's length, the lr, warm-up, decay, clipping; rows
    // per step (the sampler counts rows, so the same sequences follow).
    "train.steps", "optim.lr", "optim.min_lr", "optim.warmup_steps", "optim.warmup_ratio", "optim.schedule", "optim.decay_fraction",
    "optim.weight_decay", "optim.grad_clip", "train.epochs",
    "train.batch_size", "train.grad_accum",
    // How the same math is computed and reported.
    "train.activation_checkpointing", "train.log_every", "train.eval_every", "train.threads", "train.peak_gflops",
    "train.resume", "train.profile", "train.fsdp_prefetch", "train.sequence_parallel", "train.comm_progress", "train.dp_bucket_mb", "train.collective_timeout", "train.stop_timeout",
    "train.debug_collectives", "train.pp_schedule", "train.pp_blocks", "train.pp_virtual",
    // Where it is computed and how device buffers travel (a checkpoint is host data, so a run
    // saved on the CPU resumes on a GPU and back).
    "train.device", "train.share_gpu", "train.device_comm",
    // LoRA dropout changes the noise of the steps still to run, not what the adapter's weights
    // mean (inference never drops), like the lr.
    "lora.init_std", "lora.random_base", "lora.dropout",
    "output.dir", "output.checkpoint_every", "output.keep_checkpoints", "output.keep_best", "output.overwrite",
    "mesh.auto", "mesh.dp", "mesh.fsdp", "mesh.tp", "mesh.pp", "mesh.cp", "mesh.ep", "partition.replace_defaults", "partition.rules",
};

namespace {

std::string sources_but_paths(RunConfig c) {
  for (DataSource& s : c.data.sources) s.path.clear();
  return config_value_toml(*find_config_key("data.sources"), c);
}

}  // namespace

void require_resumable_config(const RunConfig& now, const std::string& saved_toml, const std::string& where) {
  const RunConfig saved = parse_run_config(saved_toml, {}, where + " (its recorded config)");
  std::string changed;
  int count = 0;
  for (const ConfigKey& key : config_keys()) {
    if (std::find(kResumeMayChange.begin(), kResumeMayChange.end(), key.name) != kResumeMayChange.end()) continue;
    const std::string before = config_value_toml(key, saved), after = config_value_toml(key, now);
    // [[data.sources]]: the files may move, as data.path may; their formats, weights, splits and
    // columns change what the run trains on.
    if (key.name == "data.sources" && sources_but_paths(saved) == sources_but_paths(now)) continue;
    if (before == after) continue;
    changed += std::string(count++ ? ", " : "") + std::string(key.name) + " " + before + " -> " + after;
  }
  if (count == 0) return;
  std::string may;
  for (std::string_view k : kResumeMayChange) may += std::string(may.empty() ? "" : ", ") + std::string(k);
  may += ", the path of each [[data.sources]]";
  fail(where + ": the checkpoint was trained with other values of " + std::to_string(count) +
       (count == 1 ? " key that changes" : " keys that change") + " what its weights and state mean: " + changed +
       "; resume with the checkpoint's values (a resumed run may change only " + may + ")");
}

}  // namespace mt

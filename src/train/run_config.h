// Everything a training run is told: one TOML file with sections [model] [lora] [optim] [train]
// [data] [output] [mesh] [partition], overridable from the command line with
// --set section.key=value. The keys are listed once, in train/config_schema.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/mesh.h"
#include "parallel/partition.h"
#include "model/config.h"
#include "model/lora_config.h"
#include "train/data_sources.h"

namespace mt {

struct OptimConfig {
  float lr = 3e-4f;
  float min_lr = 3e-5f;  // the schedule decays from lr to min_lr
  int64_t warmup_steps = 10;
  float weight_decay = 0.1f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float grad_clip = 1.0f;  // global-norm clip; <= 0 disables
  // The lr after warm-up (train/lr_schedule.h): "cosine", "linear", "constant" or "wsd"
  // (warmup-stable-decay, which decays over the last decay_fraction of the steps after warm-up).
  std::string schedule = "cosine";
  float decay_fraction = 0.1f;
  // > 0: the warm-up is this share of the run's steps instead of warmup_steps (train/lr_schedule.h),
  // as the HF Trainer's warmup_ratio: a run by epochs knows its steps only once its data is open.
  float warmup_ratio = 0.0f;
};

// train.seq_len of a run without model.path that does not give one (the built-in run's); with a
// model path a length not given comes from the data (train/sequence_length.h).
inline constexpr int64_t kBuiltinSeqLen = 128;

// The most tokens one optimizer step may hold (batch_size x grad_accum x seq_len).
inline constexpr int64_t kMaxTokensPerStep = int64_t(1) << 40;

struct TrainConfig {
  // "sft" (next-token loss on the data's trained tokens), or preference training on chosen /
  // rejected pairs (train/preference_loss.h): "dpo" (TRL's sigmoid loss), "ipo", "simpo", "orpo".
  std::string method = "sft";
  bool preference() const { return method != "sft"; }
  int64_t steps = 100;
  // > 0: the run's length in passes over the training data; the trainer computes steps from it.
  float epochs = 0.0f;
  int64_t batch_size = 4;    // sequences per micro-batch
  int64_t grad_accum = 1;    // micro-batches per optimizer step
  // 0: chosen from the data when the run starts (train/sequence_length.h), which is what a config
  // with model.path that gives none, or gives 0, is parsed to; without model.path 0 is parsed to
  // this default.
  int64_t seq_len = kBuiltinSeqLen;
  uint64_t seed = 1234;
  Precision precision = Precision::bf16;
  bool activation_checkpointing = false;
  bool fsdp_prefetch = true;  // FSDP: gather the next unit while this one computes
  // Megatron's sequence parallelism beside tp: the residual stream between the tensor-parallel
  // regions split by rows over the tp ranks (ModelParallel::sequence_shards).
  bool sequence_parallel = true;
  // A mixture of experts' capacity factor in training (ModelConfig::moe_capacity_factor): > 0 caps
  // each expert at ceil(factor x a rank's tokens x k / E) rows a layer and drops the rest; 0:
  // dropless, every choice computed.
  float moe_capacity_factor = 0.0f;
  // How non-blocking collectives move while the ranks compute: "thread", "ops" or "off"
  // (parallel/mpi_progress.h).
  std::string comm_progress = "thread";
  // Megabytes of gradients per data-parallel all-reduce bucket, each issued in the last
  // micro-batch's backward as soon as its units' gradients are final; 0: one all-reduce of every
  // gradient after the backward.
  float dp_bucket_mb = 25.0f;
  int64_t log_every = 1;
  int64_t eval_every = 0;  // steps between validation-loss evaluations (and at the last); 0: none
  // Held-out tokens one validation reads: its first ceil(eval_tokens / seq_len) rows, whatever
  // the batch size, gradient accumulation and mesh (validation_rows in train/training_data.h).
  int64_t eval_tokens = 16384;
  int64_t threads = 0;  // 0: all cores
  float peak_gflops = 0.0f;  // MFU denominator; 0: measure this machine's bf16 GEMM at start
  // Continue from a checkpoint: "" (start fresh), "latest" (the newest in output.dir), or the path
  // of a checkpoint directory.
  std::string resume;
  bool profile = false;  // print where the step time went (per op) at the end of the run
  // Seconds a rank may wait in one collective before the watchdog ends the job; 0: no watchdog.
  float collective_timeout = 300.0f;
  bool debug_collectives = false;  // every rank cross-checks each collective's signature first
  // How device buffers travel between ranks: "mpi", "staged" or "nccl" (parallel/device_comms.h).
  std::string device_comm = "mpi";
  // Seconds from a stop signal (SIGTERM, SIGINT, SIGUSR1) to a forced exit when the graceful stop
  // (finish the step, checkpoint) has not completed; 0: no limit (train/stop_signals.h).
  float stop_timeout = 300.0f;
  // Pipeline parallelism (mesh pp > 1): the schedule, and the blocks of each stage ("2,3"; empty:
  // balanced by cost); pp_virtual > 1 cuts each stage into that many chunks (interleaved 1F1B),
  // and pp_blocks then counts blocks per chunk.
  std::string pp_schedule = "1f1b";
  std::string pp_blocks;
  int64_t pp_virtual = 1;
  // Where the run computes: "cpu", or "cuda" (each rank the GPU of its local rank, in a build with
  // -DMESHTRAIN_CUDA=ON; see backend/backend_factory.h). share_gpu lets more ranks than a node has
  // GPUs share them (tests of multi-rank meshes on one GPU).
  std::string device = "cpu";
  bool share_gpu = false;
};

struct DataConfig {
  std::string path;  // training file; empty: the built-in demo text
  // "auto": .json/.jsonl files are records (alpaca, chat or ShareGPT, completion, text_records,
  // told apart by the first record's fields; chat in the tokenizer's chat template), anything
  // else plain text. Or "text", "alpaca", "completion", "text_records", or a chat template:
  // "chat" (Llama 3.1), "chatml", "gemma", "mistral" (data/chat_templates.h).
  std::string format = "auto";
  // "field=column" entries: the file's column read as the format's field (ExampleOptions::columns).
  std::vector<std::string> columns;
  // Tokenizer file or directory. Empty: the model's own (model.path) or, without a model path,
  // the byte-level tokenizer. "byte": the byte-level tokenizer.
  std::string tokenizer;
  // Special tokens appended to the tokenizer after its last id (a chat template's markers on a
  // base model); the model's embedding (and head) grows to match (data/added_tokens.h).
  std::vector<std::string> add_tokens;
  // A Jinja chat template file that renders the run's conversations instead of the tokenizer's own
  // chat_template (data/chat_jinja.h). Empty: the tokenizer's, else the built-in template.
  std::string chat_template;
  std::string cache_dir;  // tokenised-example cache; empty: ~/.cache/meshtrain/tokens, "off": none
  bool truncate = false;  // examples longer than seq_len: cut (true) or skip with a count (false)
  float val_fraction = 0.05f;
  // [[data.sources]]: several files mixed by weight instead of data.path (train/mixed_data.h).
  std::vector<DataSource> sources;
};

// [preference]: preference training's keys (train.method other than "sft"), TRL's names and defaults.
struct PreferenceConfig {
  float beta = 0.1f;             // DPO's beta, IPO's tau, SimPO's beta, ORPO's lambda
  float label_smoothing = 0.0f;  // dpo and simpo: the conservative loss's label noise
  float simpo_gamma = 0.5f;      // simpo's target reward margin
  float cpo_alpha = 0.0f;        // simpo: weight of the chosen sequences' NLL added to the loss
  // Longest prompt kept when a pair exceeds train.seq_len (TRL 0.11's tokenize_row); 0: seq_len / 4.
  int64_t max_prompt_length = 0;
  std::string truncation_mode = "keep_end";  // the prompt's end kept ("keep_end") or its start
  // Where dpo's and ipo's reference log-probabilities come from: "adapters_off" (LoRA/QLoRA: the
  // base alone, one forward a step, no second copy), "precomputed" (one pass over the data before
  // training with the starting model, stored with the run), "auto": adapters_off under LoRA, else
  // precomputed.
  std::string reference = "auto";
};

struct OutputConfig {
  std::string dir = "runs/default";  // metrics.jsonl and the final weights go here
  // Steps between checkpoints in <dir>/checkpoints, and one at the end; 0: none. 500 by default,
  // HF Trainer's save_steps: a run loses at most that many steps, a shorter run (the demo, most
  // fine-tunes of a small data set) saves once, at its end, and keep_checkpoints bounds the disk.
  int64_t checkpoint_every = 500;
  int64_t keep_checkpoints = 2;      // newest checkpoints kept; older ones are deleted
  bool overwrite = false;            // replace another run's files in dir (see train/run_directory.h)
  bool keep_best = false;  // save the lowest-validation-loss step as checkpoints/best, never pruned
};

struct RunConfig {
  // [model] path: a model to start from (an HF directory with config.json and safetensors, or a
  // llama2.c .bin). When set, the architecture comes from it and no other [model] key may be given.
  std::string model_path;
  ModelConfig model;
  LoraConfig lora;
  // [lora] random_base: allow LoRA without model.path, on a randomly initialised base that is not
  // saved (the adapter is useless without it); for tests of the parallel layouts.
  bool lora_random_base = false;
  // [lora] init_adapter: a PEFT adapter directory whose values the adapters start from (its r,
  // alpha and targets the run's): a run that trains an adapter further, e.g. DPO on an SFT
  // adapter. Empty: A ~ N(0, init_std), B = 0.
  std::string lora_init_adapter;
  OptimConfig optim;
  TrainConfig train;
  DataConfig data;
  PreferenceConfig preference;
  OutputConfig output;
  // [mesh] and [partition] (their syntax as in src/parallel/dist_config.h); the command line's
  // --mesh overrides [mesh].
  parallel::MeshShape mesh;
  // [mesh] auto: the trainer asks the planner for the mesh (`train --mesh auto`, plan/auto_mesh.h)
  // and writes its choice into `mesh`, so run.toml records both the layout and that it was chosen.
  bool mesh_auto = false;
  parallel::PartitionConfig partition;
};

// Parse TOML text, then apply overrides ("section.key=value", value parsed as TOML), then validate.
// Paths are kept as written (relative to the working directory).
// Any problem throws mt::Error with one line naming the key (and the file when there is one):
// unknown section or key, wrong type, out-of-range value, inconsistent model shape, rank <= 0,
// unknown LoRA target.
// Aliases (other tools' names for keys, train/config_aliases.h) are renamed to their keys; each
// used is appended once to `renamed` ("lora.r -> lora.rank") when it is given, for the run's log.
RunConfig parse_run_config(const std::string& toml_text, const std::vector<std::string>& overrides,
                           const std::string& source_name = "<config>",
                           std::vector<std::string>* renamed = nullptr);
// The same on a file. Its model.path, data.path and data.tokenizer are relative to the file's
// directory (made absolute here), so a config works from any directory; the overrides' paths and
// output.dir are relative to the working directory. An override of model.path replaces the
// file's (or the built-in run's) [model] section: the architecture comes from the model.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          std::vector<std::string>* renamed = nullptr);

// A run's config on top of another run's: `base_path` (a run's run.toml, which gives every key)
// first, then the keys the config file `config_path` gives (none when empty), then the overrides;
// each file's paths relative to its own directory, as load_run_config. A model.path in the file
// replaces the base's [model] section, as a --set of it does. For a resumed run
// (train/resumed_run_config.h). Problems are blamed on the file or --set that gave the key.
RunConfig load_run_config_over(const std::string& base_path, const std::string& config_path,
                               const std::vector<std::string>& overrides,
                               std::vector<std::string>* renamed = nullptr);

// The string value of `key` that the config file `config_path` (the built-in default run when
// empty) and the overrides give, without reading the rest of the config: where a resumed run's
// own run.toml is must be known before its config can be read (train.resume, output.dir).
std::string config_string_as_given(const std::string& config_path, const std::vector<std::string>& overrides,
                                   std::string_view key);

// model.path, data.path and data.tokenizer made absolute against the working directory: for
// run.toml, which is read relative to its own directory.
void make_input_paths_absolute(RunConfig& cfg);

// The built-in default run (the README's main job): a small LLaMA, LoRA-free, on the built-in text.
// configs/tiny.toml is this text. Every key is written, each after its help.
std::string default_run_config_toml();

// Serialise back to TOML, every key (written next to the run's outputs as run.toml, so that
// `meshtrain train --config run.toml` repeats the run). With model.path set, the other [model]
// keys are left out (the model's files give the architecture).
std::string to_toml(const RunConfig& cfg);

}  // namespace mt

// The table of run-config keys (see config_schema.h for what is derived from it). To add a key:
// add its field to RunConfig (with its default as the member initialiser) and one row here, then
// regenerate configs/tiny.toml and docs/configuration.md's key table with scripts/update_config_docs.sh.
#include "train/config_schema.h"

#include <algorithm>

namespace mt {
namespace {

// KEY(train.steps): the name and the field from one spelling, so they cannot drift apart.
#define KEY(path) \
  .name = #path, .field = [](RunConfig& c) -> ConfigField { return &c.path; }

constexpr ValueRange kPositive{.min = 0, .min_open = true};
constexpr ValueRange kNonNegative{.min = 0};
constexpr ValueRange kAtLeastOne{.min = 1};
constexpr ValueRange kUnitInterval{.min = 0, .max = 1, .max_open = true};  // [0, 1)
// Counts, bounded so that every product the trainer, samplers and memory check form of them fits
// in 64 bits (the products themselves are checked too, in run_config.cpp): generous for any
// machine, far from the 2^57 rows that once overflowed the memory check into a crash. The model's
// sizes have their own limits (model/config.h's validate).
constexpr ValueRange kRows{.min = 0, .min_open = true, .max = 0x1p24};         // sequences, tokens a row
constexpr ValueRange kRowsOrZero{.min = 0, .max = 0x1p24};
constexpr ValueRange kSteps{.min = 0, .min_open = true, .max = 0x1p40};        // steps
constexpr ValueRange kStepsOrZero{.min = 0, .max = 0x1p40};
constexpr ValueRange kThreads{.min = 0, .max = 0x1p16};

std::vector<ConfigKey> make_keys() {
  return {
      // [model]
      {.name = "model.path",
       .field = [](RunConfig& c) -> ConfigField { return &c.model_path; },
       .help = "A model to start from: an HF directory (config.json + safetensors), a llama2.c "
               ".bin, or a Hugging Face Hub id ORG/NAME (from the HF cache, downloaded into it when "
               "absent; run.toml records its snapshot directory); then no other [model] key may be given (--set model.path replaces the "
               "config's [model] section); in a config file, relative to the file"},
      {KEY(model.hidden_size), .range = kPositive, .builtin = "128",
       .help = "Model width; divisible by model.num_attention_heads"},
      {KEY(model.intermediate_size), .range = kPositive, .builtin = "344", .help = "SwiGLU MLP width"},
      {KEY(model.num_hidden_layers), .range = kPositive, .help = "Transformer blocks"},
      {KEY(model.num_attention_heads), .range = kPositive,
       .help = "Query heads; hidden_size / num_attention_heads (head_dim) must be even"},
      {KEY(model.num_key_value_heads), .range = kPositive,
       .help = "Key/value heads (grouped-query attention); divides model.num_attention_heads"},
      {KEY(model.vocab_size), .range = kPositive,
       .help = "Vocabulary size (the byte-level tokenizer uses ids 0..255)"},
      {KEY(model.max_position_embeddings), .range = kPositive, .builtin = "256",
       .help = "Longest sequence; at least train.seq_len"},
      {KEY(model.rms_norm_eps), .range = kPositive, .help = "RMSNorm epsilon"},
      {KEY(model.rope_theta), .range = kPositive, .builtin = "10000.0", .help = "RoPE base"},
      {KEY(model.tie_word_embeddings), .help = "Share the embedding matrix with the output head"},
      {KEY(model.rope_scaling.factor), .range = kNonNegative,
       .help = "Llama 3.1 (\"llama3\") RoPE scaling factor; 0 disables scaling"},
      {KEY(model.rope_scaling.low_freq_factor),
       .help = "Llama 3.1 scaling; must be < high_freq_factor when scaling"},
      {KEY(model.rope_scaling.high_freq_factor), .help = "Llama 3.1 scaling"},
      {KEY(model.rope_scaling.original_max_position_embeddings),
       .help = "Llama 3.1 scaling; > 0 when scaling"},

      // [lora]
      {KEY(lora.enabled), .help = "Train LoRA adapters on a frozen model instead of all weights"},
      {KEY(lora.rank), .range = kPositive, .help = "Adapter rank"},
      {KEY(lora.alpha), .range = kPositive, .help = "Adapter scale is alpha / rank"},
      {KEY(lora.targets), .choices = {"q", "k", "v", "o", "gate", "up", "down", "lm_head", "c_attn", "c_proj", "c_fc"},
       .help = "Projections that get adapters; not empty when enabled. GPT-2's are named by its modules: "
               "c_attn (q, k, v: one adapter on the fused matrix), c_proj (o and down), c_fc (up)"},
      {KEY(lora.init_std), .range = kNonNegative, .help = "A ~ N(0, init_std), B = 0"},
      {KEY(lora.dropout), .range = kUnitInterval,
       .help = "Dropout on each adapter's input, as PEFT's lora_dropout: only on the LoRA branch, "
               "kept values scaled by 1 / (1 - dropout), in training steps only (never in "
               "validation, eval or generate); the masks follow from train.seed and the step, so a "
               "resumed run is bit-exact (see LoRA dropout); 0: none"},
      {KEY(lora.train_router),
       .help = "A mixture of experts' routers trained beside the adapters (PEFT's modules_to_save = "
               "[\"gate\"]): each MoE layer's router gets a trainable copy, saved with the adapter; "
               "false: routers frozen (needs lora.enabled and an MoE model)"},
      {KEY(lora.base_dtype), .choices = {"bf16", "nf4"},
       .help = "The frozen base's block matrices: bf16 (as train.precision gives), or nf4 "
               "(QLoRA: 4-bit NormalFloat with double quantisation, about 4.13 bits a weight, "
               "quantised as loaded and dequantised for each GEMM; needs lora.enabled)"},
      {.name = "lora.init_adapter",
       .field = [](RunConfig& c) -> ConfigField { return &c.lora_init_adapter; },
       .help = "A PEFT adapter directory the adapters start from instead of A ~ N(0, init_std), B = 0 (a run "
               "that trains an adapter further: DPO on an SFT adapter); its r, lora_alpha and target_modules "
               "must be lora.rank, lora.alpha and lora.targets; needs lora.enabled; in a config file, relative "
               "to the file"},
      {.name = "lora.random_base",
       .field = [](RunConfig& c) -> ConfigField { return &c.lora_random_base; },
       .help = "Allow LoRA without model.path, on a random base that is never saved (the "
               "adapter is useless without it; for tests); false: such a run is refused"},

      // [optim]
      {KEY(optim.lr), .range = kPositive, .builtin = "2e-3", .help = "Peak learning rate (AdamW)"},
      {KEY(optim.min_lr), .range = kNonNegative, .builtin = "2e-4",
       .help = "The schedule decays from lr to min_lr (above lr is allowed: it then rises); "
               "constant ignores it"},
      {KEY(optim.warmup_steps), .range = kStepsOrZero, .builtin = "20",
       .help = "Linear warm-up steps (unless optim.warmup_ratio > 0)"},
      {KEY(optim.warmup_ratio), .range = {.min = 0, .max = 1},
       .help = "The warm-up as a share of the run's steps, as the HF Trainer's warmup_ratio: > 0: "
               "ceil(warmup_ratio x train.steps) steps (of a run by epochs, its steps once counted) "
               "instead of optim.warmup_steps, which is then left out (a --set of either replaces the "
               "other; both in one file are refused); 0: optim.warmup_steps gives the warm-up"},
      {KEY(optim.schedule), .choices = {"cosine", "linear", "constant", "wsd"},
       .help = "The lr after warm-up, to train.steps: cosine (half a cosine from lr to min_lr), "
               "linear (a straight line from lr to min_lr), constant (lr), wsd (warmup-stable-decay: "
               "lr, then a straight line to min_lr over the last optim.decay_fraction of the steps "
               "after warm-up)"},
      {KEY(optim.decay_fraction), .range = {.min = 0, .min_open = true, .max = 1},
       .help = "wsd: the share of the steps after warm-up that decay to min_lr (the rest stay at lr)"},
      {KEY(optim.weight_decay), .range = kNonNegative, .help = "Decoupled weight decay"},
      {KEY(optim.beta1), .range = kUnitInterval, .help = "AdamW beta1"},
      {KEY(optim.beta2), .range = kUnitInterval, .help = "AdamW beta2"},
      {KEY(optim.eps), .range = kPositive, .help = "AdamW epsilon"},
      {KEY(optim.grad_clip), .help = "Global gradient-norm clip; <= 0 disables"},

      // [train]
      {KEY(train.steps), .range = kSteps, .builtin = "200",
       .help = "Optimizer steps; leave out with train.epochs (a --set of either replaces the other)"},
      {KEY(train.epochs), .range = {.min = 0, .max = 1e6},
       .help = "The run's length in passes over the training data instead of train.steps: steps = "
               "ceil(epochs x rows of an epoch / (batch_size x grad_accum)), printed at the start "
               "(rows: packed rows of examples, or train tokens / seq_len of plain text); 0: "
               "train.steps gives the length"},
      {KEY(train.method), .choices = {"sft", "dpo", "ipo", "simpo", "orpo"},
       .help = "sft: the next-token loss on the data's trained tokens; dpo, ipo, simpo, orpo: "
               "preference training on chosen / rejected pairs as TRL computes each loss (keys in "
               "[preference]; data: prompt / chosen / rejected records; see docs/fine-tuning.md)"},
      {KEY(train.batch_size), .range = kRows, .builtin = "8",
       .help = "Sequences per micro-batch (preference training: two per pair, so even)"},
      {KEY(train.grad_accum), .range = kRows, .help = "Micro-batches per optimizer step"},
      {KEY(train.seq_len), .range = kRowsOrZero, .builtin = "0",
       .help = "Tokens per sequence; <= model.max_position_embeddings. 0 (or absent with model.path): "
               "with model.path from the data, its longest example rounded up to a multiple of 64, at "
               "most the model's max_position_embeddings and 2048 (logged; run.toml records it); "
               "without, 128"},
      {KEY(train.seed), .help = "Seeds initialisation and batch sampling; >= 0"},
      {KEY(train.precision), .choices = {"fp32", "bf16"},
       .help = "Compute precision (bf16: mixed, with fp32 master weights)"},
      {KEY(train.activation_checkpointing),
       .help = "Recompute activations in the backward pass to save memory"},
      {KEY(train.log_every), .range = kSteps, .builtin = "10",
       .help = "Print a progress line every N steps"},
      {KEY(train.eval_every), .range = kStepsOrZero,
       .help = "Steps between validation-loss evaluations of the held-out set (and one at the "
               "last step), into metrics.jsonl and the progress line; 0: only the last step's (with "
               "held-out data)"},
      {KEY(train.eval_tokens), .range = kRows,
       .help = "Held-out tokens each validation reads: the first ceil(eval_tokens / seq_len) rows "
               "(plain-text windows or packed examples) of the held-out set, or all of it when "
               "shorter; the same whatever train.batch_size, grad_accum and mesh"},
      {KEY(train.threads), .range = kThreads, .help = "Worker threads; 0 uses all cores"},
      {KEY(train.peak_gflops), .range = kNonNegative,
       .help = "MFU denominator in GFLOP/s; 0 measures the device's bf16 GEMM at the run's first "
               "start, before the model loads and outside the run's reported peak memory; its "
               "checkpoints record it and a resume reuses it",
       .per_rank = true},
      {KEY(train.resume),
       .help = "\"latest\" or a checkpoint directory to continue from (see Checkpoints)"},
      {KEY(train.profile),
       .help = "Print the time per op (steps after the first) at the end of the run "
               "(run_summary.json records it either way)"},
      {KEY(train.fsdp_prefetch),
       .help = "FSDP: issue the next unit's all-gather before this unit computes (false: gather "
               "each unit when it is needed, to measure what prefetch hides)"},
      {KEY(train.sequence_parallel),
       .help = "With tp > 1: Megatron's sequence parallelism, the residual stream between the "
               "tensor-parallel regions (norms, residual adds, embedding output) split by rows over "
               "the tp ranks, all-gather and reduce-scatter in place of each all-reduce, so those "
               "activations take 1/tp of the memory; a micro-batch's tokens per rank must divide "
               "by tp (see docs/distributed.md)"},
      {KEY(train.moe_capacity_factor), .range = {.min = 0, .max = 1e6},
       .help = "A mixture of experts in training: > 0 caps each expert at ceil(factor x tokens x k / "
               "experts) rows per layer and micro-batch of a rank (as Switch and Megatron do per "
               "device), first come first served, the other choices dropped and counted "
               "(moe_dropped in metrics.jsonl); 0: dropless, every choice computed (the default, "
               "as Hugging Face computes)"},
      {KEY(train.comm_progress), .choices = {"thread", "ops", "off"},
       .help = "What moves non-blocking collectives (FSDP gathers and reduce-scatters, gradient "
               "buckets, pipeline sends) while the ranks compute: a communication thread, the "
               "compute ops at their start, or only the waits (off: to measure what overlap hides; "
               "see docs/distributed.md, Overlap)"},
      {KEY(train.dp_bucket_mb), .range = {.min = 0, .max = 1e6},
       .help = "Megabytes of gradients per data-parallel all-reduce (dp replicas), each "
               "issued during the last micro-batch's backward once its gradients are final (DDP's "
               "25 MB); 0: one all-reduce of every gradient after the backward"},
      {KEY(train.collective_timeout), .range = kNonNegative,
       .help = "Seconds a rank may wait in one collective before the watchdog names what each "
               "rank is stuck in and ends the job; 0: no watchdog (see docs/distributed.md)"},
      {KEY(train.stop_timeout), .range = kNonNegative,
       .help = "Seconds from a stop signal (SIGTERM, SIGINT, SIGUSR1) to an immediate exit (code 4) "
               "when the graceful stop (finish the step, write a checkpoint, exit 3) has not "
               "completed; a second signal exits at once too; 0: no limit (see Stopping a run)"},
      {KEY(train.debug_collectives),
       .help = "Before each collective, the ranks compare its sequence number and signature and "
               "name a mismatch instead of hanging (one small all-gather per collective)"},
      {KEY(train.device_comm), .choices = {"mpi", "staged", "nccl"},
       .help = "How gradients, shards and activations travel between ranks: mpi (directly from "
               "CPU memory, host-staged from a GPU's), staged (always through host copies), nccl "
               "(NCCL on the GPU's stream; CUDA builds, one rank per GPU); see docs/gpu.md"},

      {KEY(train.device), .choices = {"cpu", "cuda"},
       .help = "Where the run computes: the CPU, or with cuda each rank the GPU of its local rank "
               "(a build configured with -DMESHTRAIN_CUDA=ON; see docs/gpu.md); --device overrides it"},
      {KEY(train.share_gpu),
       .help = "Let a node run more ranks than it has GPUs, sharing them round robin (for tests of "
               "multi-rank meshes on one GPU); false: such a run is refused"},

      {KEY(train.pp_schedule), .choices = {"1f1b", "gpipe"},
       .help = "Pipeline schedule under mesh pp > 1: 1F1B (one forward, one backward in the "
               "steady state) or GPipe (all forwards, then all backwards); gpipe without pp > 1 is refused"},
      {KEY(train.pp_blocks),
       .help = "Blocks per pipeline stage, first to last (\"1,3\"); empty: balanced by cost "
               "(the head's FLOPs count with the last stage); given without mesh pp > 1, refused"},
      {KEY(train.pp_virtual), .range = kAtLeastOne,
       .help = "Chunks per pipeline stage (interleaved 1F1B, Megatron's virtual stages): rank s "
               "holds chunks s, s + pp, ...; > 1 needs pp_schedule = \"1f1b\" and grad_accum a "
               "multiple of pp; train.pp_blocks then counts blocks per chunk"},

      // [data]
      {KEY(data.path),
       .help = "Training file (plain text, or JSON/JSONL records: Alpaca, chat or ShareGPT, "
               "prompt/completion, text); empty uses the built-in demo text; in a config file, relative to the file"},
      {KEY(data.format),
       .choices = {"auto", "text", "alpaca", "chat", "chatml", "gemma", "mistral", "completion", "text_records"},
       .help = "auto: .json/.jsonl files are records, their format told by the first record's fields (a chat "
               "file in its tokenizer's chat template), anything else plain text; text: plain text (refused "
               "on .json/.jsonl); chat: Llama 3.1, chatml: Qwen, gemma, mistral; completion: prompt + "
               "completion; text_records: {\"text\"} documents (see Training data)"},
      {KEY(data.columns),
       .help = "Record fields under other names: \"field=column\" entries (e.g. [\"prompt=question\", "
               "\"completion=answer\"]), each reading the file's column as the format's field (instruction, "
               "input, output, prompt, completion, text, messages, conversations; chosen, rejected of preference pairs)"},
      {KEY(data.tokenizer),
       .help = "Tokenizer file or directory; empty: the model's own (model.path), else the "
               "byte-level tokenizer; \"byte\": byte-level; in a config file, relative to the file"},
      {KEY(data.add_tokens),
       .help = "Special tokens added to the tokenizer after its last id (e.g. [\"<|im_start|>\", "
               "\"<|im_end|>\"] for the chatml template on a base model); the model's embedding and "
               "head grow to match, new rows the mean of the others, and under LoRA train in full "
               "(PEFT's modules_to_save); one the tokenizer has is skipped with a note"},
      {KEY(data.chat_template),
       .help = "A Jinja chat template file (a tokenizer_config.json chat_template's text) that renders the "
               "run's conversations in place of the tokenizer's own; empty: the tokenizer's, else the built-in "
               "template of data.format; in a config file, relative to the file"},
      {KEY(data.cache_dir),
       .help = "Tokenised-example cache; empty: ~/.cache/meshtrain/tokens; \"off\": none",
       .per_rank = true},
      {KEY(data.truncate),
       .help = "Cut examples longer than train.seq_len instead of skipping (and counting) them"},
      {KEY(data.val_fraction), .range = kUnitInterval, .builtin = "0.1",
       .help = "Tail of the text held out for validation"},
      {KEY(data.sources),
       .help = "Several files mixed by weight instead of data.path: [[data.sources]] tables of path, format "
               "(as data.format), weight (> 0, relative: a source's share of the training rows), split "
               "(\"train\", or a slice: \"train[:90%]\", \"train[:1000]\", \"train[-500:]\") and columns (as "
               "data.columns); also for preference pairs; see Mixing datasets"},

      // [preference]
      {KEY(preference.beta), .range = kPositive,
       .help = "Preference training's temperature: DPO's and SimPO's beta, IPO's tau, ORPO's lambda"},
      {KEY(preference.label_smoothing), .range = {.min = 0, .max = 0.5},
       .help = "dpo and simpo: the probability that a pair's labels are flipped (conservative DPO)"},
      {KEY(preference.simpo_gamma), .range = kNonNegative, .help = "simpo: the target reward margin"},
      {KEY(preference.cpo_alpha), .range = kNonNegative,
       .help = "simpo: weight of the chosen completions' NLL added to the loss (TRL's CPO term)"},
      {KEY(preference.max_prompt_length), .range = kRowsOrZero,
       .help = "Longest prompt kept when a pair's prompt and longer completion exceed train.seq_len "
               "(then the completions are cut to seq_len minus it); 0: train.seq_len / 4"},
      {KEY(preference.truncation_mode), .choices = {"keep_end", "keep_start"},
       .help = "Which end of a too-long prompt is kept (TRL's truncation_mode)"},
      {KEY(preference.reference), .choices = {"auto", "adapters_off", "precomputed"},
       .help = "dpo and ipo's reference model: adapters_off (LoRA: the base alone, a forward a step), "
               "precomputed (the starting model's log-probabilities of every pair, one pass before "
               "training, kept with the run), auto: adapters_off under LoRA, else precomputed"},

      // [output]
      {KEY(output.dir), .non_empty = true,
       .help = "Where metrics.jsonl, the run's config (run.toml) and the weights go; relative to "
               "the working directory"},
      {KEY(output.checkpoint_every), .range = kStepsOrZero,
       .help = "Steps between checkpoints (and one at the end, so a run can be resumed or extended); "
               "0: none"},
      {KEY(output.keep_checkpoints), .range = kAtLeastOne, .help = "Newest checkpoints kept"},
      {KEY(output.keep_best),
       .help = "Checkpoint each step whose validation loss is the lowest so far and name it in "
               "checkpoints/best, which pruning keeps; needs train.eval_every > 0"},
      {KEY(output.overwrite),
       .help = "Replace another run in output.dir: remove, and list, what meshtrain wrote there (run.toml, "
               "metrics.jsonl, run_summary.json, checkpoints/, model/, adapter/, and the reports and exports "
               "recorded in meshtrain_outputs.txt), never another file; false: such a directory is refused "
               "unless resumed"},

      // [mesh]: the command line's --mesh replaces it; the product must equal the number of ranks.
      {.name = "mesh.auto",
       .field = [](RunConfig& c) -> ConfigField { return &c.mesh_auto; },
       .help = "Let the planner choose dp, fsdp, tp, pp, cp and ep for the ranks launched (train --mesh auto): "
               "the fastest layout that fits the memory of this machine or of train's --cluster, with the "
               "run's batch_size, grad_accum and activation_checkpointing as given; the sizes beside it "
               "are replaced by the choice, which run.toml records (a resume on as many ranks keeps it, "
               "on another number re-plans; see docs/planner.md)"},
      {KEY(mesh.dp), .range = kAtLeastOne, .help = "Data-parallel replicas (each sees its own batches)"},
      {KEY(mesh.fsdp), .range = kAtLeastOne,
       .help = "Fully sharded data parallel (own batches, parameters sharded)"},
      {KEY(mesh.tp), .range = kAtLeastOne, .help = "Tensor parallel (Megatron column/row splits)"},
      {KEY(mesh.pp), .range = kAtLeastOne,
       .help = "Pipeline stages, each storing only its units (see train.pp_schedule, train.pp_blocks)"},
      {KEY(mesh.cp), .range = kAtLeastOne,
       .help = "Context parallel: every sequence cut into 2 cp chunks, rank r of a cp group holding chunks r "
               "and 2cp-1-r; parameters sharded over fsdp x cp, attention all-gathers keys and values (train.seq_len "
               "divisible by 2 cp; mesh.auto may choose it)"},
      {KEY(mesh.ep), .range = kAtLeastOne,
       .help = "Expert parallel: a mixture of experts' experts split over ranks that are otherwise data parallel "
               "(own batches; ep must divide num_experts); each MoE layer sends every token's rows to the ranks "
               "of its experts and back (see docs/mesh.md)"},

      // [partition]
      {KEY(partition.replace_defaults),
       .help = "Use only the rules below instead of trying them before the default rules"},
      {KEY(partition.rules),
       .help = "Tried in order before the defaults, first match wins: {pattern = 'regex', spec = "
               "[per dimension: \"axis\", [\"axis\", ...] or \"none\"]} (see Partition rules)"},
  };
}

#undef KEY

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

const ConfigKey* find_config_key(std::string_view name) {
  for (const ConfigKey& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string_view table_of(const ConfigKey& key) { return key.name.substr(0, key.name.rfind('.')); }

std::string_view leaf_of(const ConfigKey& key) { return key.name.substr(key.name.rfind('.') + 1); }

const std::vector<std::string>& config_tables() {
  static const std::vector<std::string> tables = [] {
    std::vector<std::string> out;
    for (const ConfigKey& k : config_keys()) {
      // Every enclosing table too, outer first: "model" before "model.rope_scaling".
      const std::string_view table = table_of(k);
      for (size_t dot = 0; dot != std::string_view::npos;) {
        dot = table.find('.', dot + 1);
        std::string prefix(table.substr(0, dot));
        if (std::find(out.begin(), out.end(), prefix) == out.end()) out.push_back(prefix);
      }
    }
    return out;
  }();
  return tables;
}

bool is_config_table(std::string_view path) {
  const auto& t = config_tables();
  return std::find(t.begin(), t.end(), path) != t.end();
}

ConfigField field_of(const ConfigKey& key, RunConfig& c) { return key.field(c); }

ConfigField field_of(const ConfigKey& key, const RunConfig& c) {
  return key.field(const_cast<RunConfig&>(c));
}

}  // namespace mt

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_of.h"
#include "core/error.h"
#include "train/config_docs.h"
#include "train/config_schema.h"
#include "train/config_values.h"
#include "train/run_config.h"
#include "temp_dirs.h"

namespace mt {
namespace {

std::string parse_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { parse_run_config(text, overrides, "run.toml"); });
}

std::string default_error(const std::vector<std::string>& overrides) {
  return error_of([&] { parse_run_config(default_run_config_toml(), overrides, "run.toml"); });
}

RunConfig parse_default(const std::vector<std::string>& overrides = {}) {
  return parse_run_config(default_run_config_toml(), overrides, "default");
}

void expect_same(const RunConfig& a, const RunConfig& b) {
  EXPECT_EQ(a.model.hidden_size, b.model.hidden_size);
  EXPECT_EQ(a.model.intermediate_size, b.model.intermediate_size);
  EXPECT_EQ(a.model.num_hidden_layers, b.model.num_hidden_layers);
  EXPECT_EQ(a.model.num_attention_heads, b.model.num_attention_heads);
  EXPECT_EQ(a.model.num_key_value_heads, b.model.num_key_value_heads);
  EXPECT_EQ(a.model.vocab_size, b.model.vocab_size);
  EXPECT_EQ(a.model.max_position_embeddings, b.model.max_position_embeddings);
  EXPECT_EQ(a.model.rms_norm_eps, b.model.rms_norm_eps);
  EXPECT_EQ(a.model.rope_theta, b.model.rope_theta);
  EXPECT_EQ(a.model.rope_scaling.factor, b.model.rope_scaling.factor);
  EXPECT_EQ(a.model.rope_scaling.low_freq_factor, b.model.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.model.rope_scaling.high_freq_factor, b.model.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.model.rope_scaling.original_max_position_embeddings,
            b.model.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.model.tie_word_embeddings, b.model.tie_word_embeddings);
  EXPECT_EQ(a.lora.enabled, b.lora.enabled);
  EXPECT_EQ(a.lora.rank, b.lora.rank);
  EXPECT_EQ(a.lora.alpha, b.lora.alpha);
  EXPECT_EQ(a.lora.targets, b.lora.targets);
  EXPECT_EQ(a.lora.init_std, b.lora.init_std);
  EXPECT_EQ(a.lora_random_base, b.lora_random_base);
  EXPECT_EQ(a.lora_init_adapter, b.lora_init_adapter);
  EXPECT_EQ(a.lora.base_dtype, b.lora.base_dtype);
  EXPECT_EQ(a.lora.dropout, b.lora.dropout);
  EXPECT_EQ(a.train.method, b.train.method);
  EXPECT_EQ(a.preference.beta, b.preference.beta);
  EXPECT_EQ(a.preference.label_smoothing, b.preference.label_smoothing);
  EXPECT_EQ(a.preference.simpo_gamma, b.preference.simpo_gamma);
  EXPECT_EQ(a.preference.cpo_alpha, b.preference.cpo_alpha);
  EXPECT_EQ(a.preference.max_prompt_length, b.preference.max_prompt_length);
  EXPECT_EQ(a.preference.truncation_mode, b.preference.truncation_mode);
  EXPECT_EQ(a.preference.reference, b.preference.reference);
  EXPECT_EQ(a.optim.lr, b.optim.lr);
  EXPECT_EQ(a.optim.min_lr, b.optim.min_lr);
  EXPECT_EQ(a.optim.warmup_steps, b.optim.warmup_steps);
  EXPECT_EQ(a.optim.weight_decay, b.optim.weight_decay);
  EXPECT_EQ(a.optim.beta1, b.optim.beta1);
  EXPECT_EQ(a.optim.beta2, b.optim.beta2);
  EXPECT_EQ(a.optim.eps, b.optim.eps);
  EXPECT_EQ(a.optim.grad_clip, b.optim.grad_clip);
  EXPECT_EQ(a.optim.schedule, b.optim.schedule);
  EXPECT_EQ(a.optim.decay_fraction, b.optim.decay_fraction);
  EXPECT_EQ(a.optim.warmup_ratio, b.optim.warmup_ratio);
  EXPECT_EQ(a.train.steps, b.train.steps);
  EXPECT_EQ(a.train.epochs, b.train.epochs);
  EXPECT_EQ(a.train.batch_size, b.train.batch_size);
  EXPECT_EQ(a.train.grad_accum, b.train.grad_accum);
  EXPECT_EQ(a.train.seq_len, b.train.seq_len);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.train.precision, b.train.precision);
  EXPECT_EQ(a.train.activation_checkpointing, b.train.activation_checkpointing);
  EXPECT_EQ(a.train.log_every, b.train.log_every);
  EXPECT_EQ(a.train.threads, b.train.threads);
  EXPECT_EQ(a.train.peak_gflops, b.train.peak_gflops);
  EXPECT_EQ(a.train.resume, b.train.resume);
  EXPECT_EQ(a.train.profile, b.train.profile);
  EXPECT_EQ(a.train.fsdp_prefetch, b.train.fsdp_prefetch);
  EXPECT_EQ(a.train.sequence_parallel, b.train.sequence_parallel);
  EXPECT_EQ(a.train.collective_timeout, b.train.collective_timeout);
  EXPECT_EQ(a.train.stop_timeout, b.train.stop_timeout);
  EXPECT_EQ(a.train.debug_collectives, b.train.debug_collectives);
  EXPECT_EQ(a.train.eval_every, b.train.eval_every);
  EXPECT_EQ(a.train.eval_tokens, b.train.eval_tokens);
  EXPECT_EQ(a.train.device, b.train.device);
  EXPECT_EQ(a.train.share_gpu, b.train.share_gpu);
  EXPECT_EQ(a.train.device_comm, b.train.device_comm);
  EXPECT_EQ(a.data.path, b.data.path);
  EXPECT_EQ(a.data.format, b.data.format);
  EXPECT_EQ(a.data.tokenizer, b.data.tokenizer);
  EXPECT_EQ(a.data.add_tokens, b.data.add_tokens);
  EXPECT_EQ(a.data.chat_template, b.data.chat_template);
  EXPECT_EQ(a.data.cache_dir, b.data.cache_dir);
  EXPECT_EQ(a.data.truncate, b.data.truncate);
  EXPECT_EQ(a.data.val_fraction, b.data.val_fraction);
  EXPECT_EQ(a.data.columns, b.data.columns);
  EXPECT_TRUE(a.data.sources == b.data.sources);
  EXPECT_EQ(a.output.dir, b.output.dir);
  EXPECT_EQ(a.output.checkpoint_every, b.output.checkpoint_every);
  EXPECT_EQ(a.output.keep_checkpoints, b.output.keep_checkpoints);
  EXPECT_EQ(a.output.overwrite, b.output.overwrite);
  EXPECT_EQ(a.output.keep_best, b.output.keep_best);
  EXPECT_EQ(a.model_path, b.model_path);
  EXPECT_EQ(a.mesh.dp, b.mesh.dp);
  EXPECT_EQ(a.mesh.fsdp, b.mesh.fsdp);
  EXPECT_EQ(a.mesh.tp, b.mesh.tp);
  EXPECT_EQ(a.mesh.pp, b.mesh.pp);
  EXPECT_EQ(a.mesh.cp, b.mesh.cp);
  EXPECT_EQ(a.mesh_auto, b.mesh_auto);
  EXPECT_EQ(a.partition.replace_defaults, b.partition.replace_defaults);
  const auto& ra = a.partition.rules.rules();
  const auto& rb = b.partition.rules.rules();
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].pattern, rb[i].pattern) << "rule " << i;
    EXPECT_EQ(ra[i].spec, rb[i].spec) << "rule " << i << ": " << ra[i].spec.str() << " vs " << rb[i].spec.str();
  }
}

TEST(ConfigParse, DefaultParses) {
  RunConfig c = parse_default();
  EXPECT_EQ(c.model.hidden_size, 128);
  EXPECT_EQ(c.model.intermediate_size, 344);
  EXPECT_EQ(c.model.num_hidden_layers, 4);
  EXPECT_EQ(c.model.num_attention_heads, 8);
  EXPECT_EQ(c.model.num_key_value_heads, 4);
  EXPECT_EQ(c.model.vocab_size, 256);
  EXPECT_EQ(c.model.max_position_embeddings, 256);
  EXPECT_FALSE(c.lora.enabled);
  EXPECT_EQ(c.train.precision, Precision::bf16);
  EXPECT_EQ(c.train.seq_len, 128);
  EXPECT_EQ(c.train.batch_size, 8);
  EXPECT_EQ(c.train.steps, 200);
  EXPECT_FLOAT_EQ(c.optim.lr, 2e-3f);
  EXPECT_EQ(c.optim.warmup_steps, 20);
  EXPECT_EQ(c.data.path, "");
  EXPECT_EQ(c.output.dir, "runs/default");
}

TEST(ConfigParse, EmptyDocumentGivesStructDefaults) {
  expect_same(parse_run_config("", {}), RunConfig{});
}

TEST(ConfigParse, IntegerAcceptedForFloat) {
  RunConfig c = parse_run_config("[optim]\nlr = 1\n[lora]\nalpha = 32\n", {});
  EXPECT_EQ(c.optim.lr, 1.0f);
  EXPECT_EQ(c.lora.alpha, 32.0f);
}

TEST(ConfigParse, RopeScalingSubTable) {
  RunConfig c = parse_run_config(
      "[model.rope_scaling]\nfactor = 8\nlow_freq_factor = 1.0\nhigh_freq_factor = 4.0\n"
      "original_max_position_embeddings = 8192\n",
      {});
  EXPECT_EQ(c.model.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.model.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(ConfigOverride, Integer) {
  EXPECT_EQ(parse_default({"train.steps=50"}).train.steps, 50);
}

TEST(ConfigOverride, Float) {
  EXPECT_FLOAT_EQ(parse_default({"optim.lr=1e-4"}).optim.lr, 1e-4f);
  EXPECT_FLOAT_EQ(parse_default({"optim.beta2=0.99"}).optim.beta2, 0.99f);
}

TEST(ConfigOverride, QuotedString) {
  EXPECT_EQ(parse_default({"train.precision=\"fp32\""}).train.precision, Precision::fp32);
  EXPECT_EQ(parse_default({"output.dir=\"runs/x y\""}).output.dir, "runs/x y");
}

TEST(ConfigOverride, BareWordIsString) {
  EXPECT_EQ(parse_default({"train.precision=fp32"}).train.precision, Precision::fp32);
  EXPECT_EQ(parse_default({"data.path=/tmp/some file.txt"}).data.path, "/tmp/some file.txt");
  EXPECT_EQ(parse_default({"output.dir=2024"}).output.dir, "2024");  // string key: raw text
  // Only the first '=' splits.
  EXPECT_EQ(parse_default({"output.dir=runs/a=b"}).output.dir, "runs/a=b");
}

TEST(ConfigOverride, Array) {
  RunConfig c = parse_default({"lora.enabled=true", "lora.targets=[\"q\",\"v\"]"});
  EXPECT_TRUE(c.lora.enabled);
  EXPECT_EQ(c.lora.targets, (std::vector<std::string>{"q", "v"}));
}

TEST(ConfigOverride, NestedKeyAndLaterOverrideWins) {
  RunConfig c = parse_default({"model.rope_scaling.factor=8", "train.steps=5", "train.steps=7"});
  EXPECT_EQ(c.model.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.train.steps, 7);
}

TEST(ConfigOverride, CreatesMissingSection) {
  RunConfig c = parse_run_config("", {"lora.rank=4", "model.rope_scaling.factor=2"});
  EXPECT_EQ(c.lora.rank, 4);
  EXPECT_EQ(c.model.rope_scaling.factor, 2.0f);
}

TEST(ConfigOverride, UnknownKeyNamesKey) {
  std::string msg = default_error({"train.stpes=5"});
  EXPECT_NE(msg.find("unknown key 'train.stpes'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.steps"), std::string::npos) << msg;  // suggestion
}

TEST(ConfigOverride, UnknownSectionNamesSection) {
  std::string msg = default_error({"trian.steps=5"});
  EXPECT_NE(msg.find("unknown section 'trian'"), std::string::npos) << msg;
}

TEST(ConfigOverride, MalformedOverride) {
  EXPECT_NE(default_error({"train.steps"}).find("section.key=value"), std::string::npos);
  EXPECT_NE(default_error({"train=5"}).find("section.key=value"), std::string::npos);
}

TEST(ConfigOverride, WrongTypeNamesKey) {
  std::string msg = default_error({"train.steps=many"});
  EXPECT_NE(msg.find("train.steps must be an integer, got a string"), std::string::npos) << msg;
}

TEST(ConfigOverride, ErrorsNameTheOverride) {
  // A bad value that came from --set is blamed on that --set, not on the file.
  EXPECT_EQ(default_error({"lora.rank=0"}).rfind("--set lora.rank=0: lora.rank must be > 0", 0), 0u);
  EXPECT_EQ(default_error({"train.steps=x"}).rfind("--set train.steps=x: train.steps", 0), 0u);
  EXPECT_EQ(default_error({"model.num_attention_heads=6"}).rfind("--set model.num_attention_heads=6: ", 0), 0u);
  // Overrides that are only consistent together are checked together.
  RunConfig c = parse_default({"model.num_attention_heads=6", "model.num_key_value_heads=3",
                               "model.hidden_size=96"});
  EXPECT_EQ(c.model.head_dim(), 16);
}

TEST(ConfigErrors, UnknownKey) {
  std::string msg = parse_error("[train]\nstpes = 5\n");
  EXPECT_NE(msg.find("run.toml: unknown key 'train.stpes'"), std::string::npos) << msg;
}

TEST(ConfigErrors, UnknownRopeScalingKey) {
  std::string msg = parse_error("[model.rope_scaling]\nfactr = 8\n");
  EXPECT_NE(msg.find("unknown key 'model.rope_scaling.factr'"), std::string::npos) << msg;
}

TEST(ConfigErrors, UnknownSection) {
  std::string msg = parse_error("[trainer]\nsteps = 5\n");
  EXPECT_NE(msg.find("unknown section 'trainer'"), std::string::npos) << msg;
}

TEST(ConfigErrors, WrongTypeStringForInteger) {
  std::string msg = parse_error("[train]\nsteps = \"ten\"\n");
  EXPECT_NE(msg.find("train.steps must be an integer, got a string"), std::string::npos) << msg;
}

TEST(ConfigErrors, WrongTypeFloatForInteger) {
  std::string msg = parse_error("[model]\nhidden_size = 128.0\n");
  EXPECT_NE(msg.find("model.hidden_size must be an integer, got a float"), std::string::npos) << msg;
}

TEST(ConfigErrors, WrongTypeOthers) {
  EXPECT_NE(parse_error("[optim]\nlr = \"fast\"\n").find("optim.lr must be a number"),
            std::string::npos);
  EXPECT_NE(parse_error("[lora]\nenabled = 1\n").find("lora.enabled must be a boolean"),
            std::string::npos);
  EXPECT_NE(parse_error("[lora]\ntargets = \"q\"\n").find("lora.targets must be an array"),
            std::string::npos);
  EXPECT_NE(parse_error("[lora]\ntargets = [1]\n").find("lora.targets must be an array of strings"),
            std::string::npos);
  EXPECT_NE(parse_error("model = 3\n").find("'model' must be a table"), std::string::npos);
  EXPECT_NE(parse_error("[model]\nrope_scaling = 8\n").find("model.rope_scaling must be a table"),
            std::string::npos);
}

TEST(ConfigErrors, HeadsMustDivideHiddenSize) {
  std::string msg = parse_error("[model]\nnum_attention_heads = 6\n");
  EXPECT_NE(msg.find("model.num_attention_heads"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.hidden_size"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("run.toml: ", 0), 0u) << msg;
}

TEST(ConfigErrors, KvHeadsMustDivideHeads) {
  std::string msg = default_error({"model.num_key_value_heads=3"});
  EXPECT_NE(msg.find("model.num_key_value_heads"), std::string::npos) << msg;
}

TEST(ConfigErrors, LoraRankZero) {
  std::string msg = default_error({"lora.rank=0"});
  EXPECT_NE(msg.find("lora.rank must be > 0"), std::string::npos) << msg;
}

TEST(ConfigErrors, SeqLenAboveMaxPositions) {
  std::string msg = default_error({"train.seq_len=512"});
  EXPECT_NE(msg.find("train.seq_len"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.max_position_embeddings"), std::string::npos) << msg;
}

TEST(ConfigErrors, BadPrecision) {
  std::string msg = default_error({"train.precision=fp16"});
  EXPECT_NE(msg.find("train.precision"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fp16"), std::string::npos) << msg;
}

TEST(ConfigErrors, UnknownLoraTarget) {
  std::string msg = default_error({"lora.targets=[\"q\", \"qkv\"]"});
  EXPECT_NE(msg.find("lora.targets"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'qkv'"), std::string::npos) << msg;
}

TEST(ConfigErrors, RangeChecksNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train.steps=0", "train.steps"},          {"train.batch_size=0", "train.batch_size"},
      {"train.grad_accum=-1", "train.grad_accum"}, {"train.seq_len=-1", "train.seq_len"},
      {"optim.lr=0", "optim.lr"},                {"optim.beta1=1.0", "optim.beta1"},
      {"optim.beta2=-0.1", "optim.beta2"},       {"lora.alpha=0", "lora.alpha"},
      {"train.log_every=0", "train.log_every"},  {"data.val_fraction=1", "data.val_fraction"},
      {"data.val_fraction=-0.5", "data.val_fraction"},
      {"optim.warmup_steps=-1", "optim.warmup_steps"},
      {"train.threads=-2", "train.threads"},     {"train.seed=-1", "train.seed"},
      {"model.hidden_size=0", "model.hidden_size"},
      {"optim.lr=nan", "optim.lr"},
  };
  for (const auto& [ov, key] : cases) {
    std::string msg = default_error({ov});
    EXPECT_NE(msg.find(key), std::string::npos) << ov << " -> " << msg;
  }
}

TEST(ConfigErrors, SyntaxErrorNamesSourceAndLine) {
  std::string msg = parse_error("[train]\nsteps = = 3\n");
  EXPECT_EQ(msg.rfind("run.toml:2:", 0), 0u) << msg;
}

// Found by fuzz/fuzz_run_config.cpp: toml++ asserted (aborting the run) on a table header whose
// name starts with a character no key can start with; core/toml.h turns that into its syntax error.
TEST(ConfigErrors, TableHeaderWithABadFirstCharacterIsASyntaxError) {
  for (const char* text : {"[$model]\n", "[train]\nsteps = 3\n[\f", "[[ #partition.rules]]\n"}) {
    const std::string msg = parse_error(text);
    EXPECT_NE(msg.find("TOML syntax error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected bare key starting character"), std::string::npos) << msg;
  }
}

// Found by fuzz/fuzz_run_config.cpp: a --set value that is not UTF-8 was accepted, and the run.toml
// written from it could not be read back (toml++ refuses such a file).
TEST(ConfigOverride, ValueMustBeUtf8) {
  for (const char* ov : {"data.path=a\xe0", "output.dir=\xff", "lora.targets=[\"q\xc3\"]"}) {
    const std::string msg = default_error({ov});
    EXPECT_NE(msg.find("is not valid UTF-8"), std::string::npos) << msg;
  }
  const RunConfig c = parse_default({"data.path=d\xc3\xa9j\xc3\xa0.json"});
  EXPECT_EQ(to_toml(parse_run_config(to_toml(c), {}, "run.toml")), to_toml(c));
}

TEST(ConfigErrors, MissingFileNamesFile) {
  std::string msg = error_of([] { load_run_config("/nonexistent/dir/run.toml", {}); });
  EXPECT_NE(msg.find("/nonexistent/dir/run.toml"), std::string::npos) << msg;
}

TEST(ConfigRoundTrip, Default) {
  RunConfig a = parse_default();
  RunConfig b = parse_run_config(to_toml(a), {});
  expect_same(a, b);
  EXPECT_EQ(to_toml(a), to_toml(b));
}

TEST(ConfigRoundTrip, EveryFieldChanged) {
  RunConfig a = parse_default();
  a.model = ModelConfig{};
  a.model.hidden_size = 96;
  a.model.intermediate_size = 250;
  a.model.num_hidden_layers = 3;
  a.model.num_attention_heads = 6;
  a.model.num_key_value_heads = 2;
  a.model.vocab_size = 300;
  a.model.max_position_embeddings = 1000;
  a.model.rms_norm_eps = 1.5e-6f;
  a.model.rope_theta = 123456.7f;
  a.model.rope_scaling = {8.0f, 2.0f, 6.0f, 4096};
  a.model.tie_word_embeddings = true;
  a.lora = {true, 16, 7.5f, {"lm_head", "q", "down"}, 0.01f};
  a.lora.base_dtype = "nf4";
  a.lora.dropout = 0.25f;
  a.lora.train_router = true;
  a.lora_random_base = true;
  a.lora_init_adapter = "/runs/sft/adapter";
  a.optim = {3.3e-4f, 1e-7f, 7, 0.0f, 0.85f, 0.999f, 1e-10f, 0.0f, "wsd", 0.3f};
  a.train.steps = 12345;
  a.train.method = "orpo";
  a.train.batch_size = 6;  // even: a preference method's pairs
  a.train.grad_accum = 5;
  a.train.seq_len = 1000;
  a.train.seed = 987654321012345ull;
  a.train.precision = Precision::fp32;
  a.train.activation_checkpointing = true;
  a.train.log_every = 17;
  a.train.threads = 2;
  a.data.path = "C:\\data\\\"quoted\" text\twith tab.txt";
  a.data.val_fraction = 0.3f;
  a.output.dir = "runs/über";
  a.train.fsdp_prefetch = false;
  a.train.sequence_parallel = false;
  a.train.moe_capacity_factor = 1.25f;
  a.train.comm_progress = "ops";
  a.train.dp_bucket_mb = 12.5f;
  a.train.peak_gflops = 123.5f;
  a.train.resume = "latest";
  a.train.profile = true;
  a.train.collective_timeout = 42.5f;
  a.train.stop_timeout = 7.25f;
  a.train.debug_collectives = true;
  a.train.pp_schedule = "gpipe";
  a.train.pp_blocks = "1,3";
  a.train.pp_virtual = 2;
  a.train.eval_every = 3;
  a.train.eval_tokens = 4096;
  a.train.device = "cuda";
  a.train.device_comm = "staged";
  a.train.share_gpu = true;
  a.train.device_comm = "staged";
  a.preference = {0.25f, 0.125f, 1.5f, 0.75f, 96, "keep_start", "precomputed"};
  a.data.format = "alpaca";
  a.data.columns = {"prompt=question", "completion=answer"};
  a.data.tokenizer = "byte";
  a.data.add_tokens = {"<|im_start|>", "<|im_end|>"};
  a.data.chat_template = "/templates/mine.jinja";
  a.data.cache_dir = "off";
  a.data.truncate = true;
  a.data.sources = {{"/data/a.jsonl", "alpaca", 2.5f, "train", {"instruction=question"}},
                    {"corpus \"b\".txt", "text", 1.0f, "train", {}}};
  a.output.checkpoint_every = 9;
  a.output.keep_checkpoints = 4;
  a.output.overwrite = true;
  a.output.keep_best = true;
  a.mesh = {.dp = 2, .fsdp = 3, .tp = 4, .pp = 5, .cp = 6, .ep = 7};
  a.mesh_auto = true;
  a.partition.replace_defaults = true;
  using parallel::Axis;
  a.partition.rules.add(R"(mlp\.down_proj\.weight$)", {{Axis::fsdp, Axis::tp}, {}});
  a.partition.rules.add("norm", {});
  a.partition.rules.add(R"(^lm_head\.weight$)", {{Axis::tp}, {Axis::dp, Axis::fsdp}});
  // Every key of the schema differs from its default here (model.path; train.epochs, which
  // replaces train.steps in run.toml, and optim.warmup_ratio, which replaces optim.warmup_steps, are
  // changed below), so a key added to the schema without a change here fails this check.
  const RunConfig defaults;
  for (const ConfigKey& key : config_keys()) {
    if (key.name == "model.path" || key.name == "train.epochs" || key.name == "optim.warmup_ratio") continue;
    EXPECT_NE(config_value_toml(key, a), config_value_toml(key, defaults))
        << key.name << " is not changed from its default in this test";
  }
  RunConfig b = parse_run_config(to_toml(a), {}, "roundtrip");
  expect_same(a, b);
  EXPECT_EQ(to_toml(a), to_toml(b));
  // The warm-up as a ratio: run.toml then records no warmup_steps, which reads back as the default.
  a.optim.warmup_ratio = 0.25f;
  a.optim.warmup_steps = OptimConfig{}.warmup_steps;
  b = parse_run_config(to_toml(a), {}, "roundtrip");
  expect_same(a, b);
  EXPECT_EQ(to_toml(a), to_toml(b));
}

TEST(ConfigRoundTrip, ModelPath) {
  RunConfig a = parse_run_config("", {"model.path=/models/my llama", "train.steps=3"});
  const std::string text = to_toml(a);
  EXPECT_EQ(text.find("hidden_size"), std::string::npos) << text;  // the model's files give it
  expect_same(a, parse_run_config(text, {}, "roundtrip"));
}

// `meshtrain train --set model.path=DIR` without --config: the model replaces the built-in run's
// [model] section (a file's too), but a [model] key given with it on the command line still clashes.
TEST(ConfigParse, ModelPathOnTheCommandLineReplacesTheModelSection) {
  const RunConfig c = parse_default({"model.path=/models/llama", "lora.enabled=true"});
  EXPECT_EQ(c.model_path, "/models/llama");
  EXPECT_EQ(to_toml(c).find("hidden_size"), std::string::npos);
  EXPECT_EQ(parse_run_config("[model]\nhidden_size = 64\n", {"model.path=m"}).model_path, "m");
  EXPECT_NE(default_error({"model.hidden_size=64", "model.path=/m"})
                .find("model.hidden_size cannot be combined with model.path"),
            std::string::npos);
  // A file naming a model keeps clashing with its own [model] keys; an empty path changes nothing.
  EXPECT_NE(parse_error("[model]\npath = \"m\"\nhidden_size = 64\n").find("model.hidden_size"),
            std::string::npos);
  EXPECT_EQ(parse_default({"model.path="}).model.hidden_size, 128);
}

TEST(ConfigRoundTrip, TheBuiltInDefaultRunIsRecordedWithEveryKey) {
  const std::string text = to_toml(parse_default());
  for (const ConfigKey& key : config_keys())
    EXPECT_NE(text.find(std::string(leaf_of(key)) + " = "), std::string::npos) << key.name;
  EXPECT_NE(text.find("[mesh]"), std::string::npos) << text;
  EXPECT_NE(text.find("pp = 1"), std::string::npos) << text;
  EXPECT_NE(text.find("[partition]"), std::string::npos) << text;
}

TEST(ConfigMeshAndPartition, ReadFromFileAndOverrides) {
  RunConfig c = parse_run_config(
      "[mesh]\ndp = 2\npp = 3\n[partition]\nreplace_defaults = true\n"
      "[[partition.rules]]\npattern = 'norm'\nspec = []\n"
      "[[partition.rules]]\npattern = 'proj'\nspec = [['fsdp', 'tp'], 'none']\n",
      {"mesh.tp=2"});
  EXPECT_EQ(c.mesh.dp, 2);
  EXPECT_EQ(c.mesh.fsdp, 1);
  EXPECT_EQ(c.mesh.tp, 2);
  EXPECT_EQ(c.mesh.pp, 3);
  EXPECT_TRUE(c.partition.replace_defaults);
  ASSERT_EQ(c.partition.rules.rules().size(), 2u);
  EXPECT_EQ(c.partition.rules.rules()[1].spec.str(), "((fsdp, tp), None)");
}

TEST(ConfigMeshAndPartition, ErrorsNameTheKey) {
  EXPECT_NE(default_error({"mesh.pp=0"}).find("mesh.pp must be >= 1"), std::string::npos);
  EXPECT_NE(parse_error("[mesh]\nmp = 2\n").find("unknown key 'mesh.mp'"), std::string::npos);
  EXPECT_NE(parse_error("[mesh]\ntp = 1.5\n").find("mesh.tp must be an integer"), std::string::npos);
  EXPECT_NE(parse_error("[partition]\nrules = 3\n").find("partition.rules must be an array"),
            std::string::npos);
  EXPECT_NE(parse_error("[[partition.rules]]\npattern = 'a'\nspec = ['mp']\n").find("unknown mesh axis 'mp'"),
            std::string::npos);
}

TEST(ConfigFiles, TinyTomlIsTheDefault) {
  const std::string path = std::string(MESHTRAIN_SOURCE_DIR) + "/configs/tiny.toml";
  expect_same(load_run_config(path, {}), parse_default());
}

// Files a config reads are named relative to the config, so it works from any directory; what the
// run writes (output.dir) and what --set names stay relative to the working directory.
TEST(ConfigFiles, InputPathsAreRelativeToTheConfigFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(mt::testing::fresh_temp_dir("config_relative")) / "configs";
  fs::create_directories(dir);
  const std::string file = (dir / "run.toml").string();
  std::ofstream(file) << "[model]\npath = \"../models/llama\"\n[data]\npath = \"data.jsonl\"\n"
                         "tokenizer = \"byte\"\n[output]\ndir = \"runs/a\"\n";
  RunConfig c = load_run_config(file, {});
  EXPECT_EQ(c.model_path, (dir.parent_path() / "models/llama").string());
  EXPECT_EQ(c.data.path, (dir / "data.jsonl").string());
  EXPECT_EQ(c.data.tokenizer, "byte");
  EXPECT_EQ(c.output.dir, "runs/a");
  c = load_run_config(file, {"data.path=mine.jsonl", "data.tokenizer=tok.json"});
  EXPECT_EQ(c.data.path, "mine.jsonl");
  EXPECT_EQ(c.data.tokenizer, "tok.json");
  make_input_paths_absolute(c);
  EXPECT_EQ(c.data.path, (fs::current_path() / "mine.jsonl").string());
  EXPECT_EQ(c.data.tokenizer, (fs::current_path() / "tok.json").string());
}

// Every run config shipped in configs/ names files that exist, wherever it is run from.
TEST(ConfigFiles, ShippedConfigsNameFilesThatExist) {
  for (const char* name : {"tiny.toml", "reference.toml", "demo_lora.toml"}) {
    const RunConfig c = load_run_config(std::string(MESHTRAIN_SOURCE_DIR) + "/configs/" + name, {});
    if (!c.data.path.empty()) {
      EXPECT_TRUE(std::filesystem::exists(c.data.path)) << name << ": " << c.data.path;
    }
  }
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(MESHTRAIN_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in) << relative;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// configs/tiny.toml is the built-in default written out, byte for byte.
TEST(ConfigFiles, TinyTomlIsGeneratedFromTheSchema) {
  EXPECT_EQ(read_source_file("configs/tiny.toml"), default_run_config_toml())
      << "configs/tiny.toml is out of date: run scripts/update_config_docs.sh "
         "(or build/meshtrain train --print-default-config > configs/tiny.toml)";
}

// docs/configuration.md's key table is the one generated from the schema.
TEST(ConfigFiles, DocsKeyTableIsGeneratedFromTheSchema) {
  const std::string docs = read_source_file("docs/configuration.md");
  const std::string begin = "<!-- config-keys:begin -->\n", end = "<!-- config-keys:end -->";
  const size_t b = docs.find(begin), e = docs.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/configuration.md has no " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/configuration.md has no " << end;
  ASSERT_LT(b, e);
  EXPECT_EQ(docs.substr(b + begin.size(), e - b - begin.size()), config_keys_markdown())
      << "docs/configuration.md's config key table is out of date: run scripts/update_config_docs.sh "
         "(it puts build/meshtrain train --print-config-table between the config-keys markers)";
}

TEST(ConfigSchema, EveryKeyIsDocumented) {
  for (const ConfigKey& key : config_keys()) {
    EXPECT_FALSE(key.help.empty()) << key.name;
    EXPECT_EQ(key.help.find('\n'), std::string_view::npos) << key.name << ": help is one line";
    EXPECT_EQ(find_config_key(key.name), &key) << key.name << " is listed twice";
    // The built-in run's value reads back for its key (and differs from the default).
    if (!key.builtin.empty()) {
      const std::string table(table_of(key));
      // train.seq_len's built-in 0 ("not given") is the default 128 without a model; with one it
      // stays 0 until the run chooses from its data (tests/test_sequence_length.cpp).
      const std::string model = key.name == "train.seq_len" ? "[model]\npath = 'some/model'\n" : "";
      RunConfig c = parse_run_config(
          model + "[" + table + "]\n" + std::string(leaf_of(key)) + " = " + std::string(key.builtin) + "\n", {});
      EXPECT_NE(config_value_toml(key, c), config_value_toml(key, RunConfig{})) << key.name;
    }
  }
}

TEST(ConfigFiles, ReferenceToml) {
  const std::string path = std::string(MESHTRAIN_SOURCE_DIR) + "/configs/reference.toml";
  RunConfig c = load_run_config(path, {});
  EXPECT_EQ(c.model.hidden_size, 768);
  EXPECT_EQ(c.model.intermediate_size, 2048);
  EXPECT_EQ(c.model.num_hidden_layers, 12);
  EXPECT_EQ(c.model.num_attention_heads, 12);
  EXPECT_EQ(c.model.num_key_value_heads, 4);
  EXPECT_EQ(c.model.vocab_size, 32000);
  EXPECT_EQ(c.train.seq_len, 512);
  EXPECT_EQ(c.train.batch_size, 4);
  EXPECT_FALSE(c.model.tie_word_embeddings);
  EXPECT_EQ(c.train.precision, Precision::bf16);
}

}  // namespace
}  // namespace mt

// meshtrain eval --model DIR [--adapter DIR] --data FILE: mean loss and perplexity over a text, or
// over instruction / chat examples as training computes it (same template, masking and packing).
// meshtrain eval --run RUN_DIR: the run's own model on its held-out rows, as its validation reads
// them (the run's last validation loss, again); a model or adapter directory a run wrote takes its
// defaults (sequence length, batch, format, data) from that run's run.toml.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/count_check.h"
#include "cli/device_option.h"
#include "cli/model_args.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/work_gate.h"
#include "data/packed_sampler.h"
#include "data/token_cache.h"
#include "io/pretrained.h"
#include "train/preference_step.h"
#include "train/reference_logps.h"
#include "train/run_config.h"
#include "train/training_data.h"

namespace mt::cli {

namespace {

namespace fs = std::filesystem;

struct EvalOptions {
  ModelArgs model;
  DeviceOption device;
  std::string run;  // --run: a run directory
  std::string data, format = "auto";
  int64_t seq_len = 256, batch = 8;  // without a run record; with one, the run's
  bool truncate = false;
  // Preference pairs (--method dpo, ipo, simpo, orpo; a preference run's own): the loss and metrics
  // training logs, with the run's [preference] keys (or TRL's defaults and --beta).
  std::string method;
  float beta = 0.0f;  // 0: the run's, else 0.1
  // Whether each was given on the command line (else a run record may supply it).
  bool seq_len_given = false, batch_given = false, format_given = false;
};

// A forward holds activations for every row of its batch, so --batch 2^57 on a 200 KB file
// allocated 3 GB (every window at once) and more on larger files. The mean loss is a sum over
// tokens whatever the batching, so rows beyond this many tokens a forward only cost memory: the
// batch is capped here (the samplers cap it further by the rows there are).
constexpr int64_t kMaxTokensPerForward = 16384;

int64_t rows_per_forward(int64_t requested, int64_t seq) {
  return std::min(requested, std::max<int64_t>(1, kMaxTokensPerForward / std::max<int64_t>(1, seq)));
}

// Nine significant digits: enough to compare with the run's own validation loss (metrics.jsonl).
void print_result(const std::string& what, const LossSum& total) {
  const double loss = total.sum / double(total.count);
  std::cout << "eval: " << what << total.count << " tokens, mean loss " << std::setprecision(9) << loss
            << ", perplexity " << std::exp(loss) << std::endl;
}

// The run.toml of --run, or of the run that wrote the --adapter or --model directory given (its
// adapter/ or model/); nullopt when there is none.
std::optional<RunConfig> run_record(const EvalOptions& o, std::string& run_dir) {
  if (!o.run.empty()) {
    run_dir = o.run;
    const std::string toml = (fs::path(o.run) / "run.toml").string();
    if (!fs::is_regular_file(toml))
      fail("eval --run " + o.run + ": no run.toml there (expected a directory meshtrain train wrote)");
    return load_run_config(toml, {});
  }
  const auto written_by_run = [&](const std::string& dir, const char* leaf) {
    const fs::path p = fs::path(dir).lexically_normal();
    const fs::path named = p.filename().empty() ? p.parent_path() : p;
    return !dir.empty() && named.filename() == leaf && fs::is_regular_file(named.parent_path() / "run.toml")
               ? named.parent_path().string()
               : std::string();
  };
  run_dir = !o.model.adapter.empty() ? written_by_run(o.model.adapter, "adapter")
                                     : written_by_run(o.model.model, "model");
  if (run_dir.empty()) return std::nullopt;
  return load_run_config((fs::path(run_dir) / "run.toml").string(), {});
}

// --run names the model: the run's model/ (a full run), or its base and adapter/ (a LoRA run).
void take_model_from_run(EvalOptions& o, const RunConfig& run, const std::string& run_dir) {
  if (!o.model.model.empty() || !o.model.adapter.empty())
    fail("eval --run takes the model from the run (" + run_dir + "): give --run or --model/--adapter, not both");
  if (run.lora.enabled) {
    o.model.model = run.model_path;
    o.model.adapter = (fs::path(run_dir) / "adapter").string();
    o.model.base_dtype = run.lora.base_dtype;
  } else {
    o.model.model = (fs::path(run_dir) / "model").string();
  }
  const std::string& dir = run.lora.enabled ? o.model.adapter : o.model.model;
  if (!fs::exists(dir))
    fail("eval --run " + run_dir + ": " + dir + " does not exist (the run has not finished; export a checkpoint "
         "with meshtrain export-checkpoint and evaluate that)");
}

// One token stream cut into consecutive windows of seq + 1 tokens; each token after the first is
// predicted once. `what` starts the result line.
void eval_windows(const EvalOptions& o, Transformer& model, const std::vector<int32_t>& tokens, int64_t seq,
                  const std::string& what) {
  LossSum total;
  std::vector<int32_t> inputs, targets;
  for (size_t start = 0; start + 1 < tokens.size();) {
    inputs.clear(), targets.clear();
    int64_t rows = 0;
    for (; rows < o.batch && start + 1 < tokens.size(); ++rows, start += size_t(seq)) {
      for (int64_t t = 0; t < seq; ++t) {
        const size_t i = start + size_t(t);
        inputs.push_back(i < tokens.size() ? tokens[i] : 0);
        targets.push_back(i + 1 < tokens.size() ? tokens[i + 1] : -1);  // past the end: not counted
      }
    }
    ModelInput in;
    in.tokens = inputs.data(), in.targets = targets.data(), in.B = rows, in.T = seq;
    LossSum s = model.forward_loss(in);
    total.sum += s.sum, total.count += s.count;
  }
  if (total.count == 0) fail(o.data + ": too short for one window of " + std::to_string(seq) + " tokens");
  print_result(what, total);
}

// The whole file as one token stream (BOS first).
void eval_text(const EvalOptions& o, Transformer& model, const Tokenizer& tok, int64_t seq) {
  require_regular_file(o.data, "data file");
  std::ifstream f(o.data, std::ios::binary);
  if (!f) fail(o.data + ": cannot open data file");
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<int32_t> tokens;
  if (tok.bos_id() >= 0) tokens.push_back(tok.bos_id());
  for (int32_t id : tok.encode(ss.str())) tokens.push_back(id);
  eval_windows(o, model, tokens, seq, "");
}

// Every example of the file, rendered with its template (only response / assistant tokens
// counted), packed into rows of seq tokens in file order as a run's validation set is: the mean
// loss over the trained tokens, the number training reports. Packing does not change it, since
// attention and targets never cross an example.
void eval_examples(const EvalOptions& o, Transformer& model, const Tokenizer& tok, int64_t seq) {
  ExampleOptions opt;
  opt.format = o.format == "auto" ? DataFormat::kAuto : parse_format(o.format);
  opt.max_tokens = seq;
  opt.truncate = o.truncate;
  const int64_t limit = model.config().max_position_embeddings;
  opt.model_limit = limit;
  // No token cache: an evaluation is a one-off, and should leave no files behind.
  const LoadedExamples ex = load_examples(o.data, tok, opt, "off");
  // {"text"} documents train as one stream of windows (joined, each with the BOS / EOS the reader
  // gives it), not as packed examples: evaluated the same way.
  if (ex.format == DataFormat::kTextRecords) {
    const auto joined = ex.table.all_tokens();
    eval_windows(o, model, {joined.begin(), joined.end()}, seq,
                 std::to_string(ex.table.size()) + " documents (text_records, joined as training joins them), ");
    return;
  }
  if (ex.table.size() == 0)
    fail(o.data + ": no example fits " + std::to_string(seq) + " tokens (" + std::to_string(ex.records) +
         " records; " + (seq < limit ? "raise --seq-len (at most " + std::to_string(limit) + ") or " : "") +
         "give --truncate)");
  std::vector<uint32_t> ids(ex.table.size());
  std::iota(ids.begin(), ids.end(), 0u);
  PackedValidation rows(ex.table, ids, seq, o.batch);
  LossSum total;
  for (PackedBatch b; rows.next(b);) {
    const LossSum s = model.forward_loss(input_of(b));
    total.sum += s.sum, total.count += s.count;
  }
  if (total.count == 0) fail(o.data + ": the examples have no trained (response) tokens to evaluate");
  print_result(std::to_string(ex.table.size()) + " examples (" + std::string(format_name(ex.format)) + ", " +
                   std::to_string(ex.skipped) + " skipped), trained ",
               total);
}

// The run's held-out rows, as its validation reads them: the same data, template, split, packing,
// sequence length, budget (train.eval_tokens) and batches of `batch` rows (the run's
// train.batch_size unless --batch). On one rank this is the computation the trainer made.
void eval_run_validation(const EvalOptions& o, const RunConfig& run, const std::string& run_dir,
                         Transformer& model, const Tokenizer& tok, int64_t seq) {
  RunConfig cfg = run;
  cfg.data.cache_dir = "off";  // an evaluation leaves no files behind
  cfg.train.seq_len = seq;
  cfg.train.batch_size = o.batch;
  const std::unique_ptr<TrainingData> data = open_training_data(cfg, tok, std::cerr);
  if (!data->has_validation()) {
    std::ostringstream fraction;
    fraction << run.data.val_fraction;
    fail("eval: the run in " + run_dir + " held nothing out (data.val_fraction = " + fraction.str() +
         "); give --data FILE to evaluate on");
  }
  LossSum total;
  for (PackedBatch b; data->next_validation(b);) {
    const LossSum s = model.forward_loss(input_of(b));
    total.sum += s.sum, total.count += s.count;
  }
  if (total.count == 0) fail("eval: the held-out rows of the run in " + run_dir + " have no trained tokens to evaluate");
  print_result("the held-out set of " + run_dir + " (" + std::to_string(data->num_validation_rows()) +
                   " rows of " + std::to_string(seq) + " tokens, train.eval_tokens = " +
                   std::to_string(cfg.train.eval_tokens) + "), ",
               total);
}

// Preference pairs: the loss and what TRL logs of them (as a preference run's validation computes
// them), over every pair of --data, or with --run the run's held-out pairs. The reference: the base
// with the adapters off when an adapter is evaluated, or a --run's precomputed log-probabilities.
void eval_preference(const EvalOptions& o, const std::optional<RunConfig>& run, const std::string& run_dir,
                     Transformer& model, const Tokenizer& tok, int64_t seq) {
  RunConfig cfg = run ? *run : RunConfig{};
  cfg.train.method = o.method;
  if (o.beta > 0.0f) cfg.preference.beta = o.beta;
  cfg.train.seq_len = seq;
  cfg.train.batch_size = std::max<int64_t>(2, o.batch / 2 * 2);
  const bool held_out = o.data.empty();  // the run's validation pairs
  if (!held_out) {  // --data: that file alone, in place of the run's data (a mix's sources too)
    cfg.data.path = o.data, cfg.data.format = o.format, cfg.data.val_fraction = 0.0f;
    cfg.data.sources.clear();
  }
  const PreferenceLossConfig loss = preference_loss_config(cfg);
  PreferenceData data(cfg, tok, std::cerr);
  std::vector<CompletionLogp> stored;  // a run's precomputed reference
  const bool adapters = model.has_lora();
  const ReferenceSource source = !needs_reference(loss.loss) ? ReferenceSource::kNone
                                 : adapters                  ? ReferenceSource::kAdaptersOff
                                                             : ReferenceSource::kGiven;
  if (source == ReferenceSource::kGiven) {
    if (!held_out || !run)
      fail("eval: " + o.method + " compares with a reference model: evaluate an adapter (--adapter; the reference "
           "is its base) or a preference run (--run)");
    stored = read_reference_logps(reference_logps_path(run_dir), data.sequences());
  }
  if (held_out && !data.has_validation())
    fail("eval: the run in " + run_dir + " held no pairs out; give --data FILE to evaluate on");
  const ForwardPass forward = [&](const ModelInput& in) { return model.forward_loss(in); };
  const PreferenceResult r = pairs_loss(
      data,
      [&](PackedBatch& b) { return held_out ? data.next_validation(b) : data.next_of_all(b, cfg.train.batch_size); },
      loss, source, stored, [&](const PackedBatch& b, bool adapters_off) {
        return completion_logps({input_of(b)}, b.batch_size, adapters_off, true, nullptr, forward);
      });
  const PreferenceMetrics& m = r.metrics;
  std::ostringstream beta;  // as given (a float's nine digits would show its binary rounding)
  beta << float(loss.beta);
  std::cout << std::setprecision(9) << "eval: " << m.pairs << " pairs (" << o.method << ", beta " << beta.str()
            << (held_out ? ", the held-out pairs of " + run_dir : "") << "), loss " << r.loss
            << ", rewards/chosen " << m.rewards_chosen << ", rewards/rejected " << m.rewards_rejected
            << ", rewards/accuracies " << m.accuracy << ", rewards/margins " << m.margin << ", logps/chosen "
            << m.logps_chosen << ", logps/rejected " << m.logps_rejected << ", nll_loss " << m.nll << std::endl;
}

}  // namespace

Action add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* sub = app.add_subcommand(
      "eval", "Mean loss and perplexity on a text file, or on Alpaca / chat examples as training computes it; "
              "--run RUN_DIR: a run's model on its held-out set");
  o->model.add_to(sub, /*model_required=*/false);
  o->device.add_to(sub, "cpu");
  sub->add_option("--run", o->run,
                  "a run directory (output.dir): its model on its held-out rows as its validation reads them, "
                  "with its sequence length, data, template, split and train.eval_tokens (default: none)");
  sub->add_option("--data,-d", o->data,
                  "plain-text file, or an Alpaca / chat / ShareGPT / prompt-completion .json or .jsonl file (default: with "
                  "--run, the run's held-out set)");
  auto* format = sub->add_option("--format", o->format,
                                 "as data.format: auto (.json/.jsonl are examples, anything else text), text, alpaca, "
                                 "completion, text_records ({\"text\"} documents, evaluated in windows as training "
                                 "reads them), or a chat template: chat (Llama 3.1), chatml, gemma or mistral")
                     ->check(CLI::IsMember({"auto", "text", "alpaca", "completion", "text_records", "chat", "chatml",
                                            "gemma", "mistral"}));
  auto* seq_len = sub->add_option("--seq-len", o->seq_len,
                                  "tokens per window; for examples the row length and the longest example kept, as train.seq_len")
                      ->check(CLI::PositiveNumber);
  auto* batch = sub->add_option("--batch", o->batch, "windows (rows) per batch; at most the rows there are")
                    ->check(count_in(1));
  sub->add_option("--method", o->method,
                  "preference pairs (prompt / chosen / rejected): the loss and rewards training logs for dpo, ipo, "
                  "simpo or orpo (default: a preference run's own, else none)")
      ->check(CLI::IsMember({"dpo", "ipo", "simpo", "orpo"}));
  sub->add_option("--beta", o->beta, "preference training's beta (default: the run's, else 0.1)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--truncate", o->truncate,
                "cut examples longer than --seq-len instead of skipping them, as data.truncate");
  sub->footer("A model or adapter directory a run wrote (RUN/model, RUN/adapter) takes its defaults for "
              "--seq-len, --batch, --format, --truncate and --precision (the run's train.precision) from "
              "RUN/run.toml, and without --data is evaluated on the run's held-out set, as with --run.\n");
  CLI::Option* precision = sub->get_option("--precision");
  return [o, format, seq_len, batch, precision] {
    o->format_given = format->count() > 0;
    o->seq_len_given = seq_len->count() > 0;
    o->batch_given = batch->count() > 0;
    std::string run_dir;
    const std::optional<RunConfig> run = run_record(*o, run_dir);
    if (run && !o->run.empty()) take_model_from_run(*o, *run, run_dir);
    if (o->model.model.empty()) fail("eval: give --model MODEL (or --run RUN_DIR)");
    o->model.resolve();  // a Hub id: its snapshot, read below before the model loads
    if (o->data.empty() && !run) fail("eval: give --data FILE (or --run RUN_DIR: the run's held-out set)");
    if (run) {  // the run's settings, where the command line gives none
      if (!o->seq_len_given) o->seq_len = run->train.seq_len;
      if (!o->batch_given) o->batch = run->train.batch_size;
      if (!o->format_given) o->format = run->data.format;
      o->truncate = o->truncate || run->data.truncate;
      if (o->method.empty() && run->train.preference()) o->method = run->train.method;
      // As the run computed its validation loss, and said after the result, which depends on it.
      if (precision->count() == 0) o->model.precision = precision_name(run->train.precision);
    }
    const DeviceBackend backend = o->device.open();
    // A length the model cannot take is refused before it loads, not cut.
    const int64_t limit = pretrained_config(o->model.model).max_position_embeddings;
    if (o->seq_len_given && o->seq_len > limit)
      fail("eval: --seq-len " + std::to_string(o->seq_len) + " is more than the model's max_position_embeddings (" +
           std::to_string(limit) + "); give at most " + std::to_string(limit));
    const int64_t seq = std::min(o->seq_len, limit);
    o->batch = rows_per_forward(o->batch, seq);
    if (o->method.empty()) refuse_text_format_on_records(o->data, o->format);  // before the model loads
    work_gate::reached("eval");
    auto model = o->model.load_model(*backend);
    // The run's tokenizer, as it trained with (a model it wrote may carry none: the byte-level one).
    auto tok = run && o->model.tokenizer.empty() ? run_tokenizer(*run) : o->model.load_tokenizer();
    if (!o->method.empty()) eval_preference(*o, run, run_dir, *model, *tok, seq);
    else if (o->data.empty()) eval_run_validation(*o, *run, run_dir, *model, *tok, seq);
    else if (is_example_data(o->data, o->format)) eval_examples(*o, *model, *tok, seq);
    else eval_text(*o, *model, *tok, seq);
    if (run && precision->count() == 0)
      std::cout << "eval: computed in the run's precision, " << o->model.precision << " (train.precision; --precision "
                << (o->model.precision == "bf16" ? "fp32" : "bf16") << " for the other)\n";
    return 0;
  };
}

}  // namespace mt::cli

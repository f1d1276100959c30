// meshtrain eval --model DIR [--adapter DIR] --data FILE: mean loss and perplexity over a text, or
// over instruction / chat examples as training computes it (same template, masking and packing).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "cli/model_args.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "data/packed_sampler.h"
#include "data/token_cache.h"
#include "train/training_data.h"

namespace mt::cli {

namespace {

struct EvalOptions {
  ModelArgs model;
  DeviceOption device;
  std::string data, format = "auto";
  int64_t seq_len = 256, batch = 8;
  bool truncate = false;
};

void print_result(const std::string& what, const LossSum& total) {
  const double loss = total.sum / double(total.count);
  std::cout << "eval: " << what << total.count << " tokens, mean loss " << loss << ", perplexity "
            << std::exp(loss) << std::endl;
}

// The whole file as one token stream (BOS first), cut into consecutive windows of seq + 1 tokens;
// each token after the first is predicted once.
void eval_text(const EvalOptions& o, LlamaModel& model, const Tokenizer& tok, int64_t seq) {
  require_regular_file(o.data, "data file");
  std::ifstream f(o.data, std::ios::binary);
  if (!f) fail(o.data + ": cannot open data file");
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<int32_t> tokens;
  if (tok.bos_id() >= 0) tokens.push_back(tok.bos_id());
  for (int32_t id : tok.encode(ss.str())) tokens.push_back(id);
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
  print_result("", total);
}

// Every example of the file, rendered with its template (only response / assistant tokens
// counted), packed into rows of seq tokens in file order as a run's validation set is: the mean
// loss over the trained tokens, the number training reports. Packing does not change it, since
// attention and targets never cross an example.
void eval_examples(const EvalOptions& o, LlamaModel& model, const Tokenizer& tok, int64_t seq) {
  ExampleOptions opt;
  opt.format = o.format == "auto" ? DataFormat::kAuto : parse_format(o.format);
  opt.max_tokens = seq;
  opt.truncate = o.truncate;
  // No token cache: an evaluation is a one-off, and should leave no files behind.
  const LoadedExamples ex = load_examples(o.data, tok, opt, "off");
  if (ex.table.size() == 0)
    fail(o.data + ": no example fits " + std::to_string(seq) + " tokens (" + std::to_string(ex.records) +
         " records; raise --seq-len or give --truncate)");
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

}  // namespace

Action add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* sub = app.add_subcommand(
      "eval", "Mean loss and perplexity on a text file, or on Alpaca / chat examples as training computes it");
  o->model.add_to(sub);
  o->device.add_to(sub, "cpu");
  sub->add_option("--data,-d", o->data, "plain-text file, or an Alpaca / chat .json or .jsonl file")->required();
  sub->add_option("--format", o->format,
                  "as data.format: auto (.json/.jsonl are examples, anything else text), text, alpaca or chat")
      ->check(CLI::IsMember({"auto", "text", "alpaca", "chat"}));
  sub->add_option("--seq-len", o->seq_len,
                  "tokens per window; for examples the row length and the longest example kept, as train.seq_len")
      ->check(CLI::PositiveNumber);
  sub->add_option("--batch", o->batch, "windows (rows) per batch")->check(CLI::PositiveNumber);
  sub->add_flag("--truncate", o->truncate,
                "cut examples longer than --seq-len instead of skipping them, as data.truncate");
  return [o] {
    const DeviceBackend backend = o->device.open();
    auto model = o->model.load_model(*backend);
    auto tok = o->model.load_tokenizer();
    const int64_t seq = std::min(o->seq_len, model->config().max_position_embeddings);
    if (is_example_data(o->data, o->format)) eval_examples(*o, *model, *tok, seq);
    else eval_text(*o, *model, *tok, seq);
    return 0;
  };
}

}  // namespace mt::cli

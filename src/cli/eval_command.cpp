// meshtrain eval --model DIR [--adapter DIR] --data FILE: mean loss and perplexity over a text.
#include <cmath>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_args.h"
#include "core/error.h"
#include "core/regular_file.h"


namespace mt::cli {

Action add_eval_command(CLI::App& app) {
  struct Options {
    ModelArgs model;
    std::string data;
    int64_t seq_len = 256, batch = 8;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("eval", "Mean loss and perplexity of a model on a text file");
  o->model.add_to(sub);
  sub->add_option("--data,-d", o->data, "plain-text file")->required();
  sub->add_option("--seq-len", o->seq_len, "tokens per window")->check(CLI::PositiveNumber);
  sub->add_option("--batch", o->batch, "windows per batch")->check(CLI::PositiveNumber);
  return [o] {
    auto model = o->model.load_model();
    auto tok = o->model.load_tokenizer();
    const int64_t seq = std::min(o->seq_len, model->config().max_position_embeddings);
    require_regular_file(o->data, "data file");
    std::ifstream f(o->data, std::ios::binary);
    if (!f) fail(o->data + ": cannot open data file");
    std::stringstream ss;
    ss << f.rdbuf();
    std::vector<int32_t> tokens;
    if (tok->bos_id() >= 0) tokens.push_back(tok->bos_id());
    for (int32_t id : tok->encode(ss.str())) tokens.push_back(id);
    // Consecutive windows of seq + 1 tokens; each token after the first is predicted once.
    LossSum total;
    std::vector<int32_t> inputs, targets;
    for (size_t start = 0; start + 1 < tokens.size();) {
      inputs.clear(), targets.clear();
      int64_t rows = 0;
      for (; rows < o->batch && start + 1 < tokens.size(); ++rows, start += size_t(seq)) {
        for (int64_t t = 0; t < seq; ++t) {
          const size_t i = start + size_t(t);
          inputs.push_back(i < tokens.size() ? tokens[i] : 0);
          targets.push_back(i + 1 < tokens.size() ? tokens[i + 1] : -1);  // past the end: not counted
        }
      }
      ModelInput in;
      in.tokens = inputs.data(), in.targets = targets.data(), in.B = rows, in.T = seq;
      LossSum s = model->forward_loss(in);
      total.sum += s.sum, total.count += s.count;
    }
    if (total.count == 0) fail(o->data + ": too short for one window of " + std::to_string(seq) + " tokens");
    const double loss = total.sum / double(total.count);
    std::cout << "eval: " << total.count << " tokens, mean loss " << loss << ", perplexity "
              << std::exp(loss) << std::endl;
    return 0;
  };
}

}  // namespace mt::cli

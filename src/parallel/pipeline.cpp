#include "parallel/pipeline.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/param_shapes.h"

namespace mt::parallel {
namespace {

// Message tags: activations go forward, their gradients come back.
constexpr int kForwardTag = 1, kBackwardTag = 2;

std::vector<int64_t> parse_blocks(const std::string& asked) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= asked.size()) {
    const size_t comma = std::min(asked.find(',', at), asked.size());
    const std::string item = asked.substr(at, comma - at);
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      fail("train.pp_blocks = \"" + asked + "\": expected block counts separated by commas (\"2,3\")");
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

}  // namespace

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::gpipe;
  if (name == "1f1b") return PipelineSchedule::one_f_one_b;
  fail("train.pp_schedule must be \"1f1b\" or \"gpipe\", got \"" + name + "\"");
}

std::vector<int64_t> pipeline_blocks(const LlamaConfig& config, int64_t stages,
                                     const std::string& asked) {
  const int64_t L = config.num_hidden_layers;
  if (!asked.empty()) {
    const std::vector<int64_t> blocks = parse_blocks(asked);
    int64_t sum = 0;
    for (int64_t b : blocks) sum += b;
    if (int64_t(blocks.size()) != stages)
      fail("train.pp_blocks = \"" + asked + "\" gives " + std::to_string(blocks.size()) +
           " stages but the mesh has pp=" + std::to_string(stages));
    if (*std::min_element(blocks.begin(), blocks.end()) < 1)
      fail("train.pp_blocks = \"" + asked + "\": every stage needs at least one block");
    if (sum != L)
      fail("train.pp_blocks = \"" + asked + "\" sums to " + std::to_string(sum) +
           " blocks but the model has " + std::to_string(L));
    return blocks;
  }
  if (L < stages)
    fail("mesh pp=" + std::to_string(stages) + ": the model has " + std::to_string(L) +
         " blocks, fewer than its stages (each stage holds at least one block)");
  // Costs in parameters: a block's, and the head's (with the final norm) on the last stage.
  double block = 0, head = double(config.vocab_size) * double(config.hidden_size);
  for (const ParamShape& p : llama_param_shapes(config, LoraConfig{})) {
    if (p.name.rfind(layer_prefix(0), 0) != 0) continue;
    double n = 1;
    for (int64_t d : p.shape) n *= double(d);
    block += n;
  }
  // best[s][j]: the smallest largest-stage cost of blocks [0, j) over stages [0, s]; cut[s][j]
  // where stage s starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(size_t(stages), std::vector<double>(size_t(L + 1), inf));
  std::vector<std::vector<int64_t>> cut(size_t(stages), std::vector<int64_t>(size_t(L + 1), 0));
  for (int64_t s = 0; s < stages; ++s)
    for (int64_t j = s + 1; j <= L; ++j)
      for (int64_t i = s; i < j; ++i) {
        if (s == 0 && i != 0) break;
        const double before = s == 0 ? 0.0 : best[size_t(s - 1)][size_t(i)];
        const double mine = double(j - i) * block + (s == stages - 1 ? head : 0.0);
        const double worst = std::max(before, mine);
        if (worst < best[size_t(s)][size_t(j)]) best[size_t(s)][size_t(j)] = worst, cut[size_t(s)][size_t(j)] = i;
      }
  std::vector<int64_t> blocks(static_cast<size_t>(stages));
  for (int64_t s = stages - 1, j = L; s >= 0; --s) {
    const int64_t i = cut[size_t(s)][size_t(j)];
    blocks[size_t(s)] = j - i;
    j = i;
  }
  return blocks;
}

UnitSpan stage_units(const std::vector<int64_t>& blocks, int stage) {
  int64_t before = 0;
  for (int s = 0; s < stage; ++s) before += blocks[size_t(s)];
  UnitSpan u;
  u.first = stage == 0 ? 0 : int(before + 1);
  u.last = int(before + blocks[size_t(stage)]) + (stage + 1 == int(blocks.size()) ? 1 : 0);
  return u;
}

std::vector<bool> stage_holds(const LlamaConfig& config, const std::vector<int64_t>& blocks, int stage) {
  const UnitSpan span = stage_units(blocks, stage);
  std::vector<bool> held(size_t(config.num_hidden_layers + 2), false);
  for (int u = span.first; u <= span.last; ++u) held[size_t(u)] = true;
  if (config.tie_word_embeddings && stage + 1 == int(blocks.size())) held[0] = true;
  return held;
}

int stage_of_unit(const std::vector<int64_t>& blocks, int unit) {
  int stage = 0;
  while (stage + 1 < int(blocks.size()) && stage_units(blocks, stage).last < unit) ++stage;
  return stage;
}

std::string blocks_text(const std::vector<int64_t>& blocks) {
  std::string out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i) out += ',';  // appended piecewise: g++ 12 warns falsely (-Wrestrict) on "," + std::string
    out += std::to_string(blocks[i]);
  }
  return out;
}

std::string describe_units(const LlamaConfig& config, const std::vector<int64_t>& blocks, int stage) {
  const int head = int(config.num_hidden_layers) + 1;
  const UnitSpan u = stage_units(blocks, stage);
  const int b0 = std::max(u.first, 1), b1 = std::min(u.last, head - 1);
  std::string what = u.first == 0 ? "embedding, " : "";
  what += b0 == b1 ? "block " + std::to_string(b0 - 1)
                   : "blocks " + std::to_string(b0 - 1) + "-" + std::to_string(b1 - 1);
  if (u.last == head) what += ", final norm and head";
  if (u.first != 0 && stage_holds(config, blocks, stage)[0]) what += ", embedding copy (tied head)";
  return what;
}

std::vector<PipeOp> pipeline_order(PipelineSchedule schedule, int stages, int stage, int64_t micro) {
  std::vector<PipeOp> order;
  const int64_t warm = schedule == PipelineSchedule::gpipe
                           ? micro
                           : std::min<int64_t>(stages - 1 - stage, micro);
  for (int64_t i = 0; i < warm; ++i) order.push_back({true, i});
  for (int64_t i = 0; i < micro - warm; ++i) {
    order.push_back({true, warm + i});
    order.push_back({false, i});
  }
  for (int64_t i = micro - warm; i < micro; ++i) order.push_back({false, i});
  return order;
}

Pipeline::Pipeline(Comm& group, LlamaModel& model, std::vector<int64_t> blocks,
                   PipelineSchedule schedule)
    : group_(group), model_(model), blocks_(std::move(blocks)), schedule_(schedule),
      units_(stage_units(blocks_, group.rank())) {
  MT_CHECK(int64_t(blocks_.size()) == group.size(), "one block count per pipeline stage");
}

std::string Pipeline::describe_stage() const {
  return "stage " + std::to_string(stage()) + " of " + std::to_string(group_.size()) + " (blocks " +
         blocks_text(blocks_) + "): " + describe_units(model_.config(), blocks_, stage());
}

double Pipeline::forward_backward(const std::vector<ModelInput>& micro, float grad_scale) {
  const int s = stage(), p = group_.size();
  const bool first = s == 0, last = s + 1 == p;
  const int64_t m = int64_t(micro.size()), C = model_.config().hidden_size;
  // Per micro-batch: this stage's input (kept from its forward to its backward), what it sent
  // (alive until the send completes), and the gradient arriving from the next stage.
  std::vector<std::vector<float>> inputs(static_cast<size_t>(m)), sent(static_cast<size_t>(2 * m));
  std::vector<float> dy;
  std::vector<Request> sends;
  double loss = 0.0;
  for (const PipeOp& op : pipeline_order(schedule_, p, s, m)) {
    const size_t i = size_t(op.micro);
    const ModelInput& in = micro[i];
    const int64_t n = in.B * in.T * C, bytes = n * int64_t(sizeof(float));
    UnitSpan span = units_;
    if (op.forward) {
      if (!first) {
        inputs[i].resize(size_t(n));
        group_.recv_bytes(inputs[i].data(), bytes, s - 1, kForwardTag);
        span.x_in = inputs[i].data();
      }
      std::vector<float>& out = sent[2 * i];
      out.resize(size_t(n));
      if (last) {  // the loss is here: forward and backward at once
        span.dx = first ? nullptr : out.data();
        loss += model_.run_units(in, span, true, grad_scale).sum;
        inputs[i] = {};
        if (!first) sends.push_back(group_.isend_bytes(out.data(), bytes, s - 1, kBackwardTag));
      } else {
        span.x_out = out.data();
        model_.run_units(in, span, false, 0.0f);
        sends.push_back(group_.isend_bytes(out.data(), bytes, s + 1, kForwardTag));
      }
    } else if (!last) {
      dy.resize(size_t(n));
      group_.recv_bytes(dy.data(), bytes, s + 1, kBackwardTag);
      span.dy = dy.data();
      std::vector<float>& dx = sent[2 * i + 1];
      if (!first) span.x_in = inputs[i].data(), dx.resize(size_t(n)), span.dx = dx.data();
      model_.run_units(in, span, true, grad_scale);
      inputs[i] = {};
      if (!first) sends.push_back(group_.isend_bytes(dx.data(), bytes, s - 1, kBackwardTag));
    }
  }
  for (Request& r : sends)
    if (r) r->wait();
  return loss;
}

LossSum Pipeline::forward_loss(const ModelInput& in) {
  const int s = stage(), p = group_.size();
  const int64_t n = in.B * in.T * model_.config().hidden_size, bytes = n * int64_t(sizeof(float));
  std::vector<float> x, y;
  UnitSpan span = units_;
  if (s > 0) {
    x.resize(size_t(n));
    group_.recv_bytes(x.data(), bytes, s - 1, kForwardTag);
    span.x_in = x.data();
  }
  if (s + 1 < p) y.resize(size_t(n)), span.x_out = y.data();
  const LossSum ls = model_.run_units(in, span, false, 0.0f);
  if (s + 1 < p) group_.send_bytes(y.data(), bytes, s + 1, kForwardTag);
  double v[2] = {ls.sum, double(ls.count)};  // only the last stage's are not zero
  group_.all_reduce_sum(v, 2);
  return {v[0], int64_t(v[1])};
}

}  // namespace mt::parallel

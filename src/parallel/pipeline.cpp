#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "backend/device_buffer.h"
#include "core/clipped.h"
#include "core/error.h"
#include "model/param_shapes.h"

namespace mt::parallel {
namespace {

// Message tags: per cut between chunks `cut` and `cut` + 1, one for the activations going forward
// and one for their gradients coming back, so each (chunk, direction) stream between two ranks is
// matched in its own order (micro-batch order on both ends). From 4 up: the pp group's tag 3 is
// the tied embedding's gradient sum (ShardedModel::sum_tied_embedding_over_stages).
int forward_tag(int cut) { return 2 * cut + 4; }
int backward_tag(int cut) { return 2 * cut + 5; }
// The routing statistics crossing a cut beside its activations (UnitSpan::routing_stats), on the
// host group: tags of their own, clear of the activations' should the two share a communicator.
constexpr int kRoutingTags = 1 << 14;
int routing_forward_tag(int cut) { return kRoutingTags + forward_tag(cut); }
int routing_backward_tag(int cut) { return kRoutingTags + backward_tag(cut); }

// Adds the seconds `f` takes to `into`.
template <class F>
auto timed(double& into, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Add {
    double& into;
    std::chrono::steady_clock::time_point t0;
    ~Add() { into += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  } add{into, t0};
  return f();
}

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

std::vector<int64_t> pipeline_blocks(const ModelConfig& config, int64_t stages,
                                     const std::string& asked, int64_t chunks) {
  const int64_t L = config.num_hidden_layers;
  // What the blocks are cut into, for the messages: stages, or each stage's chunks.
  const std::string piece = chunks > 1 ? "chunk" : "stage";
  const std::string made = chunks > 1 ? "mesh pp=" + std::to_string(stages / chunks) +
                                            " x train.pp_virtual=" + std::to_string(chunks) +
                                            " makes " + std::to_string(stages)
                                      : "the mesh has pp=" + std::to_string(stages);
  if (!asked.empty()) {
    const std::vector<int64_t> blocks = parse_blocks(asked);
    int64_t sum = 0;
    for (int64_t b : blocks) sum += b;
    if (int64_t(blocks.size()) != stages)
      fail("train.pp_blocks = \"" + asked + "\" gives " + std::to_string(blocks.size()) + " " + piece +
           "s but " + made);
    if (*std::min_element(blocks.begin(), blocks.end()) < 1)
      fail("train.pp_blocks = \"" + asked + "\": every " + piece + " needs at least one block");
    if (sum != L)
      fail("train.pp_blocks = \"" + asked + "\" sums to " + std::to_string(sum) +
           " blocks but the model has " + std::to_string(L));
    return blocks;
  }
  if (L < stages)
    fail(chunks > 1 ? made + " chunks, but the model has " + std::to_string(L) +
                          " blocks (each chunk holds at least one block)"
                    : "mesh pp=" + std::to_string(stages) + ": the model has " + std::to_string(L) +
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

std::vector<UnitSpan> rank_chunks(const std::vector<int64_t>& blocks, int stages, int stage) {
  MT_CHECK(stages > 0 && int64_t(blocks.size()) % stages == 0, "blocks for whole chunks per rank");
  std::vector<UnitSpan> out;
  for (int c = stage; c < int(blocks.size()); c += stages) out.push_back(stage_units(blocks, c));
  return out;
}

void check_virtual_stages(PipelineSchedule schedule, int stages, int chunks, int64_t micro) {
  if (chunks == 1) return;
  const std::string key = "train.pp_virtual = " + std::to_string(chunks);
  if (stages < 2) fail(key + " needs mesh pp > 1 (it splits each pipeline stage into chunks)");
  if (schedule != PipelineSchedule::one_f_one_b)
    fail(key + " needs train.pp_schedule = \"1f1b\" (the interleaved schedule is 1F1B's)");
  if (micro % stages != 0)
    fail(key + " needs train.grad_accum (" + std::to_string(micro) +
         " micro-batches) to be a multiple of mesh pp (" + std::to_string(stages) + ")");
}

void check_pipeline_keys(PipelineSchedule schedule, int stages, const std::string& blocks) {
  if (stages > 1) return;
  if (!blocks.empty())
    fail("train.pp_blocks = \"" + clipped(blocks) + "\" needs mesh pp > 1 (it gives the blocks of each pipeline stage)");
  if (schedule != PipelineSchedule::one_f_one_b)
    fail("train.pp_schedule = \"gpipe\" needs mesh pp > 1 (it orders micro-batches through pipeline stages)");
}

std::vector<bool> stage_holds(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage,
                              int chunks) {
  const int stages = int(blocks.size()) / chunks;
  std::vector<bool> held(size_t(config.num_hidden_layers + 2), false);
  for (const UnitSpan& span : rank_chunks(blocks, stages, stage))
    for (int u = span.first; u <= span.last; ++u) held[size_t(u)] = true;
  if (config.tie_word_embeddings && stage + 1 == stages) held[0] = true;
  return held;
}

int stage_of_unit(const std::vector<int64_t>& blocks, int unit, int chunks) {
  int chunk = 0;
  while (chunk + 1 < int(blocks.size()) && stage_units(blocks, chunk).last < unit) ++chunk;
  return chunk % (int(blocks.size()) / chunks);
}

std::string blocks_text(const std::vector<int64_t>& blocks) {
  std::string out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i) out += ',';  // appended piecewise: g++ 12 warns falsely (-Wrestrict) on "," + std::string
    out += std::to_string(blocks[i]);
  }
  return out;
}

std::string describe_units(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage) {
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

std::string describe_stage_units(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage,
                                 int stages) {
  std::string what;
  for (int chunk = stage; chunk < int(blocks.size()); chunk += stages) {
    if (chunk != stage) what += "; ";
    what += describe_units(config, blocks, chunk);
  }
  return what;
}

std::vector<PipeOp> pipeline_order(PipelineSchedule schedule, int stages, int stage, int64_t micro,
                                   int chunks) {
  std::vector<PipeOp> order;
  if (chunks > 1) {
    MT_CHECK(schedule == PipelineSchedule::one_f_one_b && micro % stages == 0,
             "interleaved 1F1B needs micro-batches in whole groups of pp");
    // The k-th forward (backward) of this rank: micro-batches in groups of `stages`, each group
    // through every chunk in turn (backwards from the last chunk).
    const int64_t group = int64_t(stages) * chunks, total = micro * chunks;
    const auto op = [&](int64_t k, bool forward) {
      const int64_t in = k % group;
      const int c = int(in / stages);
      return PipeOp{forward, k / group * stages + in % stages, forward ? c : chunks - 1 - c};
    };
    const int64_t warm = std::min<int64_t>(2 * (stages - 1 - stage) + int64_t(chunks - 1) * stages, total);
    for (int64_t k = 0; k < warm; ++k) order.push_back(op(k, true));
    for (int64_t k = 0; k < total - warm; ++k) {
      order.push_back(op(warm + k, true));
      order.push_back(op(k, false));
    }
    for (int64_t k = total - warm; k < total; ++k) order.push_back(op(k, false));
    return order;
  }
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

PipelineBuffers pipeline_buffers(PipelineSchedule schedule, int stages, int stage, int64_t micro,
                                 int chunks) {
  const int p = stages, last = p * chunks - 1;
  // Where each op sits in its rank's order, at [rank][(backward * chunks + chunk) * micro + micro-batch].
  const auto slot = [&](const PipeOp& op) { return size_t(((op.forward ? 0 : chunks) + op.chunk) * micro + op.micro); };
  std::vector<std::vector<size_t>> at(size_t(p), std::vector<size_t>(size_t(2 * chunks * micro)));
  for (int r = 0; r < p; ++r) {
    const std::vector<PipeOp> o = pipeline_order(schedule, p, r, micro, chunks);
    for (size_t i = 0; i < o.size(); ++i) at[size_t(r)][slot(o[i])] = i;
  }
  const auto position = [&](int rank, PipeOp op) { return at[size_t(rank)][slot(op)]; };
  // Chunk g's op on its rank: g % p holds it as its chunk g / p. The last chunk's backward is its
  // forward op.
  const auto op_of = [&](bool forward, int g, int64_t m) {
    return std::pair{g % p, position(g % p, PipeOp{forward || g == last, m, g / p})};
  };
  const std::vector<PipeOp> mine = pipeline_order(schedule, p, stage, micro, chunks);
  PipelineBuffers out;
  out.release_at_receive.resize(mine.size());
  out.release_before_forward.resize(mine.size());
  // Sends not yet known received: (op index, receiving rank, the receiving op's position, whether
  // it is an output sent forward).
  struct Pending { size_t op; int rank; size_t at; bool output; };
  std::vector<Pending> pending;
  int64_t inputs = 0, in_flight = 0;
  bool dy = false;
  for (size_t i = 0; i < mine.size(); ++i) {
    const PipeOp& op = mine[i];
    const int g = op.chunk * p + stage;
    if (!op.forward && g == last) continue;  // done in its forward
    if (op.forward && chunks == 1) {  // the outputs sent so far: their sends complete first
      for (size_t k = 0; k < pending.size();) {
        if (pending[k].output) {
          out.release_before_forward[i].push_back(pending[k].op);
          pending.erase(pending.begin() + ptrdiff_t(k));
        } else {
          ++k;
        }
      }
    }
    const bool receives = op.forward ? g > 0 : true;
    if (receives) {  // from the previous chunk's forward, or the next chunk's backward
      // The buffer received into is allocated first (the gradient's only once: it is reused).
      const int64_t arriving = op.forward || !dy ? 1 : 0;
      out.peak_allocated = std::max(out.peak_allocated, inputs + int64_t(pending.size()) + (dy ? 1 : 0) + arriving);
      const auto [rank, at] = op.forward ? op_of(true, g - 1, op.micro) : op_of(false, g + 1, op.micro);
      for (size_t k = 0; k < pending.size();)
        if (pending[k].rank == rank && pending[k].at <= at)
          out.release_at_receive[i].push_back(pending[k].op), pending.erase(pending.begin() + ptrdiff_t(k));
        else
          ++k;
      if (op.forward) ++inputs;
      else dy = true;
    }
    if (op.forward) ++in_flight;
    // This op's send: a forward's output to the next chunk's forward, a gradient to the previous
    // chunk's backward.
    const bool sends_output = op.forward && g != last, sends_grad = !sends_output && g > 0;
    if (sends_output || sends_grad) {
      const auto [rank, at] = sends_output ? op_of(true, g + 1, op.micro) : op_of(false, g - 1, op.micro);
      pending.push_back({i, rank, at, sends_output});
    }
    out.peak_in_flight = std::max(out.peak_in_flight, in_flight);
    out.peak_buffers = std::max(out.peak_buffers, inputs + int64_t(pending.size()) + (dy ? 1 : 0));
    out.peak_allocated = std::max(out.peak_allocated, out.peak_buffers);
    if (!op.forward || g == last) {  // its input goes after the backward
      --in_flight;
      if (g > 0) --inputs;
    }
  }
  return out;
}

PipelineTiming& PipelineTiming::operator+=(const PipelineTiming& o) {
  compute_s += o.compute_s, recv_wait_s += o.recv_wait_s, send_wait_s += o.send_wait_s;
  sent_bytes += o.sent_bytes;
  peak_in_flight = std::max(peak_in_flight, o.peak_in_flight);
  peak_buffer_bytes = std::max(peak_buffer_bytes, o.peak_buffer_bytes);
  return *this;
}

Pipeline::Pipeline(Comm& group, Transformer& model, std::vector<int64_t> blocks,
                   PipelineSchedule schedule, int chunks)
    : group_(group), model_(model), blocks_(std::move(blocks)), schedule_(schedule) {
  MT_CHECK(int64_t(blocks_.size()) == int64_t(group.size()) * chunks, "one block count per pipeline chunk");
  chunks_ = rank_chunks(blocks_, group.size(), group.rank());
  // The model plans its activations for these units only: the largest chunk's blocks, the head's
  // buffers on the stage that holds it.
  std::vector<UnitRange> units;
  for (const UnitSpan& c : chunks_) units.push_back({c.first, c.last});
  model_.set_units(std::move(units));
}

std::string Pipeline::describe_stage() const {
  const int p = group_.size();
  const std::string what = describe_stage_units(model_.config(), blocks_, stage(), p);
  std::string chunks;
  if (chunks_.size() > 1) chunks.append(" in ").append(std::to_string(chunks_.size())).append(" chunks per stage");
  return "stage " + std::to_string(stage()) + " of " + std::to_string(p) + " (blocks " + blocks_text(blocks_) +
         chunks + "): " + what;
}

LossSum Pipeline::forward_backward(const std::vector<ModelInput>& micro, float grad_scale) {
  const int s = stage(), p = group_.size(), v = int(chunks_.size());
  const int last_chunk = p * v - 1, next = (s + 1) % p, prev = (s + p - 1) % p;
  const int64_t m = int64_t(micro.size()), C = model_.config().hidden_size;
  Backend& backend = model_.backend();
  PipelineTiming& t = step_timing_;
  t = {};
  // The stage's buffers live in the backend's memory, as tensors: counted in the peak of tensor
  // memory, and on the device where the model computes.
  const std::vector<PipeOp> order = pipeline_order(schedule_, p, s, m, v);
  const PipelineBuffers plan = pipeline_buffers(schedule_, p, s, m, v);
  // Per op of the order: its chunk's input (kept from its forward to its backward, at the
  // forward's index) and what it sends (an output or a gradient, until known received).
  std::vector<DeviceBuffer> inputs(order.size()), sent(order.size());
  std::vector<Request> sends(order.size());
  std::vector<size_t> forward_of(size_t(v * m));  // (chunk, micro) -> the index of its forward
  DeviceBuffer dy;
  int64_t in_flight = 0, held = 0;  // bytes of the buffers above
  // In the compute dtype: bf16 under bf16 mixed precision (the model rounds what crosses a cut:
  // UnitSpan), half the bytes of f32 kept and sent.
  const DType dt = model_.compute_dtype();
  const int64_t elem = int64_t(dtype_size(dt));
  const auto allocate = [&](DeviceBuffer& b, int64_t n) {
    if (b.numel() != n) held += (n - b.numel()) * elem, b.resize(backend, dt, n);
  };
  const auto drop = [&](DeviceBuffer& b) { held -= int64_t(b.bytes()), b = DeviceBuffer(); };
  const auto compute = [&](const ModelInput& in, const UnitSpan& span, bool backward) {
    t.peak_in_flight = std::max(t.peak_in_flight, in_flight);
    t.peak_buffer_bytes = std::max(t.peak_buffer_bytes, held);
    return timed(t.compute_s, [&] { return model_.run_units(in, span, backward, grad_scale); });
  };
  const auto release = [&](const std::vector<size_t>& done_sends) {
    for (size_t done : done_sends) {
      timed(t.send_wait_s, [&] { sends[done]->wait(); });
      sends[done] = nullptr;
      drop(sent[done]);
    }
  };
  const auto receive = [&](DeviceBuffer& into, int64_t n, int peer, int tag, size_t op) {
    allocate(into, n);
    timed(t.recv_wait_s, [&] { group_.device().recv_bytes(into.data(), n * elem, peer, tag); });
    // The sender's op is past its own receives, so these of ours have arrived: their waits return
    // at once.
    release(plan.release_at_receive[op]);
  };
  const auto send = [&](size_t op, int peer, int tag) {
    const int64_t bytes = int64_t(sent[op].bytes());
    t.sent_bytes += bytes;
    sends[op] = timed(t.send_wait_s, [&] { return group_.device().isend_bytes(sent[op].data(), bytes, peer, tag); });
  };
  // With routing losses, per op: the statistics it received and passes on (the span reads and
  // replaces them), sent right after the op's activations and received right after them.
  const bool routing = model_.config().routing_losses();
  const int64_t stats_bytes = packed_balance_size(model_.config().num_experts) * int64_t(sizeof(double));
  std::vector<std::vector<double>> stats(routing ? order.size() : 0);
  std::vector<Request> stats_sends(stats.size());
  const auto receive_stats = [&](size_t op, int peer, int tag) {
    stats[op].resize(size_t(stats_bytes) / sizeof(double));
    timed(t.recv_wait_s, [&] { group_.recv_bytes(stats[op].data(), stats_bytes, peer, tag); });
  };
  const auto send_stats = [&](size_t op, int peer, int tag) {
    MT_CHECK(int64_t(stats[op].size() * sizeof(double)) == stats_bytes, "a span left no routing statistics");
    stats_sends[op] = group_.isend_bytes(stats[op].data(), stats_bytes, peer, tag);
  };
  LossSum loss;
  for (size_t i = 0; i < order.size(); ++i) {
    const PipeOp& op = order[i];
    const int chunk = op.chunk * p + s;  // in the model's order
    const ModelInput& in = micro[size_t(op.micro)];
    const int64_t n = model_.residual_rows(in.B, in.T) * C;
    UnitSpan span = chunks_[size_t(op.chunk)];
    if (routing) span.routing_stats = &stats[i];
    if (op.forward) {
      forward_of[size_t(op.chunk * m + op.micro)] = i;
      release(plan.release_before_forward[i]);  // outputs sent before: freed once their sends complete
      if (chunk > 0) {
        receive(inputs[i], n, prev, forward_tag(chunk - 1), i), span.x_in = inputs[i].tensor();
        if (routing) receive_stats(i, prev, routing_forward_tag(chunk - 1));
      }
      ++in_flight;
      if (chunk == last_chunk) {  // the loss is here: forward and backward at once
        if (chunk > 0) allocate(sent[i], n), span.dx = sent[i].tensor();
        const LossSum ls = compute(in, span, true);
        loss.sum += ls.sum, loss.routing += ls.routing, loss.dropped += ls.dropped;
        --in_flight;
        drop(inputs[i]);
        if (chunk > 0) {
          send(i, prev, backward_tag(chunk - 1));
          if (routing) send_stats(i, prev, routing_backward_tag(chunk - 1));
        }
      } else {
        allocate(sent[i], n);
        span.x_out = sent[i].tensor();
        loss.dropped += compute(in, span, false).dropped;  // a backward's recompute counts none
        send(i, next, forward_tag(chunk));
        if (routing) send_stats(i, next, routing_forward_tag(chunk));
      }
    } else if (chunk != last_chunk) {
      // The next chunk has run this micro-batch's backward, so it has our output (released here).
      receive(dy, n, next, backward_tag(chunk), i);
      if (routing) receive_stats(i, next, routing_backward_tag(chunk));
      DeviceBuffer& x = inputs[forward_of[size_t(op.chunk * m + op.micro)]];
      span.dy = dy.tensor();
      if (chunk > 0) span.x_in = x.tensor(), allocate(sent[i], n), span.dx = sent[i].tensor();
      compute(in, span, true);
      --in_flight;
      drop(x);
      if (chunk > 0) {
        send(i, prev, backward_tag(chunk - 1));
        if (routing) send_stats(i, prev, routing_backward_tag(chunk - 1));
      }
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (sends[i]) timed(t.send_wait_s, [&] { sends[i]->wait(); });
    if (routing && stats_sends[i]) stats_sends[i]->wait();
  }
  // The routing losses were computed on the last stage: every stage logs them.
  if (routing) group_.all_reduce_sum(&loss.routing, 1);
  total_timing_ += t;
  return loss;
}

LossSum Pipeline::forward_loss(const ModelInput& in) {
  const int s = stage(), p = group_.size(), v = int(chunks_.size());
  const DType dt = model_.compute_dtype();
  const int64_t n = model_.residual_rows(in.B, in.T) * model_.config().hidden_size;
  const int64_t bytes = n * int64_t(dtype_size(dt));
  // The residual stream in the model's backend memory and the compute dtype, as in a training step.
  DeviceBuffer x, y;
  // With routing losses, their statistics cross each cut too (as in forward_backward).
  const bool routing = model_.config().routing_losses();
  std::vector<double> stats;
  const int64_t stats_bytes = packed_balance_size(model_.config().num_experts) * int64_t(sizeof(double));
  LossSum ls;
  for (int c = 0; c < v; ++c) {  // chunk c * p + s, after the one before it on the previous rank
    const int chunk = c * p + s;
    UnitSpan span = chunks_[size_t(c)];
    if (routing) span.routing_stats = &stats;
    if (chunk > 0) {
      if (x.numel() != n) x.resize(model_.backend(), dt, n);
      group_.device().recv_bytes(x.data(), bytes, (s + p - 1) % p, forward_tag(chunk - 1));
      span.x_in = x.tensor();
      if (routing) {
        stats.resize(size_t(stats_bytes) / sizeof(double));
        group_.recv_bytes(stats.data(), stats_bytes, (s + p - 1) % p, routing_forward_tag(chunk - 1));
      }
    }
    const bool last = chunk + 1 == p * v;
    if (!last) {
      if (y.numel() != n) y.resize(model_.backend(), dt, n);
      span.x_out = y.tensor();
    }
    ls = model_.run_units(in, span, false, 0.0f);
    if (!last) {
      group_.device().send_bytes(y.data(), bytes, (s + 1) % p, forward_tag(chunk));
      if (routing) group_.send_bytes(stats.data(), stats_bytes, (s + 1) % p, routing_forward_tag(chunk));
    }
  }
  double sums[3] = {ls.sum, double(ls.count), ls.routing};  // only the last chunk's are not zero
  group_.all_reduce_sum(sums, 3);
  LossSum out{sums[0], int64_t(sums[1])};
  out.routing = sums[2];
  return out;
}

}  // namespace mt::parallel

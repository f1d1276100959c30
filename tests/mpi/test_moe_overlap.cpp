// Expert parallelism's overlap of its row exchanges with the experts' compute (model/moe.cpp over
// parallel/expert_parallel.h) on real ranks, ep over the whole world: a mixture-of-experts
// layer's forward and backward on each rank's own tokens give what one rank holding every expert
// computes for the same tokens (the output, the input's gradient, the router's and, summed over
// the ranks, the experts' weight gradients), and the products run while rows are in flight:
// between each exchange's start and its wait the rank began GEMMs (every GEMM of the CPU backend
// calls the progress hook, core/progress_hook.h, which the test counts).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/progress_hook.h"
#include "model/arena_cursor.h"
#include "model/moe.h"
#include "parallel/expert_parallel.h"

namespace mt::parallel {
namespace {

// GEMMs begun, counted at the progress hook (the previous hook, if any, still called).
int64_t g_gemms = 0;
progress_hook::Fn g_previous = nullptr;
void count_gemm() {
  ++g_gemms;
  if (g_previous) g_previous();
}

// The model's side of ep over a real group, recording for each exchange (in the order started)
// how many GEMMs began between its start and its wait.
class RecordingEp final : public ModelParallel {
 public:
  explicit RecordingEp(ExpertParallelGroup& ep) : ep_(ep) {}
  void exchange_expert_counts(const int64_t* counts, int64_t* received, int64_t n) override {
    ep_.exchange_counts(counts, received, n);
  }
  std::unique_ptr<ExpertRowsInFlight> start_expert_rows(const Tensor& recv, const std::vector<int64_t>& recv_rows,
                                                        const Tensor& send,
                                                        const std::vector<int64_t>& send_rows) override {
    gemms_in_flight.push_back(-1);  // -1 until waited for
    return std::make_unique<Recorded>(ep_.start_rows(recv, recv_rows, send, send_rows), gemms_in_flight,
                                      gemms_in_flight.size() - 1);
  }
  std::vector<int64_t> gemms_in_flight;

 private:
  class Recorded final : public ExpertRowsInFlight {
   public:
    Recorded(std::unique_ptr<ExpertRowsInFlight> inner, std::vector<int64_t>& log, size_t index)
        : inner_(std::move(inner)), log_(log), index_(index), start_(g_gemms) {}
    void wait() override {  // the first wait ends the exchange (a later one finds it done)
      if (log_[index_] < 0) log_[index_] = g_gemms - start_;
      inner_->wait();
    }

   private:
    std::unique_ptr<ExpertRowsInFlight> inner_;
    std::vector<int64_t>& log_;
    size_t index_;
    int64_t start_;
  };
  ExpertParallelGroup& ep_;
};

// A deterministic value in [-0.5, 0.5) for (a, b, c).
float value(int64_t a, int64_t b, int64_t c) {
  uint64_t h = uint64_t(a) * 0x9E3779B97F4A7C15ull ^ uint64_t(b) * 0xC2B2AE3D27D4EB4Full ^ uint64_t(c + 7) * 0x165667B19E3779F9ull;
  h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
  return float(h % 100000) / 100000.0f - 0.5f;
}

// Host memory seen as a tensor (the CPU backend's device memory is host memory).
struct Buffer {
  std::vector<float> data;
  Tensor t;
  Buffer(int64_t rows, int64_t cols) : data(size_t(rows * cols)), t(data.data(), DType::f32, rows, cols, Device{}) {}
};

// One MoE layer's weights and gradients: experts [begin, begin + L) of `all`'s values.
struct Layer {
  std::vector<std::unique_ptr<Buffer>> buffers;
  MoeWeights w;
  Tensor make(int64_t rows, int64_t cols, int64_t tag) {
    buffers.push_back(std::make_unique<Buffer>(rows, cols));
    if (tag >= 0)
      for (int64_t i = 0; i < rows * cols; ++i) buffers.back()->data[size_t(i)] = 0.4f * value(tag, i, 11);
    return buffers.back()->t;
  }
  Layer(const ModelConfig& c, int64_t begin, int64_t L) {
    w.router.W = make(c.num_experts, c.hidden_size, 1000), w.router.dW = make(c.num_experts, c.hidden_size, -1);
    for (int64_t e = begin; e < begin + L; ++e) {
      std::array<LinearWeights, kNumExpertProj> ew;
      for (int p = 0; p < kNumExpertProj; ++p) {
        const auto [out, in] = expert_proj_dims(ExpertProj(p), c);
        ew[size_t(p)].W = make(out, in, 10 * e + p), ew[size_t(p)].dW = make(out, in, -1);
      }
      w.experts.push_back(ew);
    }
  }
};

// The layer's forward and backward on n2 / ddelta: delta and dn2.
void run_layer(const ModelConfig& c, Layer& layer, ModelParallel& par, const Tensor& n2, const Tensor& ddelta,
               const Tensor& delta, const Tensor& dn2, MoeRouting& routing) {
  Backend& be = cpu_backend();
  const int64_t N = n2.rows;
  const std::array<bool, kNumExpertProj> no_lora{};
  const int64_t R = moe_expert_rows(c, N), M = N * c.num_experts_per_tok;
  Buffer t_arena(1, 3 * R * c.moe_intermediate_size + M * c.hidden_size + moe_scratch_elems(c, N, 0));
  Buffer f_arena(1, 3 * M + moe_scratch_f32_elems(c, N));
  ArenaCursor t(t_arena.t), f(f_arena.t);
  MoeActivations a = carve_moe_activations(t, f, N, c, 0, no_lora);
  a.routing = &routing;
  MoeScratch s = carve_moe_scratch(t, c, N, 0);
  carve_moe_scratch_f32(s, f, c, N);
  moe_forward(be, delta, n2, a, layer.w, c, s, MoeLossContext{}, par);
  moe_backward(be, dn2, ddelta, n2, a, layer.w, c, s, MoeLossContext{}, par);
}

std::vector<float> values(const Tensor& t) {
  const auto* p = static_cast<const float*>(t.data);
  return {p, p + t.numel()};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << what << " element " << i;
}

TEST(MoeOverlapMpi, OwnRowsComputeWhileRowsTravelAndResultsMatchOneRank) {
  auto world = make_world_comm();
  const int S = world->size(), me = world->rank();
  if (S < 2) GTEST_SKIP() << "needs 2 ranks or more";
  ModelConfig one;
  one.hidden_size = 16, one.moe_intermediate_size = 24, one.num_experts = 8, one.num_experts_per_tok = 2;
  one.norm_topk_prob = true, one.router_aux_loss_coef = 0.0f;
  const ModelConfig ep_config = expert_parallel_config(one, S, me);
  const int64_t N = 32, C = one.hidden_size, L = ep_config.local_experts(), begin = ep_config.moe_expert_begin;

  Buffer n2(N, C), ddelta(N, C);
  for (int64_t i = 0; i < N * C; ++i)
    n2.data[size_t(i)] = 2.0f * value(me, i, 1), ddelta.data[size_t(i)] = value(me, i, 2);

  // One rank with every expert, on this rank's tokens.
  Layer whole(one, 0, one.num_experts);
  Buffer delta_ref(N, C), dn2_ref(N, C);
  MoeRouting routing_ref;
  run_layer(one, whole, single_device(), n2.t, ddelta.t, delta_ref.t, dn2_ref.t, routing_ref);

  // ep over the world, the GEMMs counted.
  ExpertParallelGroup group(*world, cpu_backend());
  RecordingEp par(group);
  Layer mine(ep_config, begin, L);
  Buffer delta(N, C), dn2(N, C);
  MoeRouting routing;
  g_previous = progress_hook::slot().load();
  progress_hook::set(&count_gemm);
  run_layer(ep_config, mine, par, n2.t, ddelta.t, delta.t, dn2.t, routing);
  progress_hook::set(g_previous);

  expect_close(delta.data, delta_ref.data, "delta");
  expect_close(dn2.data, dn2_ref.data, "dn2");
  expect_close(values(mine.w.router.dW), values(whole.w.router.dW), "router dW");  // this rank's tokens
  // The experts' gradients: every rank's tokens, summed (every rank sums every expert's, in order).
  for (int64_t e = 0; e < one.num_experts; ++e)
    for (int p = 0; p < kNumExpertProj; ++p) {
      std::vector<float> want = values(whole.w.experts[size_t(e)][size_t(p)].dW);
      world->all_reduce_sum(want.data(), int64_t(want.size()));
      if (e >= begin && e < begin + L) expect_close(values(mine.w.experts[size_t(e - begin)][size_t(p)].dW), want, "expert dW");
    }

  // Five exchanges: the forward's rows out and results back, the backward's dout and rows out
  // (together) and dx back; the rank's own rows are computed during the first four, the router's
  // weight gradient during the last.
  const int64_t own = routing.send_rows[size_t(me)];
  ASSERT_GT(own, 0) << "the test's tokens route none to this rank's own experts";
  ASSERT_EQ(par.gemms_in_flight.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_GT(par.gemms_in_flight[i], 0) << "exchange " << i << " overlapped nothing";
}

}  // namespace
}  // namespace mt::parallel

// The batched adapters of projections that share an input (model/linear.h lora_group_*) against the
// per-module path (model/linear.h lora_forward / lora_backward) they replace: the same outputs,
// saved u, input gradient and adapter gradients, on both host backends, in f32 and bf16, with the
// A's apart or adjacent in memory, their gradients apart or adjacent, and one A shared by three
// projections (GPT-2's c_attn); and where it must not batch (dropout, one adapter, ranks apart).
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <vector>

#include "backend/reference_backend.h"
#include "core/bf16.h"
#include "finite_diff.h"
#include "model/linear.h"

namespace mt {
namespace {

using test::random_normal;

// Host memory of one dtype holding given values; the tensor views of it.
class HostBuf {
 public:
  HostBuf(DType dt, const std::vector<float>& v, Device dev) : dt_(dt), dev_(dev), f_(v) {
    if (dt == DType::bf16)
      for (float x : v) b_.push_back(float_to_bf16(x));
  }
  Tensor t(int64_t rows, int64_t cols, int64_t offset = 0) {
    void* p = dt_ == DType::bf16 ? static_cast<void*>(b_.data() + offset) : static_cast<void*>(f_.data() + offset);
    return Tensor(p, dt_, rows, cols, dev_);
  }
  std::vector<float> values() const {
    if (dt_ != DType::bf16) return f_;
    std::vector<float> out;
    for (bf16 x : b_) out.push_back(to_float(x));
    return out;
  }

 private:
  DType dt_;
  Device dev_;
  std::vector<float> f_;
  std::vector<bf16> b_;
};

struct Layout {
  bool a_adjacent, da_adjacent, shared_a;
};

// Three projections q [24], k [8], v [8] on an input of width C, rank r; outputs y (the base
// products, random), u, dx (random: accumulated onto), dA, dB (random: accumulated onto).
struct ThreeAdapters {
  static constexpr int64_t N = 37, C = 48, r = 4;
  const int64_t outs[3] = {24, 8, 8};
  DType dt;
  std::deque<HostBuf> bufs;  // stable addresses
  HostBuf *x, *a_all, *da_all, *dx;
  HostBuf *y[3], *u[3], *b[3], *db[3], *dy[3];
  LinearWeights w[3];

  ThreeAdapters(DType d, Layout lay, uint32_t seed, Device dev) : dt(d) {
    auto make = [&](DType t, size_t n, uint32_t s, float sd = 1.0f) {
      return &bufs.emplace_back(t, random_normal(n, s, sd), dev);
    };
    x = make(dt, N * C, seed);
    dx = make(dt, N * C, seed + 1);
    a_all = make(dt, 3 * r * C + 8, seed + 2, 0.3f);   // room for a gap between the A's
    da_all = make(DType::f32, 3 * r * C + 8, seed + 3);
    for (int i = 0; i < 3; ++i) {
      y[i] = make(dt, size_t(N * outs[i]), seed + 10 + i);
      u[i] = make(dt, size_t(N * r), seed + 20 + i);
      b[i] = make(dt, size_t(outs[i] * r), seed + 30 + i, 0.3f);
      db[i] = make(DType::f32, size_t(outs[i] * r), seed + 40 + i);
      dy[i] = make(dt, size_t(N * outs[i]), seed + 50 + i);
      const int64_t a_at = lay.shared_a ? 0 : i * (r * C + (lay.a_adjacent ? 0 : 4));
      const int64_t da_at = lay.shared_a ? 0 : i * (r * C + (lay.da_adjacent ? 0 : 4));
      w[i].A = a_all->t(r, C, a_at);
      w[i].dA = da_all->t(r, C, da_at);
      w[i].B = b[i]->t(outs[i], r);
      w[i].dB = db[i]->t(outs[i], r);
      w[i].scale = 2.0f;
    }
  }
  Tensor yt(int i) { return y[i]->t(N, outs[i]); }
  Tensor ut(int i) { return u[i]->t(N, r); }
  Tensor dyt(int i) { return dy[i]->t(N, outs[i]); }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << what << " [" << i << "]";
}

void check_against_per_module(Backend& be, DType dt, Layout lay) {
  SCOPED_TRACE(std::string(be.name()) + (dt == DType::bf16 ? " bf16" : " f32") + " A adjacent " +
               std::to_string(lay.a_adjacent) + " dA adjacent " + std::to_string(lay.da_adjacent) +
               " shared A " + std::to_string(lay.shared_a));
  ThreeAdapters batched(dt, lay, 5, be.device()), single(dt, lay, 5, be.device());
  std::vector<float> scratch_v(size_t(lora_group_scratch_elems(ThreeAdapters::N, ThreeAdapters::C, ThreeAdapters::r, 3)), 0.0f);
  HostBuf scratch_buf(dt, scratch_v, be.device());
  const Tensor scratch = scratch_buf.t(1, int64_t(scratch_v.size()));
  const LinearWeights* ws[] = {&batched.w[0], &batched.w[1], &batched.w[2]};
  const AdapterDropout* none[] = {nullptr, nullptr, nullptr};
  const LoraGroup g{ws, none};
  ASSERT_TRUE(lora_group_batches(g, scratch, ThreeAdapters::N));

  // Forward.
  const Tensor ys[] = {batched.yt(0), batched.yt(1), batched.yt(2)};
  const Tensor us[] = {batched.ut(0), batched.ut(1), batched.ut(2)};
  lora_group_forward(be, ys, us, batched.x->t(ThreeAdapters::N, ThreeAdapters::C), g, scratch);
  for (int i = 0; i < 3; ++i)
    lora_forward(be, single.yt(i), single.ut(i), single.x->t(ThreeAdapters::N, ThreeAdapters::C), single.w[i]);
  // f32: the same sums in another blocking; bf16: u and y rounded once either way.
  const float tol = dt == DType::bf16 ? 1e-2f : 1e-5f;
  for (int i = 0; i < 3; ++i) {
    expect_close(batched.u[i]->values(), single.u[i]->values(), tol, "u");
    expect_close(batched.y[i]->values(), single.y[i]->values(), tol, "y");
  }

  // Backward.
  const Tensor dys[] = {batched.dyt(0), batched.dyt(1), batched.dyt(2)};
  lora_group_backward(be, batched.dx->t(ThreeAdapters::N, ThreeAdapters::C), dys, batched.x->t(ThreeAdapters::N, ThreeAdapters::C), us, g, scratch);
  std::vector<float> du_v(size_t(ThreeAdapters::N * ThreeAdapters::r), 0.0f);
  HostBuf du(dt, du_v, be.device());
  for (int i = 0; i < 3; ++i)
    lora_backward(be, single.dx->t(ThreeAdapters::N, ThreeAdapters::C), du.t(ThreeAdapters::N, ThreeAdapters::r), single.dyt(i),
                  single.x->t(ThreeAdapters::N, ThreeAdapters::C), single.ut(i), single.w[i]);
  // dx: bf16 rounds once batched, three times per module.
  expect_close(batched.dx->values(), single.dx->values(), dt == DType::bf16 ? 3e-2f : 1e-5f, "dx");
  expect_close(batched.da_all->values(), single.da_all->values(), dt == DType::bf16 ? 1e-2f : 1e-5f, "dA");
  for (int i = 0; i < 3; ++i) expect_close(batched.db[i]->values(), single.db[i]->values(), 1e-5f, "dB");
}

TEST(LoraGroup, MatchesThePerModulePath) {
  for (Backend* be : {&cpu_backend(), &reference_backend()})
    for (DType dt : {DType::f32, DType::bf16})
      for (Layout lay : {Layout{false, false, false}, Layout{true, true, false}, Layout{true, false, false},
                         Layout{false, true, false}, Layout{false, false, true}})
        check_against_per_module(*be, dt, lay);
}

TEST(LoraGroup, RunsPerModuleWhereItCannotBatch) {
  ThreeAdapters s(DType::f32, {false, false, false}, 9, cpu_backend().device());
  std::vector<float> scratch_v(size_t(lora_group_scratch_elems(ThreeAdapters::N, ThreeAdapters::C, ThreeAdapters::r, 3)), 0.0f);
  const Tensor scratch(scratch_v.data(), DType::f32, 1, int64_t(scratch_v.size()), cpu_backend().device());
  const LinearWeights* ws[] = {&s.w[0], &s.w[1], &s.w[2]};
  const AdapterDropout* none[] = {nullptr, nullptr, nullptr};
  EXPECT_TRUE(lora_group_batches({ws, none}, scratch, ThreeAdapters::N));
  // LoRA dropout: each module draws its own mask, so the adapters' inputs differ.
  const AdapterDropout d{};
  const AdapterDropout* one[] = {nullptr, &d, nullptr};
  EXPECT_FALSE(lora_group_batches({ws, one}, scratch, ThreeAdapters::N));
  // No scratch, too little, another dtype.
  EXPECT_FALSE(lora_group_batches({ws, none}, Tensor{}, ThreeAdapters::N));
  EXPECT_FALSE(lora_group_batches({ws, none}, scratch.flat_slice(0, scratch.numel() - 1), ThreeAdapters::N));
  std::vector<bf16> b16(scratch_v.size());
  EXPECT_FALSE(lora_group_batches({ws, none}, Tensor(b16.data(), DType::bf16, 1, int64_t(b16.size()), cpu_backend().device()),
                                  ThreeAdapters::N));
  // One adapter only (lora.targets without k and v): nothing to batch.
  LinearWeights bare_k = s.w[1], bare_v = s.w[2];
  bare_k.A = bare_v.A = Tensor{};
  const LinearWeights* lone[] = {&s.w[0], &bare_k, &bare_v};
  EXPECT_FALSE(lora_group_batches({lone, none}, scratch, ThreeAdapters::N));
  // Two of three (q and v) batch.
  const LinearWeights* qv[] = {&s.w[0], &bare_k, &s.w[2]};
  EXPECT_TRUE(lora_group_batches({qv, none}, scratch, ThreeAdapters::N));
  // Ranks apart.
  LinearWeights half = s.w[1];
  half.A = half.A.rows_slice(0, ThreeAdapters::r / 2);
  const LinearWeights* mixed[] = {&s.w[0], &half, &s.w[2]};
  EXPECT_FALSE(lora_group_batches({mixed, none}, scratch, ThreeAdapters::N));
}

}  // namespace
}  // namespace mt

// OLMoE's whole-projection q/k norms on two shares of the heads (model/split_qk_norm.h), each
// share in a thread of its own whose ModelParallel::reduce_sum is a real sum with the other's:
// the shares' outputs, input gradients and weight gradients are the whole rows' norm (the
// reference backend's rmsnorm_forward / rmsnorm_backward on every column), and q's and k's row
// statistics go over the shares together: one reduce_sum in the forward, two in the backward (the
// row dots, then both weights' gradients; one when the weights are frozen).
#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <thread>
#include <vector>

#include "backend/reference_backend.h"
#include "finite_diff.h"
#include "model/split_qk_norm.h"

namespace mt {
namespace {

using Vec = std::vector<float>;

// Host memory as the reference backend tags its own (it is stateless: two threads may share it).
Tensor host(Vec& v, int64_t rows, int64_t cols) {
  return Tensor(v.data(), DType::f32, rows, cols, reference_backend().device());
}

// Two shares' reduce_sum: each hands over its buffer, both sum the two, each writes its own.
struct Exchange {
  std::barrier<> sync{2};
  const float* data[2] = {nullptr, nullptr};
  int64_t n[2] = {0, 0};
};

class ShareParallel : public ModelParallel {
 public:
  ShareParallel(Exchange& ex, int share) : ex_(ex), share_(share) {}
  void reduce_sum(const Tensor& partial) override {
    sizes.push_back(partial.numel());
    float* mine = partial.as<float>();
    ex_.data[share_] = mine, ex_.n[share_] = partial.numel();
    ex_.sync.arrive_and_wait();
    EXPECT_EQ(ex_.n[0], ex_.n[1]);  // the shares' calls pair up
    Vec sum(size_t(partial.numel()));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = ex_.data[0][i] + ex_.data[1][i];
    ex_.sync.arrive_and_wait();  // both have read before either writes
    std::copy(sum.begin(), sum.end(), mine);
  }
  std::vector<int64_t> sizes;  // of each reduce_sum, in call order

 private:
  Exchange& ex_;
  int share_;
};

constexpr int64_t N = 5, Cq = 6, Ck = 4;  // rows; q's and k's columns a share
constexpr float kEps = 1e-5f, kOffset = 0.5f;

// The columns [first, first + cols) of each of `rows` rows of width `width`.
Vec columns(const Vec& v, int64_t rows, int64_t width, int64_t first, int64_t cols) {
  Vec out;
  for (int64_t r = 0; r < rows; ++r)
    out.insert(out.end(), v.begin() + r * width + first, v.begin() + r * width + first + cols);
  return out;
}

void expect_close(const Vec& got, const Vec& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::abs(want[i]))) << what << " element " << i;
}

TEST(SplitQkNorm, TwoSharesGiveTheWholeRowsNormWithOneSumForQAndK) {
  for (bool frozen : {false, true}) {
    // The whole rows on the reference backend.
    Backend& be = reference_backend();
    const int64_t Wq = 2 * Cq, Wk = 2 * Ck;
    Vec xq = test::random_normal(size_t(N * Wq), 1), xk = test::random_normal(size_t(N * Wk), 2);
    Vec wq = test::random_normal(size_t(Wq), 3), wk = test::random_normal(size_t(Wk), 4);
    Vec gq = test::random_normal(size_t(N * Wq), 5), gk = test::random_normal(size_t(N * Wk), 6);
    Vec dwq0 = test::random_normal(size_t(Wq), 7), dwk0 = test::random_normal(size_t(Wk), 8);  // earlier micro-batches'
    Vec oq(xq.size()), ok(xk.size()), rq(static_cast<size_t>(N)), rk(static_cast<size_t>(N));
    Vec dxq(xq.size(), 0.0f), dxk(xk.size(), 0.0f), dwq = dwq0, dwk = dwk0;
    be.rmsnorm_forward(host(oq, N, Wq), host(rq, 1, N), host(xq, N, Wq), host(wq, 1, Wq), kEps, kOffset);
    be.rmsnorm_forward(host(ok, N, Wk), host(rk, 1, N), host(xk, N, Wk), host(wk, 1, Wk), kEps, kOffset);
    be.rmsnorm_backward(host(dxq, N, Wq), host(dwq, 1, Wq), host(gq, N, Wq), host(xq, N, Wq), host(wq, 1, Wq),
                        host(rq, 1, N), kOffset);
    be.rmsnorm_backward(host(dxk, N, Wk), host(dwk, 1, Wk), host(gk, N, Wk), host(xk, N, Wk), host(wk, 1, Wk),
                        host(rk, 1, N), kOffset);

    struct Share {
      Vec q, k, q_raw, k_raw, rows, dq, dk, dwq, dwk, draw, dw_whole, dots;
      std::vector<int64_t> forward_sums, backward_sums;
    } shares[2];
    Exchange ex;
    std::exception_ptr failed[2];
    auto run_share = [&](int h) {
      Share& s = shares[h];
      try {
        ModelConfig c;
        c.qk_norm = c.qk_norm_whole = true;
        c.head_shards = 2, c.head_shard = h, c.rms_norm_eps = kEps, c.norm_weight_offset = kOffset;
        s.q = columns(xq, N, Wq, h * Cq, Cq), s.k = columns(xk, N, Wk, h * Ck, Ck);
        s.q_raw.resize(s.q.size()), s.k_raw.resize(s.k.size()), s.rows.resize(size_t(2 * N));
        s.dwq = dwq0, s.dwk = dwk0;
        Vec wq_h = wq, wk_h = wk;  // every share holds the whole weights
        ShareParallel par(ex, h);
        split_qk_norm_forward(be, par, {host(s.q, N, Cq), host(s.q_raw, N, Cq), host(wq_h, 1, Wq), {}},
                              {host(s.k, N, Ck), host(s.k_raw, N, Ck), host(wk_h, 1, Wk), {}}, host(s.rows, 1, 2 * N),
                              c);
        s.forward_sums = par.sizes, par.sizes.clear();
        s.dq = columns(gq, N, Wq, h * Cq, Cq), s.dk = columns(gk, N, Wk, h * Ck, Ck);
        s.draw.resize(size_t(N * Cq)), s.dw_whole.resize(size_t(Wq + Wk)), s.dots.resize(size_t(2 * N));
        const SplitQkNormScratch scratch{host(s.draw, 1, N * Cq), host(s.dw_whole, 1, Wq + Wk), host(s.dots, 1, 2 * N)};
        split_qk_norm_backward(
            be, par, {host(s.dq, N, Cq), host(s.q_raw, N, Cq), host(wq_h, 1, Wq), frozen ? Tensor{} : host(s.dwq, 1, Wq)},
            {host(s.dk, N, Ck), host(s.k_raw, N, Ck), host(wk_h, 1, Wk), frozen ? Tensor{} : host(s.dwk, 1, Wk)},
            host(s.rows, 1, 2 * N), scratch, c);
        s.backward_sums = par.sizes;
      } catch (...) {
        failed[h] = std::current_exception();
        ex.sync.arrive_and_drop();  // the other share is not left waiting
      }
    };
    std::thread other(run_share, 1);
    run_share(0);
    other.join();
    for (const std::exception_ptr& e : failed)
      if (e) std::rethrow_exception(e);

    for (int h = 0; h < 2; ++h) {
      const Share& s = shares[h];
      SCOPED_TRACE(std::string(frozen ? "frozen, " : "trained, ") + "share " + std::to_string(h));
      EXPECT_EQ(s.forward_sums, (std::vector<int64_t>{2 * N}));  // q's rows and k's: one sum
      EXPECT_EQ(s.backward_sums, (frozen ? std::vector<int64_t>{2 * N} : std::vector<int64_t>{2 * N, Wq + Wk}));
      expect_close(s.q, columns(oq, N, Wq, h * Cq, Cq), "q");
      expect_close(s.k, columns(ok, N, Wk, h * Ck, Ck), "k");
      Vec rows = rq;
      rows.insert(rows.end(), rk.begin(), rk.end());
      expect_close(s.rows, rows, "1/rms of q's rows then k's");
      expect_close(s.dq, columns(dxq, N, Wq, h * Cq, Cq), "dq");
      expect_close(s.dk, columns(dxk, N, Wk, h * Ck, Ck), "dk");
      expect_close(s.dwq, frozen ? dwq0 : dwq, "q norm's weight gradient");
      expect_close(s.dwk, frozen ? dwk0 : dwk, "k norm's weight gradient");
    }
  }
}

}  // namespace
}  // namespace mt

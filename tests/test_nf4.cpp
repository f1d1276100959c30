// NF4 (core/nf4.h), the 4-bit base of QLoRA: the codebook against the QLoRA paper's published
// table, the quantisation error against NF4's bound, what double quantisation adds, the bytes per
// weight, rows that are not whole blocks, the backends' dequantising convert and GEMM (the CPU
// kernels against the reference backend), and a QLoRA model's memory: NF4 records and one
// dequantised matrix at a time, never the whole base in bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/device_buffer.h"
#include "backend/reference_backend.h"
#include "core/memory_stats.h"
#include "core/nf4.h"
#include "finite_diff.h"
#include "model/transformer.h"
#include "model_fixtures.h"

namespace mt {
namespace {

using test::random_normal;

// Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs", Appendix E (the NF4 data
// type's values, as printed there).
const double kPaperTable[16] = {-1.0,
                                -0.6961928009986877,
                                -0.5250730514526367,
                                -0.39491748809814453,
                                -0.28444138169288635,
                                -0.18477343022823334,
                                -0.09105003625154495,
                                0.0,
                                0.07958029955625534,
                                0.16093020141124725,
                                0.24611230194568634,
                                0.33791524171829224,
                                0.44070982933044434,
                                0.5626170039176941,
                                0.7229568362236023,
                                1.0};

TEST(Nf4, NormalQuantileIsTheInverseOfTheNormalCdf) {
  EXPECT_NEAR(nf4::normal_quantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(nf4::normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(nf4::normal_quantile(0.001), -3.090232306167813, 1e-12);
  for (double x : {-4.0, -1.3, 0.2, 2.5})
    EXPECT_NEAR(nf4::normal_quantile(0.5 * std::erfc(-x / std::sqrt(2.0))), x, 1e-11) << x;
}

TEST(Nf4, CodebookDerivedFromNormalQuantilesIsThePapersTable) {
  const auto& cb = nf4::codebook();
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(cb[size_t(i)], kPaperTable[i], 2e-7) << "code " << i;
  // Exact zero and ends: zero weights and the block maximum are represented without error.
  EXPECT_EQ(cb[7], 0.0f);
  EXPECT_EQ(cb[0], -1.0f);
  EXPECT_EQ(cb[15], 1.0f);
}

// Half the largest gap between neighbouring codes: no normalised weight is further from its code.
double nf4_bound() {
  const auto& cb = nf4::codebook();
  double gap = 0;
  for (int i = 0; i < 15; ++i) gap = std::max(gap, double(cb[size_t(i + 1)] - cb[size_t(i)]));
  return gap / 2;
}

TEST(Nf4, RoundTripErrorIsWithinTheNf4BoundAndDoubleQuantisationAddsLittle) {
  const int64_t rows = 16, cols = 64 * 300;  // two double-quantisation groups per row
  auto w = random_normal(size_t(rows * cols), 7, 0.02f);
  std::vector<uint8_t> packed(nf4::tensor_bytes(rows, cols));
  nf4::quantize_rows(packed.data(), w.data(), rows, cols);
  std::vector<float> back(w.size());
  nf4::dequantize_rows(back.data(), packed.data(), rows, cols);
  const auto& cb = nf4::codebook();
  const double bound = nf4_bound();
  double sq_first = 0, sq_total = 0, sq_w = 0, worst_block = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const nf4::RowView row{packed.data() + r * nf4::row_bytes(cols), cols};
    for (int64_t b = 0; b < nf4::blocks_per_row(cols); ++b) {
      float a = 0;  // the exact block maximum
      for (int64_t i = b * 64; i < (b + 1) * 64; ++i) a = std::max(a, std::abs(w[size_t(r * cols + i)]));
      const double dq = std::abs(double(row.absmax(b)) - a);
      const int64_t group = b / 150;  // 300 blocks: two equal groups
      EXPECT_LE(dq, 0.5 * row.scale(group) * 1.0001) << "double quantisation of block " << b;
      for (int64_t i = b * 64; i < (b + 1) * 64; ++i) {
        const double x = w[size_t(r * cols + i)], first = cb[row.code(i)] * double(a);
        // The first level alone: within half a code gap of the exact maximum.
        ASSERT_LE(std::abs(x - first), bound * a + 1e-9) << "row " << r << " col " << i;
        // With the maximum double-quantised: plus at most that maximum's own error.
        ASSERT_LE(std::abs(x - back[size_t(r * cols + i)]), bound * a + dq + 1e-7) << "row " << r << " col " << i;
        worst_block = std::max(worst_block, std::abs(x - first) / a);
        sq_first += (x - first) * (x - first);
        sq_total += (x - back[size_t(r * cols + i)]) * (x - back[size_t(r * cols + i)]);
        sq_w += x * x;
      }
    }
  }
  const double rel_first = std::sqrt(sq_first / sq_w), rel_total = std::sqrt(sq_total / sq_w);
  std::printf("nf4 relative RMS error: %.5f (exact block maxima), %.5f (double-quantised maxima, +%.2f%%); "
              "worst |w/absmax - code| %.4f, bound %.4f\n",
              rel_first, rel_total, 100 * (rel_total / rel_first - 1), worst_block, bound);
  EXPECT_LT(rel_first, 0.12);                   // NF4 on normal weights: ~0.1
  EXPECT_LT(rel_total, rel_first * 1.01);       // the 8-bit maxima add under 1%
  EXPECT_GT(rel_total, rel_first * 0.999);      // and are not free
}

// Tensor parallelism's column split of a row-parallel weight: each rank's records, quantised from
// whole rows, dequantise to exactly the whole rows' values in its columns. Llama 3.1 405B's
// down_proj rows (53248 columns, 832 blocks in 4 groups of 208) split over tp = 2, 4 and 8.
TEST(Nf4, TensorParallelSlicesHoldTheWholeRowsValues) {
  const int64_t rows = 2, cols = 53248;
  const auto w = random_normal(size_t(rows * cols), 5, 0.02f);
  std::vector<uint8_t> whole(nf4::tensor_bytes(rows, cols));
  nf4::quantize_rows(whole.data(), w.data(), rows, cols);
  std::vector<float> expect(w.size());
  nf4::dequantize_rows(expect.data(), whole.data(), rows, cols);
  for (int64_t tp : {2, 4, 8}) {
    const int64_t n = cols / tp;
    for (int64_t r = 0; r < tp; ++r) {
      ASSERT_TRUE(nf4::slice_keeps_groups(cols, r * n, (r + 1) * n)) << "tp " << tp << " rank " << r;
      std::vector<uint8_t> mine(nf4::tensor_bytes(rows, n));
      nf4::quantize_row_slice(mine.data(), w.data(), rows, cols, r * n, (r + 1) * n);
      std::vector<float> got(size_t(rows * n));
      nf4::dequantize_rows(got.data(), mine.data(), rows, n);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(got[size_t(i * n + j)], expect[size_t(i * cols + r * n + j)]) << "tp " << tp << " rank " << r;
    }
  }
  // Cuts that do split a group, or a block, are refused.
  EXPECT_FALSE(nf4::slice_keeps_groups(640 * 64, 0, 320 * 64));  // 3 groups of 214 blocks, cut at 320
  EXPECT_FALSE(nf4::slice_keeps_groups(256, 0, 96));
  EXPECT_THROW(nf4::quantize_row_slice(whole.data(), w.data(), 1, 256, 0, 96), Error);
}

TEST(Nf4, BytesPerWeightAreAbout4Point13Bits) {
  // 4 bits of code, 8 bits of maximum per 64 weights, 8 bytes (scale, offset) per 256 blocks.
  const auto bits = [](int64_t cols) { return 8.0 * double(nf4::row_bytes(cols)) / double(cols); };
  std::printf("nf4 bits per weight: %.4f (rows of 16384), %.4f (4096), %.4f (11008), %.4f (128)\n",
              bits(16384), bits(4096), bits(11008), bits(128));
  EXPECT_NEAR(bits(16384), 4.0 + 8.0 / 64 + 64.0 / 16384, 1e-9);
  EXPECT_NEAR(bits(4096), 4.0 + 8.0 / 64 + 64.0 / 4096, 1e-9);
  EXPECT_LT(bits(11008), 4.14);
  // Against bf16's 16 bits: the base falls ~3.9x.
  EXPECT_NEAR(16.0 / bits(16384), 3.875, 0.01);
}

TEST(Nf4, RowsThatAreNotWholeBlocksArePaddedWithZeros) {
  const int64_t rows = 3, cols = 100;  // one whole block and 36 weights of a second
  auto w = random_normal(size_t(rows * cols), 3);
  w[5] = 0.0f;
  std::vector<uint8_t> packed(nf4::tensor_bytes(rows, cols));
  nf4::quantize_rows(packed.data(), w.data(), rows, cols);
  EXPECT_EQ(nf4::row_bytes(cols) % 4, 0);
  const nf4::RowView row{packed.data(), cols};
  for (int64_t i = cols; i < 128; ++i) EXPECT_EQ(row.code(i), 7) << "padding is the exact zero";
  std::vector<float> back(w.size());
  nf4::dequantize_rows(back.data(), packed.data(), rows, cols);
  EXPECT_EQ(back[5], 0.0f);
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, double(std::abs(w[i] - back[i])));
  EXPECT_LT(worst, 0.6);  // |w| < ~4: within the bound's 0.14 of each block's maximum
  EXPECT_GT(worst, 0.0);
}

// The CPU and the reference backend dequantise to the same values, and a GEMM against an NF4
// weight equals the GEMM against its dequantised copy.
TEST(Nf4, BackendsDequantiseAndMultiplyAlike) {
  const int64_t out = 40, in = 192, M = 5;
  const auto w = random_normal(size_t(out * in), 11, 0.05f), x = random_normal(size_t(M * in), 12);
  for (Backend* be : {&cpu_backend(), &reference_backend()}) {
    SCOPED_TRACE(be->name());
    DeviceBuffer wf(*be, DType::f32, out * in), packed(*be, DType::i32, int64_t(nf4::tensor_bytes(out, in) / 4));
    DeviceBuffer xf(*be, DType::f32, M * in), back(*be, DType::f32, out * in), y(*be, DType::f32, M * out),
        y_ref(*be, DType::f32, M * out), xb(*be, DType::bf16, M * in), yb(*be, DType::f32, M * out),
        wb(*be, DType::bf16, out * in), yb_ref(*be, DType::f32, M * out);
    const Tensor W = wf.tensor().view(out, in), Q = be->view(packed.data(), DType::nf4, out, in);
    be->copy_from_host(W, w.data());
    be->copy_from_host(xf.tensor(), x.data());
    be->convert(Q, W);
    be->convert(back.tensor().view(out, in), Q);
    std::vector<float> host(w.size()), expect(w.size());
    be->copy_to_host(host.data(), back.tensor());
    nf4::dequantize_rows(expect.data(), static_cast<const uint8_t*>(packed.data()), out, in);
    for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], expect[i]) << i;
    // f32 activations: against the f32 dequantised weight.
    be->linear_forward(y.tensor().view(M, out), xf.tensor().view(M, in), Q);
    be->linear_forward(y_ref.tensor().view(M, out), xf.tensor().view(M, in), back.tensor().view(out, in));
    std::vector<float> a(size_t(M * out)), b(a.size());
    be->copy_to_host(a.data(), y.tensor());
    be->copy_to_host(b.data(), y_ref.tensor());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
    // bf16 activations: the weight is dequantised straight to bf16.
    be->convert(xb.tensor(), xf.tensor());
    be->convert(wb.tensor().view(out, in), Q);
    be->linear_forward(yb.tensor().view(M, out), xb.tensor().view(M, in), Q);
    be->linear_forward(yb_ref.tensor().view(M, out), xb.tensor().view(M, in), wb.tensor().view(out, in));
    be->copy_to_host(a.data(), yb.tensor());
    be->copy_to_host(b.data(), yb_ref.tensor());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  }
}

TEST(Nf4, CpuDequantisationEqualsTheReferenceBackends) {
  const int64_t out = 33, in = 64 * 5 + 17;
  const auto w = random_normal(size_t(out * in), 21, 0.03f);
  std::vector<float> got[2];
  std::vector<uint16_t> got16[2];
  int k = 0;
  for (Backend* be : {&cpu_backend(), &reference_backend()}) {
    DeviceBuffer wf(*be, DType::f32, out * in), packed(*be, DType::i32, int64_t(nf4::tensor_bytes(out, in) / 4)),
        back(*be, DType::f32, out * in), back16(*be, DType::bf16, out * in);
    const Tensor Q = be->view(packed.data(), DType::nf4, out, in);
    be->copy_from_host(wf.tensor(), w.data());
    be->convert(Q, wf.tensor().view(out, in));
    be->convert(back.tensor().view(out, in), Q);
    be->convert(back16.tensor().view(out, in), Q);
    got[k].resize(w.size()), got16[k].resize(w.size());
    be->copy_to_host(got[k].data(), back.tensor());
    be->copy_to_host(got16[k].data(), back16.tensor());
    ++k;
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got16[0], got16[1]);
}

TEST(Nf4, ConvertRefusesAShapeThatIsNotTheTensors) {
  DeviceBuffer wf(cpu_backend(), DType::f32, 128), packed(cpu_backend(), DType::i32, int64_t(nf4::tensor_bytes(2, 64) / 4));
  const Tensor Q = cpu_backend().view(packed.data(), DType::nf4, 2, 64);
  EXPECT_THROW(cpu_backend().convert(Q, wf.tensor()), Error);  // [1, 128] is not [2, 64]
  EXPECT_THROW(DeviceBuffer(cpu_backend(), DType::nf4, 128), Error);
}

TEST(Nf4, QloraModelNeverHoldsItsProjectionsInBf16) {
  ModelConfig c = testing::tiny_config();
  c.hidden_size = 256, c.intermediate_size = 768, c.num_hidden_layers = 4;
  c.num_attention_heads = 4, c.num_key_value_heads = 4, c.vocab_size = 64;
  LoraConfig lora;
  lora.enabled = true, lora.rank = 4, lora.base_dtype = "nf4";
  const size_t start = memory_stats::current_bytes();
  Transformer m(c, Precision::bf16, lora);
  m.init_weights(1);
  int64_t projections = 0;
  for (const Param& p : m.base().params()) {
    if (!p.quant) continue;
    EXPECT_EQ(p.master, nullptr) << p.name;
    EXPECT_EQ(p.compute, nullptr) << p.name;
    projections += p.numel;
  }
  ASSERT_EQ(projections, 4 * (4 * 256 * 256 + 3 * 256 * 768));
  // 4.375 bits a weight on rows of 256, 4.21 on rows of 768: a quarter of bf16 and a bit.
  EXPECT_LT(double(m.base().quant_bytes()), 0.28 * 2.0 * double(projections));
  const auto batch = testing::tiny_batch(c.vocab_size, 3, 2, 8);
  memory_stats::reset_peak();
  m.forward_backward(batch.input(), 1.0f);
  // Everything the forward and backward allocated: stores, the activation arena and at most one
  // dequantised projection (768 x 256 bf16) -- far below the projections in bf16 (6.8 MB).
  const size_t grown = memory_stats::peak_bytes() - start;
  // (512 KiB: the small buffers beside the arena, rope tables and loss rows among them; they came
  // to 297 KiB when measured.)
  const size_t allowed = m.base().bytes() + m.adapters().bytes() + m.activation_bytes() + 768 * 256 * 2 + (512 << 10);
  std::printf("QLoRA model: projections %.2f MB in bf16, %.2f MB as NF4; peak growth %.2f MB\n",
              2.0 * double(projections) / 1e6, double(m.base().quant_bytes()) / 1e6, double(grown) / 1e6);
  EXPECT_LE(grown, allowed);
  EXPECT_LT(double(grown), 2.0 * double(projections));
}

}  // namespace
}  // namespace mt

#include "core/nf4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace mt::nf4 {

// Acklam's rational approximation (relative error < 1.2e-9), then one Halley step on erfc, which
// brings it to double precision.
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  double x;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - lo) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// The paper's construction (Appendix E): the 2^(k-1) = 8 positive values are quantiles of N(0, 1)
// at 8 evenly spaced probabilities from delta up to 1/2 (exclusive), the 7 negative ones the same
// from 7 points, and zero; delta = (1 - 1/(2*15) + 1 - 1/(2*16)) / 2 keeps the end quantiles
// finite. Dividing by the largest maps them onto [-1, 1].
const std::array<float, 16>& codebook() {
  static const std::array<float, 16> table = [] {
    const double delta = 0.5 * ((1 - 1.0 / 30) + (1 - 1.0 / 32));
    std::vector<double> v;
    for (int i = 0; i < 8; ++i) v.push_back(normal_quantile(delta + (0.5 - delta) * i / 8));
    for (int i = 0; i < 7; ++i) v.push_back(-normal_quantile(delta + (0.5 - delta) * i / 7));
    v.push_back(0.0);
    std::sort(v.begin(), v.end());
    const double top = v.back();
    std::array<float, 16> t{};
    for (int i = 0; i < 16; ++i) t[size_t(i)] = float(v[size_t(i)] / top);
    return t;
  }();
  return table;
}

uint8_t nearest_code(float x) {
  const auto& cb = codebook();
  // Midpoints between neighbours decide; ties go to the larger code.
  uint8_t code = 0;
  while (code < 15 && x >= 0.5f * (cb[code] + cb[code + 1])) ++code;
  return code;
}

float RowView::scale(int64_t group) const {
  float v;
  std::memcpy(&v, base + 8 * group, 4);
  return v;
}

float RowView::offset(int64_t group) const {
  float v;
  std::memcpy(&v, base + 8 * group + 4, 4);
  return v;
}

// A row's blocks fall into groups_per_row equal groups (the last may be shorter), not groups of
// exactly kGroup from the row's start: then tensor parallelism's power-of-two column splits of the
// widest rows (Llama 3.1 405B's 832 blocks: 4 groups of 208) fall between groups, or inside one.
namespace {
int64_t group_size(int64_t cols) {
  const int64_t nb = blocks_per_row(cols), ng = groups_per_row(cols);
  return (nb + ng - 1) / ng;
}
int64_t group_of(int64_t cols, int64_t block) { return block / group_size(cols); }
}  // namespace

float RowView::absmax(int64_t block) const {
  const int64_t g = group_of(cols, block);
  return offset(g) + scale(g) * float(int(qmax(block)) - 128);
}

namespace {

// One row's record for its columns [c0, c1); statistics over the whole row.
void quantize_row(uint8_t* rec, const float* src, int64_t cols, int64_t c0, int64_t c1) {
  const int64_t n = c1 - c0, nb = blocks_per_row(n), ng = groups_per_row(n), b0 = c0 / kBlock;
  const int64_t all_blocks = blocks_per_row(cols);
  std::memset(rec, 0, size_t(row_bytes(n)));
  std::vector<float> amax(size_t(all_blocks), 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    amax[size_t(i / kBlock)] = std::max(amax[size_t(i / kBlock)], std::abs(src[i]));
  // Double quantisation: each group's maxima, centred on their mean, in 8 bits on its own scale.
  std::vector<float> offsets, scales;
  const int64_t whole_group = group_size(cols);
  for (int64_t g0 = 0; g0 < all_blocks; g0 += whole_group) {
    const int64_t g1 = std::min(all_blocks, g0 + whole_group);
    double sum = 0;
    for (int64_t b = g0; b < g1; ++b) sum += amax[size_t(b)];
    const float offset = float(sum / double(g1 - g0));
    float spread = 0;
    for (int64_t b = g0; b < g1; ++b) spread = std::max(spread, std::abs(amax[size_t(b)] - offset));
    offsets.push_back(offset), scales.push_back(spread / 127.0f);
  }
  for (int64_t g = 0; g < ng; ++g) {
    const size_t whole = size_t((b0 + g * group_size(n)) / whole_group);
    std::memcpy(rec + 8 * g, &scales[whole], 4);
    std::memcpy(rec + 8 * g + 4, &offsets[whole], 4);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const size_t whole = size_t((b0 + b) / whole_group);
    const float scale = scales[whole], a = amax[size_t(b0 + b)];
    const float q = scale > 0 ? std::nearbyint((a - offsets[whole]) / scale) : 0.0f;
    rec[8 * ng + b] = uint8_t(int(std::clamp(q, -127.0f, 127.0f)) + 128);
  }
  // Codes against the exact maxima (the paper's order: the first level sees the true scale).
  uint8_t* codes = rec + 8 * ng + nb;
  for (int64_t i = 0; i < n; ++i) {
    const float a = amax[size_t((c0 + i) / kBlock)];
    const uint8_t c = nearest_code(a > 0 ? src[c0 + i] / a : 0.0f);
    codes[i / 2] |= uint8_t(i % 2 == 0 ? c << 4 : c);
  }
  // Padding weights are zero: their code is 7 (the exact zero), not 0 (-1).
  for (int64_t i = n; i < nb * kBlock; ++i) codes[i / 2] |= uint8_t(i % 2 == 0 ? 7 << 4 : 7);
}

template <class T>
void dequantize(T* dst, const uint8_t* src, int64_t rows, int64_t cols) {
  const auto& cb = codebook();
  const int64_t nb = blocks_per_row(cols), ng = groups_per_row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const RowView row{src + r * row_bytes(cols), cols};
    const uint8_t* codes = row.base + 8 * ng + nb;
    T* out = dst + r * cols;
    for (int64_t b = 0; b < nb; ++b) {
      // The block's 16 values once, then two weights a byte.
      const float a = row.absmax(b);
      T value[16];
      for (int c = 0; c < 16; ++c) value[c] = from_float<T>(cb[size_t(c)] * a);
      const int64_t i0 = b * kBlock, i1 = std::min(cols, i0 + kBlock);
      for (int64_t i = i0; i + 1 < i1; i += 2) {
        const uint8_t byte = codes[i / 2];
        out[i] = value[byte >> 4], out[i + 1] = value[byte & 15];
      }
      if ((i1 - i0) % 2) out[i1 - 1] = value[codes[(i1 - 1) / 2] >> 4];
    }
  }
}

}  // namespace

void quantize_rows(uint8_t* dst, const float* src, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) quantize_row(dst + r * row_bytes(cols), src + r * cols, cols, 0, cols);
}

bool slice_keeps_groups(int64_t cols, int64_t c0, int64_t c1) {
  if (c0 < 0 || c1 > cols || c0 >= c1 || c0 % kBlock != 0 || (c1 != cols && c1 % kBlock != 0)) return false;
  // Each group of the slice must lie in one group of the row (it stores that group's statistics).
  const int64_t b0 = c0 / kBlock, nb = blocks_per_row(c1 - c0), local = group_size(c1 - c0), whole = group_size(cols);
  for (int64_t first = 0; first < nb; first += local) {
    const int64_t last = std::min(nb, first + local) - 1;
    if ((b0 + first) / whole != (b0 + last) / whole) return false;
  }
  return true;
}

void quantize_row_slice(uint8_t* dst, const float* src, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  MT_CHECK(slice_keeps_groups(cols, c0, c1), "nf4: columns cut a block or a double-quantisation group");
  for (int64_t r = 0; r < rows; ++r) quantize_row(dst + r * row_bytes(c1 - c0), src + r * cols, cols, c0, c1);
}

void dequantize_rows(float* dst, const uint8_t* src, int64_t rows, int64_t cols) {
  dequantize(dst, src, rows, cols);
}

void dequantize_rows(bf16* dst, const uint8_t* src, int64_t rows, int64_t cols) {
  dequantize(dst, src, rows, cols);
}

}  // namespace mt::nf4

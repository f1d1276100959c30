#include "parallel/context_parallel.h"

#include <string>

#include "core/error.h"
#include "core/profile.h"

namespace mt::parallel {

namespace {

// Which chunk of the 2 cp chunks of a row is the half-th (0 or 1) of cp rank `rank`'s share.
int64_t chunk_of_share(int64_t cp, int64_t rank, int64_t half) { return half == 0 ? rank : 2 * cp - 1 - rank; }

}  // namespace

PackedBatch sequence_share(const PackedBatch& rows, int64_t cp, int64_t rank) {
  if (cp == 1) return rows;
  const int64_t B = rows.batch_size, T = rows.seq_len;
  if (T % (2 * cp) != 0)
    fail("train.seq_len (" + std::to_string(T) + ") must be divisible by 2 x cp = " + std::to_string(2 * cp) +
         " (context parallelism cuts every sequence into 2 cp equal chunks)");
  const int64_t C = T / (2 * cp), share = 2 * C;
  PackedBatch out;
  out.batch_size = B, out.seq_len = share;
  auto cut = [&](const std::vector<int32_t>& v, std::vector<int32_t>& dst) {
    if (v.empty()) return;
    dst.resize(size_t(B * share));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t from = b * T + chunk_of_share(cp, rank, half) * C, to = b * share + half * C;
        std::copy(v.begin() + from, v.begin() + from + C, dst.begin() + to);
      }
  };
  cut(rows.tokens, out.tokens);
  cut(rows.targets, out.targets);
  cut(rows.segments, out.segments);
  if (rows.positions.empty()) {  // the true positions 0..T-1 of every row, cut like the rest
    std::vector<int32_t> whole(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) whole[size_t(i)] = int32_t(i % T);
    cut(whole, out.positions);
  } else {
    cut(rows.positions, out.positions);
  }
  return out;
}

Tensor ContextParallel::gather_rows(DeviceBuffer& rows, const Tensor& share, int64_t B) {
  const int64_t cp = group_.size(), n = share.numel(), width = share.cols, T = share.rows / B;
  const int64_t C = T / 2;
  const int64_t words = (cp * n * int64_t(dtype_size(share.dtype)) + 3) / 4;  // held as i32 words
  if (gathered_.numel() < words) gathered_.resize(backend_, DType::i32, words);
  if (rows.numel() != cp * n || rows.dtype() != share.dtype) rows.resize(backend_, share.dtype, cp * n);
  const Tensor all{gathered_.data(), share.dtype, cp * share.rows, width, share.device};
  {
    MT_PROFILE("cp all-gather");
    group_.device().all_gather_bytes(share.data, all.data, n, int(dtype_size(share.dtype)));
    bytes_sent_ += n * int64_t(dtype_size(share.dtype)) * (cp - 1);
  }
  const Tensor whole{rows.data(), share.dtype, cp * share.rows, width, share.device};
  // all: [rank][b][half][C] rows; whole: [b][chunk][C] rows, chunks in sequence order.
  for (int64_t r = 0; r < cp; ++r)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t half = 0; half < 2; ++half)
        backend_.copy(whole.rows_slice(b * cp * T + chunk_of_share(cp, r, half) * C, C),
                      all.rows_slice((r * B + b) * T + half * C, C));
  return whole;
}

void ContextParallel::scatter_sum(const Tensor& share, const Tensor& whole, int64_t B) {
  const int64_t cp = group_.size(), n = share.numel(), width = share.cols, T = share.rows / B;
  const int64_t C = T / 2;
  if (send_.numel() < cp * n) send_.resize(backend_, DType::f32, cp * n);
  if (recv_.numel() < n) recv_.resize(backend_, DType::f32, n);
  const Tensor all = send_.slice(0, cp * share.rows, width);
  // The inverse of gather_rows' order, f32 throughout.
  for (int64_t r = 0; r < cp; ++r)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t half = 0; half < 2; ++half)
        backend_.copy(all.rows_slice((r * B + b) * T + half * C, C),
                         whole.rows_slice(b * cp * T + chunk_of_share(cp, r, half) * C, C));
  {
    MT_PROFILE("cp reduce-scatter");
    group_.device().reduce_scatter_sum(send_.as<float>(), recv_.as<float>(), n);
    bytes_sent_ += n * 4 * (cp - 1);
  }
  backend_.convert(share, recv_.slice(0, share.rows, width));
}

AttentionDims ContextParallel::whole_dims(const AttentionDims& d) const {
  MT_CHECK(d.cp == 1, "context-parallel attention is given a rank's share");
  AttentionDims whole = d;
  whole.cp = group_.size(), whole.cp_rank = group_.rank();
  return whole;
}

void ContextParallel::attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                        const Tensor& k, const Tensor& v, const Tensor& segments,
                                        const AttentionDims& d) {
  const Tensor keys = gather_rows(keys_, k, d.B), values = gather_rows(values_, v, d.B);
  const Tensor docs = segments ? gather_rows(documents_, segments.view(segments.numel(), 1), d.B) : Tensor{};
  backend_.attention_forward(out, lse, q, keys, values, docs, whole_dims(d));
}

// The keys and values are gathered again rather than kept from the forward: one layer's whole
// rows at a time, not every layer's (Llama 3's choice too).
void ContextParallel::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                         const Tensor& dout, const Tensor& out, const Tensor& lse,
                                         const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& segments, const AttentionDims& d) {
  const Tensor keys = gather_rows(keys_, k, d.B), values = gather_rows(values_, v, d.B);
  const Tensor docs = segments ? gather_rows(documents_, segments.view(segments.numel(), 1), d.B) : Tensor{};
  // f32 whatever the keys' dtype: each rank's partial gradient of a key is summed over the ranks
  // before it is rounded once to the keys' dtype, as one rank's kernel rounds its own f32 sum
  // (bf16 partials rounded before the sum drifted 1.3e-3 from one rank's losses).
  if (dkeys_.numel() != keys.numel()) {
    dkeys_.resize(backend_, DType::f32, keys.numel());
    dvalues_.resize(backend_, DType::f32, keys.numel());
  }
  const Tensor dkeys = dkeys_.slice(0, keys.rows, keys.cols), dvalues = dvalues_.slice(0, keys.rows, keys.cols);
  backend_.attention_backward(dq, dkeys, dvalues, dout, out, lse, q, keys, values, docs, whole_dims(d));
  scatter_sum(dk, dkeys, d.B);
  scatter_sum(dv, dvalues, d.B);
}

}  // namespace mt::parallel

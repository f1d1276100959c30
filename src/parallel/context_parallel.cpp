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
  cut(rows.padding, out.padding);
  if (rows.positions.empty()) {  // the true positions 0..T-1 of every row, cut like the rest
    std::vector<int32_t> whole(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) whole[size_t(i)] = int32_t(i % T);
    cut(whole, out.positions);
  } else {
    cut(rows.positions, out.positions);
  }
  return out;
}

void ContextParallel::reserve_gradients(int64_t n) {
  const int64_t whole = group_.size() * n;
  if (dkeys_.numel() != whole) {
    dkeys_.resize(backend_, DType::f32, whole);
    dvalues_.resize(backend_, DType::f32, whole);
  }
}

void ContextParallel::start_one(Gather& g, void* staging, const Tensor& share) {
  const int64_t cp = group_.size(), n = share.numel(), elem = int64_t(dtype_size(share.dtype));
  MT_PROFILE("cp all-gather");
  g.staging = staging, g.share = share;
  g.request = group_.device().iall_gather_bytes(share.data, staging, n, int(elem));
  bytes_sent_ += n * elem * (cp - 1);
}

void ContextParallel::start(const Tensor& k, const Tensor& v, const Tensor& segments) {
  MT_CHECK(!inflight_.pending(), "context-parallel gathers issued twice");
  const int64_t cp = group_.size(), n = k.numel();
  const int64_t words = (cp * n * int64_t(dtype_size(k.dtype)) + 3) / 4;  // held as i32 words
  if (gathered_.numel() < words) gathered_.resize(backend_, DType::i32, words);
  // The f32 gradient buffers hold cp n words each: room for the values (<= 4 bytes an element)
  // and for the documents (one i32 a token, n / width of them).
  reserve_gradients(n);
  start_one(inflight_.k, gathered_.data(), k);
  start_one(inflight_.v, dvalues_.data(), v);
  if (segments) start_one(inflight_.docs, dkeys_.data(), segments.view(segments.numel(), 1));
}

Tensor ContextParallel::finish_one(Gather& g, DeviceBuffer& rows, int64_t B) {
  const Tensor& share = g.share;
  const int64_t cp = group_.size(), n = share.numel(), width = share.cols, T = share.rows / B;
  const int64_t C = T / 2;
  {
    MT_PROFILE("cp all-gather");
    g.request->wait();
    g.request.reset();
  }
  if (rows.numel() != cp * n || rows.dtype() != share.dtype) rows.resize(backend_, share.dtype, cp * n);
  const Tensor all{g.staging, share.dtype, cp * share.rows, width, share.device};
  const Tensor whole{rows.data(), share.dtype, cp * share.rows, width, share.device};
  // all: [rank][b][half][C] rows; whole: [b][chunk][C] rows, chunks in sequence order.
  for (int64_t r = 0; r < cp; ++r)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t half = 0; half < 2; ++half)
        backend_.copy(whole.rows_slice(b * cp * T + chunk_of_share(cp, r, half) * C, C),
                      all.rows_slice((r * B + b) * T + half * C, C));
  return whole;
}

ContextParallel::Whole ContextParallel::finish(int64_t B) {
  Whole w;
  w.keys = finish_one(inflight_.k, keys_, B);
  w.values = finish_one(inflight_.v, values_, B);
  if (inflight_.docs.request) w.docs = finish_one(inflight_.docs, documents_, B);
  inflight_ = Gathers{};
  return w;
}

void ContextParallel::scatter_sum(const Tensor& dk, const Tensor& dv, int64_t B) {
  const int64_t cp = group_.size(), n = dk.numel(), width = dk.cols, T = dk.rows / B;
  const int64_t C = T / 2;
  if (send_.numel() < cp * n) send_.resize(backend_, DType::f32, cp * n);
  if (recv_.numel() < n) recv_.resize(backend_, DType::f32, n);
  // The inverse of finish_one's order, f32 throughout: every rank's block of `whole` into `all`.
  auto by_rank = [&](const Tensor& all, const Tensor& whole) {
    for (int64_t r = 0; r < cp; ++r)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t half = 0; half < 2; ++half)
          backend_.copy(all.rows_slice((r * B + b) * T + half * C, C),
                        whole.rows_slice(b * cp * T + chunk_of_share(cp, r, half) * C, C));
  };
  const Tensor dkeys = dkeys_.slice(0, cp * dk.rows, width), dvalues = dvalues_.slice(0, cp * dk.rows, width);
  // Both sums in flight at once without more memory: dK is sent from send_; dkeys_, free once
  // copied there, sends dV; and dvalues_, free once copied there, receives dV's sum.
  Request sums[2];
  by_rank(send_.slice(0, cp * dk.rows, width), dkeys);
  {
    MT_PROFILE("cp reduce-scatter");
    sums[0] = group_.device().ireduce_scatter_sum(send_.as<float>(), recv_.as<float>(), n);
  }
  by_rank(dkeys, dvalues);
  {
    MT_PROFILE("cp reduce-scatter");
    sums[1] = group_.device().ireduce_scatter_sum(dkeys_.as<float>(), dvalues_.as<float>(), n);
    bytes_sent_ += 2 * n * 4 * (cp - 1);
    sums[0]->wait();
    sums[1]->wait();
  }
  backend_.convert(dk, recv_.slice(0, dk.rows, width));
  backend_.convert(dv, dvalues_.slice(0, dk.rows, width));
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
  start(k, v, segments);  // the three gathers travel together
  const Whole w = finish(d.B);
  backend_.attention_forward(out, lse, q, w.keys, w.values, w.docs, whole_dims(d));
}

void ContextParallel::prefetch_backward(const Tensor& k, const Tensor& v, const Tensor& segments,
                                        const AttentionDims&) {
  start(k, v, segments);
}

// The keys and values are gathered again rather than kept from the forward: one layer's whole
// rows at a time, not every layer's (Llama 3's choice too). The gathers were issued by
// prefetch_backward when the block called it; otherwise here.
void ContextParallel::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                         const Tensor& dout, const Tensor& out, const Tensor& lse,
                                         const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& segments, const AttentionDims& d) {
  if (!inflight_.pending()) start(k, v, segments);
  MT_CHECK(inflight_.k.share.data == k.data && inflight_.v.share.data == v.data &&
               bool(inflight_.docs.request) == bool(segments),
           "context-parallel backward prefetched other keys than it is given");
  const Whole w = finish(d.B);
  // f32 whatever the keys' dtype: each rank's partial gradient of a key is summed over the ranks
  // before it is rounded once to the keys' dtype, as one rank's kernel rounds its own f32 sum
  // (bf16 partials rounded before the sum drifted 1.3e-3 from one rank's losses).
  const Tensor dkeys = dkeys_.slice(0, w.keys.rows, w.keys.cols), dvalues = dvalues_.slice(0, w.keys.rows, w.keys.cols);
  backend_.attention_backward(dq, dkeys, dvalues, dout, out, lse, q, w.keys, w.values, w.docs, whole_dims(d));
  scatter_sum(dk, dv, d.B);
}

}  // namespace mt::parallel

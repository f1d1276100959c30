// A test backend whose memory the host cannot read: what a GPU's memory is to host code. allocate()
// hands out addresses in a reserved PROT_NONE region, so any host dereference of a tensor's data
// (a memcpy, .as<float>() read, std::copy) ends the test process with SIGSEGV. The bytes live at
// the same offset in a shadow mapping only this backend touches: copy_to_host / copy_from_host /
// copy move them, and every op translates its tensors' addresses to the shadow and runs the inner
// backend's kernel there (the CPU kernels by default, so results are bit for bit the CPU's).
//
// It proves that the code between the model and the files (checkpoints, exports, the pipeline's
// stage boundaries) moves tensor memory only through the Backend interface.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor_checks.h"
#include "core/error.h"
#include "core/memory_stats.h"

namespace mt::testing {

class FarMemoryBackend : public Backend {
 public:
  explicit FarMemoryBackend(Backend& inner = cpu_backend(), size_t capacity = size_t(4) << 30)
      : inner_(inner), capacity_(capacity) {
    far_ = static_cast<char*>(map(PROT_NONE));
    near_ = static_cast<char*>(map(PROT_READ | PROT_WRITE));
    free_[0] = capacity_;
  }
  ~FarMemoryBackend() override {
    ::munmap(far_, capacity_);
    ::munmap(near_, capacity_);
  }
  FarMemoryBackend(const FarMemoryBackend&) = delete;
  FarMemoryBackend& operator=(const FarMemoryBackend&) = delete;

  const char* name() const override { return "far-memory (test)"; }
  // A device kind the host code must treat as not its own; index 7 so that it is no real GPU's.
  Device device() const override { return {DeviceKind::cuda, 7}; }

  // Bytes allocated now, and the most at once: a test checks that the run lived here and freed
  // what it allocated.
  size_t bytes_in_use() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }

  // ---- memory ---------------------------------------------------------------------------------
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
      if (it->second < need) continue;
      const size_t offset = it->first, left = it->second - need;
      free_.erase(it);
      if (left) free_[offset + need] = left;
      used_[offset] = need;
      std::memset(near_ + offset, 0, need);
      in_use_ += need;
      peak_ = std::max(peak_, in_use_);
      memory_stats::add(need);
      return far_ + offset;
    }
    throw std::bad_alloc();
  }
  void deallocate(void* p, size_t) override {
    if (!p) return;
    const size_t offset = size_t(static_cast<char*>(p) - far_);
    const auto it = used_.find(offset);
    MT_CHECK(it != used_.end(), "far-memory: deallocate of an address it did not allocate");
    size_t begin = offset, size = it->second;
    in_use_ -= size;
    memory_stats::sub(size);
    used_.erase(it);
    // Coalesce with the free neighbours on both sides.
    auto next = free_.lower_bound(begin);
    if (next != free_.end() && next->first == begin + size) size += next->second, next = free_.erase(next);
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == begin) begin = prev->first, size += prev->second, free_.erase(prev);
    }
    free_[begin] = size;
  }
  void copy_from_host(const Tensor& dst, const void* src) override {
    const Tensor d = near(dst, "copy_from_host");
    if (d.bytes()) std::memcpy(d.data, src, d.bytes());
  }
  void copy_to_host(void* dst, const Tensor& src) override {
    const Tensor s = near(src, "copy_to_host");
    if (s.bytes()) std::memcpy(dst, s.data, s.bytes());
  }
  void copy(const Tensor& dst, const Tensor& src) override { inner_.copy(near(dst, "copy"), near(src, "copy")); }
  void fill(const Tensor& dst, float value) override { inner_.fill(near(dst, "fill"), value); }

  // ---- ordering -------------------------------------------------------------------------------
  Event record() override { return inner_.record(); }
  void wait(Event e) override { inner_.wait(e); }
  void synchronize() override { inner_.synchronize(); }

  // ---- ops: the inner backend's, on the shadow ------------------------------------------------
  void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, float alpha,
              bool accumulate) override {
    inner_.matmul(near(c, "matmul"), near(a, "matmul"), trans_a, near(b, "matmul"), trans_b, alpha, accumulate);
  }
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& segments, const AttentionDims& d) override {
    const char* op = "attention_forward";
    inner_.attention_forward(near(out, op), near(lse, op), near(q, op), near(k, op), near(v, op),
                             near(segments, op), d);
  }
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                          const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& segments, const AttentionDims& d) override {
    const char* op = "attention_backward";
    inner_.attention_backward(near(dq, op), near(dk, op), near(dv, op), near(dout, op), near(out, op),
                              near(lse, op), near(q, op), near(k, op), near(v, op), near(segments, op), d);
  }
  void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        int64_t len, int64_t Hq, int64_t Hkv, float scale = 0.0f) override {
    const char* op = "decode_attention";
    inner_.decode_attention(near(out, op), near(q, op), near(k_cache, op), near(v_cache, op), len, Hq, Hkv, scale);
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       float eps, float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_forward";
    inner_.rmsnorm_forward(near(out, op), near(rstd, op), near(x, op), near(w, op), eps, weight_offset);
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& rstd, float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward";
    inner_.rmsnorm_backward(near(dx, op), near(dw, op), near(dout, op), near(x, op), near(w, op), near(rstd, op),
                            weight_offset);
  }
  void residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                const Tensor& delta, const Tensor& w, float eps, float weight_offset = 0.0f) override {
    const char* op = "residual_rmsnorm_forward";
    inner_.residual_rmsnorm_forward(near(y, op), near(out, op), near(rstd, op), near(x, op), near(delta, op),
                                    near(w, op), eps, weight_offset);
  }
  void rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd, float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward_convert";
    inner_.rmsnorm_backward_convert(near(dx, op), near(dx_c, op), near(dw, op), near(dout, op), near(x, op),
                                    near(w, op), near(rstd, op), weight_offset);
  }
  void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                        float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_row_dots";
    inner_.rmsnorm_row_dots(near(dots, op), near(x, op), near(y, op), near(w, op), weight_offset);
  }
  void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                              int64_t width, float eps, float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_forward_summed";
    inner_.rmsnorm_forward_summed(near(out, op), near(rstd, op), near(x, op), near(w, op), width, eps, weight_offset);
  }
  void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                               float weight_offset = 0.0f) override {
    const char* op = "rmsnorm_backward_summed";
    inner_.rmsnorm_backward_summed(near(dx, op), near(dw, op), near(dout, op), near(x, op), near(w, op),
                                   near(rstd, op), near(dots, op), width, weight_offset);
  }
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& w, const Tensor& b, float eps) override {
    const char* op = "layernorm_forward";
    inner_.layernorm_forward(near(out, op), near(mean, op), near(rstd, op), near(x, op), near(w, op),
                             near(b, op), eps);
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) override {
    const char* op = "layernorm_backward";
    inner_.layernorm_backward(near(dx, op), near(dw, op), near(db, op), near(dout, op), near(x, op),
                              near(w, op), near(mean, op), near(rstd, op));
  }
  void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                    int64_t heads) override {
    const char* op = "rope_forward";
    inner_.rope_forward(near(x, op), near(cos, op), near(sin, op), near(positions, op), heads);
  }
  void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                     int64_t heads) override {
    const char* op = "rope_backward";
    inner_.rope_backward(near(dx, op), near(cos, op), near(sin, op), near(positions, op), heads);
  }
  void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    inner_.swiglu_forward(near(h, "swiglu"), near(gate, "swiglu"), near(up, "swiglu"));
  }
  void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                       const Tensor& up) override {
    const char* op = "swiglu_backward";
    inner_.swiglu_backward(near(dgate, op), near(dup, op), near(dh, op), near(gate, op), near(up, op));
  }
  void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override {
    inner_.geglu_forward(near(h, "geglu"), near(gate, "geglu"), near(up, "geglu"));
  }
  void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                      const Tensor& up) override {
    const char* op = "geglu_backward";
    inner_.geglu_backward(near(dgate, op), near(dup, op), near(dh, op), near(gate, op), near(up, op));
  }
  void gelu_forward(const Tensor& h, const Tensor& x) override {
    inner_.gelu_forward(near(h, "gelu_forward"), near(x, "gelu_forward"));
  }
  void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) override {
    const char* op = "gelu_backward";
    inner_.gelu_backward(near(dx, op), near(dh, op), near(x, op));
  }
  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table, int64_t row0) override {
    const char* op = "embedding_forward";
    inner_.embedding_forward(near(out, op), near(tokens, op), near(table, op), row0);
  }
  void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout, int64_t row0) override {
    const char* op = "embedding_backward";
    inner_.embedding_backward(near(dtable, op), near(tokens, op), near(dout, op), row0);
  }
  void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) override {
    const char* op = "gather_rows";
    inner_.gather_rows(near(dst, op), near(src, op), near(rows, op));
  }
  void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots, const Tensor& weights, int64_t k,
                    bool accumulate) override {
    const char* op = "combine_rows";
    inner_.combine_rows(near(out, op), near(src, op), near(slots, op), near(weights, op), k, accumulate);
  }
  void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout, const Tensor& src,
                             const Tensor& slots, const Tensor& weights, int64_t k) override {
    const char* op = "combine_rows_backward";
    inner_.combine_rows_backward(near(dsrc, op), near(dweights, op), near(dout, op), near(src, op), near(slots, op),
                                 near(weights, op), k);
  }
  double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                       float grad_scale) override {
    const char* op = "cross_entropy";
    return inner_.cross_entropy(near(losses, op), near(dlogits, op), near(logits, op), near(targets, op),
                                grad_scale);
  }
  void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits, const Tensor& targets) override {
    const char* op = "cross_entropy_row_max";
    inner_.cross_entropy_row_max(near(row_max, op), near(logits, op), near(targets, op));
  }
  void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                              const Tensor& row_max, int64_t v0) override {
    const char* op = "cross_entropy_row_sums";
    inner_.cross_entropy_row_sums(near(sums, op), near(logits, op), near(targets, op), near(row_max, op), v0);
  }
  double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                              const Tensor& targets, const Tensor& row_max, const Tensor& sums, int64_t v0,
                              float grad_scale) override {
    const char* op = "cross_entropy_finish";
    return inner_.cross_entropy_finish(near(losses, op), near(dlogits, op), near(logits, op), near(targets, op),
                                       near(row_max, op), near(sums, op), v0, grad_scale);
  }
  void bias_add(const Tensor& y, const Tensor& b) override {
    inner_.bias_add(near(y, "bias_add"), near(b, "bias_add"));
  }
  void bias_backward(const Tensor& db, const Tensor& dy) override {
    inner_.bias_backward(near(db, "bias_backward"), near(dy, "bias_backward"));
  }
  void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) override {
    inner_.residual_add(near(y, "residual_add"), near(x, "residual_add"), near(delta, "residual_add"));
  }
  void convert(const Tensor& dst, const Tensor& src) override {
    inner_.convert(near(dst, "convert"), near(src, "convert"));
  }
  void add(const Tensor& dst, const Tensor& src) override { inner_.add(near(dst, "add"), near(src, "add")); }
  void scale(const Tensor& x, float factor) override { inner_.scale(near(x, "scale"), factor); }
  void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) override {
    inner_.dropout(near(y, "dropout"), near(x, "dropout"), mask, accumulate);
  }
  void split_columns(const Tensor& src, std::span<const Tensor> blocks) override {
    inner_.split_columns(near(src, "split_columns"), near_all(blocks, "split_columns"));
  }
  void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) override {
    inner_.concat_columns(near(dst, "concat_columns"), near_all(blocks, "concat_columns"));
  }
  void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst, const TensorBox& dst_box,
                const TensorBox& region) override {
    inner_.copy_box(near(src, "copy_box"), src_box, near(dst, "copy_box"), dst_box, region);
  }
  void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad, const Tensor& m,
                    const Tensor& v, bool decay, const AdamWHyper& h) override {
    const char* op = "adamw_update";
    inner_.adamw_update(near(master, op), near(master16, op), near(grad, op), near(m, op), near(v, op), decay, h);
  }
  double sum_squares(const Tensor& x) override { return inner_.sum_squares(near(x, "sum_squares")); }

 private:
  static constexpr size_t kAlign = 64;

  void* map(int protection) {
    void* p = ::mmap(nullptr, capacity_, protection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  // The tensor as the inner backend sees it: the same bytes at their shadow address. An empty
  // tensor stays empty; one this backend did not allocate is refused as any backend refuses it.
  Tensor near(const Tensor& t, const char* op) const {
    if (!t) return Tensor(nullptr, t.dtype, t.rows, t.cols, inner_.device());
    check_device(t, device(), op);
    const char* p = static_cast<const char*>(t.data);
    MT_CHECK(p >= far_ && p + t.bytes() <= far_ + capacity_,
             std::string("far-memory: ") + op + " given a tensor outside its memory");
    return {near_ + (p - far_), t.dtype, t.rows, t.cols, inner_.device()};
  }
  std::vector<Tensor> near_all(std::span<const Tensor> ts, const char* op) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(near(t, op));
    return out;
  }

  Backend& inner_;
  const size_t capacity_;
  char* far_ = nullptr;   // PROT_NONE: what the host is handed
  char* near_ = nullptr;  // the bytes, at the same offsets
  std::map<size_t, size_t> free_, used_;  // offset -> bytes
  size_t in_use_ = 0, peak_ = 0;
};

}  // namespace mt::testing

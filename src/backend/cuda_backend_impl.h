// CudaBackend's declaration, shared by its source files (cuda_backend.cu: device, memory and
// ordering; cuda_backend_ops.cu: the ops). Only CUDA sources include it: callers see
// cuda_backend.h, which names no CUDA type.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_backend_options.h"
#include "backend/dequant_scratch.h"
#include "backend/device_buffer.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/gpu_runtime.h"

namespace mt {

// Owns the backend's stream; declared first in CudaBackend so that it is destroyed last, after
// every buffer has been freed on it.
class CudaStream {
 public:
  explicit CudaStream(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index, const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  const char* name() const override { return "cuda"; }
  Device device() const override { return {DeviceKind::cuda, index_}; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, float value) override;

  Event record() override;
  void wait(Event e) override;
  void synchronize() override;
  void* native_stream() override { return stream_.get(); }

  void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
              float alpha, bool accumulate) override;
  void matmul_group(std::span<const MatmulProduct> products, bool trans_a, bool trans_b,
                    float alpha, bool accumulate) override;  // cuda_backend_group.cu
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& segments,
                         const AttentionDims& d) override;
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                          const Tensor& dout, const Tensor& out, const Tensor& lse,
                          const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& segments, const AttentionDims& d) override;
  void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                        const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv,
                        float scale = 0.0f) override;
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       float eps, float weight_offset = 0.0f) override;
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& rstd, float weight_offset = 0.0f) override;
  void residual_rmsnorm_forward(const Tensor& y, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                const Tensor& delta, const Tensor& w, float eps,
                                float weight_offset = 0.0f) override;
  void rmsnorm_backward_convert(const Tensor& dx, const Tensor& dx_c, const Tensor& dw, const Tensor& dout,
                                const Tensor& x, const Tensor& w, const Tensor& rstd,
                                float weight_offset = 0.0f) override;
  void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w,
                        float weight_offset = 0.0f) override;
  void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                              int64_t width, float eps, float weight_offset = 0.0f) override;
  void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                               float weight_offset = 0.0f) override;
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& w, const Tensor& b, float eps) override;
  void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                          const Tensor& x, const Tensor& w, const Tensor& mean,
                          const Tensor& rstd) override;
  void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                    const Tensor& positions, int64_t heads) override;
  void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                     const Tensor& positions, int64_t heads) override;
  void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override;
  void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                       const Tensor& gate, const Tensor& up) override;
  void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) override;
  void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh,
                      const Tensor& gate, const Tensor& up) override;
  void gelu_forward(const Tensor& h, const Tensor& x) override;
  void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) override;
  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                         int64_t row0) override;
  void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t row0) override;
  void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) override;
  void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots,
                    const Tensor& weights, int64_t k, bool accumulate) override;
  void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                             const Tensor& src, const Tensor& slots, const Tensor& weights,
                             int64_t k) override;
  double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                       const Tensor& targets, float grad_scale) override;
  void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits,
                             const Tensor& targets) override;
  void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                              const Tensor& row_max, int64_t v0) override;
  double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                              const Tensor& targets, const Tensor& row_max, const Tensor& sums,
                              int64_t v0, float grad_scale) override;
  void bias_add(const Tensor& y, const Tensor& b) override;
  void bias_backward(const Tensor& db, const Tensor& dy) override;
  void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) override;
  void convert(const Tensor& dst, const Tensor& src) override;
  void add(const Tensor& dst, const Tensor& src) override;
  void scale(const Tensor& x, float factor) override;
  void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) override;
  void split_columns(const Tensor& src, std::span<const Tensor> blocks) override;
  void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) override;
  void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
                const TensorBox& dst_box, const TensorBox& region) override;
  void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                    const Tensor& m, const Tensor& v, bool decay, const AdamWHyper& h) override;
  double sum_squares(const Tensor& x) override;

 private:
  void on_device(const Tensor& t, const char* op) const;
  cudaStream_t stream() const { return stream_.get(); }
  // Device scratch of at least `bytes`, shared by the ops (they run one after another on the
  // stream), grown to the largest request and kept.
  void* scratch(size_t bytes);
  // The sum of the first n f32 values of `losses`, in row order on the host (as the CPU does).
  double host_sum(const Tensor& losses);
  // Reads i32 targets to the host and fails on one at or past `vocab` (a kernel cannot throw).
  void check_targets(const Tensor& targets, int64_t vocab, const char* op);

  // The device's memory pool policy (cuda_backend.cu): its release threshold follows this
  // backend's high-water mark plus a bounded cache (set again by this), and synchronize() trims it
  // to what is in use plus that cache.
  void grow_pool_threshold();

  // One of the side streams matmul_group spreads products over (cuda_backend_group.cu): its own
  // cuBLASLt handle and workspace (a workspace is never used by two streams at once) and the
  // event it records for the main stream to join on. Made on the first group.
  struct GroupLane {
    explicit GroupLane(CudaBackend& be);
    ~GroupLane();
    GroupLane(const GroupLane&) = delete;
    GroupLane& operator=(const GroupLane&) = delete;
    CudaStream stream;  // first: destroyed last, after its work has finished
    DeviceBuffer workspace;
    std::unique_ptr<cuda::CublasLt> gemm;
    cudaEvent_t done = nullptr;
  };
  void make_group_lanes();
  // matmul's product (b not packed) issued through `gemm`, on that handle's stream.
  void matmul_on(cuda::CublasLt& gemm, const Tensor& c, const Tensor& a, bool trans_a,
                 const Tensor& b, bool trans_b, float alpha, bool accumulate);

  int index_;
  size_t group_streams_;  // CudaBackendOptions::group_streams
  CudaStream stream_;
  cudaMemPool_t pool_ = nullptr;  // the device's default pool, which cudaMallocAsync draws on
  size_t pool_cache_ = 0;         // free bytes the pool may keep beyond what is in use
  size_t in_use_ = 0, peak_ = 0;  // this backend's allocations (padded), now and at most
  size_t threshold_peak_ = 0;     // the peak the release threshold was last set from
  DeviceBuffer workspace_;  // cuBLASLt's
  std::unique_ptr<cuda::CublasLt> gemm_;
  DequantScratch dequant_;
  DeviceBuffer scratch_;
  std::unordered_map<uint64_t, cudaEvent_t> events_;
  uint64_t next_event_ = 0;
  cudaEvent_t group_fork_ = nullptr;  // recorded on the stream before a group's side work
  std::vector<std::unique_ptr<GroupLane>> lanes_;
};

}  // namespace mt

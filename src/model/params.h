// A set of named parameter tensors carved out of a few flat buffers (llm.c style): one f32 buffer
// of values, one bf16 buffer of compute copies, one f32 buffer of gradients, all allocated on one
// backend's device. Flat buffers make the optimizer, clipping, checkpointing and sharding simple
// passes over contiguous memory.
//
// Every tensor has a storage plan decided when it is added:
//   master  - f32 values exist (trainable tensors, norms, embeddings, and everything in fp32 mode)
//   compute - a bf16 copy exists for the GEMMs (matrices in bf16 mode)
//   grad    - a gradient exists (trainable tensors only)
//   quant   - a 4-bit NF4 copy exists (core/nf4.h), the only one (a QLoRA base's block matrices)
// A frozen LoRA base in bf16 mode has compute but no master and no grad: bf16 only. With
// lora.base_dtype = "nf4" its block matrices are quant only: the backend dequantises one at a
// time for each GEMM (backend/dequant_scratch.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "core/bf16.h"

namespace mt {

struct Param {
  std::string name;             // HF name, e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<int64_t> shape;
  int64_t numel = 0;
  bool decay = true;            // AdamW weight decay applies (matrices yes, norms no)
  // Device memory (of the store's backend, or of whoever owns sharded storage), null when absent.
  float* master = nullptr;
  bf16* compute = nullptr;
  float* grad = nullptr;
  uint8_t* quant = nullptr;
  Device device;
  // Offsets into the store's flat buffers, -1 when absent (quant's in bytes).
  int64_t master_offset = -1, compute_offset = -1, grad_offset = -1, quant_offset = -1;

  // The copies as tensor views: a matrix [out, in] as itself, a vector as [1, n]. Empty where the
  // copy is absent.
  Tensor master_tensor() const { return view(master, DType::f32); }
  Tensor compute_tensor() const { return view(compute, DType::bf16); }
  Tensor grad_tensor() const { return view(grad, DType::f32); }
  Tensor quant_tensor() const { return view(quant, DType::nf4); }
  // What the GEMMs read: the NF4 copy of a QLoRA base, the bf16 copy where there is one (bf16
  // mode), else the f32 master. The backend's matmul dispatches on the dtype.
  Tensor gemm_tensor() const {
    return quant ? quant_tensor() : compute ? compute_tensor() : master_tensor();
  }

 private:
  Tensor view(void* p, DType t) const {
    if (!p) return {};
    const int64_t rows = shape.size() >= 2 ? shape[0] : 1;
    return {p, t, rows, numel / rows, device};
  }
};

struct ParamPlan {
  bool master = true;
  bool compute = false;
  bool grad = true;
  bool decay = true;
  bool quant = false;  // NF4 only (then master, compute and grad are false)
};

// Sets a tensor's values from f32 host data, through the backend: the master copy and/or the
// bf16 copy, whichever exist.
void set_param_values(Backend& backend, const Param& p, const float* values);
// Reads a tensor's values into f32 host memory through the backend (from the master copy, else
// the bf16 copy, else the NF4 copy dequantised): never a host read of device memory.
void get_param_values(Backend& backend, const Param& p, float* out);

class ParamStore {
 public:
  explicit ParamStore(Backend& backend = cpu_backend()) : backend_(&backend) {}
  Backend& backend() const { return *backend_; }

  // Declare a tensor; storage is allocated by allocate(). Trainable tensors (grad) are laid out
  // first and contiguously in master and grad, so the optimizer sees one flat range.
  void add(const std::string& name, std::vector<int64_t> shape, ParamPlan plan);
  // Lays the tensors out and, with `buffers`, allocates them. Without, only the plan exists (the
  // offsets say which copies a tensor has) and the pointers stay null until whoever owns the
  // storage (a sharded-parameter layer) points them somewhere.
  void allocate(bool buffers = true);
  bool has_buffers() const { return has_buffers_; }

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  Param& get(const std::string& name);
  const Param& get(const std::string& name) const;
  const Param* find(const std::string& name) const;

  // Trainable range: master[0, trainable_numel) pairs with grad[0, trainable_numel).
  int64_t trainable_numel() const { return trainable_numel_; }
  float* master_data() { return master_.as<float>(); }
  float* grad_data() { return grad_.as<float>(); }
  const float* grad_data() const { return grad_.as<float>(); }
  // The trainable range of the gradients as one f32 tensor [1, trainable_numel].
  Tensor trainable_grads() const { return grad_.tensor(); }
  int64_t numel() const;

  // Sets a tensor's values from f32 host data: the master copy and/or the bf16 copy, whichever
  // exist.
  void set_values(Param& p, const float* values) { set_param_values(*backend_, p, values); }
  void set_values(const std::string& name, const float* values) { set_values(get(name), values); }
  // Reads a tensor's values into f32 host memory (from the master copy, else the bf16 copy, else
  // the NF4 copy dequantised).
  void get_values(const Param& p, float* out) const { get_param_values(*backend_, p, out); }

  void zero_grad();
  // Refresh every bf16 compute copy from its master (after an optimizer step).
  void sync_compute();
  size_t bytes() const { return master_.bytes() + compute_.bytes() + grad_.bytes() + quant_.bytes(); }
  size_t quant_bytes() const { return quant_.bytes(); }

 private:
  struct Pending {
    std::string name;
    std::vector<int64_t> shape;
    ParamPlan plan;
  };
  std::vector<Pending> pending_;
  std::vector<Param> params_;
  Backend* backend_;
  DeviceBuffer master_;   // f32
  DeviceBuffer compute_;  // bf16
  DeviceBuffer grad_;     // f32
  DeviceBuffer quant_;    // NF4 records, held as 4-byte words (every record is a multiple of 4)
  int64_t trainable_numel_ = 0;
  bool has_buffers_ = false;
};

}  // namespace mt

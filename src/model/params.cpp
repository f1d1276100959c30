#include "model/params.h"

#include <algorithm>

#include "core/error.h"
#include "core/nf4.h"

namespace mt {

void ParamStore::add(const std::string& name, std::vector<int64_t> shape, ParamPlan plan) {
  MT_CHECK(params_.empty(), "add() after allocate()");
  MT_CHECK(!plan.grad || plan.master, "a trainable tensor needs master values: " + name);
  MT_CHECK(!plan.quant || (!plan.master && !plan.compute && !plan.grad && shape.size() == 2),
           "an NF4 tensor is a frozen matrix with no other copy: " + name);
  pending_.push_back({name, std::move(shape), plan});
}

void ParamStore::allocate(bool buffers) {
  MT_CHECK(params_.empty(), "allocate() twice");
  int64_t master = 0, compute = 0, grad = 0, quant = 0;
  // Two passes: trainable tensors first, so [0, trainable_numel) of master and grad line up.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& p : pending_) {
      if (p.plan.grad != (pass == 0)) continue;
      Param q;
      q.name = p.name;
      q.shape = p.shape;
      q.numel = 1;
      for (int64_t d : p.shape) q.numel *= d;
      q.decay = p.plan.decay;
      if (p.plan.master) q.master_offset = master, master += q.numel;
      if (p.plan.compute) q.compute_offset = compute, compute += q.numel;
      if (p.plan.grad) q.grad_offset = grad, grad += q.numel;
      if (p.plan.quant) q.quant_offset = quant, quant += int64_t(nf4::tensor_bytes(q.shape[0], q.shape[1]));
      params_.push_back(std::move(q));
    }
    if (pass == 0) trainable_numel_ = grad;
  }
  pending_.clear();
  for (auto& p : params_) p.device = backend_->device();  // also where another layer owns storage
  has_buffers_ = buffers;
  if (!buffers) return;
  master_.resize(*backend_, DType::f32, master);
  compute_.resize(*backend_, DType::bf16, compute);
  grad_.resize(*backend_, DType::f32, grad);
  quant_.resize(*backend_, DType::i32, quant / 4);
  for (auto& p : params_) {
    if (p.master_offset >= 0) p.master = master_.as<float>() + p.master_offset;
    if (p.compute_offset >= 0) p.compute = compute_.as<bf16>() + p.compute_offset;
    if (p.grad_offset >= 0) p.grad = grad_.as<float>() + p.grad_offset;
    if (p.quant_offset >= 0) p.quant = static_cast<uint8_t*>(quant_.data()) + p.quant_offset;
  }
}

Param& ParamStore::get(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return p;
  fail("no parameter named '" + name + "'");
}

const Param& ParamStore::get(const std::string& name) const {
  return const_cast<ParamStore*>(this)->get(name);
}

const Param* ParamStore::find(const std::string& name) const {
  for (auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

int64_t ParamStore::numel() const {
  int64_t n = 0;
  for (auto& p : params_) n += p.numel;
  return n;
}

// Values go through an f32 staging tensor on the device, so the bf16 copy is rounded (and the NF4
// copy quantised) by the backend's own conversion whatever the device.
void set_param_values(Backend& backend, const Param& p, const float* values) {
  if (p.master) {
    backend.copy_from_host(p.master_tensor(), values);
    if (p.compute) backend.convert(p.compute_tensor(), p.master_tensor());
    return;
  }
  DeviceBuffer staging(backend, DType::f32, p.numel);
  backend.copy_from_host(staging.tensor(), values);
  if (p.quant) return backend.convert(p.quant_tensor(), staging.tensor().view(p.shape[0], p.shape[1]));
  backend.convert(p.compute_tensor(), staging.tensor());
}

void get_param_values(Backend& backend, const Param& p, float* out) {
  if (p.master) return backend.copy_to_host(out, p.master_tensor());
  DeviceBuffer staging(backend, DType::f32, p.numel);
  if (p.quant) backend.convert(staging.tensor().view(p.shape[0], p.shape[1]), p.quant_tensor());
  else backend.convert(staging.tensor(), p.compute_tensor());
  backend.copy_to_host(out, staging.tensor());
}

void ParamStore::zero_grad() {
  if (!grad_.empty()) backend_->fill(grad_.tensor(), 0.0f);
}

void ParamStore::sync_compute() {
  for (auto& p : params_)
    if (p.compute && p.master) backend_->convert(p.compute_tensor(), p.master_tensor());
}

}  // namespace mt

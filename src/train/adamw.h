// AdamW with decoupled weight decay and bias correction (as torch.optim.AdamW), over the trainable
// range of a ParamStore. Moments are f32 and live here, on the store's backend; the backend's
// adamw_update updates the master values and, in the same pass, their bf16 compute copies (one
// sweep over memory instead of three: clip scale, update and bf16 refresh are fused).
#pragma once
#include <cstdint>

#include "backend/device_buffer.h"
#include "model/params.h"
#include "train/run_config.h"

namespace mt {

class AdamW {
 public:
  AdamW(ParamStore& params, const OptimConfig& cfg);
  // One update from the current gradients, each multiplied by grad_scale first (the clip factor).
  void step(float lr, float grad_scale = 1.0f);
  int64_t steps_taken() const { return t_; }
  ParamStore& params() { return params_; }

  // State, exposed for checkpoints: a trainable tensor's moments on the store's device (f32
  // [1, numel], laid out like its gradient).
  Tensor exp_avg(const Param& p) const { return m_.slice(p.grad_offset, 1, p.numel); }
  Tensor exp_avg_sq(const Param& p) const { return v_.slice(p.grad_offset, 1, p.numel); }
  Backend& backend() const { return params_.backend(); }
  void set_steps_taken(int64_t t) { t_ = t; }
  size_t state_bytes() const { return m_.bytes() + v_.bytes(); }

 private:
  ParamStore& params_;
  OptimConfig cfg_;
  DeviceBuffer m_, v_;  // f32, laid out like the store's trainable gradients
  int64_t t_ = 0;
};

// The factor that brings a gradient of this norm down to max_norm (1 when below, or max_norm <= 0).
float clip_factor(double norm, float max_norm);

}  // namespace mt

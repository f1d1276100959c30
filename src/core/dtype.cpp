#include "core/dtype.h"

#include "core/tensor.h"

namespace mt {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::nf4: return "nf4";
  }
  return "?";
}

const char* device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::reference: return "reference";
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::hip: return "hip";
  }
  return "?";
}

}  // namespace mt

// One rotary pair in the HF "rotate_half" layout: element i and i + D/2 of a head rotated by the
// angle whose cosine and sine are c and s; direction +1 forward, -1 backward (the transpose).
#pragma once

#include "kernels/device_math/host_device.h"

namespace mt::dm {

struct RopePair {
  float lo, hi;
};

MT_HOST_DEVICE RopePair rope_rotate(float lo, float hi, float c, float s, float direction) {
  const float si = direction * s;
  return {lo * c - hi * si, hi * c + lo * si};
}

}  // namespace mt::dm

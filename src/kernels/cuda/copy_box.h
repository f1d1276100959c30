// The part `region` of a tensor from a buffer holding src_box into one holding dst_box
// (core/tensor_box.h's copy_box, Backend::copy_box): the boxes stay on the host, where they are
// checked (check_region: mt::Error as on the CPU) and reduced to strides
// (kernels/device_math/box_offsets.h); one kernel copies, an element per thread.
#pragma once

#include "core/tensor_box.h"
#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// Boxes of rank up to dm::kBoxMaxRank (8); more is an mt::Error.
template <class T>
void copy_box(const T* src, const TensorBox& src_box, T* dst, const TensorBox& dst_box,
              const TensorBox& region, cudaStream_t stream);

}  // namespace mt::cuda

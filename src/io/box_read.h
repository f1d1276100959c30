// Reads one box of a tensor from a Hugging Face checkpoint (single file or sharded), converted
// to float or bf16. Loading a sharded model makes each rank read only its own block of every
// parameter; the checkpoint is mmapped, so touching only the box's bytes (for a 2-D box, the
// box's columns of each of its rows) means the rest of the tensor is never read from disk.
//
// Tensors of rank 1 and 2 only: those are the ones the mesh shards. Errors (mt::Error, one line,
// starting with the path of the file that holds the tensor): unknown tensor, a dtype other than
// F32/BF16/F16, tensor rank not 1 or 2, box rank != tensor rank, box outside the tensor's shape.
#pragma once
#include <string>

#include "core/bf16.h"
#include "io/safetensors_index.h"
#include "core/tensor_box.h"

namespace mt {

// dst receives box.numel() elements, row-major over box.shape().
void read_box_f32(const SafetensorsCheckpoint& ckpt, const std::string& name, const TensorBox& box, float* dst);
void read_box_bf16(const SafetensorsCheckpoint& ckpt, const std::string& name, const TensorBox& box, bf16* dst);

}  // namespace mt

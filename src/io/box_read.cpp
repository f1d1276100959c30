#include "io/box_read.h"

#include "core/error.h"
#include "io/safetensors_text.h"

namespace mt {

namespace {

template <class T>
void read_box(const SafetensorsCheckpoint& ckpt, const std::string& name, const TensorBox& box, T* dst) {
  const SafetensorsFile& file = ckpt.file_of(name);  // names the checkpoint if the tensor is unknown
  const TensorInfo& t = file.info(name);
  const std::string where = file.path() + ": tensor " + quote_name(name);
  if (!dtype_is_convertible(t.dtype))
    fail(where + " has dtype " + dtype_name(t.dtype) +
         ", which cannot be read as float or bf16 (only F32, BF16 and F16 can)");
  if (t.shape.size() != 1 && t.shape.size() != 2)
    fail(where + " has shape " + shape_string(t.shape) + "; boxes can be read from 1-D and 2-D tensors only");
  if (box.rank() != t.shape.size() || box.end.size() != box.rank())
    fail(where + " has rank " + std::to_string(t.shape.size()) + " but box " + box.str() + " has rank " +
         std::to_string(box.rank()));
  const TensorBox whole = TensorBox::whole(t.shape);
  if (!whole.contains(box))
    fail(where + ": box " + box.str() + " is out of bounds for shape " + shape_string(t.shape));
  // The header check guarantees the tensor's byte range lies within the file, and the box lies
  // within the tensor, so every run below is in bounds.
  const std::byte* src = ckpt.bytes(name).data();
  const size_t es = dtype_size(t.dtype);
  for_each_run(whole, box, box, [&](int64_t so, int64_t dof, int64_t n) {
    convert_elements(t.dtype, src + uint64_t(so) * es, size_t(n), dst + dof);
  });
}

}  // namespace

void read_box_f32(const SafetensorsCheckpoint& ckpt, const std::string& name, const TensorBox& box, float* dst) {
  read_box(ckpt, name, box, dst);
}
void read_box_bf16(const SafetensorsCheckpoint& ckpt, const std::string& name, const TensorBox& box, bf16* dst) {
  read_box(ckpt, name, box, dst);
}

}  // namespace mt

#include "io/safetensors.h"

#include "core/error.h"
#include "io/safetensors_text.h"

namespace mt {

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), map_(path) {
  auto b = map_.bytes();
  header_ = parse_header(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), path_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header_.tensors.size());
  for (const auto& t : header_.tensors) out.push_back(t.name);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = header_.index.find(name);
  if (it == header_.index.end()) fail(path_ + ": no tensor named " + quote_name(name));
  return header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {data(t), size_t(t.nbytes())};
}

const TensorInfo& SafetensorsFile::readable(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (!dtype_is_convertible(t.dtype))
    fail(path_ + ": tensor " + quote_name(name) + " has dtype " + dtype_name(t.dtype) +
         ", which cannot be read as float or bf16 (only F32, BF16 and F16 can)");
  return t;
}

template <class T>
void SafetensorsFile::read_all(const std::string& name, T* dst) const {
  const TensorInfo& t = readable(name);
  convert_elements(t.dtype, data(t), size_t(t.numel), dst);
}

template <class T>
void SafetensorsFile::read_rows(const std::string& name, int64_t row0, int64_t nrows, T* dst) const {
  const TensorInfo& t = readable(name);
  if (t.shape.empty()) fail(path_ + ": tensor " + quote_name(name) + " is a scalar; it has no rows");
  const int64_t rows = t.shape[0];
  if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0)
    fail(path_ + ": tensor " + quote_name(name) + ": row slice (start " + std::to_string(row0) + ", count " +
         std::to_string(nrows) + ") out of range for shape " +
         shape_string(t.shape));
  // parse_header checked that the product of the non-zero dimensions fits, so none of these
  // products can overflow.
  uint64_t row_elems = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) row_elems *= uint64_t(t.shape[i]);
  const uint64_t first = uint64_t(row0) * row_elems;
  convert_elements(t.dtype, data(t) + first * dtype_size(t.dtype), size_t(uint64_t(nrows) * row_elems), dst);
}

template <class T>
void SafetensorsFile::read_cols(const std::string& name, int64_t col0, int64_t ncols, T* dst) const {
  const TensorInfo& t = readable(name);
  if (t.shape.size() != 2)
    fail(path_ + ": tensor " + quote_name(name) + " has shape " + shape_string(t.shape) +
         "; column slices need a 2-D tensor");
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (col0 < 0 || ncols < 0 || col0 > cols || ncols > cols - col0)
    fail(path_ + ": tensor " + quote_name(name) + ": column slice (start " + std::to_string(col0) + ", count " +
         std::to_string(ncols) + ") out of range for shape " +
         shape_string(t.shape));
  const size_t es = dtype_size(t.dtype);
  const std::byte* src = data(t) + uint64_t(col0) * es;
  for (int64_t r = 0; r < rows; ++r)
    convert_elements(t.dtype, src + uint64_t(r) * uint64_t(cols) * es, size_t(ncols), dst + r * ncols);
}

void SafetensorsFile::read_f32(const std::string& name, float* dst) const { read_all(name, dst); }
void SafetensorsFile::read_bf16(const std::string& name, bf16* dst) const { read_all(name, dst); }
void SafetensorsFile::read_rows_f32(const std::string& name, int64_t row0, int64_t nrows, float* dst) const {
  read_rows(name, row0, nrows, dst);
}
void SafetensorsFile::read_rows_bf16(const std::string& name, int64_t row0, int64_t nrows, bf16* dst) const {
  read_rows(name, row0, nrows, dst);
}
void SafetensorsFile::read_cols_f32(const std::string& name, int64_t col0, int64_t ncols, float* dst) const {
  read_cols(name, col0, ncols, dst);
}
void SafetensorsFile::read_cols_bf16(const std::string& name, int64_t col0, int64_t ncols, bf16* dst) const {
  read_cols(name, col0, ncols, dst);
}

}  // namespace mt

// A tensor view: where the elements are (data, device), what they are (dtype) and their shape,
// a row-major matrix [rows, cols]. It owns nothing: DeviceBuffer (backend/device_buffer.h) owns memory, views point into it.
//
// Two dimensions are enough for everything the model hands its backend: activations are
// [tokens, features], weights [out, in], and ops with more structure (attention's heads) take
// their extra sizes as arguments.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/nf4.h"

namespace mt {

// Which memory a pointer lives in. `reference` is host memory owned by the reference backend,
// tagged apart so that tests catch a tensor handed to the wrong backend.
enum class DeviceKind : uint8_t { cpu, reference, cuda, hip };
const char* device_kind_name(DeviceKind k);

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0, cols = 0;
  Device device;

  Tensor() = default;
  Tensor(void* d, DType t, int64_t r, int64_t c, Device dev)
      : data(d), dtype(t), rows(r), cols(c), device(dev) {}

  explicit operator bool() const { return data != nullptr; }
  int64_t numel() const { return rows * cols; }
  size_t bytes() const {
    return is_packed(dtype) ? nf4::tensor_bytes(rows, cols) : size_t(numel()) * dtype_size(dtype);
  }
  // Bytes from one row to the next.
  size_t row_stride() const { return is_packed(dtype) ? size_t(nf4::row_bytes(cols)) : size_t(cols) * dtype_size(dtype); }

  // Rows [r0, r0 + n): a view of the same memory.
  Tensor rows_slice(int64_t r0, int64_t n) const {
    MT_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows, "tensor row slice outside the tensor");
    return {static_cast<char*>(data) + size_t(r0) * row_stride(), dtype, n, cols, device};
  }
  // The same elements seen as [r, c] (r * c must equal numel()).
  Tensor view(int64_t r, int64_t c) const {
    MT_CHECK(r * c == numel(), "tensor view changes the element count");
    MT_CHECK(!is_packed(dtype) || c == cols, "a packed tensor keeps its row length");
    return {data, dtype, r, c, device};
  }
  // Elements [offset, offset + n) of the row-major order, as a [1, n] view.
  Tensor flat_slice(int64_t offset, int64_t n) const {
    MT_CHECK(offset >= 0 && n >= 0 && offset + n <= numel(), "tensor slice outside the tensor");
    MT_CHECK(!is_packed(dtype), "a packed tensor is sliced by whole rows only");
    return {static_cast<char*>(data) + size_t(offset) * dtype_size(dtype), dtype, 1, n, device};
  }
  // The typed pointer, for a backend's kernels: checks the dtype.
  template <class T>
  T* as() const {
    MT_CHECK(!data || dtype == dtype_of<T>(),
             std::string("tensor holds ") + dtype_name(dtype) + ", read as " +
                 dtype_name(dtype_of<T>()));
    return static_cast<T*>(data);
  }
};

}  // namespace mt

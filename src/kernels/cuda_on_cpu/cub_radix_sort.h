// CUB's cub::DeviceRadixSort::SortPairs, emulated on the CPU for the MESHTRAIN_CUDA_ON_CPU build
// (docs/gpu.md), with CUB's documented semantics: called with d_temp_storage null it only writes
// the temporary storage it needs into temp_storage_bytes; otherwise it sorts the pairs by the key
// bits [begin_bit, end_bit), stably (pairs with equal keys keep their input order, which
// embedding_backward relies on), leaving the inputs unchanged, as work queued on `stream`. A
// temp_storage_bytes below what it asked for is cudaErrorInvalidValue, as in CUB.
//
// The sort is a least-significant-digit radix sort, 8 bits a pass, that really works in the
// temporary storage it asked for (the alternate keys and values of its ping-pong and the digit
// counts), so storage that is too small, not device memory, or shared with another buffer faults
// or corrupts the result here as it would on the GPU. Each buffer must lie inside one device
// allocation and no two may overlap; otherwise the work faults naming them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda_on_cpu/runtime_api.h"
#include "kernels/cuda_on_cpu/streams.h"

namespace mt::cuda_on_cpu::radix {

inline size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// CUB's bit twiddling: the key's bits as an unsigned integer that orders as the key does (signed
// integers: sign bit flipped; floats: all bits flipped for negatives, the sign bit for the rest).
template <class K>
auto ordered_bits(K key) {
  using U = std::conditional_t<sizeof(K) == 1, uint8_t,
            std::conditional_t<sizeof(K) == 2, uint16_t,
            std::conditional_t<sizeof(K) == 4, uint32_t, uint64_t>>>;
  U u;
  std::memcpy(&u, &key, sizeof(K));
  constexpr U top = U(U(1) << (sizeof(K) * 8 - 1));
  if constexpr (std::is_floating_point_v<K>) return U(u & top ? ~u : u | top);
  else if constexpr (std::is_signed_v<K>) return U(u ^ top);
  else return u;
}

struct TempLayout {
  size_t keys = 0, values = 0, counts = 0, total = 0;  // byte offsets, and the size asked for
};
template <class K, class V>
TempLayout temp_layout(size_t n) {
  TempLayout t;
  t.keys = 0;
  t.values = round_up(n * sizeof(K));
  t.counts = t.values + round_up(n * sizeof(V));
  t.total = t.counts + round_up(256 * sizeof(uint64_t));
  return t;
}

inline void check_buffers(const char* what, const void* const* p, const size_t* bytes,
                          const char* const* names, int count) {
  for (int i = 0; i < count; ++i)
    if (bytes[i] > 0 && !is_device_range(p[i], bytes[i]))
      fault(std::string(what) + ": " + names[i] + " (" + std::to_string(bytes[i]) +
            " bytes) is not inside one device allocation");
  for (int i = 0; i < count; ++i)
    for (int j = i + 1; j < count; ++j) {
      const char* a = static_cast<const char*>(p[i]);
      const char* b = static_cast<const char*>(p[j]);
      if (bytes[i] > 0 && bytes[j] > 0 && a < b + bytes[j] && b < a + bytes[i])
        fault(std::string(what) + ": " + names[i] + " and " + names[j] + " overlap");
    }
}

// The sort itself, on the stream's worker: passes of 8 bits from begin_bit, ping-ponging between
// the output arrays and the temporary storage so that the last pass writes the outputs.
template <class K, class V>
void sort_pairs(void* temp, const K* keys_in, K* keys_out, const V* values_in, V* values_out,
                size_t n, int begin_bit, int end_bit) {
  const TempLayout t = temp_layout<K, V>(n);
  {
    const void* p[5] = {temp, keys_in, keys_out, values_in, values_out};
    const size_t b[5] = {t.total, n * sizeof(K), n * sizeof(K), n * sizeof(V), n * sizeof(V)};
    const char* names[5] = {"d_temp_storage", "d_keys_in", "d_keys_out", "d_values_in",
                            "d_values_out"};
    check_buffers("cub::DeviceRadixSort::SortPairs", p, b, names, 5);
  }
  auto* base = static_cast<char*>(temp);
  K* keys_alt = reinterpret_cast<K*>(base + t.keys);
  V* values_alt = reinterpret_cast<V*>(base + t.values);
  auto* counts = reinterpret_cast<uint64_t*>(base + t.counts);
  const int passes = (end_bit - begin_bit + 7) / 8;
  if (passes == 0) {
    std::copy(keys_in, keys_in + n, keys_out);
    std::copy(values_in, values_in + n, values_out);
    return;
  }
  const K* ks = keys_in;
  const V* vs = values_in;
  for (int pass = 0; pass < passes; ++pass) {
    const bool to_out = (passes - 1 - pass) % 2 == 0;
    K* kd = to_out ? keys_out : keys_alt;
    V* vd = to_out ? values_out : values_alt;
    const int shift = begin_bit + 8 * pass;
    const int width = std::min(8, end_bit - shift);
    const uint64_t mask = (uint64_t(1) << width) - 1;
    std::fill(counts, counts + 256, uint64_t(0));
    for (size_t i = 0; i < n; ++i) ++counts[(uint64_t(ordered_bits(ks[i])) >> shift) & mask];
    uint64_t sum = 0;
    for (int d = 0; d < 256; ++d) {  // counts -> first position of each digit
      const uint64_t c = counts[d];
      counts[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; ++i) {  // in input order: stable
      const uint64_t at = counts[(uint64_t(ordered_bits(ks[i])) >> shift) & mask]++;
      kd[at] = ks[i];
      vd[at] = vs[i];
    }
    ks = kd, vs = vd;
  }
}

}  // namespace mt::cuda_on_cpu::radix

namespace cub {

struct DeviceRadixSort {
  template <class KeyT, class ValueT, class NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               const KeyT* d_keys_in, KeyT* d_keys_out, const ValueT* d_values_in,
                               ValueT* d_values_out, NumItemsT num_items, int begin_bit = 0,
                               int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    namespace radix = mt::cuda_on_cpu::radix;
    static_assert(std::is_arithmetic_v<KeyT>, "radix sort keys are integers or floats");
    if (num_items < 0 || begin_bit < 0 || end_bit > int(sizeof(KeyT) * 8) || begin_bit > end_bit)
      return cudaErrorInvalidValue;
    const size_t n = size_t(num_items);
    const radix::TempLayout t = radix::temp_layout<KeyT, ValueT>(n);
    if (!d_temp_storage) {  // the size query: no work
      temp_storage_bytes = t.total;
      return cudaSuccess;
    }
    if (temp_storage_bytes < t.total) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    return mt::cuda_on_cpu::enqueue(stream, "cub::DeviceRadixSort::SortPairs", [=] {
      radix::sort_pairs(d_temp_storage, d_keys_in, d_keys_out, d_values_in, d_values_out, n,
                        begin_bit, end_bit);
    });
  }
};

}  // namespace cub

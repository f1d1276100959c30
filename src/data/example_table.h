// Examples stored flat (all tokens back to back + offsets + trained masks), either owned or
// viewed in a memory-mapped token cache, so a large dataset is not copied after loading.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "data/examples.h"
#include "core/mapped_file.h"

namespace mt {

class ExampleTable {
 public:
  ExampleTable() = default;
  explicit ExampleTable(const std::vector<Example>& examples);
  // A view into `file`, which the table keeps mapped. offsets has size() + 1 entries, starts at
  // 0, is non-decreasing and ends at tokens.size() == trained.size() (checked by the caller).
  ExampleTable(MappedFile file, std::span<const uint64_t> offsets, std::span<const int32_t> tokens,
               std::span<const uint8_t> trained);

  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  int64_t length(size_t i) const { return int64_t(offsets_[i + 1] - offsets_[i]); }
  std::span<const int32_t> tokens(size_t i) const {
    return tokens_.subspan(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  std::span<const uint8_t> trained(size_t i) const {
    return trained_.subspan(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  Example example(size_t i) const;  // a copy
  int64_t total_tokens() const { return int64_t(tokens_.size()); }
  std::span<const uint64_t> offsets() const { return offsets_; }
  std::span<const int32_t> all_tokens() const { return tokens_; }
  std::span<const uint8_t> all_trained() const { return trained_; }

 private:
  std::vector<uint64_t> own_offsets_;
  std::vector<int32_t> own_tokens_;
  std::vector<uint8_t> own_trained_;
  MappedFile file_;
  // Point into the owned vectors or the mapping; both keep their addresses when moved.
  std::span<const uint64_t> offsets_;
  std::span<const int32_t> tokens_;
  std::span<const uint8_t> trained_;
};

}  // namespace mt

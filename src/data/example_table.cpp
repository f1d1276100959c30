#include "data/example_table.h"

#include "core/error.h"

namespace mt {

ExampleTable::ExampleTable(const std::vector<Example>& examples) {
  own_offsets_.reserve(examples.size() + 1);
  own_offsets_.push_back(0);
  for (const Example& ex : examples) {
    MT_CHECK(ex.tokens.size() == ex.trained.size(), "example tokens and mask differ in length");
    own_tokens_.insert(own_tokens_.end(), ex.tokens.begin(), ex.tokens.end());
    own_trained_.insert(own_trained_.end(), ex.trained.begin(), ex.trained.end());
    own_offsets_.push_back(own_tokens_.size());
  }
  offsets_ = own_offsets_;
  tokens_ = own_tokens_;
  trained_ = own_trained_;
}

ExampleTable::ExampleTable(MappedFile file, std::span<const uint64_t> offsets,
                           std::span<const int32_t> tokens, std::span<const uint8_t> trained)
    : file_(std::move(file)), offsets_(offsets), tokens_(tokens), trained_(trained) {}

Example ExampleTable::example(size_t i) const {
  auto t = tokens(i);
  auto m = trained(i);
  return Example{{t.begin(), t.end()}, {m.begin(), m.end()}};
}

}  // namespace mt

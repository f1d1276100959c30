// The order in which a mixture of training sources gives its rows (train/mixed_data.h, docs/data.md
// "Mixing datasets"): row r of the mixed stream comes from the source that is furthest behind its
// share at that point (smooth weighted round robin, ties to the earlier source). So every prefix
// of the stream holds each source's share of its rows to within (sources - 1) rows, the order
// depends on nothing but the weights, and the rows each source has given after r rows follow from
// r alone: a resumed run needs only the count of rows drawn.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mt {

class MixSchedule {
 public:
  // `weights`: relative, each finite and > 0 (mt::Error otherwise, or when there are none).
  explicit MixSchedule(const std::vector<double>& weights);

  size_t num_sources() const { return quota_.size(); }
  // The share of the rows source i gives: its weight over the sum, as the schedule holds it (in
  // units of 2^-32, summing exactly to 1).
  double share(size_t i) const;
  // The source of the next row; advances.
  size_t next();
  // Back to the start, then forward `rows` rows (replayed: O(rows x sources)).
  void seek(int64_t rows);
  int64_t rows() const { return rows_; }
  // Rows each source has given so far.
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  std::vector<int64_t> quota_;    // share x 2^32, summing to 2^32
  std::vector<int64_t> credit_;   // what each source is owed, in the same units
  std::vector<int64_t> counts_;
  int64_t rows_ = 0;
};

}  // namespace mt

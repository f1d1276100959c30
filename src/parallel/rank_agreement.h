// Refusing to start when the ranks of a job were told different things. Ranks launched with
// different configs (or reading different model files) would otherwise hang in a collective,
// abort with MPI_ERR_TRUNCATE, or train silently diverging replicas; comparing first turns each of
// those into one line that names what differs.
#pragma once
#include <string>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {

struct NamedValue {
  std::string name;   // "train.steps", "layers.0.attn.q.weight"
  std::string value;  // as text: two values agree when their texts are equal
};

// Collective over `group`: returns when every rank holds the same items (names and values, in the
// same order); otherwise throws mt::Error, on every rank alike, naming the items that differ (the
// first six, then how many more) and up to three ranks whose value is not rank 0's:
//   "ranks disagree on the run config: train.steps (rank 0: 6, rank 1: 8); train.seq_len (...)"
// Cheap when they agree: each rank sends a length and a checksum of its items; only on a
// mismatch are the items themselves gathered, to name them.
void require_agreement(Comm& group, const std::string& what, const std::vector<NamedValue>& items);

}  // namespace mt::parallel

// The online softmax (Milakov and Gimelshein): a softmax-weighted sum over keys seen in pieces
// keeps, for the keys seen so far, the largest score m, the sum s of exp(score - m) and the
// accumulated exp(score - m) * value. Two such partial states (two chunks of keys, two warps)
// combine exactly: each is rescaled to the larger maximum. Decode attention merges its warps'
// states this way; the CPU test checks merged chunks against the one-pass softmax of
// kernels/reference.
#pragma once
#include <cmath>

#include "kernels/device_math/host_device.h"

namespace mt {

struct SoftmaxState {
  float max = -INFINITY;  // no key seen: -inf and sum 0
  float sum = 0.0f;
};

// The merged state and the factors by which each side's accumulated values are multiplied
// before they are added: acc = acc_a * scale_a + acc_b * scale_b.
struct SoftmaxMerge {
  SoftmaxState state;
  float scale_a, scale_b;
};

MT_HOST_DEVICE SoftmaxMerge merge_softmax(SoftmaxState a, SoftmaxState b) {
  const float m = a.max > b.max ? a.max : b.max;
  if (m == -INFINITY) return {{m, 0.0f}, 0.0f, 0.0f};  // both empty (avoids -inf - -inf)
  const float sa = a.max == -INFINITY ? 0.0f : expf(a.max - m);
  const float sb = b.max == -INFINITY ? 0.0f : expf(b.max - m);
  return {{m, a.sum * sa + b.sum * sb}, sa, sb};
}

// One more key with this score: a state of one key (sum 1, its value with weight 1).
MT_HOST_DEVICE SoftmaxMerge add_score(SoftmaxState a, float score) {
  return merge_softmax(a, SoftmaxState{score, 1.0f});
}

// log(sum over the keys of exp(score)), the value attention saves for its backward.
MT_HOST_DEVICE float log_sum_exp(SoftmaxState s) { return s.max + logf(s.sum); }

}  // namespace mt

// The merge loop shared by byte-level BPE and the llama2.c sentencepiece encoder: repeatedly
// replace the adjacent pair with the best (smallest) priority by its merged token, taking the
// leftmost pair on ties, until no adjacent pair can merge. Both reference implementations
// (tiktoken / HF BPE and llama2.c) pick exactly this pair at every step, so the result is the
// same whichever of the two strategies below runs.
#pragma once
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace mt {

template <class Key>
struct PairMerge {
  Key priority;    // smaller merges first
  int32_t merged;  // token id of the pair's concatenation
};

// pair_fn(left_id, right_id) -> std::optional<PairMerge<Key>>.
template <class Key, class PairFn>
void merge_adjacent_pairs(std::vector<int32_t>& ids, PairFn&& pair_fn) {
  const size_t n = ids.size();
  if (n < 2) return;
  if (n <= 64) {
    // Short pieces (almost every word): rescanning a small array beats any bookkeeping.
    std::vector<std::optional<PairMerge<Key>>> pairs(n - 1);
    for (size_t i = 0; i + 1 < n; ++i) pairs[i] = pair_fn(ids[i], ids[i + 1]);
    for (;;) {
      size_t best = pairs.size();
      for (size_t i = 0; i < pairs.size(); ++i)
        if (pairs[i] && (best == pairs.size() || pairs[i]->priority < pairs[best]->priority))
          best = i;
      if (best == pairs.size()) break;
      ids[best] = pairs[best]->merged;
      ids.erase(ids.begin() + best + 1);
      pairs.erase(pairs.begin() + best);
      if (best > 0) pairs[best - 1] = pair_fn(ids[best - 1], ids[best]);
      if (best < pairs.size()) pairs[best] = pair_fn(ids[best], ids[best + 1]);
    }
    return;
  }
  // Long pieces (a run of CJK letters, a whole text for sentencepiece): a doubly linked list and
  // a min-heap of candidate pairs, O(n log n). A heap entry is stale when either of its tokens
  // has changed since it was pushed; it is then skipped.
  struct Node {
    int32_t id, prev, next;  // id -1: merged into its left neighbour
  };
  struct Cand {
    Key priority;
    int32_t left, left_id, right_id, merged;
    bool operator>(const Cand& o) const {
      return o.priority < priority || (!(priority < o.priority) && left > o.left);
    }
  };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i)
    nodes[i] = {ids[i], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = nodes[left].next;
    if (right < 0) return;
    if (auto m = pair_fn(nodes[left].id, nodes[right].id))
      heap.push({m->priority, left, nodes[left].id, nodes[right].id, m->merged});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Node& l = nodes[c.left];
    if (l.id != c.left_id || l.next < 0 || nodes[l.next].id != c.right_id) continue;
    int32_t r = l.next;
    l.id = c.merged;
    l.next = nodes[r].next;
    if (l.next >= 0) nodes[l.next].prev = c.left;
    nodes[r].id = -1;
    push(l.prev);
    push(c.left);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = nodes[i].next) ids.push_back(nodes[i].id);
}

}  // namespace mt

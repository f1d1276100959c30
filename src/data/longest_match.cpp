#include "data/longest_match.h"

#include <deque>

namespace mt {

int32_t LongestMatch::child(int32_t node, unsigned char byte) const {
  if (node == 0) return root_children_[byte];
  for (const auto& [b, c] : nodes_[size_t(node)].children)
    if (b == byte) return c;
  return 0;
}

int32_t LongestMatch::step(int32_t node, unsigned char byte) const {
  // Each failure link shortens the matched suffix, and each byte lengthens it by at most one, so
  // the links followed over a whole text are at most its length.
  for (;;) {
    if (const int32_t c = child(node, byte)) return c;
    if (node == 0) return 0;
    node = nodes_[size_t(node)].fail;
  }
}

LongestMatch::LongestMatch(const std::vector<std::string>& strings) {
  nodes_.emplace_back();
  // The trie of the reversed strings.
  for (const std::string& s : strings) {
    if (s.empty()) continue;
    int32_t node = 0;
    for (auto it = s.rbegin(); it != s.rend(); ++it) {
      const unsigned char byte = static_cast<unsigned char>(*it);
      int32_t next = child(node, byte);
      if (!next) {
        next = int32_t(nodes_.size());
        Node n;
        n.depth = nodes_[size_t(node)].depth + 1;
        nodes_.push_back(std::move(n));
        if (node == 0) root_children_[byte] = next;
        else nodes_[size_t(node)].children.emplace_back(byte, next);
      }
      node = next;
    }
    nodes_[size_t(node)].longest = nodes_[size_t(node)].depth;
  }
  // Failure links breadth first, so a node's link (shallower) is final before the node is used.
  std::deque<int32_t> queue;
  for (int32_t c : root_children_)
    if (c) queue.push_back(c);  // their failure link is the root
  while (!queue.empty()) {
    const int32_t u = queue.front();
    queue.pop_front();
    const Node& un = nodes_[size_t(u)];
    if (un.longest == 0) nodes_[size_t(u)].longest = nodes_[size_t(un.fail)].longest;
    for (const auto& [byte, v] : nodes_[size_t(u)].children) {
      int32_t f = nodes_[size_t(u)].fail;
      int32_t target = 0;
      for (;;) {
        if (const int32_t c = child(f, byte)) {
          target = c;
          break;
        }
        if (f == 0) break;
        f = nodes_[size_t(f)].fail;
      }
      nodes_[size_t(v)].fail = target;
      queue.push_back(v);
    }
  }
}

std::vector<uint32_t> LongestMatch::longest_at_each(std::string_view text) const {
  std::vector<uint32_t> lengths(text.size(), 0);
  if (empty()) return lengths;
  int32_t state = 0;
  for (size_t i = text.size(); i-- > 0;) {
    state = step(state, static_cast<unsigned char>(text[i]));
    lengths[i] = nodes_[size_t(state)].longest;
  }
  return lengths;
}

}  // namespace mt

#include "parallel/rank_agreement.h"

#include <algorithm>
#include <cstdint>

#include "core/crc32c.h"
#include "core/error.h"

namespace mt::parallel {
namespace {

// A line break or tab inside a name or value would split its item: written as \n and \t (only
// what ranks compare and the message shows, never read back as a value).
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return out;
}

// One item per line, "name\tvalue".
std::string serialise(const std::vector<NamedValue>& items) {
  std::string out;
  for (const NamedValue& it : items) out += escaped(it.name) + '\t' + escaped(it.value) + '\n';
  return out;
}

std::vector<NamedValue> parse(const std::string& text) {
  std::vector<NamedValue> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const size_t tab = line.find('\t');
    out.push_back({line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1)});
    pos = end + 1;
  }
  return out;
}

const std::string* value_of(const std::vector<NamedValue>& items, const std::string& name) {
  for (const NamedValue& it : items)
    if (it.name == name) return &it.value;
  return nullptr;
}

std::string shown(const std::string* value) { return value ? *value : "(absent)"; }

// Every rank's items, gathered (only on the error path, so size does not matter).
std::vector<std::vector<NamedValue>> gather_items(Comm& group, const std::string& mine) {
  const size_t n = size_t(group.size());
  std::vector<int64_t> lengths(n, 0);
  lengths[size_t(group.rank())] = int64_t(mine.size());
  group.all_gather_bytes(&lengths[size_t(group.rank())], lengths.data(), 1, 8);
  const int64_t width = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(size_t(width), '\0');
  std::string all(size_t(width) * n, '\0');
  group.all_gather_bytes(padded.data(), all.data(), width, 1);
  std::vector<std::vector<NamedValue>> out;
  for (size_t r = 0; r < n; ++r)
    out.push_back(parse(all.substr(r * size_t(width), size_t(lengths[r]))));
  return out;
}

}  // namespace

void require_agreement(Comm& group, const std::string& what, const std::vector<NamedValue>& items) {
  if (group.size() == 1) return;
  const std::string mine = serialise(items);
  const size_t n = size_t(group.size()), me = size_t(group.rank());
  std::vector<int64_t> digests(2 * n, 0);
  digests[2 * me] = int64_t(mine.size());
  digests[2 * me + 1] = int64_t(crc32c(mine.data(), mine.size()));
  group.all_gather_bytes(&digests[2 * me], digests.data(), 2, 8);
  bool same = true;
  for (size_t r = 1; r < n; ++r)
    same = same && digests[2 * r] == digests[0] && digests[2 * r + 1] == digests[1];
  if (same) return;

  const auto all = gather_items(group, mine);
  // Names in rank 0's order, then any only other ranks have.
  std::vector<std::string> names;
  for (const auto& rank_items : all)
    for (const NamedValue& it : rank_items)
      if (std::find(names.begin(), names.end(), it.name) == names.end()) names.push_back(it.name);
  // The first few differing items (a model with one layer more differs in nine tensors).
  const int64_t shown_items = 6;
  int64_t differing_items = 0;
  std::string listed;
  for (const std::string& name : names) {
    const std::string* first = value_of(all[0], name);
    std::string differing;
    int64_t count = 0;
    for (size_t r = 1; r < n; ++r) {
      const std::string* v = value_of(all[r], name);
      if ((v == nullptr) == (first == nullptr) && (!v || *v == *first)) continue;
      if (++count <= 3) differing += ", rank " + std::to_string(r) + ": " + shown(v);
    }
    if (count == 0 || ++differing_items > shown_items) continue;
    if (count > 3) differing += ", and " + std::to_string(count - 3) + " more ranks";
    listed += (listed.empty() ? "" : "; ") + name + " (rank 0: " + shown(first) + differing + ")";
  }
  if (differing_items > shown_items)
    listed += "; and " + std::to_string(differing_items - shown_items) + " more";
  // Every name with the same value everywhere, yet different texts: the order differs.
  if (listed.empty()) listed = "the same items in a different order";
  fail("ranks disagree on " + what + ": " + listed);
}

}  // namespace mt::parallel

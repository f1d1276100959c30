#include "parallel/replica_agreement.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/crc32c.h"
#include "core/error.h"

namespace mt::parallel {
namespace {

// One block per line, "tensor\tbox\tcrc": parameter names hold no tab or line break.
std::string serialise(const std::vector<HeldBlock>& blocks) {
  std::string out;
  for (const HeldBlock& b : blocks) out += b.tensor + '\t' + b.box.str() + '\t' + crc32c_hex(b.crc) + '\n';
  return out;
}

// Every rank's text, gathered: the lengths first, then each padded to the longest.
std::vector<std::string> gather_texts(Comm& group, const std::string& mine) {
  const size_t n = size_t(group.size()), me = size_t(group.rank());
  std::vector<int64_t> lengths(n, 0);
  lengths[me] = int64_t(mine.size());
  group.all_gather_bytes(&lengths[me], lengths.data(), 1, 8);
  const int64_t width = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(size_t(width), '\0');
  std::string all(size_t(width) * n, '\0');
  group.all_gather_bytes(padded.data(), all.data(), width, 1);
  std::vector<std::string> out;
  for (size_t r = 0; r < n; ++r) out.push_back(all.substr(r * size_t(width), size_t(lengths[r])));
  return out;
}

}  // namespace

void require_equal_replicas(Comm& group, const std::vector<HeldBlock>& blocks, const std::string& what) {
  if (group.size() == 1) return;
  const std::vector<std::string> texts = gather_texts(group, serialise(blocks));
  // "tensor box" -> the checksum each holding rank has, in rank order (and the first-seen order
  // of the blocks, so the message lists them as rank 0 holds them).
  std::map<std::string, std::vector<std::pair<int, std::string>>> holders;
  std::vector<std::string> order;
  for (size_t r = 0; r < texts.size(); ++r) {
    const std::string& text = texts[r];
    for (size_t pos = 0; pos < text.size();) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      const size_t tab = line.rfind('\t');
      if (tab == std::string::npos) continue;
      std::string block = line.substr(0, tab);
      std::replace(block.begin(), block.end(), '\t', ' ');
      auto [it, added] = holders.try_emplace(block);
      if (added) order.push_back(block);
      it->second.push_back({int(r), line.substr(tab + 1)});
    }
  }
  const size_t shown_blocks = 4;
  size_t differing = 0;
  std::string listed;
  for (const std::string& block : order) {
    const auto& copies = holders[block];
    const bool same = std::all_of(copies.begin(), copies.end(),
                                  [&](const auto& c) { return c.second == copies.front().second; });
    if (same || ++differing > shown_blocks) continue;
    // The ranks grouped by the checksum they hold: "ranks 0, 2: crc32c ..; rank 1: crc32c ..".
    std::vector<std::pair<std::string, std::vector<int>>> by_crc;
    for (const auto& [rank, crc] : copies) {
      auto g = std::find_if(by_crc.begin(), by_crc.end(), [&](const auto& e) { return e.first == crc; });
      if (g == by_crc.end()) by_crc.push_back({crc, {rank}});
      else g->second.push_back(rank);
    }
    std::string groups;
    for (const auto& [crc, ranks] : by_crc) {
      std::string names;
      for (size_t k = 0; k < ranks.size() && k < 4; ++k) names += (k ? ", " : "") + std::to_string(ranks[k]);
      if (ranks.size() > 4) names += " and " + std::to_string(ranks.size() - 4) + " more";
      groups += (groups.empty() ? "" : "; ") + std::string(ranks.size() > 1 ? "ranks " : "rank ") + names +
                ": crc32c " + crc;
    }
    listed += (listed.empty() ? "" : "; ") + block + " (" + groups + ")";
  }
  if (differing == 0) return;
  if (differing > shown_blocks) listed += "; and " + std::to_string(differing - shown_blocks) + " more blocks";
  fail("ranks hold different values of the same tensor (" + what + "): " + listed);
}

}  // namespace mt::parallel

#include "parallel/rank_places.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>

namespace mt::parallel {
namespace {

// A node name travels as a fixed-size record, so one all-gather moves every rank's.
constexpr int kNodeBytes = 64;
struct Record {
  int32_t local_rank;
  char node[kNodeBytes];
};

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// "0-3,6,8-9": runs of consecutive numbers shortened, the order kept (local ranks in rank order)
std::string ranges(const std::vector<int>& sorted) {
  std::string s;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(sorted[i]);
    if (j > i) {
      s += j == i + 1 ? ',' : '-';
      s += std::to_string(sorted[j]);
    }
    i = j + 1;
  }
  return s;
}

}  // namespace

std::vector<RankPlace> gather_rank_places(Comm& world, const LaunchEnv& env) {
  Record mine{};
  mine.local_rank = env.local_rank;
  const std::string node = env.node.empty() ? host_name() : env.node;
  std::strncpy(mine.node, node.c_str(), kNodeBytes - 1);
  std::vector<Record> all(size_t(world.size()));
  world.all_gather_bytes(&mine, all.data(), sizeof(Record), 1);

  std::vector<RankPlace> places;
  std::map<std::string, int> seen_on_node;  // ranks so far on each node, for missing local ranks
  for (const Record& r : all) {
    RankPlace p;
    p.node.assign(r.node, strnlen(r.node, kNodeBytes));
    const int position = seen_on_node[p.node]++;
    p.local_rank = r.local_rank >= 0 ? r.local_rank : position;
    places.push_back(p);
  }
  return places;
}

std::string describe_rank_places(const std::vector<RankPlace>& places, Launcher launcher) {
  std::vector<std::string> order;  // nodes in the order of their first rank
  std::map<std::string, std::pair<std::vector<int>, std::vector<int>>> on;  // ranks, local ranks
  for (size_t r = 0; r < places.size(); ++r) {
    auto& [ranks, locals] = on[places[r].node];
    if (ranks.empty()) order.push_back(places[r].node);
    ranks.push_back(int(r));
    locals.push_back(places[r].local_rank);
  }
  std::string s = std::to_string(places.size()) + " ranks on " + std::to_string(order.size()) +
                  (order.size() == 1 ? " node" : " nodes") + ", placed by " +
                  launcher_name(launcher) + ":";
  for (size_t i = 0; i < order.size(); ++i) {
    auto& [ranks, locals] = on[order[i]];
    s += (i ? "; " : " ") + order[i] + " runs rank" + (ranks.size() > 1 ? "s " : " ") +
         ranges(ranks) + " (local " + ranges(locals) + ")";
  }
  return s;
}

}  // namespace mt::parallel

#include "core/profile.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace mt::profile {

namespace {
bool g_on = false;
std::map<std::string, double>& table() {
  static std::map<std::string, double> t;
  return t;
}
}  // namespace

void enable(bool on) { g_on = on; }
bool enabled() { return g_on; }
void reset() { table().clear(); }
void add(const char* name, double seconds) { table()[name] += seconds; }
int& depth() {
  static int d = 0;
  return d;
}
const std::map<std::string, double>& totals() { return table(); }

std::string table(double wall, int64_t steps) {
  std::vector<std::pair<double, std::string>> rows;
  double accounted = 0.0;
  for (const auto& [name, sec] : totals()) rows.push_back({sec, name}), accounted += sec;
  std::sort(rows.rbegin(), rows.rend());
  rows.push_back({wall - accounted, "(unaccounted)"});
  std::string out;
  char line[128];
  for (const auto& [sec, name] : rows) {
    std::snprintf(line, sizeof(line), "    %-28s %8.1f ms  %5.1f%%\n", name.c_str(),
                  1e3 * sec / double(steps), wall > 0 ? 100.0 * sec / wall : 0.0);
    out += line;
  }
  return out;
}

}  // namespace mt::profile

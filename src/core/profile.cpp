#include "core/profile.h"

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

}  // namespace mt::profile

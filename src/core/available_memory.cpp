#include "core/available_memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/resource.h>

#include "core/error.h"

namespace mt {

namespace {

// The value of `key` in a "key value [kB]" file (/proc/meminfo, memory.stat), in bytes; -1 if absent.
int64_t keyed_value(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    std::istringstream s(line);
    std::string k, unit;
    int64_t v = 0;
    if (!(s >> k >> v)) continue;
    if (!k.empty() && k.back() == ':') k.pop_back();
    if (k != key) continue;
    s >> unit;
    return unit == "kB" ? v * 1024 : v;
  }
  return -1;
}

// A file holding one number ("max" or a v1 limit near 2^63 means none); -1 if absent or unlimited.
int64_t number_in(const std::string& path) {
  std::ifstream f(path);
  std::string text;
  if (!(f >> text) || text == "max") return -1;
  try {
    const long long v = std::stoll(text);
    return v >= (int64_t(1) << 62) ? -1 : int64_t(v);
  } catch (const std::exception&) {
    return -1;
  }
}

// Room under a cgroup's limit: limit - usage + inactive page cache; -1 without a limit.
int64_t cgroup_room(const std::string& dir, const char* limit, const char* usage, const char* inactive_key) {
  const int64_t max = number_in(dir + "/" + limit), used = number_in(dir + "/" + usage);
  if (max < 0 || used < 0) return -1;
  const int64_t cache = std::max<int64_t>(0, keyed_value(dir + "/memory.stat", inactive_key));
  return std::max<int64_t>(0, max - std::max<int64_t>(0, used - cache));
}

// This process's cgroup path in one hierarchy of /proc/self/cgroup: "0::<path>" (v2), or
// "<n>:memory:<path>" (v1); "" when not listed.
std::string cgroup_path(bool v2) {
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty() : controllers == "memory")
      return line.substr(b + 1);
  }
  return "";
}

// The least room under the limits of this process's cgroup and of every group above it (each
// one caps its descendants); -1 when none is set.
int64_t cgroup_room(bool v2) {
  const std::string mount = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
  const char* limit = v2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage = v2 ? "memory.current" : "memory.usage_in_bytes";
  const char* inactive = v2 ? "inactive_file" : "total_inactive_file";
  int64_t least = -1;
  // Inside a cgroup namespace the mount is the process's own group and the listed path is "/".
  for (std::string path = cgroup_path(v2);; path = path.substr(0, path.find_last_of('/'))) {
    const int64_t room = cgroup_room(mount + path, limit, usage, inactive);
    if (room >= 0 && (least < 0 || room < least)) least = room;
    if (path.empty() || path == "/") break;
  }
  return least;
}

// Room under this process's address-space limit (RLIMIT_AS, `ulimit -v`, `prlimit --as`): the
// limit less the address space mapped now (VmSize). A run past it fails its next allocation ("out
// of memory") though the machine has memory to spare, so it caps the figure like a cgroup does;
// -1 when unlimited.
int64_t address_space_room() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  const int64_t cap = limit.rlim_cur >= rlim_t(INT64_MAX) ? INT64_MAX : int64_t(limit.rlim_cur);
  return std::max<int64_t>(0, cap - std::max<int64_t>(0, keyed_value("/proc/self/status", "VmSize")));
}

}  // namespace

int64_t parse_memory_size(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    fail(what + " must be a size in bytes, or a number with K, M, G or T (binary units, e.g. 24G), got '" +
         text + "'");
  };
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    bad();
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();  // "24GB", "24GiB"
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1.0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const size_t k = units.find(char(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) bad();
    scale = std::pow(1024.0, double(k + 1));
  } else if (!unit.empty()) {
    bad();
  }
  const double bytes = v * scale;
  if (!std::isfinite(bytes) || bytes <= 0.0 || bytes >= 9e18) bad();
  return int64_t(bytes);
}

AvailableMemory available_memory() {
  if (const char* limit = std::getenv("MESHTRAIN_MEMORY_LIMIT"); limit && *limit)
    return {parse_memory_size(limit, "MESHTRAIN_MEMORY_LIMIT"), "MESHTRAIN_MEMORY_LIMIT"};
  AvailableMemory m{keyed_value("/proc/meminfo", "MemAvailable"), "MemAvailable"};
  for (const bool v2 : {true, false})
    if (const int64_t room = cgroup_room(v2); room >= 0 && (m.bytes < 0 || room < m.bytes))
      m = {room, "cgroup limit"};
  if (const int64_t room = address_space_room(); room >= 0 && (m.bytes < 0 || room < m.bytes))
    m = {room, "address-space limit (ulimit -v)"};
  return m;
}

}  // namespace mt

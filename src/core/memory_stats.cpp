#include "core/memory_stats.h"

#include <malloc.h>

#include <atomic>
#include <fstream>
#include <string>

namespace mt::memory_stats {

namespace {
std::atomic<size_t> g_current{0};
std::atomic<size_t> g_peak{0};
}  // namespace

void add(size_t bytes) {
  size_t now = g_current.fetch_add(bytes) + bytes;
  size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void sub(size_t bytes) { g_current.fetch_sub(bytes); }
size_t current_bytes() { return g_current.load(); }
size_t peak_bytes() { return g_peak.load(); }
void reset_peak() { g_peak.store(g_current.load()); }

void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

void restart_peaks() {
  malloc_trim(0);  // else freed buffers stay resident in the heap and in the new window's RSS
  reset_peak();
  reset_peak_rss();
}

size_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace mt::memory_stats

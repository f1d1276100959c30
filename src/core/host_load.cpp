#include "core/host_load.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

namespace mt {

namespace {

// The whole of a small /proc file; empty when it cannot be read.
std::string read_proc_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Tasks (threads) of process `pid` that are runnable now; 0 when it is gone or not on this host.
int64_t running_tasks(int64_t pid) {
  std::error_code ec;
  int64_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end;
       !ec && it != end; it.increment(ec))
    if (parse_task_running(read_proc_file(it->path().string() + "/stat"))) ++n;
  return n;
}

}  // namespace

int64_t parse_procs_running(const std::string& proc_stat) {
  std::istringstream in(proc_stat);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("procs_running ", 0) != 0) continue;
    char* end = nullptr;
    const long long n = std::strtoll(line.c_str() + 14, &end, 10);
    if (end == line.c_str() + 14 || n < 0) return -1;
    return n;
  }
  return -1;
}

bool parse_task_running(const std::string& task_stat) {
  const size_t close = task_stat.rfind(')');
  if (close == std::string::npos || close + 2 >= task_stat.size()) return false;
  return task_stat[close + 1] == ' ' && task_stat[close + 2] == 'R';
}

double parse_load_average_15(const std::string& loadavg) {
  std::istringstream in(loadavg);
  double one = 0, five = 0, fifteen = 0;
  if (!(in >> one >> five >> fifteen) || !(fifteen >= 0.0)) return -1.0;
  return fifteen;
}

double other_work_from_samples(const std::vector<RunnableSample>& samples) {
  double sum = 0.0;
  int64_t readable = 0;
  for (const RunnableSample& s : samples) {
    if (s.host < 0) continue;
    sum += double(std::max<int64_t>(0, s.host - s.own));
    ++readable;
  }
  if (readable == 0) return -1.0;
  return std::round(10.0 * sum / double(readable)) / 10.0;
}

HostLoad read_host_load(const std::vector<int64_t>& own_pids, double window_s, int samples) {
  samples = std::max(1, samples);
  const auto gap = std::chrono::duration<double>(window_s / double(samples));
  std::vector<RunnableSample> taken;
  taken.reserve(size_t(samples));
  for (int i = 0; i < samples; ++i) {
    if (i > 0) std::this_thread::sleep_for(gap);
    RunnableSample s;
    // The host's count first, then this job's: the reader is running at both moments, so it is
    // counted in the one and subtracted in the other.
    s.host = parse_procs_running(read_proc_file("/proc/stat"));
    if (s.host >= 0)
      for (int64_t pid : own_pids) s.own += running_tasks(pid);
    taken.push_back(s);
  }
  char window[32];
  std::snprintf(window, sizeof window, "%.3g s", window_s);
  if (const double load = other_work_from_samples(taken); load >= 0.0)
    return {load, "runnable now (/proc/stat over " + std::string(window) + ", this job's " +
                      std::to_string(own_pids.size()) + (own_pids.size() == 1 ? " process" : " processes") +
                      " excluded)"};
  if (const double avg = parse_load_average_15(read_proc_file("/proc/loadavg")); avg >= 0.0)
    return {std::round(avg), "15-minute load average: /proc/stat unreadable; it lags and counts this job"};
  return {0.0, "unknown: neither /proc/stat nor /proc/loadavg readable; priced idle"};
}

}  // namespace mt

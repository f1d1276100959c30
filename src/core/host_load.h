// How many processes of other work are running on this host now: what `--mesh auto` prices the
// host's cores with (plan/hardware.h host_load). Linux only: the figures come from /proc.
//
// The reading is the kernel's count of runnable tasks (/proc/stat `procs_running`, what the load
// average averages, as it is at the moment of reading) sampled over a short window, less the tasks
// of this job's own processes running at each sample. Not the load average: its 15-minute figure
// lags a machine going quiet by many minutes (docs/planner.md, "Pick against measured": an idle host
// read as 4 processes busy and priced so), and even the 1-minute one counts this job's own earlier
// runs. Not the CPU busy time of /proc/stat either: it stops at the cores' count, where 2 and 6
// processes of other work on 2 cores leave a rank very different shares (rank_share's C / P).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// /proc/stat's `procs_running` (runnable tasks now, the reader included); -1 when the text has none.
int64_t parse_procs_running(const std::string& proc_stat);

// Whether a /proc/<pid>/task/<tid>/stat line says the task is runnable (state R). The state is the
// field after the command name, which is in parentheses and may itself hold spaces and ')'.
bool parse_task_running(const std::string& task_stat);

// The 15-minute load average of /proc/loadavg's text; -1 when it cannot be read.
double parse_load_average_15(const std::string& loadavg);

// One sample: the host's runnable tasks and those of them that are this job's.
struct RunnableSample {
  int64_t host = -1;  // -1: unreadable
  int64_t own = 0;
};

// Mean over the readable samples of the host's runnable tasks less this job's (never below 0),
// rounded to a tenth of a process; -1 when no sample was readable.
double other_work_from_samples(const std::vector<RunnableSample>& samples);

struct HostLoad {
  double load = 0.0;   // processes of other work
  std::string source;  // how it was read, for the log ("running now, over 1 s, 3 processes of this job excluded")
};

// Samples /proc/stat `samples` times over `window_s` seconds, excluding the tasks of the processes
// `own_pids` (this job's processes on this host, the caller's included). Where /proc/stat cannot be
// read: the 15-minute load average, rounded to whole processes, said so in `source`; where neither
// can be read, 0.
HostLoad read_host_load(const std::vector<int64_t>& own_pids, double window_s = 1.0, int samples = 50);

}  // namespace mt

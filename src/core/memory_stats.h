// Counts bytes held in Buffers (current and peak), and reads the process's peak resident set.
// The trainer prints both: Buffer bytes are what the planner predicts; RSS adds libraries and heap.
#pragma once
#include <cstddef>

namespace mt::memory_stats {

void add(size_t bytes);
void sub(size_t bytes);
size_t current_bytes();
size_t peak_bytes();
void reset_peak();
size_t peak_rss_bytes();  // VmHWM of this process
void reset_peak_rss();     // start a new VmHWM window (Linux clear_refs)
// Returns the heap's free memory to the system (glibc's malloc_trim) and starts both peaks anew:
// after work whose memory is not the run's (the GEMM peak measurement), freed first.
void restart_peaks();

}  // namespace mt::memory_stats

// How much memory this process may still take before the kernel's OOM killer (or a container's
// limit) ends it, so a run too large for the machine is refused with a figure instead of growing
// until it is killed. Linux only: the figures come from /proc and /sys/fs/cgroup.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

struct AvailableMemory {
  int64_t bytes = 0;
  std::string source;  // what the figure is: "MemAvailable", "cgroup limit", "MESHTRAIN_MEMORY_LIMIT",
                       // "address-space limit (ulimit -v)"
};

// MESHTRAIN_MEMORY_LIMIT when set (bytes, or a number with a binary suffix K, M, G or T: "24G"),
// else the smaller of /proc/meminfo's MemAvailable and the room left under this process's memory
// cgroup (v2 memory.max, v1 memory.limit_in_bytes): the limit less what the group uses, counting
// its inactive page cache as free since the kernel reclaims that first; and the room under the
// process's address-space limit (RLIMIT_AS, `ulimit -v`) when it has one. A malformed variable is an
// mt::Error naming it; no readable figure at all gives bytes = -1.
AvailableMemory available_memory();

// "24G", "512M", "1.5T", "1073741824" -> bytes; mt::Error naming `what` otherwise.
int64_t parse_memory_size(const std::string& text, const std::string& what);

}  // namespace mt

// Output directories that belong to the operating system. A run or an export writes files and
// --overwrite removes them, so `--out /etc` (accepted before, as root: run.toml, metrics and a
// model written into /etc) must be refused before anything is created there.
#pragma once
#include <string>

namespace mt {

// mt::Error "<what> '<dir>' is inside the system directory /etc; ..." when `dir`, with symlinks
// resolved (as far as it exists), is /etc, /usr, /bin, /sbin, /lib*, /boot, /proc, /sys or /dev, or
// lies below one of them. /dev/shm (a tmpfs for users' files) is allowed.
void refuse_system_directory(const std::string& dir, const std::string& what);

}  // namespace mt

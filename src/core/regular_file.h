// Readers read whole files, so anything but a regular file must be refused before it is opened:
// opening a FIFO for reading blocks until some writer appears, and /dev/zero, /dev/urandom or a
// terminal never reach end-of-file. Either would hang the run with no message.
#pragma once
#include <string>

namespace mt {

// mt::Error "<what> '<path>' is a FIFO, not a regular file" (or a device, socket, directory)
// when path exists and is not a regular file (symlinks are followed). A path that cannot be
// stat'ed is left to the open that follows, whose own message says what is wrong with it.
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace mt

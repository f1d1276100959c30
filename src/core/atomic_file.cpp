#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace mt {

namespace {
void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}
}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& fill) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) fail(path + ": cannot create directory: " + ec.message());
  }
  // The temporary name is this process's own: ranks of one job may write the same file at once
  // (every rank building the same token cache); each then renames a complete file into place.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path + ": cannot open for writing");
    try {
      fill(out);
    } catch (...) {
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path + ": write failed (disk full?)");
    }
  }
  fsync_path(tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path + ": cannot rename temporary file into place");
  }
  fsync_path(p.has_parent_path() ? p.parent_path().string() : ".", O_RDONLY | O_DIRECTORY);
}

}  // namespace mt

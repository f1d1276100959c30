#include "core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/regular_file.h"
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace mt {

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\0')) out.pop_back();
  return out;
}

// The file at `path` is still the one open as `fd`: a holder that was releasing removed it, and
// a lock on the removed file would exclude no one who opens the path afresh.
bool still_at_path(int fd, const std::string& path) {
  struct stat open_st {}, path_st {};
  return ::fstat(fd, &open_st) == 0 && ::stat(path.c_str(), &path_st) == 0 &&
         open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino;
}

}  // namespace

std::string this_process_label() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return "pid " + std::to_string(::getpid()) + " host " + host;
}

FileLock::FileLock(const std::string& path, const std::string& what, std::string* previous)
    : path_(path) {
  // Its previous holder is read from it: a FIFO there would block that read.
  require_regular_file(path, "lock file");
  for (;;) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(path + ": cannot create lock file: " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
        locked_ = false;
        break;
      }
      const std::string holder = read_all(fd_);
      ::close(fd_);
      if (err == EWOULDBLOCK)
        fail(what + " is in use by " + (holder.empty() ? "another process" : holder) + " (" +
             path + ")");
      fail(path + ": cannot lock: " + std::strerror(err));
    }
    if (still_at_path(fd_, path)) break;
    ::close(fd_);  // locked a file its holder has just removed: open the path again
  }
  if (previous) *previous = read_all(fd_);
  const std::string me = this_process_label() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    const int err = errno;
    ::unlink(path.c_str());
    ::close(fd_);
    fail(path + ": cannot write lock file: " + std::strerror(err));
  }
}

FileLock::~FileLock() {
  // Removed while still held, so no other process can lock the file being removed and keep it.
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace mt

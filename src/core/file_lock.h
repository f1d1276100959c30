// An exclusive lock on a file, held for as long as the object lives: flock(2) on "<path>", whose
// contents name the holder ("pid 1234 host node7"). The kernel drops the lock when its holder
// exits however it exits (SIGKILL included), so a lock left by a dead process is simply taken
// over; only a live holder refuses, and is named. flock conflicts between two opens of the file
// even within one process, so two runs in one test process exclude each other as well.
#pragma once
#include <string>

namespace mt {

class FileLock {
 public:
  // Takes the lock or throws mt::Error "<what> is in use by pid N on host H" (the holder as its
  // file names it). `previous` receives the holder a stale lock file named ("" when there was
  // none), so the caller can say it took over. On a file system without locks (some network
  // mounts) the file is written all the same and locked() is false, for the caller to warn.
  FileLock(const std::string& path, const std::string& what, std::string* previous = nullptr);
  ~FileLock();  // removes the file, then releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::string& path() const { return path_; }
  bool locked() const { return locked_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool locked_ = true;
};

// "pid 1234 host node7": this process, as a lock file names it.
std::string this_process_label();

}  // namespace mt

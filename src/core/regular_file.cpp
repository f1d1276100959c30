#include "core/regular_file.h"

#include <sys/stat.h>

#include "core/clipped.h"
#include "core/error.h"

namespace mt {
namespace {

// What a non-regular file is, in the words a user would recognise.
const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "a special file";
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode)) fail(what + " '" + clipped(path, 200) + "' is " + kind_of(st.st_mode) + ", not a regular file");
}

}  // namespace mt

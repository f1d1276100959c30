#include "core/system_dirs.h"

#include <filesystem>

#include "core/clipped.h"
#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

void refuse_system_directory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  // weakly_canonical resolves the symlinks of the part that exists (/etc/ssl/certs -> its target,
  // /bin -> /usr/bin), so a link out of a user's directory into /etc is seen too.
  const fs::path here = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return;  // the directory's own creation reports what is wrong with it
  auto below = [&](const fs::path& top) {
    std::error_code e;
    const fs::path root = fs::weakly_canonical(top, e);
    if (e) return false;
    const fs::path rel = here.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  };
  if (below("/dev/shm")) return;
  for (const char* top : {"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc",
                          "/sys", "/dev"})
    if (below(top))
      fail(what + " '" + clipped(dir, 200) + "' is " + (here == fs::weakly_canonical(top, ec) ? "" : "inside ") +
           "the system directory " + top + "; give a directory of your own (e.g. runs/NAME)");
}

}  // namespace mt

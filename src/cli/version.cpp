#include "cli/version.h"

#include "cli/build_info.h"

namespace mt::cli {

std::string version_text() {
  std::string backends = "cpu";
#ifdef MESHTRAIN_CUDA
  backends += ", cuda";
#endif
  const std::string build_type = MESHTRAIN_BUILD_TYPE;
  return std::string("meshtrain ") + MESHTRAIN_VERSION + "\n" + "commit: " + MESHTRAIN_GIT_COMMIT + "\n" +
         "build: " + (build_type.empty() ? "unspecified" : build_type) + "\n" + "backends: " + backends + "\n";
}

}  // namespace mt::cli

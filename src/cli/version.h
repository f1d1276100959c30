// What `meshtrain --version` prints.
#pragma once
#include <string>

namespace mt::cli {

// "meshtrain 0.1.0\ncommit: 35648712bbc0\nbuild: Release\nbackends: cpu, cuda\n": the version,
// the git commit CMake found at configure time ("unknown" without git), the build type and the
// compute backends this binary was built with.
std::string version_text();

}  // namespace mt::cli

// One error type for everything the user can get wrong (config, files, data). The CLI catches it
// at the top and prints its message as one line, then exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace mt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error(msg); }

}  // namespace mt

// Internal invariant check: a failure is a bug, not bad input, but still a clean message.
#define MT_CHECK(cond, msg)                                                              \
  do {                                                                                   \
    if (!(cond)) ::mt::fail(std::string("internal error: ") + (msg) + " [" #cond "] at " \
                            __FILE__ ":" + std::to_string(__LINE__));                    \
  } while (0)

// The message of the mt::Error a call throws, for tests of error paths: one line (checked, since
// the CLI prints it as one), or "" when the call throws none, so EXPECT_EQ(error_of(f), "") says
// that f succeeded.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace mt {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error message is not one line: " << msg;
    return msg;
  }
  return "";
}

}  // namespace mt

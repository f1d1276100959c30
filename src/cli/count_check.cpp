#include "cli/count_check.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/clipped.h"

namespace mt::cli {

CLI::Validator count_in(int64_t min, int64_t max) {
  std::string expected = "a whole number >= " + std::to_string(min);
  if (max != std::numeric_limits<int64_t>::max()) expected += " and <= " + std::to_string(max);
  return CLI::Validator(
      [min, max, expected](std::string& text) -> std::string {
        const size_t start = !text.empty() && (text[0] == '-' || text[0] == '+');
        const bool digits = text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos;
        errno = 0;
        char* end = nullptr;
        const long long v = digits ? std::strtoll(text.c_str(), &end, 10) : 0;
        if (!digits) return "must be " + expected + ", got '" + clipped(text) + "'";
        if (errno == ERANGE) return "must be " + expected + ", got " + clipped(text) + " (beyond 64-bit integers)";
        if (v < min || v > max) return "must be " + expected + ", got " + clipped(text);
        return "";
      },
      expected);
}

}  // namespace mt::cli

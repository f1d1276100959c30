// A check for command-line counts (-n, --batch, --devices) that answers in words a user reads:
// CLI11's NonNegativeNumber printed its upper bound, DBL_MAX, as 309 digits, and a number past 64
// bits reached the option as whatever the conversion made of it.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace mt::cli {

// A whole number in [min, max], else "must be a whole number >= MIN (at most MAX), got VALUE",
// the value quoted in at most ~100 bytes.
CLI::Validator count_in(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());

}  // namespace mt::cli

#include "train/data_sources.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/clipped.h"
#include "train/config_schema.h"

namespace mt {

namespace {

// "0", "-2.5", "nan": as the user wrote it, not std::to_string's "0.000000".
std::string weight_text(float w) {
  std::ostringstream s;
  s << w;
  return s.str();
}

// "12.5%" -> 12.5; nullopt unless a number in [0, 100] then '%'.
std::optional<double> percent_of(const std::string& text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  const std::string number = text.substr(0, text.size() - 1);
  if (number.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(v >= 0 && v <= 100)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<SplitRange> parse_split(const std::string& split) {
  if (split == "train") return SplitRange{};
  if (split.rfind("train[", 0) != 0 || split.back() != ']') return std::nullopt;
  const std::string inner = split.substr(6, split.size() - 7);
  const size_t colon = inner.find(':');
  if (colon == std::string::npos || inner.find(':', colon + 1) != std::string::npos) return std::nullopt;
  SplitRange r;
  const std::string from = inner.substr(0, colon), to = inner.substr(colon + 1);
  if (!from.empty()) {
    const auto v = percent_of(from);
    if (!v) return std::nullopt;
    r.begin = *v;
  }
  if (!to.empty()) {
    const auto v = percent_of(to);
    if (!v) return std::nullopt;
    r.end = *v;
  }
  if (!(r.begin < r.end)) return std::nullopt;
  return r;
}

std::string check_data_sources(const std::vector<DataSource>& sources) {
  const std::vector<std::string_view>& formats = find_config_key("data.format")->choices;
  for (size_t i = 0; i < sources.size(); ++i) {
    const DataSource& s = sources[i];
    const std::string which = "data.sources: source " + std::to_string(i + 1) +
                              (s.path.empty() ? std::string() : " ('" + clipped(s.path) + "')") + ": ";
    if (s.path.empty()) return which + "path is missing (each [[data.sources]] names its file with path = \"...\")";
    if (s.path.find('\0') != std::string::npos) return which + "path holds a NUL byte";
    if (std::find(formats.begin(), formats.end(), s.format) == formats.end()) {
      std::string list;
      for (std::string_view f : formats) list += (list.empty() ? "" : ", ") + std::string(f);
      return which + "unknown format \"" + clipped(s.format) + "\" (expected one of " + list + ")";
    }
    if (!std::isfinite(s.weight) || !(s.weight > 0))
      return which + "weight must be a finite number > 0 (a share relative to the other sources' weights), got " +
             weight_text(s.weight);
    if (!parse_split(s.split))
      return which + "split must be \"train\" (the whole file) or a slice of it: \"train[:90%]\", \"train[10%:]\", "
             "\"train[10%:20%]\" (percentages, the first below the second), got \"" + clipped(s.split) + "\"";
    for (size_t j = 0; j < i; ++j)
      if (sources[j].path == s.path && sources[j].format == s.format && sources[j].columns == s.columns &&
          sources[j].split == s.split)
        return which + "the same file read the same way as source " + std::to_string(j + 1) +
               ": give it once, with the sum of the weights";
  }
  return "";
}

}  // namespace mt

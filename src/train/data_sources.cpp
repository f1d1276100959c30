#include "train/data_sources.h"

#include <algorithm>
#include <cmath>
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

}  // namespace

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
    if (s.split != "train")
      return which + "split must be \"train\" (the file less its held-out tail, data.val_fraction), got \"" +
             clipped(s.split) + "\"";
    for (size_t j = 0; j < i; ++j)
      if (sources[j].path == s.path && sources[j].format == s.format && sources[j].columns == s.columns &&
          sources[j].split == s.split)
        return which + "the same file read the same way as source " + std::to_string(j + 1) +
               ": give it once, with the sum of the weights";
  }
  return "";
}

}  // namespace mt

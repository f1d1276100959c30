#include "train/data_sources.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

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

// One end of a slice: "12.5%", "-10%" (percent), "1000", "-500" (rows); nullopt unless one of them.
struct SplitBound {
  double value;
  bool rows;
};
std::optional<SplitBound> split_bound_of(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  const size_t digits = number.rfind('-', 0) == 0 ? 1 : 0;  // a leading minus
  if (number.size() <= digits || number.find_first_not_of(percent ? "0123456789." : "0123456789", digits) !=
                                     std::string::npos)
    return std::nullopt;
  if (!percent) {
    // Counts of rows are exact integers (2^53 bounds them; no file holds as many).
    if (number.size() - digits > 15) return std::nullopt;
    return SplitBound{double(std::stoll(number)), true};
  }
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(v >= -100 && v <= 100)) return std::nullopt;
  return SplitBound{v, false};
}

// A percentage from the end (-10%) as one from the start (90%).
double percent_from_start(double percent) { return percent < 0 ? 100 + percent : percent; }

// Item `v` (a percentage or a count, negative from the end) of n, within [0, n].
size_t split_item_at(double v, bool rows, size_t n) {
  if (rows) {
    const double i = v < 0 ? double(n) + v : v;
    return size_t(std::clamp(i, 0.0, double(n)));
  }
  const double p = percent_from_start(v);
  return p >= 100 ? n : size_t(double(n) * p / 100.0);
}

}  // namespace

bool SplitRange::whole() const { return begin == 0 && !end_rows && end == 100; }
size_t SplitRange::first(size_t n) const { return split_item_at(begin, begin_rows, n); }
size_t SplitRange::last(size_t n) const { return split_item_at(end, end_rows, n); }

std::string SplitRange::misfit(size_t n, const std::string& items) const {
  const std::string holds = std::to_string(n) + " " + items;
  for (const auto& [v, rows] : {std::pair{begin, begin_rows}, std::pair{end, end_rows}}) {
    if (!rows) continue;
    if (v > double(n))
      return "split \"" + text + "\" reaches item " + std::to_string(int64_t(v)) + " of " + holds + " (give at most " +
             std::to_string(n) + ", or a percentage)";
    if (-v > double(n))
      return "split \"" + text + "\" starts " + std::to_string(int64_t(-v)) + " items before the end of " + holds +
             " (give at most " + std::to_string(n) + ", or a percentage)";
  }
  if (last(n) <= first(n)) return "split \"" + text + "\" of " + holds + " holds none";
  return "";
}

std::optional<SplitRange> parse_split(const std::string& split) {
  SplitRange r;
  r.text = split;
  if (split == "train") return r;
  if (split.rfind("train[", 0) != 0 || split.back() != ']') return std::nullopt;
  const std::string inner = split.substr(6, split.size() - 7);
  const size_t colon = inner.find(':');
  if (colon == std::string::npos || inner.find(':', colon + 1) != std::string::npos) return std::nullopt;
  const std::string from = inner.substr(0, colon), to = inner.substr(colon + 1);
  if (!from.empty()) {
    const auto b = split_bound_of(from);
    if (!b) return std::nullopt;
    r.begin = b->value, r.begin_rows = b->rows;
  }
  if (!to.empty()) {
    const auto b = split_bound_of(to);
    if (!b) return std::nullopt;
    r.end = b->value, r.end_rows = b->rows;
  }
  // Ends of one kind (and, for counts, one side) are ordered here; others only against the file.
  if (!r.begin_rows && !r.end_rows && !(percent_from_start(r.begin) < percent_from_start(r.end))) return std::nullopt;
  if (r.begin_rows && r.end_rows && (r.begin < 0) == (r.end < 0) && !(r.begin < r.end)) return std::nullopt;
  return r;
}

std::string split_problem(const std::string& split) {
  if (split.find('+') != std::string::npos)
    return "split \"" + clipped(split) + "\" joins slices with '+': give each slice as a source of its own (the same "
           "path, its own split and weight)";
  return "split must be \"train\" (the whole file) or a slice of it: \"train[:90%]\", \"train[10%:]\", "
         "\"train[10%:20%]\" (percentages), \"train[:1000]\", \"train[100:200]\", \"train[-500:]\" (counts of "
         "records, negative from the end), the first end before the second, got \"" + clipped(split) + "\"";
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
    if (!parse_split(s.split)) return which + split_problem(s.split);
    for (size_t j = 0; j < i; ++j)
      if (sources[j].path == s.path && sources[j].format == s.format && sources[j].columns == s.columns &&
          sources[j].split == s.split)
        return which + "the same file read the same way as source " + std::to_string(j + 1) +
               ": give it once, with the sum of the weights";
  }
  return "";
}

}  // namespace mt

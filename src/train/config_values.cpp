#include "train/config_values.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/clipped.h"
#include "core/error.h"

namespace mt {
namespace {

// std::visit over a ConfigField with one lambda per field type.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

std::string num(double v) {
  // Whole numbers in full ("16777216", not "1.67772e+07"): range limits and counts.
  if (v == std::floor(v) && std::fabs(v) < 0x1p53) return std::to_string(int64_t(v));
  std::ostringstream s;
  s << v;
  return s.str();
}

// Shortest text that reads back to the same float, kept a TOML float ("1.0", not "1") and with
// the exponent's leading zeros dropped ("1e-8", not "1e-08").
std::string fmt_float(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  const size_t e = s.find('e');
  if (e == std::string::npos) {
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  size_t digits = e + 1 + (s[e + 1] == '-' || s[e + 1] == '+');
  while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  if (s[e + 1] == '+') s.erase(e + 1, 1);
  return s;
}

std::string fmt_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += char(ch);
        }
    }
  }
  return out + "\"";
}

std::string fmt_string_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + fmt_string(v[i]);
  return out + "]";
}

// One rule per line, as inline tables: the same rules parallel/partition.h reads from
// [[partition.rules]] blocks, but written as a plain `rules = [...]` value.
std::string fmt_rules(const parallel::PartitionRules& rules) {
  if (rules.empty()) return "[]";
  std::string out = "[\n";
  for (const auto& r : rules.rules()) {
    std::vector<std::string> dims;
    for (const auto& axes : r.spec.dims) {
      if (axes.empty()) {
        dims.push_back("\"none\"");
      } else if (axes.size() == 1) {
        dims.push_back(fmt_string(parallel::axis_name(axes[0])));
      } else {
        std::vector<std::string> names;
        for (auto a : axes) names.push_back(parallel::axis_name(a));
        dims.push_back(fmt_string_list(names));
      }
    }
    std::string spec = "[";
    for (size_t i = 0; i < dims.size(); ++i) spec += (i ? ", " : "") + dims[i];
    out += "  { pattern = " + fmt_string(r.pattern) + ", spec = " + spec + "] },\n";
  }
  return out + "]";
}

// One source per line, as inline tables with every key: [[data.sources]] blocks written as a plain
// `sources = [...]` value, as the partition rules are.
std::string fmt_sources(const std::vector<DataSource>& sources) {
  if (sources.empty()) return "[]";
  std::string out = "[\n";
  for (const DataSource& s : sources)
    out += "  { path = " + fmt_string(s.path) + ", format = " + fmt_string(s.format) + ", weight = " +
           fmt_float(s.weight) + ", split = " + fmt_string(s.split) + ", columns = " + fmt_string_list(s.columns) +
           " },\n";
  return out + "]";
}

// [[data.sources]] tables as DataSource values; a key outside kDataSourceKeys or a value of the
// wrong type is refused naming the source.
std::vector<DataSource> read_sources(const toml::node& n, const std::string& where) {
  const toml::array* a = n.as_array();
  if (!a)
    fail(where + ": data.sources must be an array of tables ([[data.sources]] with path, format, weight, split), got " +
         toml_type_name(n));
  std::vector<DataSource> out;
  for (const toml::node& e : *a) {
    const std::string which = where + ": data.sources: source " + std::to_string(out.size() + 1);
    const toml::table* t = e.as_table();
    if (!t) fail(which + " must be a table, got " + toml_type_name(e));
    DataSource s;
    for (auto&& [k, value] : *t) {
      const std::string key(k.str());
      const toml::node& v = value;  // a structured binding cannot be captured (clang, which builds the fuzzers)
      auto string_of = [&](std::string& field) {
        if (!v.is_string()) fail(which + ": " + key + " must be a string, got " + toml_type_name(v));
        field = v.as_string()->get();
      };
      if (key == "path") string_of(s.path);
      else if (key == "format") string_of(s.format);
      else if (key == "split") string_of(s.split);
      else if (key == "weight") {
        if (v.is_floating_point()) s.weight = float(v.as_floating_point()->get());
        else if (v.is_integer()) s.weight = float(v.as_integer()->get());
        else fail(which + ": weight must be a number, got " + toml_type_name(v));
      } else if (key == "columns") {
        const toml::array* c = v.as_array();
        if (!c) fail(which + ": columns must be an array of strings, got " + toml_type_name(v));
        for (const toml::node& col : *c) {
          if (!col.is_string()) fail(which + ": columns must be an array of strings, got an element that is " +
                                     toml_type_name(col));
          s.columns.push_back(col.as_string()->get());
        }
      } else {
        std::string keys;
        for (const char* known : kDataSourceKeys) keys += (keys.empty() ? "" : ", ") + std::string(known);
        fail(which + ": unknown key '" + clipped(key) + "' (a source has " + keys + ")");
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool in_range(double v, const ValueRange& r) {
  if (std::isnan(v)) return false;
  if (r.min_open ? !(v > r.min) : !(v >= r.min)) return false;
  if (r.max_open ? !(v < r.max) : !(v <= r.max)) return false;
  return true;
}

bool has_bounds(const ValueRange& r) { return std::isfinite(r.min) || std::isfinite(r.max); }

std::string range_text(const ValueRange& r) {
  const bool lo = std::isfinite(r.min), hi = std::isfinite(r.max);
  if (lo && hi)
    return "in " + std::string(r.min_open ? "(" : "[") + num(r.min) + ", " + num(r.max) +
           (r.max_open ? ")" : "]");
  if (lo) return (r.min_open ? "> " : ">= ") + num(r.min);
  if (hi) return (r.max_open ? "< " : "<= ") + num(r.max);
  return "";
}

// "\"a\", \"b\" or \"c\"" (quoted) or "a, b, c" (plain).
std::string choice_list(const std::vector<std::string_view>& choices, bool quoted) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) out += quoted && i + 1 == choices.size() ? " or " : ", ";
    if (quoted) out += '"';
    out += choices[i];
    if (quoted) out += '"';
  }
  return out;
}

// Longer than PATH_MAX: no file can be named by it, and quoting it whole would flood the terminal.
constexpr size_t kMaxStringValue = 4096;

bool is_decimal_integer(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '-' || s[0] == '+');
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

// "\0" for each NUL, so a quoted value shows where it was instead of ending the message there.
std::string escape_nuls(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '\0' ? std::string("\\0") : std::string(1, ch);
  return out;
}

bool is_choice(const ConfigKey& key, const std::string& v) {
  return std::find(key.choices.begin(), key.choices.end(), v) != key.choices.end();
}

}  // namespace

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

void read_config_value(const toml::node& n, const ConfigKey& key, RunConfig& c,
                       const std::string& where) {
  const std::string name(key.name);
  auto type_error = [&](const std::string& expected, const toml::node& got) {
    fail(where + ": " + name + " must be " + expected + ", got " + toml_type_name(got));
  };
  std::visit(
      Overloaded{
          [&](int64_t* out) {
            // A --set of a whole number past 64 bits is no TOML integer and arrives as a string;
            // "got a string" would send the user looking for quotes that are not there.
            if (n.is_string() && is_decimal_integer(n.as_string()->get()))
              fail(where + ": " + name + " must be " + range_text(key.range) + ", got " +
                   clipped(n.as_string()->get()) + " (beyond 64-bit integers)");
            if (!n.is_integer()) type_error("an integer", n);
            *out = n.as_integer()->get();
          },
          [&](uint64_t* out) {
            if (!n.is_integer()) type_error("an integer", n);
            const int64_t v = n.as_integer()->get();
            if (v < 0) fail(where + ": " + name + " must be >= 0, got " + std::to_string(v));
            *out = uint64_t(v);
          },
          [&](float* out) {
            // check_config_value refuses what is not finite, including a double past float's range.
            if (n.is_floating_point()) *out = float(n.as_floating_point()->get());
            else if (n.is_integer()) *out = float(n.as_integer()->get());  // 1 for 1.0 is fine
            else type_error("a number", n);
          },
          [&](bool* out) {
            if (!n.is_boolean()) type_error("a boolean (true or false)", n);
            *out = n.as_boolean()->get();
          },
          [&](std::string* out) {
            if (!n.is_string()) type_error("a string", n);
            *out = n.as_string()->get();
          },
          [&](std::vector<std::string>* out) {
            const toml::array* a = n.as_array();
            if (!a) type_error("an array of strings", n);
            std::vector<std::string> v;
            for (const toml::node& e : *a) {
              if (!e.is_string())
                fail(where + ": " + name + " must be an array of strings, got an element that is " +
                     toml_type_name(e));
              v.push_back(e.as_string()->get());
            }
            *out = std::move(v);
          },
          [&](Precision* out) {
            // An enum cannot hold a wrong value to check later, so the choice is checked here.
            if (!n.is_string()) type_error("a string", n);
            const std::string v = n.as_string()->get();
            if (!is_choice(key, v))
              fail(where + ": " + name + " must be " + choice_list(key.choices, true) + ", got \"" +
                   clipped(v) + "\"");
            *out = v == "fp32" ? Precision::fp32 : Precision::bf16;
          },
          [&](parallel::PartitionRules* out) {
            // The rules' own syntax and checks belong to parallel/partition.h: hand it the array.
            if (!n.is_array()) type_error("an array of tables ([[partition.rules]])", n);
            toml::table doc;
            doc.insert_or_assign("partition", toml::table{{"rules", *n.as_array()}});
            std::ostringstream text;
            text << doc;
            *out = parallel::parse_partition_toml(text.str(), where).rules;
          },
          [&](std::vector<DataSource>* out) { *out = read_sources(n, where); },
      },
      field_of(key, c));
}

std::string check_config_value(const ConfigKey& key, const RunConfig& c) {
  const std::string name(key.name);
  auto number = [&](double v, const std::string& text) -> std::string {
    if (in_range(v, key.range)) return "";
    if (!has_bounds(key.range)) return name + " must be a number, got nan";
    return name + " must be " + range_text(key.range) + ", got " + text;
  };
  return std::visit(
      Overloaded{
          [&](int64_t* v) { return number(double(*v), std::to_string(*v)); },
          [&](uint64_t*) { return std::string(); },  // the reader refused negatives
          [&](float* v) -> std::string {
            // inf passes every "> 0" bound and becomes `null` in a JSON config: no key takes it.
            if (!std::isfinite(*v))
              return name + " must be a finite number, got " + (std::isnan(*v) ? "nan" : *v > 0 ? "inf" : "-inf");
            return number(*v, num(*v));
          },
          [&](bool*) { return std::string(); },
          [&](std::string* v) -> std::string {
            if (key.non_empty && v->empty()) return name + " must not be empty";
            // No path or name holds a NUL, and one would cut every message that quotes the value.
            if (const size_t nul = v->find('\0'); nul != std::string::npos)
              return name + " holds a NUL byte at offset " + std::to_string(nul) + ": \"" +
                     clipped(escape_nuls(*v)) + "\"";
            if (v->size() > kMaxStringValue)
              return name + " is " + std::to_string(v->size()) + " bytes long, more than the " +
                     std::to_string(kMaxStringValue) + " any path or name may have: \"" + clipped(*v) + "\"";
            if (!key.choices.empty() && !is_choice(key, *v))
              return name + " must be " + choice_list(key.choices, true) + ", got \"" + clipped(*v) + "\"";
            return "";
          },
          [&](std::vector<std::string>* v) -> std::string {
            for (size_t i = 0; i < v->size(); ++i) {
              const std::string& e = (*v)[i];
              if (!key.choices.empty() && !is_choice(key, e))
                return name + ": unknown entry '" + e + "' (expected some of " +
                       choice_list(key.choices, false) + ")";
              if (std::find(v->begin(), v->begin() + i, e) != v->begin() + i)
                return name + ": '" + e + "' is listed twice";
            }
            return "";
          },
          [&](Precision*) { return std::string(); },  // checked when read
          [&](parallel::PartitionRules*) { return std::string(); },  // checked when read
          [&](std::vector<DataSource>* v) { return check_data_sources(*v); },
      },
      field_of(key, c));
}

std::string config_value_toml(const ConfigKey& key, const RunConfig& c) {
  return std::visit(
      Overloaded{
          [](int64_t* v) { return std::to_string(*v); },
          // TOML integers are signed 64-bit; a seed above INT64_MAX is written as its two's
          // complement so the file still parses (and is refused as negative) rather than changing.
          [](uint64_t* v) { return std::to_string(int64_t(*v)); },
          [](float* v) { return fmt_float(*v); },
          [](bool* v) { return std::string(*v ? "true" : "false"); },
          [](std::string* v) { return fmt_string(*v); },
          [](std::vector<std::string>* v) { return fmt_string_list(*v); },
          [](Precision* v) { return fmt_string(precision_name(*v)); },
          [](parallel::PartitionRules* v) { return fmt_rules(*v); },
          [](std::vector<DataSource>* v) { return fmt_sources(*v); },
      },
      field_of(key, c));
}

std::string config_type_name(const ConfigKey& key) {
  RunConfig probe;
  return std::visit(Overloaded{
                        [](int64_t*) { return "int"; },
                        [](uint64_t*) { return "int"; },
                        [](float*) { return "float"; },
                        [](bool*) { return "bool"; },
                        [](std::string*) { return "string"; },
                        [](std::vector<std::string>*) { return "array of strings"; },
                        [](Precision*) { return "string"; },
                        [](parallel::PartitionRules*) { return "array of tables"; },
                        [](std::vector<DataSource>*) { return "array of tables"; },
                    },
                    field_of(key, probe));
}

std::string config_allowed_text(const ConfigKey& key) {
  RunConfig probe;
  const ConfigField f = field_of(key, probe);
  std::string out;
  if (has_bounds(key.range)) out = range_text(key.range);
  if (!key.choices.empty())
    out = std::holds_alternative<std::vector<std::string>*>(f)
              ? "some of " + choice_list(key.choices, false) + ", no duplicates"
              : choice_list(key.choices, true);
  if (key.non_empty) out = "not empty";
  return out;
}

bool is_string_key(const ConfigKey& key) {
  RunConfig probe;
  const ConfigField f = field_of(key, probe);
  return std::holds_alternative<std::string*>(f) || std::holds_alternative<Precision*>(f);
}

}  // namespace mt

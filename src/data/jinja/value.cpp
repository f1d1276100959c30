#include "data/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/jinja/template.h"

namespace mt::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
void Dict::set(const std::string& key, Value v) {
  if (Value* old = find(key)) *old = std::move(v);
  else items.emplace_back(key, std::move(v));
}

Value Args::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return pos[index];
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return Value();
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "mapping";
    case Kind::kNamespace: return "namespace";
    case Kind::kFunction: return "function";
  }
  return "value";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0;
    case Kind::kString: return !v.str.s.empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return !v.dict->items.empty();
    default: return true;
  }
}

namespace {
bool numeric(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kFloat || v.kind == Kind::kBool; }
double number(const Value& v) { return v.kind == Kind::kFloat ? v.f : v.kind == Kind::kInt ? double(v.i) : double(v.b); }
}  // namespace

bool equal(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) return number(a) == number(b);
    return (a.kind == Kind::kInt ? a.i : a.b) == (b.kind == Kind::kInt ? b.i : b.b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined: case Kind::kNone: return true;
    case Kind::kString: return a.str.s == b.str.s;
    case Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equal((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Kind::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    default: return a.dict == b.dict && a.fn == b.fn;
  }
}

namespace {

// Python's repr() of a float.
std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string s = buf;
  const size_t e = s.find('e');
  if (e != std::string::npos) {  // Python writes e+16 / e-05 as 1e+16 / 1e-05
    const int exp = std::atoi(s.c_str() + e + 1);
    if (exp >= -4 && exp < 16) {
      std::snprintf(buf, sizeof buf, "%.*f", std::max(0, 16 - exp), f);
      s = buf;
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s += '0';
      return s;
    }
    std::string mant = s.substr(0, e);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return mant + exp_buf;
  }
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

std::string py_repr_string(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) { out += '\\'; out += q; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

std::string py_repr(const Value& v) {
  switch (v.kind) {
    case Kind::kString: return py_repr_string(v.str.s);
    case Kind::kList: {
      std::string s = "[";
      for (size_t i = 0; i < v.list->size(); ++i) s += (i ? ", " : "") + py_repr((*v.list)[i]);
      return s + "]";
    }
    case Kind::kDict: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        s += (first ? "" : ", ") + py_repr_string(k) + ": " + py_repr(x);
        first = false;
      }
      return s + "}";
    }
    default: return to_text(v).s;
  }
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void json_value(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Kind::kUndefined: case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.b ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat:
      out += std::isfinite(v.f) ? float_repr(v.f) : (std::isnan(v.f) ? "NaN" : v.f < 0 ? "-Infinity" : "Infinity");
      return;
    case Kind::kString: json_string(v.str.s, out); return;
    case Kind::kList:
      if (v.list->empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value((*v.list)[i], indent, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    case Kind::kDict: case Kind::kNamespace: {
      if (v.dict->items.empty()) { out += "{}"; return; }
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        json_string(k, out);
        out += ": ";
        json_value(x, indent, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Kind::kFunction: fail("chat template: tojson of a function");
  }
}

}  // namespace

Text to_text(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return Text();
    case Kind::kNone: return Text("None", v.origin);
    case Kind::kBool: return Text(v.b ? "True" : "False", v.origin);
    case Kind::kInt: return Text(std::to_string(v.i), v.origin);
    case Kind::kFloat: return Text(float_repr(v.f), v.origin);
    case Kind::kString: return v.str;
    case Kind::kFunction: return Text("<function>", kData);
    default: return Text(py_repr(v), v.origin);
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_value(v, indent, 0, out);
  return out;
}

Value from_json(const nlohmann::ordered_json& j, int32_t origin) {
  Value v;
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: v = Value::none(); break;
    case nlohmann::ordered_json::value_t::boolean: v = Value::boolean(j.get<bool>()); break;
    case nlohmann::ordered_json::value_t::number_integer: v = Value::integer(j.get<int64_t>()); break;
    case nlohmann::ordered_json::value_t::number_unsigned: v = Value::integer(static_cast<int64_t>(j.get<uint64_t>())); break;
    case nlohmann::ordered_json::value_t::number_float: v = Value::real(j.get<double>()); break;
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>(), origin);
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& x : j) items.push_back(from_json(x, origin));
      v = Value::make_list(std::move(items));
      break;
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, x] : j.items()) d.items.emplace_back(k, from_json(x, origin));
      v = Value::make_dict(std::move(d));
      break;
    }
    default: v = Value::none();
  }
  v.origin = origin;
  return v;
}

}  // namespace mt::jinja

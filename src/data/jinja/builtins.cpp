// Jinja's filters and tests, Python's string and dict methods, and the globals transformers gives
// chat templates, for the values of value.h. Strings are indexed, sliced and measured by Unicode
// character, as Python does; text keeps its origin through every operation that moves it.
#include "data/jinja/builtins.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt::jinja {

void fail_line(int line, const std::string& msg) { fail("chat template line " + std::to_string(line) + ": " + msg); }

std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

namespace {

// The code point at s[i] and its length in bytes.
uint32_t code_point(const std::string& s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + static_cast<size_t>(n) > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = static_cast<size_t>(n);
  return cp;
}

// Python's str.isspace() for one code point.
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's strip / lstrip / rstrip: of whitespace, or of the characters of `chars`.
Text strip(const Text& t, const Value& chars, bool left, bool right) {
  const std::string& s = t.s;
  std::vector<uint32_t> set;
  const bool by_set = chars.is(Kind::kString);
  if (by_set)
    for (size_t i = 0, n; i < chars.str.s.size(); i += n) set.push_back(code_point(chars.str.s, i, &n));
  const auto strip_it = [&](uint32_t c) { return by_set ? std::count(set.begin(), set.end(), c) > 0 : py_space(c); };
  const std::vector<size_t> starts = char_starts(s);
  size_t b = 0, e = starts.size();
  size_t n;
  if (left)
    while (b < e && strip_it(code_point(s, starts[b], &n))) ++b;
  if (right)
    while (e > b && strip_it(code_point(s, starts[e - 1], &n))) --e;
  const size_t from = b < starts.size() ? starts[b] : s.size();
  const size_t to = e < starts.size() ? starts[e] : s.size();
  return t.sub(from, to - from);
}

const std::string& need_string(const Value& v, const char* what, int line) {
  if (!v.is(Kind::kString)) fail_line(line, std::string(what) + " needs a string, not a " + kind_name(v.kind));
  return v.str.s;
}

int64_t need_int(const Value& v, const char* what, int line) {
  if (v.is(Kind::kInt)) return v.i;
  if (v.is(Kind::kBool)) return v.b;
  fail_line(line, std::string(what) + " needs an integer, not a " + kind_name(v.kind));
}

Text replace(const Text& t, const std::string& old, const Text& with, int64_t count) {
  if (old.empty()) return t;  // Python inserts between characters; no template does that
  Text out;
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t at = t.s.find(old, pos);
    if (at == std::string::npos) break;
    out.append(t.sub(pos, at - pos));
    out.append(with);
    pos = at + old.size();
  }
  out.append(t.sub(pos));
  return out;
}

Value split(const Text& t, const Value& sep, int64_t maxsplit) {
  List parts;
  const std::string& s = t.s;
  if (!sep.defined() || sep.is(Kind::kNone)) {  // runs of whitespace, none empty
    size_t i = 0;
    while (i < s.size()) {
      size_t n;
      while (i < s.size() && py_space(code_point(s, i, &n))) i += n;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        Text rest = strip(t.sub(i), Value(), false, true);
        parts.push_back(Value::string(rest));
        break;
      }
      size_t j = i;
      while (j < s.size() && !py_space(code_point(s, j, &n))) j += n;
      parts.push_back(Value::string(t.sub(i, j - i)));
      i = j;
    }
    return Value::make_list(std::move(parts));
  }
  const std::string& d = sep.str.s;
  if (d.empty()) fail("chat template: split() of an empty separator");
  size_t pos = 0;
  for (;;) {
    const size_t at = maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit ? std::string::npos : s.find(d, pos);
    if (at == std::string::npos) break;
    parts.push_back(Value::string(t.sub(pos, at - pos)));
    pos = at + d.size();
  }
  parts.push_back(Value::string(t.sub(pos)));
  return Value::make_list(std::move(parts));
}

Text case_mapped(const Text& t, int how) {  // 0 lower, 1 upper, 2 title, 3 capitalize (ASCII letters)
  Text out = t;
  bool word_start = true;
  for (size_t i = 0; i < out.s.size(); ++i) {
    char& c = out.s[i];
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    bool up = how == 1 || (how == 2 && word_start) || (how == 3 && i == 0);
    if (how == 3 && i > 0) up = false;
    c = static_cast<char>(up ? std::toupper(static_cast<unsigned char>(c)) : how == 1 ? c : std::tolower(static_cast<unsigned char>(c)));
    word_start = !alpha;
  }
  return out;
}

// A bound method: `object.name` called later with its arguments.
Value method(const Value& object, const std::string& name, int line) {
  if (object.is(Kind::kString)) {
    const Text t = object.str;
    static const char* const kNames[] = {"startswith", "endswith", "split", "strip", "lstrip", "rstrip", "upper",
                                         "lower", "title", "capitalize", "replace", "find", "join", "count"};
    if (std::find_if(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; }) == std::end(kNames))
      return Value();
    return Value::function([t, name, line](Args& a) -> Value {
      if (name == "startswith" || name == "endswith") {
        const Value p = a.get(0, "prefix");
        std::vector<std::string> options;
        if (p.is(Kind::kList))
          for (const Value& x : *p.list) options.push_back(need_string(x, name.c_str(), line));
        else
          options.push_back(need_string(p, name.c_str(), line));
        for (const std::string& o : options) {
          if (name == "startswith" ? t.s.rfind(o, 0) == 0
                                   : t.s.size() >= o.size() && t.s.compare(t.s.size() - o.size(), o.size(), o) == 0)
            return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      if (name == "split") {
        const Value maxsplit = a.get(1, "maxsplit");
        return split(t, a.get(0, "sep"), maxsplit.defined() ? need_int(maxsplit, "split", line) : -1);
      }
      if (name == "strip" || name == "lstrip" || name == "rstrip")
        return Value::string(strip(t, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
      if (name == "upper") return Value::string(case_mapped(t, 1));
      if (name == "lower") return Value::string(case_mapped(t, 0));
      if (name == "title") return Value::string(case_mapped(t, 2));
      if (name == "capitalize") return Value::string(case_mapped(t, 3));
      if (name == "replace") {
        const Value count = a.get(2, "count");
        return Value::string(replace(t, need_string(a.get(0, "old"), "replace", line),
                                     to_text(a.get(1, "new")), count.defined() ? need_int(count, "replace", line) : -1));
      }
      if (name == "find") {
        const size_t at = t.s.find(need_string(a.get(0, "sub"), "find", line));
        if (at == std::string::npos) return Value::integer(-1);
        const auto starts = char_starts(t.s);
        return Value::integer(std::lower_bound(starts.begin(), starts.end(), at) - starts.begin());
      }
      if (name == "count") {
        const std::string& sub = need_string(a.get(0, "sub"), "count", line);
        int64_t n = 0;
        for (size_t at = t.s.find(sub); !sub.empty() && at != std::string::npos; at = t.s.find(sub, at + sub.size())) ++n;
        return Value::integer(n);
      }
      // join
      Text out;
      const List items = iterate(a.get(0, "iterable"), line);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out.append(t);
        out.append(to_text(items[i]));
      }
      return Value::string(out);
    });
  }
  if (object.is(Kind::kDict)) {
    const auto dict = object.dict;
    const int32_t origin = object.origin;
    if (name == "items" || name == "keys" || name == "values")
      return Value::function([dict, name, origin](Args&) {
        List out;
        for (const auto& [k, v] : dict->items) {
          if (name == "keys") out.push_back(Value::string(k, origin));
          else if (name == "values") out.push_back(v);
          else out.push_back(Value::make_list({Value::string(k, origin), v}));
        }
        return Value::make_list(std::move(out));
      });
    if (name == "get")
      return Value::function([dict, line](Args& a) {
        const Value* v = dict->find(need_string(a.get(0, "key"), "get", line));
        if (v) return *v;
        const Value d = a.get(1, "default");
        return d.defined() ? d : Value::none();
      });
  }
  return Value();
}

bool test_of(const std::string& name, const Value& v, const Args& a, int line) {
  const Value arg = a.get(0, "other");
  if (name == "defined") return v.defined();
  if (name == "undefined") return !v.defined();
  if (name == "none") return v.is(Kind::kNone);
  if (name == "string") return v.is(Kind::kString);
  if (name == "number") return v.is(Kind::kInt) || v.is(Kind::kFloat);
  if (name == "integer") return v.is(Kind::kInt);
  if (name == "float") return v.is(Kind::kFloat);
  if (name == "boolean") return v.is(Kind::kBool);
  if (name == "true") return v.is(Kind::kBool) && v.b;
  if (name == "false") return v.is(Kind::kBool) && !v.b;
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable") return v.is(Kind::kList) || v.is(Kind::kDict) || v.is(Kind::kString);
  if (name == "sequence") return v.is(Kind::kList) || v.is(Kind::kDict) || v.is(Kind::kString);
  if (name == "callable") return v.is(Kind::kFunction);
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(v, arg);
  if (name == "ne" || name == "!=") return !equal(v, arg);
  if (name == "odd" || name == "even") {
    const int64_t n = need_int(v, name.c_str(), line);
    return (n % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") return need_int(v, "divisibleby", line) % need_int(arg, "divisibleby", line) == 0;
  if (name == "in") return truthy(apply_filter("__in__", v, a, line));
  if (name == "lower" || name == "upper") {
    const std::string& s = need_string(v, name.c_str(), line);
    return s == case_mapped(Text(s, kData), name == "lower" ? 0 : 1).s;
  }
  fail_line(line, "unsupported test 'is " + name + "'");
}

Value attr_or_item(const Value& v, const std::string& attr, int line) {
  Value x = attribute(v, attr, line);
  return x;
}

const char* const kFilters[] = {"trim", "length", "count", "tojson", "items", "string", "safe", "default", "d",
                               "upper", "lower", "title", "capitalize", "replace", "list", "first", "last", "reverse",
                               "join", "selectattr", "rejectattr", "select", "reject", "map", "unique", "int", "float",
                               "abs", "indent", "dictsort"};
const char* const kTests[] = {"defined", "undefined", "none", "string", "number", "integer", "float", "boolean",
                             "true", "false", "mapping", "iterable", "sequence", "callable", "equalto", "eq", "==",
                             "sameas", "ne", "!=", "odd", "even", "divisibleby", "in", "lower", "upper"};

}  // namespace

bool known_filter(const std::string& name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}
bool known_test(const std::string& name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

List iterate(const Value& v, int line) {
  switch (v.kind) {
    case Kind::kUndefined: case Kind::kNone: return {};
    case Kind::kList: return *v.list;
    case Kind::kDict: {
      List keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(Value::string(k, v.origin));
      return keys;
    }
    case Kind::kString: {
      List chars;
      const auto starts = char_starts(v.str.s);
      for (size_t i = 0; i < starts.size(); ++i)
        chars.push_back(Value::string(v.str.sub(starts[i], (i + 1 < starts.size() ? starts[i + 1] : v.str.s.size()) - starts[i])));
      return chars;
    }
    default: fail_line(line, std::string("cannot iterate over a ") + kind_name(v.kind));
  }
}

Value attribute(const Value& object, const std::string& name, int line) {
  if (object.is_mapping()) {
    if (object.is(Kind::kDict) && (name == "items" || name == "keys" || name == "values" || name == "get"))
      return method(object, name, line);
    if (const Value* v = object.dict->find(name)) return *v;
    return Value();
  }
  if (object.is(Kind::kString)) return method(object, name, line);
  return Value();
}

Value item(const Value& object, const Value& index, int line) {
  if (object.is_mapping()) {
    if (!index.is(Kind::kString)) return Value();
    if (const Value* v = object.dict->find(index.str.s)) return *v;
    return Value();
  }
  if (object.is(Kind::kList) || object.is(Kind::kString)) {
    if (!index.is(Kind::kInt)) {
      if (index.is(Kind::kString)) return attribute(object, index.str.s, line);
      fail_line(line, std::string("a ") + kind_name(object.kind) + " index must be an integer");
    }
    const auto starts = object.is(Kind::kString) ? char_starts(object.str.s) : std::vector<size_t>();
    const int64_t n = object.is(Kind::kList) ? static_cast<int64_t>(object.list->size()) : static_cast<int64_t>(starts.size());
    const int64_t i = index.i < 0 ? index.i + n : index.i;
    if (i < 0 || i >= n) return Value();  // Jinja: undefined
    if (object.is(Kind::kList)) return (*object.list)[static_cast<size_t>(i)];
    const size_t b = starts[static_cast<size_t>(i)];
    const size_t e = i + 1 < n ? starts[static_cast<size_t>(i + 1)] : object.str.s.size();
    return Value::string(object.str.sub(b, e - b));
  }
  return Value();
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step_v, int line) {
  const bool is_str = object.is(Kind::kString);
  if (!is_str && !object.is(Kind::kList)) fail_line(line, std::string("cannot slice a ") + kind_name(object.kind));
  const auto starts = is_str ? char_starts(object.str.s) : std::vector<size_t>();
  const int64_t n = is_str ? static_cast<int64_t>(starts.size()) : static_cast<int64_t>(object.list->size());
  const bool given_step = step_v.defined() && !step_v.is(Kind::kNone);
  const int64_t step = given_step ? need_int(step_v, "a slice", line) : 1;
  if (step == 0) fail_line(line, "a slice step cannot be zero");
  const auto bound = [&](const Value& v, int64_t dflt) {
    if (!v.defined() || v.is(Kind::kNone)) return dflt;
    int64_t x = need_int(v, "a slice", line);
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = bound(start, step > 0 ? 0 : n - 1);
  const int64_t e = bound(stop, step > 0 ? n : -1);
  std::vector<int64_t> picks;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) picks.push_back(i);
  if (!is_str) {
    List out;
    for (int64_t i : picks) out.push_back((*object.list)[static_cast<size_t>(i)]);
    return Value::make_list(std::move(out));
  }
  Text out;
  for (int64_t i : picks) {
    const size_t from = starts[static_cast<size_t>(i)];
    const size_t to = i + 1 < n ? starts[static_cast<size_t>(i + 1)] : object.str.s.size();
    out.append(object.str.sub(from, to - from));
  }
  return Value::string(out);
}

bool apply_test(const std::string& name, const Value& subject, const Args& args, int line) {
  return test_of(name, subject, args, line);
}

Value apply_filter(const std::string& name, const Value& v, const Args& a, int line) {
  if (name == "__in__") {  // `x is in y`, `x in y`
    const Value c = a.get(0, "seq");
    if (c.is(Kind::kString)) return Value::boolean(v.is(Kind::kString) && c.str.s.find(v.str.s) != std::string::npos);
    if (c.is_mapping()) return Value::boolean(v.is(Kind::kString) && c.dict->find(v.str.s) != nullptr);
    if (c.is(Kind::kList)) {
      for (const Value& x : *c.list)
        if (equal(x, v)) return Value::boolean(true);
      return Value::boolean(false);
    }
    if (!c.defined() || c.is(Kind::kNone)) return Value::boolean(false);
    fail_line(line, std::string("'in' a ") + kind_name(c.kind));
  }
  if (name == "trim") {
    if (!v.is(Kind::kString)) return Value::string(strip(to_text(v), a.get(0, "chars"), true, true));
    return Value::string(strip(v.str, a.get(0, "chars"), true, true));
  }
  if (name == "length" || name == "count") {
    if (v.is(Kind::kString)) return Value::integer(static_cast<int64_t>(char_starts(v.str.s).size()));
    if (v.is(Kind::kList)) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_mapping()) return Value::integer(static_cast<int64_t>(v.dict->items.size()));
    if (!v.defined()) return Value::integer(0);
    fail_line(line, std::string("length of a ") + kind_name(v.kind));
  }
  if (name == "tojson") {
    const Value indent = a.get(0, "indent");
    std::string json = to_json(v, indent.defined() && !indent.is(Kind::kNone) ? static_cast<int>(need_int(indent, "tojson", line)) : -1);
    // The text keeps the origin of what it was made from when that is one message.
    int32_t origin = v.origin;
    if (v.is(Kind::kString)) {
      origin = v.str.from.empty() ? kData : v.str.from[0];
      for (int32_t f : v.str.from)
        if (f != origin) origin = kData;
    }
    if (origin == kLiteral) origin = kData;  // never special tokens from JSON text
    return Value::string(json, origin);
  }
  if (name == "items") {
    if (!v.is_mapping()) fail_line(line, std::string("items of a ") + kind_name(v.kind));
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({Value::string(k, v.origin), x}));
    return Value::make_list(std::move(out));
  }
  if (name == "string") return Value::string(to_text(v));
  if (name == "safe") return v;
  if (name == "default" || name == "d") {
    const bool boolean = truthy(a.get(1, "boolean"));
    if (boolean ? !truthy(v) : !v.defined()) {
      const Value d = a.get(0, "default_value");
      return d.defined() ? d : Value::string("", kLiteral);
    }
    return v;
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    const Value s = Value::string(to_text(v));
    Args none;
    Value m = method(s, name, line);
    return (*m.fn)(none);
  }
  if (name == "replace") {
    const Value count = a.get(2, "count");
    return Value::string(replace(to_text(v), need_string(a.get(0, "old"), "replace", line), to_text(a.get(1, "new")),
                                 count.defined() ? need_int(count, "replace", line) : -1));
  }
  if (name == "list") return Value::make_list(iterate(v, line));
  if (name == "first" || name == "last") {
    const List items = iterate(v, line);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is(Kind::kString)) return slice(v, Value(), Value(), Value::integer(-1), line);
    List items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "join") {
    const Value sep = a.get(0, "d");
    const Value attr = a.get(1, "attribute");
    Text out;
    const List items = iterate(v, line);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i && sep.defined()) out.append(to_text(sep));
      out.append(to_text(attr.defined() ? attr_or_item(items[i], to_text(attr).s, line) : items[i]));
    }
    return Value::string(out);
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "selectattr" || name == "select";
    const size_t test_at = by_attr ? 1 : 0;
    const Value test = a.get(test_at, "");
    Args test_args;
    for (size_t i = test_at + 1; i < a.pos.size(); ++i) test_args.pos.push_back(a.pos[i]);
    List out;
    for (const Value& x : iterate(v, line)) {
      const Value subject = by_attr ? attr_or_item(x, need_string(a.get(0, "attribute"), name.c_str(), line), line) : x;
      const bool ok = test.defined() ? test_of(need_string(test, name.c_str(), line), subject, test_args, line) : truthy(subject);
      if (ok == keep_if) out.push_back(x);
    }
    return Value::make_list(std::move(out));
  }
  if (name == "map") {
    List out;
    const Value attr = a.get(1000, "attribute");
    for (const Value& x : iterate(v, line)) {
      if (attr.defined()) {
        Value y = attr_or_item(x, to_text(attr).s, line);
        if (!y.defined()) {
          const Value d = a.get(1000, "default");
          if (d.defined()) y = d;
        }
        out.push_back(y);
      } else {
        Args rest;
        for (size_t i = 1; i < a.pos.size(); ++i) rest.pos.push_back(a.pos[i]);
        out.push_back(apply_filter(need_string(a.get(0, ""), "map", line), x, rest, line));
      }
    }
    return Value::make_list(std::move(out));
  }
  if (name == "unique") {
    List out;
    for (const Value& x : iterate(v, line))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    return Value::make_list(std::move(out));
  }
  if (name == "int") {
    if (v.is(Kind::kInt)) return v;
    if (v.is(Kind::kFloat)) return Value::integer(static_cast<int64_t>(v.f));
    if (v.is(Kind::kBool)) return Value::integer(v.b);
    if (v.is(Kind::kString)) {
      try { return Value::integer(std::stoll(v.str.s)); } catch (...) {}
    }
    return Value::integer(0);
  }
  if (name == "float") {
    if (v.is(Kind::kFloat)) return v;
    if (v.is(Kind::kInt)) return Value::real(static_cast<double>(v.i));
    if (v.is(Kind::kString)) {
      try { return Value::real(std::stod(v.str.s)); } catch (...) {}
    }
    return Value::real(0);
  }
  if (name == "abs") {
    if (v.is(Kind::kInt)) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.is(Kind::kFloat)) return Value::real(std::fabs(v.f));
    fail_line(line, std::string("abs of a ") + kind_name(v.kind));
  }
  if (name == "indent") {
    const Value w = a.get(0, "width");
    const Text pad(std::string(static_cast<size_t>(w.defined() ? need_int(w, "indent", line) : 4), ' '), kLiteral);
    const bool first = truthy(a.get(1, "first"));
    const bool blank = truthy(a.get(2, "blank"));
    const Text t = to_text(v);
    Text out;
    size_t pos = 0;
    for (bool first_line = true;; first_line = false) {
      const size_t nl = t.s.find('\n', pos);
      const size_t end = nl == std::string::npos ? t.s.size() : nl;
      if (first_line ? first : blank || end > pos) out.append(pad);
      out.append(t.sub(pos, end - pos));
      if (nl == std::string::npos) break;
      out.append(t.sub(nl, 1));
      pos = nl + 1;
    }
    return Value::string(out);
  }
  if (name == "dictsort") {
    if (!v.is_mapping()) fail_line(line, std::string("dictsort of a ") + kind_name(v.kind));
    auto items = v.dict->items;
    std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    List out;
    for (const auto& [k, x] : items) out.push_back(Value::make_list({Value::string(k, v.origin), x}));
    return Value::make_list(std::move(out));
  }
  fail_line(line, "unsupported filter '" + name + "'");
}

Value global_function(const std::string& name) {
  if (name == "raise_exception")
    return Value::function([](Args& a) -> Value {
      fail("the chat template refuses this conversation: " + to_text(a.get(0, "message")).s);
    });
  if (name == "namespace" || name == "dict")
    return Value::function([name](Args& a) {
      Value v = Value::make_dict();
      if (name == "namespace") v.kind = Kind::kNamespace;
      for (const Value& p : a.pos)
        if (p.is_mapping())
          for (const auto& [k, x] : p.dict->items) v.dict->set(k, x);
      for (const auto& [k, x] : a.kw) v.dict->set(k, x);
      return v;
    });
  if (name == "range")
    return Value::function([](Args& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.pos.size() == 1) stop = need_int(a.pos[0], "range", 0);
      else if (a.pos.size() >= 2) {
        start = need_int(a.pos[0], "range", 0);
        stop = need_int(a.pos[1], "range", 0);
        if (a.pos.size() > 2) step = need_int(a.pos[2], "range", 0);
      }
      if (step == 0) fail("chat template: range() step cannot be zero");
      // transformers' sandbox refuses ranges longer than this (jinja2's MAX_RANGE).
      const double n = (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
      if (n > 100000) fail("chat template: range() of more than 100000 items");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
      return Value::make_list(std::move(out));
    });
  return Value();
}

}  // namespace mt::jinja

// The values a chat template computes with. Strings carry, byte by byte, where their text came
// from (a literal of the template, message i of the conversation, or other data), so that the
// rendering can make special tokens only of template text and find each message's bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mt::jinja {

// Where a byte of text came from: >= 0 is the index of the message it was read from.
constexpr int32_t kLiteral = -1;  // the template's own text (and bos_token / eos_token)
constexpr int32_t kData = -2;     // any other context value, or text computed from several

// Text with the origin of each byte.
struct Text {
  std::string s;
  std::vector<int32_t> from;
  Text() = default;
  Text(std::string_view text, int32_t origin) : s(text), from(text.size(), origin) {}
  void append(const Text& t) {
    s += t.s;
    from.insert(from.end(), t.from.begin(), t.from.end());
  }
  void append(std::string_view t, int32_t origin) {
    s += t;
    from.insert(from.end(), t.size(), origin);
  }
  Text sub(size_t pos, size_t n = std::string::npos) const {
    Text t;
    t.s = s.substr(pos, n);
    t.from.assign(from.begin() + static_cast<std::ptrdiff_t>(pos),
                  from.begin() + static_cast<std::ptrdiff_t>(pos + t.s.size()));
    return t;
  }
};

struct Value;
using List = std::vector<Value>;
struct Dict {
  std::vector<std::pair<std::string, Value>> items;  // in insertion order, as Python's dict
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};
struct Args;
using Function = std::function<Value(Args&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  Text str;
  std::shared_ptr<List> list;   // kList (shared: append and namespace attributes mutate in place)
  std::shared_ptr<Dict> dict;   // kDict, kNamespace
  std::shared_ptr<Function> fn;
  int32_t origin = kData;       // for values other than strings: which message they came from

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value real(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
  static Value string(Text t) { Value v; v.kind = Kind::kString; v.str = std::move(t); return v; }
  static Value string(std::string_view s, int32_t origin) { return string(Text(s, origin)); }
  static Value make_list(List items = {}) {
    Value v; v.kind = Kind::kList; v.list = std::make_shared<List>(std::move(items)); return v;
  }
  static Value make_dict(Dict d = {}) {
    Value v; v.kind = Kind::kDict; v.dict = std::make_shared<Dict>(std::move(d)); return v;
  }
  static Value function(Function f) {
    Value v; v.kind = Kind::kFunction; v.fn = std::make_shared<Function>(std::move(f)); return v;
  }
  bool is(Kind k) const { return kind == k; }
  bool defined() const { return kind != Kind::kUndefined; }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
};

// Arguments of a call, filter or test: positional then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional `index`, else keyword `name`, else undefined.
  Value get(size_t index, std::string_view name) const;
};

// Python's truth of a value.
bool truthy(const Value& v);
// Python's == between values (lists and dicts compared by content).
bool equal(const Value& a, const Value& b);
// The value as {{ }} prints it (Python's str()); origins kept for strings.
Text to_text(const Value& v);
// Python's json.dumps(v, ensure_ascii=False, indent=indent) as transformers' tojson calls it;
// indent < 0 for none.
std::string to_json(const Value& v, int indent);
// "string", "list", ... for messages.
const char* kind_name(Kind k);

}  // namespace mt::jinja

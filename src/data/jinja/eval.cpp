// Runs a parsed template (ast.h) over a context of values, writing text with its origins.
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "core/error.h"
#include "data/jinja/builtins.h"
#include "data/jinja/template.h"

namespace mt::jinja {
namespace {

// Variables of one level: the context, a for loop's body, a macro call. Lookups go outward;
// `set` writes the innermost, so a loop's assignments stay in the loop, as in Jinja.
struct Scope {
  std::unordered_map<std::string, Value> vars;
  const Scope* parent = nullptr;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

bool is_numeric(const Value& v) { return v.is(Kind::kInt) || v.is(Kind::kFloat) || v.is(Kind::kBool); }
double as_double(const Value& v) { return v.is(Kind::kFloat) ? v.f : v.is(Kind::kInt) ? double(v.i) : double(v.b); }
int64_t as_int(const Value& v) { return v.is(Kind::kInt) ? v.i : v.b; }

class Evaluator {
 public:
  explicit Evaluator(Rendered& out) : out_(out), sink_(&out.text) {}

  Flow exec(const Body& body, Scope& scope) {
    for (const auto& st : body) {
      const Flow f = exec(*st, scope);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  Flow exec(const Stmt& st, Scope& scope) {
    switch (st.k) {
      case Stmt::kText: sink_->append(st.text, kLiteral); return Flow::kNormal;
      case Stmt::kOutput: sink_->append(to_text(eval(*st.expr, scope))); return Flow::kNormal;
      case Stmt::kIf:
        for (size_t i = 0; i < st.bodies.size(); ++i)
          if (i >= st.conditions.size() || truthy(eval(*st.conditions[i], scope))) return exec(st.bodies[i], scope);
        return Flow::kNormal;
      case Stmt::kFor: return run_for(st, scope);
      case Stmt::kSet: assign(st, eval(*st.expr, scope), scope); return Flow::kNormal;
      case Stmt::kSetBlock: {
        Text captured;
        Text* saved = sink_;
        sink_ = &captured;
        exec(st.bodies[0], scope);
        sink_ = saved;
        assign(st, Value::string(captured), scope);
        return Flow::kNormal;
      }
      case Stmt::kMacro: define_macro(st, scope); return Flow::kNormal;
      case Stmt::kGeneration: {
        const size_t begin = sink_->s.size();
        const Flow f = exec(st.bodies[0], scope);
        if (sink_ == &out_.text) out_.generation.emplace_back(begin, sink_->s.size());
        return f;
      }
      case Stmt::kBreak: return Flow::kBreak;
      case Stmt::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void assign(const Stmt& st, Value v, Scope& scope) {
    if (st.attribute.empty()) {
      scope.vars[st.targets[0]] = std::move(v);
      return;
    }
    const Value* ns = scope.find(st.targets[0]);
    if (!ns || !ns->is(Kind::kNamespace))
      fail_line(st.line, "'set " + st.targets[0] + "." + st.attribute + "' needs " + st.targets[0] + " to be a namespace()");
    ns->dict->set(st.attribute, std::move(v));
  }

  Flow run_for(const Stmt& st, Scope& scope) {
    const Value seq = eval(*st.expr, scope);
    List items = iterate(seq, st.line);
    Scope inner;
    inner.parent = &scope;
    if (st.filter) {
      List kept;
      for (const Value& x : items) {
        bind_targets(st, x, inner);
        if (truthy(eval(*st.filter, inner))) kept.push_back(x);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (st.bodies.size() > 1) return exec(st.bodies[1], scope);
      return Flow::kNormal;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      bind_targets(st, items[static_cast<size_t>(i)], inner);
      Dict loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(n - i));
      loop.set("revindex0", Value::integer(n - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == n - 1));
      loop.set("length", Value::integer(n));
      if (i > 0) loop.set("previtem", items[static_cast<size_t>(i - 1)]);
      if (i + 1 < n) loop.set("nextitem", items[static_cast<size_t>(i + 1)]);
      const int64_t at = i;
      loop.set("cycle", Value::function([at](Args& a) {
        if (a.pos.empty()) fail("chat template: loop.cycle() of nothing");
        return a.pos[static_cast<size_t>(at) % a.pos.size()];
      }));
      inner.vars["loop"] = Value::make_dict(std::move(loop));
      if (exec(st.bodies[0], inner) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void bind_targets(const Stmt& st, const Value& x, Scope& inner) {
    if (st.targets.size() == 1) {
      inner.vars[st.targets[0]] = x;
      return;
    }
    const List parts = iterate(x, st.line);
    if (parts.size() != st.targets.size())
      fail_line(st.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                             std::to_string(st.targets.size()) + " names");
    for (size_t k = 0; k < parts.size(); ++k) inner.vars[st.targets[k]] = parts[k];
  }

  void define_macro(const Stmt& st, Scope& scope) {
    const Stmt* def = &st;
    const Scope* home = &scope;
    Evaluator* self = this;
    scope.vars[st.targets[0]] = Value::function([def, home, self](Args& a) {
      if (self->calls_ >= 50) fail_line(def->line, "macro '" + def->targets[0] + "' calls nested more than 50 deep");
      ++self->calls_;
      Scope call;
      call.parent = home;
      for (size_t i = 0; i < def->params.size(); ++i) {
        Value v = a.get(i, def->params[i].first);
        if (!v.defined() && def->params[i].second) v = self->eval(*def->params[i].second, call);
        call.vars[def->params[i].first] = v;
      }
      Text captured;
      Text* saved = self->sink_;
      self->sink_ = &captured;
      self->exec(def->bodies[0], call);
      self->sink_ = saved;
      --self->calls_;
      return Value::string(captured);
    });
  }

  Args args_of(const Expr& e, size_t first, Scope& scope) {
    Args a;
    for (size_t i = first; i < e.kids.size(); ++i) a.pos.push_back(eval(*e.kids[i], scope));
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x, scope));
    return a;
  }

  Value eval(const Expr& e, Scope& scope) {
    switch (e.k) {
      case Expr::kLiteral: return e.value;
      case Expr::kName: {
        if (const Value* v = scope.find(e.name)) return *v;
        return global_function(e.name);
      }
      case Expr::kAttr: return attribute(eval(*e.kids[0], scope), e.name, e.line);
      case Expr::kItem: return item(eval(*e.kids[0], scope), eval(*e.kids[1], scope), e.line);
      case Expr::kSlice: {
        const auto part = [&](size_t i) { return e.kids[i] ? eval(*e.kids[i], scope) : Value(); };
        return slice(eval(*e.kids[0], scope), part(1), part(2), part(3), e.line);
      }
      case Expr::kCall: {
        const Value callee = eval(*e.kids[0], scope);
        if (!callee.is(Kind::kFunction)) {
          std::string what = e.kids[0]->k == Expr::kName ? "'" + e.kids[0]->name + "'"
                             : e.kids[0]->k == Expr::kAttr ? "method '" + e.kids[0]->name + "'" : "this value";
          fail_line(e.line, "unsupported call of " + what + " (" + kind_name(callee.kind) + ")");
        }
        Args a = args_of(e, 1, scope);
        return (*callee.fn)(a);
      }
      case Expr::kFilter: {
        const Value subject = eval(*e.kids[0], scope);
        return apply_filter(e.name, subject, args_of(e, 1, scope), e.line);
      }
      case Expr::kTest: {
        const Value subject = eval(*e.kids[0], scope);
        return Value::boolean(apply_test(e.name, subject, args_of(e, 1, scope), e.line) != e.negated);
      }
      case Expr::kNot: return Value::boolean(!truthy(eval(*e.kids[0], scope)));
      case Expr::kNeg: {
        const Value v = eval(*e.kids[0], scope);
        if (v.is(Kind::kFloat)) return Value::real(-v.f);
        if (is_numeric(v)) return Value::integer(-as_int(v));
        fail_line(e.line, std::string("cannot negate a ") + kind_name(v.kind));
      }
      case Expr::kAnd: {
        Value l = eval(*e.kids[0], scope);
        return truthy(l) ? eval(*e.kids[1], scope) : l;
      }
      case Expr::kOr: {
        Value l = eval(*e.kids[0], scope);
        return truthy(l) ? l : eval(*e.kids[1], scope);
      }
      case Expr::kCond:
        if (truthy(eval(*e.kids[1], scope))) return eval(*e.kids[0], scope);
        return e.kids[2] ? eval(*e.kids[2], scope) : Value();
      case Expr::kList: {
        List items;
        for (const auto& k : e.kids) items.push_back(eval(*k, scope));
        return Value::make_list(std::move(items));
      }
      case Expr::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          const Value k = eval(*e.kids[i], scope);
          if (!k.is(Kind::kString)) fail_line(e.line, "dict keys must be strings here");
          d.set(k.str.s, eval(*e.kids[i + 1], scope));
        }
        return Value::make_dict(std::move(d));
      }
      case Expr::kBinary: return binary(e, eval(*e.kids[0], scope), eval(*e.kids[1], scope));
    }
    return Value();
  }

  Value binary(const Expr& e, const Value& l, const Value& r) {
    const std::string& op = e.name;
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "~") {
      Text t = to_text(l);
      t.append(to_text(r));
      return Value::string(t);
    }
    if (op == "in" || op == "not in") {
      Args a;
      a.pos.push_back(r);
      const bool in = truthy(apply_filter("__in__", l, a, e.line));
      return Value::boolean(in == (op == "in"));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (is_numeric(l) && is_numeric(r)) c = as_double(l) < as_double(r) ? -1 : as_double(l) > as_double(r) ? 1 : 0;
      else if (l.is(Kind::kString) && r.is(Kind::kString)) c = l.str.s.compare(r.str.s);
      else fail_line(e.line, std::string("cannot compare a ") + kind_name(l.kind) + " with a " + kind_name(r.kind));
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+" && l.is(Kind::kString) && r.is(Kind::kString)) {
      Text t = l.str;
      t.append(r.str);
      return Value::string(t);
    }
    if (op == "+" && l.is(Kind::kList) && r.is(Kind::kList)) {
      List items = *l.list;
      items.insert(items.end(), r.list->begin(), r.list->end());
      return Value::make_list(std::move(items));
    }
    if (op == "*" && l.is(Kind::kString) && r.is(Kind::kInt)) {
      if (r.i > 0 && l.str.s.size() * static_cast<uint64_t>(r.i) > (uint64_t{1} << 24))
        fail_line(e.line, "a string repeated to more than 16 MiB");
      Text t;
      for (int64_t i = 0; i < r.i; ++i) t.append(l.str);
      return Value::string(t);
    }
    if (!is_numeric(l) || !is_numeric(r))
      fail_line(e.line, std::string("unsupported operand types for ") + op + ": " + kind_name(l.kind) + " and " +
                            kind_name(r.kind));
    const bool real = l.is(Kind::kFloat) || r.is(Kind::kFloat) || op == "/";
    const double a = as_double(l), b = as_double(r);
    const int64_t x = as_int(l), y = as_int(r);
    if ((op == "/" || op == "//" || op == "%") && b == 0) fail_line(e.line, "division by zero");
    if (op == "+") return real ? Value::real(a + b) : Value::integer(x + y);
    if (op == "-") return real ? Value::real(a - b) : Value::integer(x - y);
    if (op == "*") return real ? Value::real(a * b) : Value::integer(x * y);
    if (op == "/") return Value::real(a / b);
    if (op == "//") {
      if (real) return Value::real(std::floor(a / b));
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    if (op == "%") {
      if (real) return Value::real(a - b * std::floor(a / b));
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::integer(m);
    }
    if (op == "**") {
      if (real || y < 0) return Value::real(std::pow(a, b));
      int64_t p = 1;
      for (int64_t i = 0; i < y; ++i) p *= x;
      return Value::integer(p);
    }
    fail_line(e.line, "unsupported operator '" + op + "'");
  }

  Rendered& out_;
  Text* sink_;
  int calls_ = 0;  // macro calls in progress
};

bool uses_generation(const Body& body) {
  for (const auto& st : body) {
    if (st->k == Stmt::kGeneration) return true;
    for (const Body& b : st->bodies)
      if (uses_generation(b)) return true;
  }
  return false;
}

// Filters and tests are looked up when a template is parsed, so that one meshtrain lacks is named
// before anything is rendered (a model's template then falls back to the built-in rendering).
void check_names(const Expr& e) {
  if (e.k == Expr::kFilter && !known_filter(e.name)) fail_line(e.line, "unsupported filter '" + e.name + "'");
  if (e.k == Expr::kTest && !known_test(e.name)) fail_line(e.line, "unsupported test 'is " + e.name + "'");
  for (const auto& k : e.kids)
    if (k) check_names(*k);
  for (const auto& [name, k] : e.kwargs)
    if (k) check_names(*k);
}
void check_names(const Body& body) {
  for (const auto& st : body) {
    for (const Expr* e : {st->expr.get(), st->filter.get()})
      if (e) check_names(*e);
    for (const auto& c : st->conditions) check_names(*c);
    for (const auto& [name, d] : st->params)
      if (d) check_names(*d);
    for (const Body& b : st->bodies) check_names(b);
  }
}

}  // namespace

Template::Template(std::string_view source) : body_(parse_template(source)), has_generation_(uses_generation(body_)) {
  check_names(body_);
}

Rendered Template::render(const Dict& context) const {
  Rendered out;
  Scope root;
  for (const auto& [k, v] : context.items) root.vars[k] = v;
  Evaluator(out).exec(body_, root);
  return out;
}

Value strftime_now_at(std::time_t now) {
  return Value::function([now](Args& a) {
    const Value fmt = a.get(0, "format");
    if (!fmt.is(Kind::kString)) fail("chat template: strftime_now() needs a format string");
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, fmt.str.s.c_str(), &tm);
    return Value::string(std::string(buf, n), kLiteral);
  });
}

}  // namespace mt::jinja

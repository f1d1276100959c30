// Reads a chat template into the tree of ast.h: first the source is cut into text and tags with
// Jinja's whitespace control applied, then each tag's inside is tokenized and parsed.
#include <cctype>
#include <string>

#include "core/error.h"
#include "data/jinja/ast.h"

namespace mt::jinja {
namespace {

[[noreturn]] void fail_at(int line, const std::string& msg) {
  fail("chat template line " + std::to_string(line) + ": " + msg);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// One piece of the source: text, an expression tag {{ }} or a statement tag {% %}.
struct Segment {
  enum K { kText, kExpr, kStmt } k;
  std::string body;
  int line;
};

int lines_in(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The end of the tag opened at `from` (the index of its closing "}}", "%}" or "#}"), skipping
// string literals, whose text may hold the closing characters.
size_t tag_end(std::string_view src, size_t from, char kind, int line) {
  const char close[3] = {kind == '{' ? '}' : kind, '}', 0};
  char quote = 0;
  for (size_t i = from; i + 1 < src.size(); ++i) {
    const char c = src[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (kind != '#' && (c == '\'' || c == '"')) quote = c;
    else if (c == close[0] && src[i + 1] == close[1]) return i;
  }
  fail_at(line, std::string("a tag opened with '{") + kind + "' is never closed");
}

std::vector<Segment> segments_of(std::string_view src) {
  if (!src.empty() && src.back() == '\n') src.remove_suffix(1);  // keep_trailing_newline off
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  bool strip_next = false;  // the previous tag ended with '-'
  bool trim_next = false;   // the previous tag was a block or comment (trim_blocks)
  while (pos <= src.size()) {
    size_t open = pos;
    while ((open = src.find('{', open)) != std::string_view::npos) {
      if (open + 1 < src.size() && (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#')) break;
      ++open;
    }
    std::string text(src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    // Whether the text's last line starts a source line (for lstrip_blocks), before trimming.
    const bool line_start = text.find('\n') != std::string::npos || pos == 0 || src[pos - 1] == '\n';
    const int text_line = line;
    line += lines_in(text);
    if (strip_next) {
      size_t b = 0;
      while (b < text.size() && is_space(text[b])) ++b;
      text.erase(0, b);
    } else if (trim_next) {
      if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
      else if (!text.empty() && text[0] == '\n') text.erase(0, 1);
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({Segment::kText, text, text_line});
      break;
    }
    const char kind = src[open + 1];
    const char mark = open + 2 < src.size() ? src[open + 2] : 0;
    const size_t close = tag_end(src, open + 2, kind, line);
    if (mark == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && mark != '+') {
      // lstrip_blocks: spaces and tabs from the start of the line to a block or comment tag.
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if (line_start && text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
    }
    if (!text.empty()) out.push_back({Segment::kText, text, text_line});
    const size_t inner = open + 2 + (mark == '-' || mark == '+' ? 1 : 0);
    size_t inner_end = close;
    strip_next = close > inner && src[close - 1] == '-';
    if (strip_next) --inner_end;
    trim_next = kind != '{';
    if (kind != '#')
      out.push_back({kind == '{' ? Segment::kExpr : Segment::kStmt, std::string(src.substr(inner, inner_end - inner)), line});
    line += lines_in(src.substr(open, close + 2 - open));
    pos = close + 2;
  }
  return out;
}

// Tokens of an expression.
struct Tok {
  enum K { kName, kString, kInt, kFloat, kOp, kEnd } k;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

std::vector<Tok> tokenize(const std::string& src, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < src.size()) {
    const char c = src[i];
    if (is_space(c)) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = i;
      while (e < src.size() && (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
      out.push_back({Tok::kName, src.substr(i, e - i)});
      i = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = i;
      while (e < src.size() && (std::isdigit(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
      bool real = false;
      if (e + 1 < src.size() && src[e] == '.' && std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
        real = true;
        ++e;
        while (e < src.size() && std::isdigit(static_cast<unsigned char>(src[e]))) ++e;
      }
      if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {  // 2.5e-7, 1e20
        size_t x = e + 1;
        if (x < src.size() && (src[x] == '+' || src[x] == '-')) ++x;
        if (x < src.size() && std::isdigit(static_cast<unsigned char>(src[x]))) {
          real = true;
          e = x;
          while (e < src.size() && std::isdigit(static_cast<unsigned char>(src[e]))) ++e;
        }
      }
      std::string num;
      for (size_t k = i; k < e; ++k)
        if (src[k] != '_') num += src[k];
      Tok t{real ? Tok::kFloat : Tok::kInt, num};
      if (real) t.f = std::stod(num);
      else t.i = std::stoll(num);
      out.push_back(t);
      i = e;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t k = i + 1;
      for (; k < src.size() && src[k] != c; ++k) {
        if (src[k] != '\\' || k + 1 >= src.size()) {
          s += src[k];
          continue;
        }
        const char e = src[++k];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case 'b': s += '\b'; break;
          case 'f': s += '\f'; break;
          case '\\': case '\'': case '"': s += e; break;
          default: s += '\\'; s += e;  // Python keeps an unknown escape as written
        }
      }
      if (k >= src.size()) fail_at(line, "a string literal is never closed");
      out.push_back({Tok::kString, s});
      i = k + 1;
    } else {
      static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/", "%", "~",
                                         "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "="};
      bool found = false;
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (src.compare(i, o.size(), o) == 0) {
          out.push_back({Tok::kOp, std::string(o)});
          i += o.size();
          found = true;
          break;
        }
      }
      if (!found) fail_at(line, std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

// How deep expressions and blocks may nest: far beyond any template's, and short of the stack.
constexpr int kMaxNesting = 100;

// Counts one level of nesting while it lives; past kMaxNesting, one error instead of a stack overflow.
class Nesting {
 public:
  Nesting(int& depth, int line) : depth_(depth) {
    if (++depth_ > kMaxNesting) fail_at(line, "nested more than " + std::to_string(kMaxNesting) + " levels deep");
  }
  ~Nesting() { --depth_; }
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;

 private:
  int& depth_;
};

// Recursive descent over one tag's tokens, in Jinja's precedence order.
class ExprParser {
 public:
  ExprParser(const std::string& src, int line) : toks_(tokenize(src, line)), line_(line) {}

  ExprPtr expression() {
    const Nesting nest(depth_, line_);
    ExprPtr e = or_expr();
    if (name_is("if")) {
      ++at_;
      auto cond = node(Expr::kCond);
      cond->kids.push_back(std::move(e));
      cond->kids.push_back(or_expr());
      if (name_is("else")) {
        ++at_;
        cond->kids.push_back(expression());
      } else {
        cond->kids.push_back(nullptr);
      }
      return cond;
    }
    return e;
  }
  // An expression without a trailing `if` (a for loop's iterable, before its filter).
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (name_is("or")) {
      ++at_;
      e = binary(Expr::kOr, "or", std::move(e), and_expr());
    }
    return e;
  }
  bool name_is(std::string_view s) const { return toks_[at_].k == Tok::kName && toks_[at_].s == s; }
  bool op_is(std::string_view s) const { return toks_[at_].k == Tok::kOp && toks_[at_].s == s; }
  bool at_end() const { return toks_[at_].k == Tok::kEnd; }
  void expect_op(std::string_view s) {
    if (!op_is(s)) fail_at(line_, "expected '" + std::string(s) + "' but found " + describe());
    ++at_;
  }
  std::string name() {
    if (toks_[at_].k != Tok::kName) fail_at(line_, "expected a name but found " + describe());
    return toks_[at_++].s;
  }
  void expect_end() {
    if (!at_end()) fail_at(line_, "unexpected " + describe());
  }
  std::string describe() const {
    const Tok& t = toks_[at_];
    if (t.k == Tok::kEnd) return "the end of the tag";
    if (t.k == Tok::kString) return "a string";
    return "'" + t.s + "'";
  }

 private:
  ExprPtr node(Expr::K k) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(Expr::K k, std::string op, ExprPtr l, ExprPtr r) {
    auto e = node(k);
    e->name = std::move(op);
    e->kids.push_back(std::move(l));
    e->kids.push_back(std::move(r));
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (name_is("and")) {
      ++at_;
      e = binary(Expr::kAnd, "and", std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    const Nesting nest(depth_, line_);
    if (name_is("not")) {
      ++at_;
      auto e = node(Expr::kNot);
      e->kids.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    for (;;) {
      if (toks_[at_].k == Tok::kOp && (op_is("==") || op_is("!=") || op_is("<") || op_is(">") || op_is("<=") || op_is(">="))) {
        std::string op = toks_[at_++].s;
        e = binary(Expr::kBinary, op, std::move(e), concat());
      } else if (name_is("in")) {
        ++at_;
        e = binary(Expr::kBinary, "in", std::move(e), concat());
      } else if (name_is("not") && toks_[at_ + 1].k == Tok::kName && toks_[at_ + 1].s == "in") {
        at_ += 2;
        e = binary(Expr::kBinary, "not in", std::move(e), concat());
      } else {
        return e;
      }
    }
  }
  ExprPtr concat() {
    ExprPtr e = sum();
    while (op_is("~")) {
      ++at_;
      e = binary(Expr::kBinary, "~", std::move(e), sum());
    }
    return e;
  }
  ExprPtr sum() {
    ExprPtr e = product();
    while (op_is("+") || op_is("-")) {
      std::string op = toks_[at_++].s;
      e = binary(Expr::kBinary, op, std::move(e), product());
    }
    return e;
  }
  ExprPtr product() {
    ExprPtr e = power();
    while (op_is("*") || op_is("/") || op_is("//") || op_is("%")) {
      std::string op = toks_[at_++].s;
      e = binary(Expr::kBinary, op, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (op_is("**")) {
      ++at_;
      e = binary(Expr::kBinary, "**", std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary() {
    if (op_is("-") || op_is("+")) {
      const bool neg = op_is("-");
      ++at_;
      ExprPtr e = unary_no_filter();
      if (neg) {
        ExprPtr n = node(Expr::kNeg);
        n->kids.push_back(std::move(e));
        e = std::move(n);
      }
      return filters(std::move(e));
    }
    return filters(postfix(primary()));
  }
  ExprPtr unary_no_filter() {
    const Nesting nest(depth_, line_);
    if (op_is("-")) {
      ++at_;
      auto e = node(Expr::kNeg);
      e->kids.push_back(unary_no_filter());
      return e;
    }
    return postfix(primary());
  }
  // Arguments of a call, filter or test: "(" [expr | name=expr] {, ...} ")".
  void call_args(Expr& e) {
    expect_op("(");
    while (!op_is(")")) {
      if (toks_[at_].k == Tok::kName && toks_[at_ + 1].k == Tok::kOp && toks_[at_ + 1].s == "=") {
        std::string key = toks_[at_].s;
        at_ += 2;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.kids.push_back(expression());
      }
      if (!op_is(")")) expect_op(",");
    }
    ++at_;
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (op_is(".")) {
        ++at_;
        auto a = node(Expr::kAttr);
        if (toks_[at_].k == Tok::kInt) {  // foo.0 is foo[0]
          a->k = Expr::kItem;
          a->kids.push_back(std::move(e));
          auto idx = node(Expr::kLiteral);
          idx->value = Value::integer(toks_[at_++].i);
          a->kids.push_back(std::move(idx));
        } else {
          a->name = name();
          a->kids.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (op_is("[")) {
        ++at_;
        e = subscript(std::move(e));
      } else if (op_is("(")) {
        auto c = node(Expr::kCall);
        c->kids.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr subscript(ExprPtr object) {
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (op_is("]")) break;
      if (op_is(":")) {
        if (++colons > 2) fail_at(line_, "a slice has at most three parts");
        ++at_;
        continue;
      }
      parts[colons] = expression();
    }
    ++at_;
    if (colons == 0) {
      if (!parts[0]) fail_at(line_, "empty subscript []");
      auto e = node(Expr::kItem);
      e->kids.push_back(std::move(object));
      e->kids.push_back(std::move(parts[0]));
      return e;
    }
    auto e = node(Expr::kSlice);
    e->kids.push_back(std::move(object));
    for (auto& p : parts) e->kids.push_back(std::move(p));
    return e;
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (op_is("|")) {
        ++at_;
        auto f = node(Expr::kFilter);
        f->name = name();
        while (op_is(".")) {  // a dotted filter name is not something templates use; keep it whole
          ++at_;
          f->name += "." + name();
        }
        f->kids.push_back(std::move(e));
        if (op_is("(")) call_args(*f);
        e = std::move(f);
      } else if (name_is("is")) {
        ++at_;
        auto t = node(Expr::kTest);
        if (name_is("not")) {
          t->negated = true;
          ++at_;
        }
        // `none`, `true` and `false` are names of tests as well as literals.
        t->name = name();
        t->kids.push_back(std::move(e));
        if (op_is("(")) {
          call_args(*t);
        } else if (toks_[at_].k == Tok::kString || toks_[at_].k == Tok::kInt || toks_[at_].k == Tok::kFloat ||
                   (toks_[at_].k == Tok::kName && !name_is("and") && !name_is("or") && !name_is("if") &&
                    !name_is("else") && !name_is("is") && !name_is("in") && !name_is("not"))) {
          t->kids.push_back(postfix(primary()));  // `is divisibleby 3`, `is sameas x`
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Tok& t = toks_[at_];
    switch (t.k) {
      case Tok::kString: {
        auto e = node(Expr::kLiteral);
        std::string s = t.s;
        ++at_;
        while (toks_[at_].k == Tok::kString) s += toks_[at_++].s;  // adjacent literals join
        e->value = Value::string(s, kLiteral);
        return e;
      }
      case Tok::kInt: {
        auto e = node(Expr::kLiteral);
        e->value = Value::integer(t.i);
        ++at_;
        return e;
      }
      case Tok::kFloat: {
        auto e = node(Expr::kLiteral);
        e->value = Value::real(t.f);
        ++at_;
        return e;
      }
      case Tok::kName: {
        auto e = node(Expr::kLiteral);
        if (t.s == "true" || t.s == "True") e->value = Value::boolean(true);
        else if (t.s == "false" || t.s == "False") e->value = Value::boolean(false);
        else if (t.s == "none" || t.s == "None") e->value = Value::none();
        else {
          e->k = Expr::kName;
          e->name = t.s;
        }
        ++at_;
        return e;
      }
      case Tok::kOp:
        if (t.s == "(") {
          ++at_;
          ExprPtr inner = expression();
          if (op_is(",")) {  // a tuple: a list here (templates only iterate or index them)
            auto l = node(Expr::kList);
            l->kids.push_back(std::move(inner));
            while (op_is(",")) {
              ++at_;
              if (op_is(")")) break;
              l->kids.push_back(expression());
            }
            inner = std::move(l);
          }
          expect_op(")");
          return inner;
        }
        if (t.s == "[") {
          ++at_;
          auto l = node(Expr::kList);
          while (!op_is("]")) {
            l->kids.push_back(expression());
            if (!op_is("]")) expect_op(",");
          }
          ++at_;
          return l;
        }
        if (t.s == "{") {
          ++at_;
          auto d = node(Expr::kDict);
          while (!op_is("}")) {
            d->kids.push_back(expression());
            expect_op(":");
            d->kids.push_back(expression());
            if (!op_is("}")) expect_op(",");
          }
          ++at_;
          return d;
        }
        break;
      case Tok::kEnd: break;
    }
    fail_at(line_, "expected a value but found " + describe());
  }

  std::vector<Tok> toks_;
  size_t at_ = 0;
  int line_;
  int depth_ = 0;
};

// Statements, read from the segments; each block parses until one of its end tags.
class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Body top() {
    Body b = body({});
    if (at_ < segs_.size()) fail_at(segs_[at_].line, "unexpected '" + word_of(segs_[at_]) + "'");
    return b;
  }

 private:
  static std::string word_of(const Segment& s) {
    size_t b = 0;
    while (b < s.body.size() && is_space(s.body[b])) ++b;
    size_t e = b;
    while (e < s.body.size() && (std::isalnum(static_cast<unsigned char>(s.body[e])) || s.body[e] == '_')) ++e;
    return s.body.substr(b, e - b);
  }
  // Statements until a statement tag whose first word is in `ends` (left unconsumed).
  Body body(const std::vector<std::string_view>& ends) {
    const Nesting nest(depth_, at_ < segs_.size() ? segs_[at_].line : 1);
    Body out;
    while (at_ < segs_.size()) {
      const Segment& s = segs_[at_];
      if (s.k == Segment::kText) {
        auto st = std::make_unique<Stmt>();
        st->k = Stmt::kText;
        st->line = s.line;
        st->text = s.body;
        out.push_back(std::move(st));
        ++at_;
        continue;
      }
      if (s.k == Segment::kExpr) {
        ExprParser p(s.body, s.line);
        auto st = std::make_unique<Stmt>();
        st->k = Stmt::kOutput;
        st->line = s.line;
        st->expr = p.expression();
        p.expect_end();
        out.push_back(std::move(st));
        ++at_;
        continue;
      }
      const std::string word = word_of(s);
      for (std::string_view e : ends)
        if (word == e) return out;
      out.push_back(statement(word));
    }
    if (!ends.empty()) {
      std::string want;
      for (std::string_view e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
      fail_at(segs_.empty() ? 1 : segs_.back().line, "the template ends before " + want);
    }
    return out;
  }
  // The current statement tag's parser, past its first word.
  ExprParser open(const std::string& word) {
    ExprParser p(segs_[at_].body, segs_[at_].line);
    if (p.name() != word) fail_at(segs_[at_].line, "internal: statement word");
    return p;
  }
  void close(const std::string& word) {
    ExprParser p = open(word);
    p.expect_end();
    ++at_;
  }
  std::unique_ptr<Stmt> statement(const std::string& word) {
    const int line = segs_[at_].line;
    auto st = std::make_unique<Stmt>();
    st->line = line;
    if (word == "if") {
      st->k = Stmt::kIf;
      ExprParser p = open("if");
      st->conditions.push_back(p.expression());
      p.expect_end();
      ++at_;
      for (;;) {
        st->bodies.push_back(body({"elif", "else", "endif"}));
        const std::string w = word_of(segs_[at_]);
        if (w == "elif") {
          ExprParser q = open("elif");
          st->conditions.push_back(q.expression());
          q.expect_end();
          ++at_;
        } else if (w == "else") {
          close("else");
          st->bodies.push_back(body({"endif"}));
          close("endif");
          return st;
        } else {
          close("endif");
          return st;
        }
      }
    }
    if (word == "for") {
      st->k = Stmt::kFor;
      ExprParser p = open("for");
      st->targets.push_back(p.name());
      while (p.op_is(",")) {
        p.expect_op(",");
        st->targets.push_back(p.name());
      }
      if (!p.name_is("in")) fail_at(line, "expected 'in' in a for loop, found " + p.describe());
      p.name();
      st->expr = p.or_expr();
      if (p.name_is("if")) {
        p.name();
        st->filter = p.expression();
      }
      if (p.name_is("recursive")) fail_at(line, "unsupported construct 'for ... recursive'");
      p.expect_end();
      ++at_;
      st->bodies.push_back(body({"else", "endfor"}));
      if (word_of(segs_[at_]) == "else") {
        close("else");
        st->bodies.push_back(body({"endfor"}));
      }
      close("endfor");
      return st;
    }
    if (word == "set") {
      ExprParser p = open("set");
      st->targets.push_back(p.name());
      if (p.op_is(".")) {
        p.expect_op(".");
        st->attribute = p.name();
      }
      if (p.op_is(",")) fail_at(line, "unsupported construct 'set' of several names");
      if (p.at_end()) {
        st->k = Stmt::kSetBlock;
        ++at_;
        st->bodies.push_back(body({"endset"}));
        close("endset");
        return st;
      }
      st->k = Stmt::kSet;
      p.expect_op("=");
      st->expr = p.expression();
      p.expect_end();
      ++at_;
      return st;
    }
    if (word == "macro") {
      st->k = Stmt::kMacro;
      ExprParser p = open("macro");
      st->targets.push_back(p.name());
      p.expect_op("(");
      while (!p.op_is(")")) {
        std::string param = p.name();
        ExprPtr def;
        if (p.op_is("=")) {
          p.expect_op("=");
          def = p.expression();
        }
        st->params.emplace_back(std::move(param), std::move(def));
        if (!p.op_is(")")) p.expect_op(",");
      }
      p.expect_op(")");
      p.expect_end();
      ++at_;
      st->bodies.push_back(body({"endmacro"}));
      close("endmacro");
      return st;
    }
    if (word == "generation") {
      st->k = Stmt::kGeneration;
      close("generation");
      st->bodies.push_back(body({"endgeneration"}));
      close("endgeneration");
      return st;
    }
    if (word == "break" || word == "continue") {
      st->k = word == "break" ? Stmt::kBreak : Stmt::kContinue;
      close(word);
      return st;
    }
    static const char* const kKnownEnds[] = {"endif", "endfor", "elif", "else", "endset", "endmacro", "endgeneration"};
    for (const char* e : kKnownEnds)
      if (word == e) fail_at(line, "'" + word + "' without the block it closes");
    fail_at(line, "unsupported construct '{% " + word + " %}' (meshtrain's Jinja runs if, for, set, macro and "
                  "generation blocks)");
  }

  std::vector<Segment> segs_;
  size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return StmtParser(segments_of(source)).top(); }

}  // namespace mt::jinja

// The syntax tree of a chat template: what parser.cpp builds and eval.cpp runs.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/jinja/value.h"

namespace mt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum K { kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kNot, kNeg, kBinary, kAnd, kOr, kCond, kList, kDict };
  K k;
  int line = 0;
  Value value;       // kLiteral
  std::string name;  // kName, kAttr (attribute), kFilter / kTest (its name), kBinary (operator)
  bool negated = false;  // kTest: `is not`
  // kAttr: {object}; kItem: {object, index}; kSlice: {object, start, stop, step} (null when left
  // out); kCall: {callee, args...}; kFilter / kTest: {subject, args...}; kNot / kNeg: {operand};
  // kBinary / kAnd / kOr: {left, right}; kCond: {then, condition, else (may be null)};
  // kList: items; kDict: key, value, key, value...
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter, kTest
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum K { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kGeneration, kBreak, kContinue };
  K k;
  int line = 0;
  std::string text;   // kText
  ExprPtr expr;       // kOutput; kFor: the iterable; kSet: the value
  // kIf: conditions[i] guards bodies[i]; a last body without a condition is the else.
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  // kFor: targets (one name, or several to unpack), filter (`if` after the iterable, may be null),
  // bodies[0] the loop, bodies[1] (when present) the else. kSet / kSetBlock: targets[0] is the
  // name, attribute the namespace attribute (`set ns.x = ...`) or empty.
  std::vector<std::string> targets;
  std::string attribute;
  ExprPtr filter;
  // kMacro: targets[0] its name, params with their defaults (null for none), bodies[0].
  std::vector<std::pair<std::string, ExprPtr>> params;
};

// A parsed template. Parsing applies whitespace control as transformers configures Jinja:
// trim_blocks and lstrip_blocks on, `{%-`/`-%}` and `{{-`/`-}}` stripping, one trailing newline of
// the source dropped. mt::Error "chat template line N: ..." for syntax it cannot read, naming the
// construct meshtrain does not support.
Body parse_template(std::string_view source);

}  // namespace mt::jinja

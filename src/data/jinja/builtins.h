// The filters, tests, methods and global functions chat templates call (builtins.cpp), shared by
// the evaluator (eval.cpp). Each failure is one mt::Error naming the template line.
#pragma once
#include <string>
#include <vector>

#include "data/jinja/value.h"

namespace mt::jinja {

[[noreturn]] void fail_line(int line, const std::string& msg);

// Whether `name` is a filter / test apply_filter / apply_test know (templates are checked when parsed).
bool known_filter(const std::string& name);
bool known_test(const std::string& name);
// `subject | name(args)`.
Value apply_filter(const std::string& name, const Value& subject, const Args& args, int line);
// `subject is name(args)`.
bool apply_test(const std::string& name, const Value& subject, const Args& args, int line);
// `object.name`: a key of a mapping, a method of a string, mapping or list (bound), else undefined.
Value attribute(const Value& object, const std::string& name, int line);
// `object[index]`.
Value item(const Value& object, const Value& index, int line);
// `object[start:stop:step]` of a list or string (bounds undefined where left out).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, int line);
// The global function `name` (range, namespace, dict, raise_exception), or undefined.
Value global_function(const std::string& name);
// The items a for loop or a filter iterates: a list's items, a mapping's keys, a string's characters.
List iterate(const Value& v, int line);
// The byte offset where each UTF-8 character of `s` starts.
std::vector<size_t> char_starts(const std::string& s);

}  // namespace mt::jinja

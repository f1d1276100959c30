// A Jinja interpreter for the subset that models' chat templates use (Llama 3.1/3.2, Qwen2.5,
// Qwen3, Gemma 3, Mistral): if/elif/else, for (with loop.*, a filter, else), set (names, namespace
// attributes, blocks), macros, {% generation %}, the operators and literals of Jinja expressions,
// and the filters, tests, string/dict methods and globals listed in builtins.cpp. Whitespace is
// controlled as transformers configures Jinja (trim_blocks, lstrip_blocks). Anything else is one
// mt::Error naming the construct and its line. Output equals Hugging Face's renderers'
// (@huggingface/jinja, transformers' jinja2) on the templates above: tests/test_jinja*.cpp.
#pragma once
#include <ctime>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "data/jinja/ast.h"
#include "data/jinja/value.h"

namespace mt::jinja {

struct Rendered {
  Text text;
  // Byte ranges [begin, end) of text written inside {% generation %} blocks, in order.
  std::vector<std::pair<size_t, size_t>> generation;
};

class Template {
 public:
  // Parses `source`; mt::Error "chat template line N: ..." when it cannot.
  explicit Template(std::string_view source);
  // Runs the template with these variables (messages, add_generation_prompt, bos_token, ...).
  // mt::Error for what fails while running (raise_exception, a filter of the wrong type, ...).
  Rendered render(const Dict& context) const;
  // Whether the template writes {% generation %} blocks (then they mark what is trained).
  bool has_generation() const { return has_generation_; }

 private:
  Body body_;
  bool has_generation_ = false;
};

// A JSON value as a template value; every string, number, list and dict in it gets `origin`.
Value from_json(const nlohmann::ordered_json& j, int32_t origin);
// strftime_now(format): the function transformers gives templates (Llama's date line), here
// formatting the fixed time `now` (UTC) so that renderings are reproducible.
Value strftime_now_at(std::time_t now);

}  // namespace mt::jinja

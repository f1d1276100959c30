// toml++ as meshtrain includes it: every file that reads TOML includes this, never <toml++/toml.h>
// directly, so all of them see the library configured the same way.
//
// toml++ 3.3 asserts a precondition that its parser breaks: a table header whose name starts with
// a character a key cannot start with ("[$model]", "[" then a form feed) reaches parse_key's
// TOML_ASSERT_ASSUME, which aborts the run (or, with NDEBUG, is undefined behaviour) instead of
// reporting the syntax error that the following lines of parse_key already produce. With its
// assertions off (and NDEBUG hidden from it, so they do not turn into assumptions) the parser
// reports "expected bare key starting character or string delimiter" like any other error.
#pragma once

#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_assert(true)
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

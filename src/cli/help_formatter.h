// The help text of every verb: each option's default at the end of its description, where a
// reader looks for it.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace mt::cli {

// CLI11 (2.1) prints a captured default as "INT=256" after the option's name, easy to miss and
// unexplained; this formatter moves it to the description as "(default: 256)". Options bound to an
// empty value (no default: a path that is optional) show nothing; their descriptions say what
// leaving them out means.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
};

// Every verb's options capture their defaults and print them with HelpFormatter; call before the
// verbs are added (subcommands inherit both from the app).
void show_defaults_in_help(CLI::App& app);

}  // namespace mt::cli

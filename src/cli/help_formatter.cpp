#include "cli/help_formatter.h"

#include <memory>

namespace mt::cli {

namespace {

// A default worth printing: flags (no value) are off unless given, and an empty string or list
// means the option has no default.
bool has_shown_default(const CLI::Option* opt) {
  const std::string& d = opt->get_default_str();
  return opt->get_type_size() != 0 && !d.empty() && d != "[]";
}

}  // namespace

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  std::string opts = CLI::Formatter::make_option_opts(opt);
  const std::string shown = "=" + opt->get_default_str();
  if (!opt->get_default_str().empty())
    if (const size_t at = opts.find(shown); at != std::string::npos) opts.erase(at, shown.size());
  return opts;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  std::string desc = CLI::Formatter::make_option_desc(opt);
  if (has_shown_default(opt)) desc += " (default: " + opt->get_default_str() + ")";
  return desc;
}

void show_defaults_in_help(CLI::App& app) {
  app.option_defaults()->always_capture_default();
  app.formatter(std::make_shared<HelpFormatter>());
}

}  // namespace mt::cli

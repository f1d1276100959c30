// `meshtrain report`: one self-contained HTML page of a run (inline SVG charts and CSS, no script,
// nothing fetched) and the same charts as PNG files.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace mt::report {

// The page's HTML.
std::string html_report(const RunData& run);

// Writes the page to `html_path` and the PNG charts into `png_dir` (created); returns the files
// written, the page first. Throws mt::Error naming a file that cannot be written.
std::vector<std::string> write_report(const RunData& run, const std::string& html_path,
                                      const std::string& png_dir);

}  // namespace mt::report

// meshtrain report RUN_DIR [--out HTML] [--png-dir DIR] [--tensorboard DIR]
// One self-contained HTML page of a training run (loss, learning rate, tokens/s, MFU, memory,
// time per op and per collective, mesh, config) and the same charts as PNG files; optionally the
// metrics as a TensorBoard event file.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/work_gate.h"
#include "report/html_report.h"
#include "train/run_outputs.h"
#include "report/run_data.h"
#include "report/tensorboard.h"

namespace mt::cli {

Action add_report_command(CLI::App& app) {
  struct Options {
    std::string run_dir, out, png_dir, tensorboard;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "report", "Write an HTML report of a training run (inline SVG charts, nothing fetched) and "
                "PNG charts");
  sub->add_option("run_dir", opt->run_dir, "The run's directory (output.dir of meshtrain train)")
      ->required();
  sub->add_option("--out,-o", opt->out, "The HTML file to write (default: RUN_DIR/report.html)");
  sub->add_option("--png-dir", opt->png_dir,
                  "Where the PNG charts go (default: report/ beside the HTML file)");
  sub->add_option("--tensorboard", opt->tensorboard,
                  "Also write the metrics as a TensorBoard event file into this directory "
                  "(default: none, not written)");
  return [opt] {
    work_gate::reached("report");
    const report::RunData run = report::read_run(opt->run_dir);
    const std::string html = opt->out.empty() ? opt->run_dir + "/report.html" : opt->out;
    std::string png_dir = opt->png_dir;
    if (png_dir.empty()) {
      const size_t slash = html.find_last_of('/');
      png_dir = (slash == std::string::npos ? std::string() : html.substr(0, slash + 1)) + "report";
    }
    std::cout << "report of " << run.steps.size() << (run.steps.size() == 1 ? " step" : " steps")
              << (run.summary ? "" : " (no run_summary.json: memory per rank, op and collective "
                                     "times not recorded)")
              << "\nwrote:\n";
    for (const std::string& f : report::write_report(run, html, png_dir)) {
      std::cout << "  " << f << "\n";
      record_run_output(f, std::cerr);  // so that train --overwrite replaces it with the run
    }
    if (!opt->tensorboard.empty())
      std::cout << "  " << report::write_tensorboard_events(run, opt->tensorboard) << "\n";
    return 0;
  };
}

}  // namespace mt::cli

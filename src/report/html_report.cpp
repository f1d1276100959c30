#include "report/html_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "report/raster_chart.h"
#include "report/run_charts.h"
#include "report/svg_chart.h"

namespace mt::report {
namespace {

constexpr int kChartWidth = 560, kChartHeight = 300, kBarWidth = 900;

const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}.missing{color:#888;font-style:italic})";

std::string fixed(double v, const char* format) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string row(const std::string& key, const std::string& value) {
  return "<tr><th>" + escape_xml(key) + "</th><td>" + escape_xml(value) + "</td></tr>\n";
}

// The run at a glance: its length, last losses, throughput and memory.
std::string overview(const RunData& run) {
  const StepPoint& last = run.steps.back();
  double last_val = std::nan(""), peak = 0.0;
  for (const StepPoint& p : run.steps) {
    if (std::isfinite(p.val_loss)) last_val = p.val_loss;
    if (std::isfinite(p.peak_mem_bytes)) peak = std::max(peak, p.peak_mem_bytes);
  }
  std::string t = "<table>\n";
  t += row("steps recorded", std::to_string(run.steps.size()) + " (last: step " + std::to_string(last.step) + ")");
  t += row("final training loss", fixed(last.loss, "%.4f"));
  t += row("last validation loss", fixed(last_val, "%.4f"));
  if (run.summary) {
    t += row("tokens/s (steps after the first)", fixed(run.summary->value("tokens_per_s", NAN), "%.0f"));
    t += row("MFU", fixed(100.0 * run.summary->value("mfu", NAN), "%.1f%%"));
  }
  t += row("peak memory (rank 0)", bytes_text(peak));
  t += row("elapsed", fixed(last.elapsed_s, "%.1f s"));
  return t + "</table>\n";
}

std::string bar_section(const std::string& heading, const NamedBarChart& c) {
  std::string s = "<h2>" + escape_xml(heading) + "</h2>\n";
  if (!c.missing.empty()) return s + "<p class=\"missing\">" + escape_xml(c.missing) + "</p>\n";
  return s + svg_bar_chart(c.chart, kBarWidth);
}

// The mesh as the run laid it out: from the summary, else from run.toml's [mesh] table.
std::string mesh_section(const RunData& run) {
  std::string s = "<h2>Mesh</h2>\n";
  if (run.summary && run.summary->contains("mesh")) {
    return s + "<table>\n" + row("mesh", run.summary->value("mesh", std::string())) +
           row("ranks", std::to_string(run.summary->value("world_size", 1))) + "</table>\n";
  }
  const size_t at = run.config_toml.find("[mesh]");
  if (at == std::string::npos) return s + "<p class=\"missing\">not recorded</p>\n";
  const size_t end = run.config_toml.find("\n[", at + 1);
  return s + "<pre>" + escape_xml(run.config_toml.substr(at, end == std::string::npos ? end : end - at)) + "</pre>\n";
}

}  // namespace

std::string html_report(const RunData& run) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>meshtrain report: " +
                  escape_xml(run.dir) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>meshtrain report: " + escape_xml(run.dir) + "</h1>\n" + overview(run);
  h += "<h2>Training</h2>\n<div class=\"charts\">\n";
  for (const NamedLineChart& c : step_charts(run)) h += svg_line_chart(c.chart, kChartWidth, kChartHeight);
  h += "</div>\n";
  h += bar_section("Memory per rank", memory_per_rank_chart(run));
  h += bar_section("Time per op", op_time_chart(run));
  h += bar_section("Time per collective", collective_time_chart(run));
  h += mesh_section(run);
  h += "<h2>Config (run.toml)</h2>\n";
  h += run.config_toml.empty() ? "<p class=\"missing\">not recorded</p>\n"
                               : "<pre>" + escape_xml(run.config_toml) + "</pre>\n";
  return h + "</body>\n</html>\n";
}

std::vector<std::string> write_report(const RunData& run, const std::string& html_path,
                                      const std::string& png_dir) {
  std::vector<std::string> written;
  const std::string html = html_report(run);
  write_file_atomically(html_path, [&](std::ostream& os) { os << html; });
  written.push_back(html_path);
  std::error_code ec;
  std::filesystem::create_directories(png_dir, ec);
  if (ec) fail("cannot create directory '" + png_dir + "': " + ec.message());
  for (const NamedLineChart& c : step_charts(run)) {
    write_png(png_dir + "/" + c.file, raster_line_chart(c.chart, kChartWidth, kChartHeight));
    written.push_back(png_dir + "/" + c.file);
  }
  for (const NamedBarChart& c : {memory_per_rank_chart(run), op_time_chart(run), collective_time_chart(run)}) {
    if (!c.missing.empty()) continue;
    write_png(png_dir + "/" + c.file, raster_bar_chart(c.chart, kBarWidth));
    written.push_back(png_dir + "/" + c.file);
  }
  return written;
}

}  // namespace mt::report

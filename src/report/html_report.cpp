#include "report/html_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "report/raster_chart.h"
#include "report/run_charts.h"
#include "report/run_identity.h"
#include "report/run_totals.h"
#include "report/svg_chart.h"

namespace mt::report {
namespace {

// The charts' size on the page; the PNGs have kPngScale device pixels to each of the page's.
constexpr int kChartWidth = 560, kChartHeight = 300, kBarWidth = 900, kPngScale = 2;

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

// "12.3 s over 2 segments (resumed at step 4)", for a resumed run.
std::string segments_text(const RunData& run, double elapsed_s) {
  std::string t = fixed(elapsed_s, "%.1f s");
  if (run.segments.size() < 2) return t;
  t += " over " + std::to_string(run.segments.size()) + " segments (resumed at step";
  for (size_t k = 1; k < run.segments.size(); ++k)
    t += (k > 1 ? ", " : " ") + std::to_string(run.segments[k].start_step);
  return t + ")";
}

// The MFU's denominator: the peak the run measured at its first start (or was given), which a
// resumed run reuses; said when a segment used another one.
std::string mfu_basis_text(const RunData& run) {
  double peak = run.segments.front().peak_flops;
  if (!std::isfinite(peak) && run.summary) peak = run.summary->value("peak_flops", NAN);
  if (!std::isfinite(peak)) return "not recorded";
  std::string t = fixed(peak / 1e9, "%.1f GFLOP/s") + " per process";
  for (const Segment& seg : run.segments)
    if (std::isfinite(seg.peak_flops) && seg.peak_flops != peak)
      return t + " (another basis from the resume at step " + std::to_string(seg.start_step) + ")";
  return t;
}

// The run at a glance: its length, losses, throughput and memory, over every segment.
std::string overview(const RunData& run) {
  const StepPoint& last = run.steps.back();
  double last_val = std::nan(""), peak = 0.0;
  int64_t last_val_step = 0;
  for (const StepPoint& p : run.steps) {
    if (std::isfinite(p.val_loss)) last_val = p.val_loss, last_val_step = p.step;
    if (std::isfinite(p.peak_mem_bytes)) peak = std::max(peak, p.peak_mem_bytes);
  }
  const Segment& first = run.segments.front();
  const RunTotals totals = run_totals(run);
  const bool timed = totals.timed_steps > 0;
  std::string t = "<table>\n";
  for (const auto& [label, value] : run_identity_rows(run.config_toml, run.summary)) t += row(label, value);
  t += row("steps recorded", std::to_string(run.steps.size()) + " (last: step " + std::to_string(last.step) + ")");
  t += row("final training loss", fixed(last.loss, "%.4f"));
  // A mixture of experts: its routing losses (beside the tokens' loss) and a capacity's drops.
  if (std::isfinite(last.routing_loss)) t += row("final routing loss (MoE)", fixed(last.routing_loss, "%.4f"));
  if (std::isfinite(last.moe_dropped)) t += row("MoE choices dropped (last step)", fixed(last.moe_dropped, "%.0f"));
  t += row("validation loss at step " + std::to_string(first.start_step), fixed(first.val_loss_start, "%.4f"));
  t += row(std::isfinite(last_val) ? "last validation loss (step " + std::to_string(last_val_step) + ")"
                                   : "last validation loss",
           fixed(last_val, "%.4f"));
  if (timed || run.summary) {
    const char* when = timed ? " (steps after each start's first)" : " (steps after the first, last segment)";
    t += row(std::string("tokens/s") + when,
             fixed(timed ? totals.tokens_per_s : run.summary->value("tokens_per_s", NAN), "%.0f"));
    t += row(std::string("MFU") + when, fixed(100.0 * (timed ? totals.mfu : run.summary->value("mfu", NAN)), "%.1f%%"));
  }
  t += row("MFU basis", mfu_basis_text(run));
  // Each start's process has its own peak (the log's and run_summary.json's are the last start's):
  // a resumed run's row names both when they differ.
  std::string peak_text = bytes_text(peak);
  double last_peak = NAN;
  if (run.summary && run.summary->contains("memory_per_rank") && (*run.summary)["memory_per_rank"].is_array())
    for (const auto& r : (*run.summary)["memory_per_rank"])
      if (r.is_object() && r.value("rank", -1) == 0) last_peak = r.value("peak_rss_bytes", NAN);
  if (run.segments.size() > 1 && std::isfinite(last_peak) && bytes_text(last_peak) != peak_text)
    peak_text += " (the highest of its " + std::to_string(run.segments.size()) + " starts; the last start's " +
                 bytes_text(last_peak) + ")";
  t += row("peak memory (rank 0)", peak_text);
  t += row("elapsed", segments_text(run, totals.elapsed_s));
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
    write_png(png_dir + "/" + c.file, raster_line_chart(c.chart, kChartWidth, kChartHeight, kPngScale));
    written.push_back(png_dir + "/" + c.file);
  }
  for (const NamedBarChart& c : {memory_per_rank_chart(run), op_time_chart(run), collective_time_chart(run)}) {
    if (!c.missing.empty()) continue;
    write_png(png_dir + "/" + c.file, raster_bar_chart(c.chart, kBarWidth, kPngScale));
    written.push_back(png_dir + "/" + c.file);
  }
  return written;
}

}  // namespace mt::report

// `meshtrain report` on a real run: a two-rank data-parallel training run of a few steps with
// validation, its report rendered by headless Chromium (the DOM keeps every chart's SVG, the
// screenshot is not blank), and the PNG charts meshtrain wrote valid PNG files that show the
// lines. Also the run summary the trainer writes for it, an older run without that summary, and
// bad input; and the TensorBoard event file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "report/chart.h"
#include "report/pixel_font.h"
#include "report/png.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"
#include "train/checkpoint_manifest.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

using testing::count_of, testing::read_file;

// A decoded 8-bit RGB or RGBA PNG, as RGB.
struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  std::string error;  // empty when the file is a valid PNG
};

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// Checks the signature, IHDR and every chunk's CRC, inflates the IDAT data (zlib) and undoes the
// row filters: enough of PNG for meshtrain's files and Chromium's screenshots.
Decoded decode_png(const std::string& path) {
  Decoded d;
  const std::string bytes = read_file(path);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() < 8 || std::memcmp(p, signature, 8) != 0) return d.error = "no PNG signature", d;
  std::string idat;
  int channels = 0;
  size_t at = 8;
  bool first = true, ended = false;
  while (at + 12 <= bytes.size()) {
    const uint32_t len = be32(p + at);
    if (at + 12 + len > bytes.size()) return d.error = "chunk past the end", d;
    const std::string type(bytes, at + 4, 4);
    const uint32_t crc = uint32_t(::crc32(0, p + at + 4, len + 4));
    if (crc != be32(p + at + 8 + len)) return d.error = "bad CRC in " + type, d;
    if (first && type != "IHDR") return d.error = "first chunk is " + type, d;
    if (type == "IHDR") {
      d.width = int(be32(p + at + 8)), d.height = int(be32(p + at + 12));
      const int depth = p[at + 16], color = p[at + 17], interlace = p[at + 20];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0)
        return d.error = "not 8-bit RGB/RGBA non-interlaced", d;
      channels = color == 2 ? 3 : 4;
    }
    if (type == "IDAT") idat.append(bytes, at + 8, len);
    if (type == "IEND") ended = true;
    first = false;
    at += 12 + len;
  }
  if (!ended) return d.error = "no IEND", d;
  const size_t stride = size_t(d.width) * size_t(channels);
  std::vector<uint8_t> raw((stride + 1) * size_t(d.height));
  uLongf raw_len = uLongf(raw.size());
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), uLong(idat.size())) != Z_OK ||
      raw_len != raw.size())
    return d.error = "image data does not inflate to its size", d;
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  for (int y = 0; y < d.height; ++y) {
    const uint8_t* row = &raw[size_t(y) * (stride + 1)];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= size_t(channels) ? cur[i - size_t(channels)] : 0, b = prev[i],
                c = i >= size_t(channels) ? prev[i - size_t(channels)] : 0;
      int pred = 0;
      switch (row[0]) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: return d.error = "bad filter type", d;
      }
      cur[i] = uint8_t(row[1 + i] + pred);
    }
    for (int x = 0; x < d.width; ++x)
      for (int k = 0; k < 3; ++k) d.rgb.push_back(cur[size_t(x) * size_t(channels) + size_t(k)]);
    prev = cur;
  }
  return d;
}

// Pixels within 24 of the charts' blue (#4c78a8) in every channel: the drawn series and bars.
size_t blue_pixels(const Decoded& d) {
  size_t n = 0;
  for (size_t i = 0; i + 2 < d.rgb.size(); i += 3)
    n += std::abs(d.rgb[i] - 0x4c) < 24 && std::abs(d.rgb[i + 1] - 0x78) < 24 && std::abs(d.rgb[i + 2] - 0xa8) < 24;
  return n;
}

// The number of pixels that differ from the most common colour (the page's background).
size_t non_background_pixels(const Decoded& d) {
  std::map<uint32_t, size_t> counts;
  for (size_t i = 0; i + 2 < d.rgb.size(); i += 3) ++counts[uint32_t(d.rgb[i]) << 16 | uint32_t(d.rgb[i + 1]) << 8 | d.rgb[i + 2]];
  size_t most = 0;
  for (const auto& [c, n] : counts) most = std::max(most, n);
  return d.rgb.size() / 3 - most;
}

std::string write_text(const std::string& dir) {
  std::string text;
  while (text.size() < 2000) text += "the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ";
  fs::create_directories(dir);
  std::ofstream(dir + "/text.txt") << text;
  return dir + "/text.txt";
}

// What the trainer recorded for the report: memory per rank, time per op and per collective.
void check_summary(const std::string& run) {
  const nlohmann::json s = nlohmann::json::parse(read_file(run + "/run_summary.json"));
  EXPECT_EQ(s["mesh"].get<std::string>().rfind("dp=2", 0), 0u) << s.dump(1);
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["timed_steps"], 5);
  ASSERT_EQ(s["memory_per_rank"].size(), 2u) << s.dump(1);
  for (const auto& r : s["memory_per_rank"]) EXPECT_GT(r["peak_rss_bytes"].get<int64_t>(), 1 << 20) << s.dump(1);
  EXPECT_GT(s["op_seconds"].size(), 3u) << s.dump(1);
  double ops = 0.0;
  for (const auto& [op, sec] : s["op_seconds"].items()) ops += sec.get<double>();
  EXPECT_GT(ops, 0.0);
  EXPECT_LE(ops, s["timed_seconds"].get<double>() * 1.01) << s.dump(1);
  // Data parallelism sums the gradients over its group (dp+fsdp) once per step: at least 5.
  bool gradient_sum = false;
  for (const auto& c : s["collectives"])
    if (c["collective"] == "all_reduce_sum" && c["group"].get<std::string>().rfind("dp", 0) == 0 && c["calls"].get<int64_t>() >= 5 &&
        c["bytes"].get<int64_t>() > 0 && c["seconds"].get<double>() > 0)
      gradient_sum = true;
  EXPECT_TRUE(gradient_sum) << s.dump(1);
}

// The page as Chromium renders it.
void check_page_in_chromium(const std::string& run) {
  const CommandResult r = testing::run_meshtrain("report " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_file(run + "/report.html");
  EXPECT_EQ(html.find("http://", html.find("<body")), std::string::npos) << "the page fetches nothing";
  EXPECT_EQ(html.find("<script"), std::string::npos);

  ASSERT_EQ(testing::run_command("command -v chromium").code, 0)
      << "chromium is not installed: scripts/setup.sh installs it for this test";
  // As root Chromium needs --no-sandbox; a private profile; its dbus complaints go to a log.
  const std::string profile = run + "/../chromium-profile", log = run + "/../chromium.log";
  const std::string chromium = "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
                               "--user-data-dir=" + profile + " ";
  // The DOM as Chromium parsed it: the five line charts' and three bar charts' SVG, a polyline
  // with points per series (training and validation loss: two in the loss chart), bars.
  const CommandResult dom = testing::run_command(chromium + "--dump-dom file://" + run + "/report.html 2>" + log);
  ASSERT_EQ(dom.code, 0) << dom.output << read_file(log);
  EXPECT_EQ(count_of(dom.output, "<svg"), 8u) << dom.output;
  EXPECT_EQ(count_of(dom.output, "<polyline class=\"series\""), 6u) << dom.output;
  EXPECT_EQ(count_of(dom.output, "points=\"\""), 0u) << dom.output;
  EXPECT_GE(count_of(dom.output, "<rect class=\"bar\""), 2u + 4u + 1u) << dom.output;
  EXPECT_NE(dom.output.find("all_reduce_sum on dp"), std::string::npos) << dom.output;
  EXPECT_EQ(dom.output.find("not recorded"), std::string::npos) << dom.output;

  const std::string shot = run + "/../screenshot.png";
  const CommandResult s = testing::run_command(chromium + "--window-size=1280,1600 --screenshot=" + shot +
                                               " file://" + run + "/report.html 2>" + log);
  ASSERT_EQ(s.code, 0) << s.output << read_file(log);
  const Decoded d = decode_png(shot);
  ASSERT_EQ(d.error, "") << shot;
  EXPECT_EQ(d.width, 1280);
  EXPECT_GT(non_background_pixels(d), size_t(d.width) * size_t(d.height) / 50) << "blank screenshot";
  EXPECT_GT(blue_pixels(d), 2000u) << "no chart lines in the screenshot";
}

// meshtrain's own PNG files, written where --out says.
void check_png_charts(const std::string& run) {
  const std::string out = run + "/../elsewhere";
  const CommandResult r = testing::run_meshtrain("report " + run + " --out " + out + "/r.html");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out + "/r.html"));
  for (const char* name : {"loss", "lr", "tokens_per_s", "mfu", "memory", "memory_per_rank", "op_time"}) {
    const Decoded d = decode_png(out + "/report/" + name + ".png");
    ASSERT_EQ(d.error, "") << name;
    EXPECT_GT(d.width, 100) << name;
    EXPECT_GT(blue_pixels(d), 200u) << name << ": no line or bar drawn";
    EXPECT_GT(non_background_pixels(d), blue_pixels(d) + 200) << name << ": no axes or text";
  }
}

// A run without run_summary.json and run.toml: an older one, or one killed mid-line.
void check_run_without_summary(const std::string& run) {
  const std::string dir = mt::testing::fresh_temp_dir("report_old");
  fs::copy_file(run + "/metrics.jsonl", dir + "/metrics.jsonl");
  // A killed run's torn last line is not a step yet.
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"step\": 7, \"lo";
  const CommandResult r = testing::run_meshtrain("report " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("report of 6 steps"), std::string::npos) << r.output;
  const std::string html = read_file(dir + "/report.html");
  // model, data, mode and mesh in the overview; memory, ops, collectives, mesh, config below
  EXPECT_EQ(count_of(html, "not recorded"), 9u) << html;
  EXPECT_EQ(count_of(html, "<svg"), 5u);
}

// One real run (two data-parallel ranks, 6 steps, validation every 2) for all the checks: a test
// process of its own would train again.
TEST(Report, OfARealTwoRankRunRenderedByChromium) {
  const std::string dir = mt::testing::fresh_temp_dir("report_run");
  const std::string text = write_text(dir);
  const CommandResult r = testing::run_command(
      "OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -n 2 " +
      std::string(MESHTRAIN_BINARY) + " train --mesh dp=2 "
      "--set train.steps=6 --set train.eval_every=2 --set train.seq_len=32 --set train.batch_size=4 "
      "--set train.precision=fp32 --set train.peak_gflops=100 --set data.val_fraction=0.25 "
      "--set data.cache_dir=off --set data.path=" + text + " --set output.dir=" + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string run = dir + "/run";
  {
    SCOPED_TRACE("run_summary.json");
    check_summary(run);
  }
  {
    SCOPED_TRACE("the page in Chromium");
    check_page_in_chromium(run);
  }
  {
    SCOPED_TRACE("the PNG charts");
    check_png_charts(run);
  }
  {
    SCOPED_TRACE("a run without its summary");
    check_run_without_summary(run);
  }
}

// metrics.jsonl as JSON objects, one per line.
std::vector<nlohmann::json> metrics_lines(const std::string& run) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The inline SVG of the chart titled `title` in the page.
std::string svg_of(const std::string& html, const std::string& title) {
  const size_t at = html.find("aria-label=\"" + title + "\"");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) - at);
}

std::string fixed_text(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A run of 6 steps without eval_every (validation is measured at the start and the end all the
// same), resumed from its step-4 checkpoint: the report is of one run of two segments. The MFU
// basis is measured at the first start and reused by the resume; validation is plotted from step
// 0; the x axis ends at step 6; elapsed time and tokens/s cover both segments; the PNGs are
// deflated at twice the page's resolution and Chromium loads them.
TEST(Report, ResumedRunIsOneRunOfTwoSegments) {
  const std::string dir = mt::testing::fresh_temp_dir("report_resumed");
  const std::string text = write_text(dir), run = dir + "/run";
  const std::string args = " --set train.steps=6 --set train.seq_len=32 --set train.batch_size=4 "
                           "--set train.precision=fp32 --set data.val_fraction=0.25 --set data.cache_dir=off "
                           "--set output.checkpoint_every=2 --set output.keep_checkpoints=3 --set data.path=" + text +
                           " --set output.dir=" + run;
  const CommandResult first = testing::run_command("OMP_NUM_THREADS=1 timeout 300 " + std::string(MESHTRAIN_BINARY) +
                                                   " train" + args);
  ASSERT_EQ(first.code, 0) << first.output;
  EXPECT_NE(first.output.find("(measured bf16 GEMM)"), std::string::npos) << first.output;
  const CommandResult second = testing::run_command(
      "OMP_NUM_THREADS=1 timeout 300 " + std::string(MESHTRAIN_BINARY) + " train" + args +
      " --set train.resume=" + run + "/checkpoints/step-000004");
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_NE(second.output.find("(measured at the run's first start, recorded in its checkpoint)"), std::string::npos)
      << second.output;

  // What the trainer recorded: each segment's first line marked, the same MFU basis in both, the
  // validation loss at each start and after the last step, every step's own time.
  const std::vector<nlohmann::json> lines = metrics_lines(run);
  ASSERT_EQ(lines.size(), 6u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"], int64_t(i + 1));
    EXPECT_GT(lines[i].value("step_s", 0.0), 0.0) << lines[i].dump();
    EXPECT_EQ(lines[i].contains("segment_start_step"), i == 0 || i == 4) << lines[i].dump();
  }
  EXPECT_EQ(lines[0]["segment_start_step"], 0);
  EXPECT_EQ(lines[4]["segment_start_step"], 4);
  const double peak = lines[0].value("peak_flops", 0.0);
  EXPECT_GT(peak, 1e8) << lines[0].dump();
  EXPECT_EQ(lines[4].value("peak_flops", 0.0), peak) << "the resume measured its own peak";
  // MFU over the same basis: tokens/s x FLOPs/token / peak, the same factor in both segments.
  EXPECT_NEAR(lines[5]["mfu"].get<double>() / lines[5]["tokens_per_s"].get<double>(),
              lines[1]["mfu"].get<double>() / lines[1]["tokens_per_s"].get<double>(), 1e-12);
  const double val_start = lines[0].value("val_loss_start", 0.0), val_end = lines[5].value("val_loss", 0.0);
  EXPECT_GT(val_start, 0.0) << lines[0].dump();
  EXPECT_GT(lines[4].value("val_loss_start", 0.0), 0.0) << lines[4].dump();
  EXPECT_GT(val_end, 0.0) << "the last step is evaluated without eval_every: " << lines[5].dump();
  for (size_t i = 0; i < 5; ++i) EXPECT_FALSE(lines[i].contains("val_loss")) << lines[i].dump();
  const nlohmann::json summary = nlohmann::json::parse(read_file(run + "/run_summary.json"));
  EXPECT_EQ(summary.value("peak_flops", 0.0), peak);
  EXPECT_EQ(summary.value("val_loss_end", 0.0), val_end);

  const CommandResult r = testing::run_meshtrain("report " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_file(run + "/report.html");
  // The whole run's figures: elapsed summed over the segments, tokens/s over the steps after each
  // segment's first (2, 3, 4 and 6), from their own times.
  const double elapsed = lines[3]["elapsed_s"].get<double>() + lines[5]["elapsed_s"].get<double>();
  EXPECT_NE(html.find(fixed_text(elapsed, "%.1f s") + " over 2 segments (resumed at step 4)"), std::string::npos) << html;
  double tokens = 0.0, seconds = 0.0;
  for (size_t i : {1, 2, 3, 5}) {
    tokens += lines[i]["tokens_per_s"].get<double>() * lines[i]["step_s"].get<double>();
    seconds += lines[i]["step_s"].get<double>();
  }
  EXPECT_NE(html.find("<td>" + fixed_text(tokens / seconds, "%.0f") + "</td>"), std::string::npos) << html;
  EXPECT_NE(html.find(fixed_text(peak / 1e9, "%.1f GFLOP/s") + " per process</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("validation loss at step 0</th><td>" + fixed_text(val_start, "%.4f")), std::string::npos) << html;
  EXPECT_NE(html.find("last validation loss (step 6)</th><td>" + fixed_text(val_end, "%.4f")), std::string::npos) << html;
  // Which run it is: model, data, mode and mesh first.
  EXPECT_NE(html.find("<tr><th>model</th><td>the [model] of run.toml, random init (4 layers, hidden 128)</td>"),
            std::string::npos) << html;
  EXPECT_NE(html.find("<tr><th>data</th><td>" + text + "</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><th>mode</th><td>full (every weight trained), fp32</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><th>mesh</th><td>dp=1</td>"), std::string::npos) << html;
  // Peak memory: the highest of every step's, and where the last start's (the log's, the
  // summary's and the per-rank bars') differs, that one named beside it.
  double highest = 0.0;
  for (const auto& l : lines) highest = std::max(highest, l.value("peak_mem_bytes", 0.0));
  const double last_start = summary["memory_per_rank"][0].value("peak_rss_bytes", 0.0);
  const std::string highest_text = fixed_text(highest / 1048576.0, "%.2f MiB");
  const std::string last_text = fixed_text(last_start / 1048576.0, "%.2f MiB");
  EXPECT_NE(html.find("peak memory (rank 0)</th><td>" + highest_text +
                      (highest_text == last_text ? "</td>" : " (the highest of its 2 starts; the last start's " + last_text + ")")),
            std::string::npos) << html;
  EXPECT_NE(html.find("Peak memory per rank (the last start, from step 4)"), std::string::npos) << html;
  // Every line chart marks the resume; the loss chart's validation points are at steps 0, 4 and 6:
  // the first on the plot's left edge (x = 72), the training line ends on its right edge (x = 544,
  // step 6), not past it.
  EXPECT_EQ(count_of(html, "<line class=\"segment\""), 5u) << html;
  const std::string loss = svg_of(html, "Loss");
  EXPECT_EQ(count_of(loss, "<circle"), 3u) << loss;
  EXPECT_NE(loss.find("<circle cx=\"72.0\""), std::string::npos) << loss;
  const size_t training = loss.find("points=\"");
  const std::string points = loss.substr(training, loss.find('"', training + 8) - training);
  EXPECT_EQ(points.substr(points.rfind(' ') + 1, 6), "544.0,") << points;
  // The memory axis starts at 0 (its lowest y tick; the x ticks are centred, the y ones end-aligned).
  const std::string memory = svg_of(html, "Peak memory (rank 0)");
  EXPECT_NE(memory.find("text-anchor=\"end\">0</text>"), std::string::npos) << memory;

  // The PNGs: twice the page's 560 x 300, deflated (far below the 2 MB of raw pixels), decoded
  // here and loaded by Chromium.
  const std::string png = run + "/report/loss.png";
  const Decoded d = decode_png(png);
  ASSERT_EQ(d.error, "");
  EXPECT_EQ(d.width, 1120);
  EXPECT_EQ(d.height, 600);
  EXPECT_LT(fs::file_size(png), size_t(1120 * 3 + 1) * 600 / 20);
  EXPECT_GT(blue_pixels(d), 2000u);
  const std::string shot = dir + "/png_in_chromium.png", log = dir + "/chromium.log";
  const CommandResult c = testing::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" + dir +
      "/chromium-profile --window-size=1120,600 --screenshot=" + shot + " file://" + png + " 2>" + log);
  ASSERT_EQ(c.code, 0) << c.output << read_file(log);
  const Decoded seen = decode_png(shot);
  ASSERT_EQ(seen.error, "");
  EXPECT_GT(blue_pixels(seen), 1000u) << "Chromium did not show the chart";
}

// A checkpoint written before the MFU basis was recorded (its config's train.peak_gflops is 0):
// the resume measures the peak again and says why, rather than failing or reusing nothing.
TEST(Report, ResumeFromACheckpointWithoutABasisMeasuresAgain) {
  const std::string dir = mt::testing::fresh_temp_dir("report_no_basis");
  const std::string text = write_text(dir), run = dir + "/run";
  const std::string args = " --set train.steps=4 --set train.seq_len=32 --set train.batch_size=4 "
                           "--set train.precision=fp32 --set data.cache_dir=off --set output.checkpoint_every=2 "
                           "--set data.path=" + text + " --set output.dir=" + run;
  const std::string train = "OMP_NUM_THREADS=1 timeout 300 " + std::string(MESHTRAIN_BINARY) + " train" + args;
  const CommandResult first = testing::run_command(train);
  ASSERT_EQ(first.code, 0) << first.output;
  // The step-2 checkpoint as an older meshtrain wrote it, its manifest's checksum made to match.
  const std::string ckpt = run + "/checkpoints/step-000002";
  const std::string manifest = read_file(ckpt + "/manifest.json");
  const std::string older = std::regex_replace(manifest, std::regex("peak_gflops = [0-9.eE+-]+"), "peak_gflops = 0.0");
  ASSERT_NE(older, manifest) << manifest;
  std::ofstream(ckpt + "/manifest.json", std::ios::binary | std::ios::trunc) << older;
  write_manifest_checksum(ckpt, older);
  const CommandResult resumed = testing::run_command(train + " --set train.resume=" + ckpt);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("(measured bf16 GEMM now: the checkpoint recorded none)"), std::string::npos)
      << resumed.output;
  const std::vector<nlohmann::json> lines = metrics_lines(run);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2]["segment_start_step"], 2);
  EXPECT_GT(lines[2].value("peak_flops", 0.0), 1e8) << lines[2].dump();
}

// A run recorded before segments were marked: a resume shows as elapsed_s starting again.
TEST(Report, UnmarkedResumeIsFoundByItsClock) {
  const std::string dir = mt::testing::fresh_temp_dir("report_unmarked");
  std::ofstream(dir + "/metrics.jsonl")
      << R"({"step": 1, "loss": 3.5, "lr": 0.001, "tokens_per_s": 100.0, "mfu": 0.25, "peak_mem_bytes": 1048576, "elapsed_s": 1.0})" "\n"
      << R"({"step": 2, "loss": 3.4, "lr": 0.001, "tokens_per_s": 100.0, "mfu": 0.25, "peak_mem_bytes": 1048576, "elapsed_s": 2.0})" "\n"
      << R"({"step": 3, "loss": 3.3, "lr": 0.001, "tokens_per_s": 100.0, "mfu": 0.25, "peak_mem_bytes": 1048576, "elapsed_s": 1.5})" "\n";
  const CommandResult r = testing::run_meshtrain("report " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_file(dir + "/report.html");
  EXPECT_NE(html.find("3.5 s over 2 segments (resumed at step 2)"), std::string::npos) << html;
  EXPECT_EQ(count_of(html, "<line class=\"segment\""), 5u);
}

// One protocol buffer field as the wire format has it: a number (varint, fixed64, fixed32) or bytes.
struct Field {
  int number = 0, wire = 0;
  uint64_t value = 0;
  std::string bytes;
};

// Decodes a message's fields; fails the test on a malformed one.
std::vector<Field> fields_of(const std::string& m) {
  std::vector<Field> out;
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; at < m.size(); shift += 7) {
      const uint8_t b = uint8_t(m[at++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ADD_FAILURE() << "varint past the end";
    return v;
  };
  while (at < m.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = int(key >> 3), f.wire = int(key & 7);
    if (f.wire == 0) {
      f.value = varint();
    } else if (f.wire == 1 || f.wire == 5) {
      const size_t n = f.wire == 1 ? 8 : 4;
      if (at + n > m.size()) {
        ADD_FAILURE() << "fixed past the end";
        return out;
      }
      std::memcpy(&f.value, m.data() + at, n);
      at += n;
    } else if (f.wire == 2) {
      const uint64_t n = varint();
      if (at + n > m.size()) {
        ADD_FAILURE() << "bytes past the end";
        return out;
      }
      f.bytes = m.substr(at, n);
      at += n;
    } else {
      ADD_FAILURE() << "wire type " << f.wire;
      return out;
    }
    out.push_back(f);
  }
  return out;
}

uint32_t masked(const std::string& data) {
  const uint32_t crc = crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TEST(Report, TensorBoardEventFileHoldsTheMetrics) {
  const std::string dir = mt::testing::fresh_temp_dir("report_tb");
  fs::create_directories(dir + "/run");
  std::ofstream(dir + "/run/metrics.jsonl")
      << R"({"step": 1, "loss": 3.5, "lr": 0.001, "tokens_per_s": 100.0, "mfu": 0.25, "peak_mem_bytes": 1048576, "elapsed_s": 1.0, "segment_start_step": 0, "val_loss_start": 4.0})" "\n"
      << R"({"step": 2, "loss": 3.25, "val_loss": 3.75, "lr": 0.002, "tokens_per_s": 200.0, "mfu": 0.5, "peak_mem_bytes": 2097152, "elapsed_s": 2.0})" "\n";
  const CommandResult r = testing::run_meshtrain("report " + dir + "/run --tensorboard " + dir + "/tb");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string path;
  for (const auto& e : fs::directory_iterator(dir + "/tb"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) path = e.path().string();
  ASSERT_FALSE(path.empty()) << r.output;
  EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
  // TFRecord: length (uint64), its masked CRC32C, the data, the data's masked CRC32C.
  const std::string file = read_file(path);
  std::vector<std::string> records;
  for (size_t at = 0; at < file.size();) {
    ASSERT_LE(at + 12, file.size());
    uint64_t n = 0;
    uint32_t length_crc = 0, data_crc = 0;
    std::memcpy(&n, file.data() + at, 8);
    std::memcpy(&length_crc, file.data() + at + 8, 4);
    ASSERT_EQ(length_crc, masked(file.substr(at, 8)));
    ASSERT_LE(at + 16 + n, file.size());
    const std::string data = file.substr(at + 12, n);
    std::memcpy(&data_crc, file.data() + at + 12 + n, 4);
    ASSERT_EQ(data_crc, masked(data));
    records.push_back(data);
    at += 16 + n;
  }
  ASSERT_EQ(records.size(), 4u);  // the file version, step 0's validation, steps 1 and 2
  // Event: wall_time 1 (double), step 2, file_version 3, summary 5 { value 1 { tag 1, simple_value 2 } }.
  const std::vector<Field> first = fields_of(records[0]);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[2].number, 3);
  EXPECT_EQ(first[2].bytes, "brain.Event:2");
  double start = 0.0;
  std::memcpy(&start, &first[0].value, 8);
  EXPECT_GT(start, 1.7e9);  // seconds since the epoch: a date after 2023
  std::map<std::string, std::vector<std::pair<int64_t, float>>> scalars;
  for (size_t i = 1; i < records.size(); ++i) {
    int64_t step = -1;
    for (const Field& f : fields_of(records[i])) {
      if (f.number == 2) step = int64_t(f.value);
      if (f.number != 5) continue;
      for (const Field& v : fields_of(f.bytes)) {
        ASSERT_EQ(v.number, 1);
        const std::vector<Field> value = fields_of(v.bytes);
        ASSERT_EQ(value.size(), 2u);
        ASSERT_EQ(value[1].wire, 5);
        float x = 0.0f;
        std::memcpy(&x, &value[1].value, 4);
        scalars[value[0].bytes].push_back({step, x});
      }
    }
  }
  using P = std::vector<std::pair<int64_t, float>>;
  EXPECT_EQ(scalars["train/loss"], (P{{1, 3.5f}, {2, 3.25f}}));
  EXPECT_EQ(scalars["val/loss"], (P{{0, 4.0f}, {2, 3.75f}}));  // before training, and after step 2
  EXPECT_EQ(scalars["train/lr"], (P{{1, 0.001f}, {2, 0.002f}}));
  EXPECT_EQ(scalars["perf/tokens_per_s"], (P{{1, 100.0f}, {2, 200.0f}}));
  EXPECT_EQ(scalars["perf/mfu"], (P{{1, 0.25f}, {2, 0.5f}}));
  EXPECT_EQ(scalars["memory/peak_bytes"], (P{{1, 1048576.0f}, {2, 2097152.0f}}));
  EXPECT_EQ(scalars.size(), 6u);
}

// The PNG writer's chunk checksum against its published check value, and the axis ticks.
TEST(Report, ChecksumsAndAxes) {
  const std::string digits = "123456789";
  EXPECT_EQ(report::crc32(reinterpret_cast<const uint8_t*>(digits.data()), digits.size()), 0xCBF43926u);
  const report::Axis a = report::nice_axis(4.63, 5.57, 5);
  EXPECT_DOUBLE_EQ(a.step, 0.5);
  EXPECT_DOUBLE_EQ(a.lo, 4.5);
  EXPECT_DOUBLE_EQ(a.hi, 6.0);
  EXPECT_EQ(a.ticks.size(), 4u);
  EXPECT_EQ(report::tick_label(5.5, a.step), "5.5");
  EXPECT_EQ(report::tick_label(2.5e-4, 5e-5), "2.5e-04");
  EXPECT_EQ(report::tick_label(15000, 5000), "15k");
  const report::Axis flat = report::nice_axis(130.0, 130.0);  // a flat line still gets a range
  EXPECT_LT(flat.lo, 130.0);
  EXPECT_GT(flat.hi, 130.0);
  // The x axis ends at the last step, which is labelled; ticks inside at round steps.
  const report::Axis x = report::exact_axis(0, 7);
  EXPECT_DOUBLE_EQ(x.lo, 0.0);
  EXPECT_DOUBLE_EQ(x.hi, 7.0);
  EXPECT_EQ(x.ticks, (std::vector<double>{0, 2, 4, 6, 7}));
  EXPECT_EQ(report::exact_axis(1, 30).ticks, (std::vector<double>{10, 20, 30}));
  // Memory from 0; tokens/s over at least 10% of its value, so noise is not a cliff.
  report::LineChart memory{"m", "step", "MiB", {{"rss", "#4c78a8", {{1, 100.0}, {2, 100.01}}}}};
  memory.y_from_zero = true;
  EXPECT_DOUBLE_EQ(report::plot_frame(memory, 560, 300).y.lo, 0.0);
  report::LineChart tokens{"t", "step", "tokens/s", {{"t", "#4c78a8", {{1, 1000.0}, {2, 1001.0}}}}};
  tokens.y_min_span_fraction = 0.1;
  const report::Axis y = report::plot_frame(tokens, 560, 300).y;
  EXPECT_GE(y.hi - y.lo, 100.0);
  EXPECT_LE(y.lo, 950.0);
  EXPECT_GE(y.hi, 1050.0);
}

// The pixel font smoothed for the doubled resolution: each level doubles the glyph, a vertical
// stroke stays solid, and Scale2x rounds a diagonal's steps (the 2x 'A' is not the 5x7 one with
// each pixel made a 2x2 block).
TEST(Report, PixelFontScalesSmoothly) {
  const report::GlyphBitmap one = report::glyph_bitmap('A', 0), two = report::glyph_bitmap('A', 1),
                            four = report::glyph_bitmap('A', 2);
  EXPECT_EQ(one.width, 5);
  EXPECT_EQ(two.width, 10);
  EXPECT_EQ(two.height, 14);
  EXPECT_EQ(four.height, 28);
  bool differs_from_blocks = false;
  for (int y = 0; y < two.height; ++y)
    for (int x = 0; x < two.width; ++x) differs_from_blocks |= two.at(x, y) != one.at(x / 2, y / 2);
  EXPECT_TRUE(differs_from_blocks);
  for (int y = 4; y < 28; ++y) EXPECT_TRUE(report::glyph_bitmap('I', 2).at(10, y)) << y;  // I's stem
}

TEST(Report, BadInputIsOneErrorLine) {
  const std::string dir = mt::testing::fresh_temp_dir("report_bad");
  fs::create_directories(dir + "/empty");
  std::ofstream(dir + "/file") << "x";
  fs::create_directories(dir + "/corrupt");
  std::ofstream(dir + "/corrupt/metrics.jsonl") << "{\"step\": 1, \"loss\": 2.0}\nnot json\n{\"step\": 3}\n";
  const std::pair<std::string, std::string> cases[] = {
      {dir + "/missing", "not a directory"},
      {dir + "/file", "not a directory"},
      {dir + "/empty", "no metrics.jsonl"},
      {dir + "/corrupt", "metrics.jsonl:2: not a step's JSON object"},
  };
  for (const auto& [path, message] : cases) {
    const CommandResult r = testing::run_meshtrain("report " + path);
    EXPECT_NE(r.code, 0) << path;
    EXPECT_EQ(count_of(r.output, "\n"), 1u) << r.output;
    EXPECT_EQ(r.output.rfind("meshtrain: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace mt

// `meshtrain report` on a real run: a two-rank data-parallel training run of a few steps with
// validation, its report rendered by headless Chromium (the DOM keeps every chart's SVG, the
// screenshot is not blank), and the PNG charts meshtrain wrote valid PNG files that show the
// lines. Also the run summary the trainer writes for it, an older run without that summary, and
// bad input.
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
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

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
  const std::string dir = (fs::temp_directory_path() / "meshtrain_report_old").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(run + "/metrics.jsonl", dir + "/metrics.jsonl");
  // A killed run's torn last line is not a step yet.
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"step\": 7, \"lo";
  const CommandResult r = testing::run_meshtrain("report " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("report of 6 steps"), std::string::npos) << r.output;
  const std::string html = read_file(dir + "/report.html");
  EXPECT_EQ(count_of(html, "not recorded"), 5u) << html;  // memory, ops, collectives, mesh, config
  EXPECT_EQ(count_of(html, "<svg"), 5u);
}

// One real run (two data-parallel ranks, 6 steps, validation every 2) for all the checks: a test
// process of its own would train again.
TEST(Report, OfARealTwoRankRunRenderedByChromium) {
  const std::string dir = (fs::temp_directory_path() / "meshtrain_report_run").string();
  fs::remove_all(dir);
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

TEST(Report, BadInputIsOneErrorLine) {
  const std::string dir = (fs::temp_directory_path() / "meshtrain_report_bad").string();
  fs::remove_all(dir);
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

// [[data.sources]]: several files mixed by weight (docs/data.md, "Mixing datasets"). The schedule's
// shares and determinism; the sources in the config (read, written back, refused); and through the
// binary: a completion file and a text-records file trained together with their shares in the log,
// a stop + resume mid-epoch that repeats the uninterrupted run, a token-cache file per source,
// eval --run giving the mixed validation loss again, and two data-parallel ranks that consume the
// same global order as one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <utility>
#include <regex>
#include <sstream>

#include "config_error.h"
#include "data/source_mix.h"
#include "error_of.h"
#include "mesh_runs.h"
#include "report/run_identity.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"
#include "train/config_schema.h"
#include "train/metrics.h"
#include "train/mixed_data.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::config_text_error;
using mt::testing::parse_config_text;
using mt::testing::read_file;
using mt::testing::run_meshtrain;
using mt::testing::TempDir;

// --- the schedule ---

// Every prefix of the stream holds each source's share to within (sources - 1) rows, and a
// whole period of integer weights holds it exactly.
TEST(MixSchedule, EveryPrefixHoldsTheShares) {
  for (const std::vector<double>& w :
       std::vector<std::vector<double>>{{1, 3}, {0.7, 0.2, 0.1}, {5, 1, 1, 1}, {1}, {2, 2}}) {
    MixSchedule s(w);
    double total = 0;
    for (double x : w) total += x;
    for (int64_t r = 1; r <= 2000; ++r) {
      s.next();
      for (size_t i = 0; i < w.size(); ++i) {
        const double expected = double(r) * w[i] / total;
        ASSERT_LE(std::abs(double(s.counts()[i]) - expected), double(w.size() - 1) + 1e-6)
            << "weights " << w.size() << ", source " << i << ", row " << r;
      }
    }
  }
  MixSchedule s({1, 3});
  for (int r = 0; r < 400; ++r) s.next();
  EXPECT_EQ(s.counts(), (std::vector<int64_t>{100, 300}));
  EXPECT_DOUBLE_EQ(s.share(0), 0.25);
  EXPECT_DOUBLE_EQ(s.share(1), 0.75);
}

// The order depends on the weights alone, and a seek lands where drawing the rows would have.
TEST(MixSchedule, FixedOrderAndSeekEqualsDrawing) {
  MixSchedule a({0.5, 0.3, 0.2}), b({0.5, 0.3, 0.2});
  std::vector<size_t> order;
  for (int r = 0; r < 500; ++r) {
    order.push_back(a.next());
    ASSERT_EQ(order.back(), b.next());
  }
  // 1:1 alternates, the earlier source first.
  MixSchedule even({1, 1});
  EXPECT_EQ(even.next(), 0u);
  EXPECT_EQ(even.next(), 1u);
  EXPECT_EQ(even.next(), 0u);
  for (int64_t at : {0, 1, 7, 123, 499}) {
    MixSchedule c({0.5, 0.3, 0.2});
    c.seek(at);
    MixSchedule d({0.5, 0.3, 0.2});
    for (int64_t r = 0; r < at; ++r) d.next();
    EXPECT_EQ(c.counts(), d.counts()) << at;
    for (int64_t r = at; r < 500; ++r) ASSERT_EQ(c.next(), order[size_t(r)]) << "seek " << at << ", row " << r;
  }
}

TEST(MixSchedule, RefusesWeightsThatAreNotPositive) {
  EXPECT_NE(error_of([] { MixSchedule({}); }).find("no sources"), std::string::npos);
  EXPECT_NE(error_of([] { MixSchedule({1, 0}); }).find("source 2's weight must be finite and > 0"), std::string::npos);
  EXPECT_NE(error_of([] { MixSchedule({-1}); }).find("source 1's weight"), std::string::npos);
  EXPECT_NE(error_of([] { MixSchedule({1, std::nan("")}); }).find("source 2's weight"), std::string::npos);
}

TEST(MixSchedule, SourcesHaveSeedsOfTheirOwn) {
  EXPECT_NE(source_seed(1, 0), source_seed(1, 1));
  EXPECT_NE(source_seed(1, 0), source_seed(2, 0));
  EXPECT_EQ(source_seed(7, 3), source_seed(7, 3));
}

// --- the config ---

const std::string kSources = R"([data]
val_fraction = 0.1

[[data.sources]]
path = "/d/a.jsonl"
weight = 3

[[data.sources]]
path = "/d/b.jsonl"
format = "text_records"
weight = 0.5
columns = ["text=body"]
)";

TEST(MixConfig, SourcesReadAndWrittenBack) {
  const RunConfig c = parse_config_text(kSources);
  ASSERT_EQ(c.data.sources.size(), 2u);
  EXPECT_EQ(c.data.sources[0].path, "/d/a.jsonl");
  EXPECT_EQ(c.data.sources[0].format, "auto");
  EXPECT_EQ(c.data.sources[0].weight, 3.0f);
  EXPECT_EQ(c.data.sources[0].split, "train");
  EXPECT_TRUE(c.data.sources[0].columns.empty());
  EXPECT_EQ(c.data.sources[1].format, "text_records");
  EXPECT_EQ(c.data.sources[1].weight, 0.5f);
  EXPECT_EQ(c.data.sources[1].columns, std::vector<std::string>{"text=body"});
  // run.toml holds them and reads back to the same sources.
  const std::string text = to_toml(c);
  EXPECT_NE(text.find("sources = ["), std::string::npos) << text;
  EXPECT_EQ(parse_config_text(text).data.sources, c.data.sources);
  // --set takes them as an array of inline tables.
  const RunConfig s = parse_config_text("", {"data.sources=[{path = \"/d/x.txt\", weight = 2}]"});
  ASSERT_EQ(s.data.sources.size(), 1u);
  EXPECT_EQ(s.data.sources[0].path, "/d/x.txt");
  EXPECT_EQ(s.data.sources[0].weight, 2.0f);
}

// A relative path in a config file is relative to the file, as data.path.
TEST(MixConfig, RelativePathsAreTheFilesDirectorys) {
  TempDir dir("mix_config_paths");
  const std::string file = dir.file("run.toml", "[[data.sources]]\npath = \"sub/a.jsonl\"\n");
  const RunConfig c = load_run_config(file, {});
  ASSERT_EQ(c.data.sources.size(), 1u);
  EXPECT_EQ(c.data.sources[0].path, (fs::path(dir.path()) / "sub/a.jsonl").lexically_normal().string());
}

TEST(MixConfig, BadSourcesAreRefusedInOneLine) {
  const std::string one = "[[data.sources]]\npath = \"/d/a.jsonl\"\n";
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {one + "weight = 0\n", "data.sources: source 1 ('/d/a.jsonl'): weight must be a finite number > 0"},
           {one + "weight = -2.5\n", "weight must be a finite number > 0"},
           {one + "weight = \"heavy\"\n", "data.sources: source 1: weight must be a number, got a string"},
           {"[[data.sources]]\nweight = 1\n", "data.sources: source 1: path is missing"},
           {one + "format = \"sharegpt4\"\n", "unknown format \"sharegpt4\" (expected one of auto, text, alpaca"},
           {one + "split = \"test\"\n", "split must be \"train\" (the whole file) or a slice of it"},
           {one + "split = \"train[50%:10%]\"\n", "got \"train[50%:10%]\""},
           {one + "split = \"train[:120%]\"\n", "got \"train[:120%]\""},
           {one + "split = \"train[200:100]\"\n", "got \"train[200:100]\""},
           {one + "split = \"train[:10%]+train[-5:]\"\n", "joins slices with '+': give each slice as a source"},
           {one + "wieght = 2\n", "data.sources: source 1: unknown key 'wieght' (a source has path, format, weight, split, columns)"},
           {one + one, "data.sources: source 2 ('/d/a.jsonl'): the same file read the same way as source 1"},
           {"[data]\nsources = \"a.jsonl\"\n", "data.sources must be an array of tables"},
       }) {
    const std::string msg = config_text_error(text);
    EXPECT_NE(msg.find(why), std::string::npos) << text << "\n -> " << msg;
  }
  // The same file read two ways is two sources, and so are two slices of it.
  EXPECT_EQ(config_text_error(one + one + "format = \"text\"\n"), "");
  EXPECT_EQ(config_text_error(one + "split = \"train[:50%]\"\n" + one + "split = \"train[50%:]\"\n"), "");
}

TEST(MixConfig, SplitSlicesAsHfDatasetsWritesThem) {
  const auto r = [](const std::string& s) { return parse_split(s); };
  ASSERT_TRUE(r("train"));
  EXPECT_TRUE(r("train")->whole());
  EXPECT_TRUE(r("train[:]") && r("train[:]")->whole());
  ASSERT_TRUE(r("train[:90%]"));
  EXPECT_EQ(r("train[:90%]")->begin, 0.0);
  EXPECT_EQ(r("train[:90%]")->end, 90.0);
  ASSERT_TRUE(r("train[12.5%:]"));
  EXPECT_EQ(r("train[12.5%:]")->begin, 12.5);
  EXPECT_EQ(r("train[12.5%:]")->end, 100.0);
  for (const char* bad : {"", "test", "train[]", "train[90%:10%]", "train[:101%]", "train[:-101%]", "train[20:10]",
                          "train[-5:-10]", "train[1.5:]", "train[--5:]", "train[5%:-95%]", "train[:50%",
                          "train[1%:2%:3%]", "validation[:10%]", "train[:10]+train[20:]"})
    EXPECT_FALSE(r(bad)) << bad;
  // Complementary slices share no item and miss none.
  const SplitRange head = *r("train[:30%]"), tail = *r("train[30%:]");
  for (size_t n : {0, 1, 7, 10, 33, 1000}) {
    EXPECT_EQ(head.first(n), 0u);
    EXPECT_EQ(head.last(n), tail.first(n)) << n;
    EXPECT_EQ(tail.last(n), n);
  }
  EXPECT_EQ(head.last(10), 3u);
  // Counts of rows, negative from the end, as HF datasets reads them; a percentage from the end too.
  const auto items = [&](const std::string& s, size_t n) {
    const SplitRange range = *r(s);
    EXPECT_EQ(range.misfit(n, "examples"), "") << s;
    return std::pair{range.first(n), range.last(n)};
  };
  EXPECT_EQ(items("train[:1000]", 1500), (std::pair<size_t, size_t>{0, 1000}));
  EXPECT_EQ(items("train[100:200]", 1500), (std::pair<size_t, size_t>{100, 200}));
  EXPECT_EQ(items("train[-500:]", 1500), (std::pair<size_t, size_t>{1000, 1500}));
  EXPECT_EQ(items("train[:-100]", 1500), (std::pair<size_t, size_t>{0, 1400}));
  EXPECT_EQ(items("train[-10%:]", 1500), (std::pair<size_t, size_t>{1350, 1500}));
  EXPECT_EQ(items("train[10%:200]", 1500), (std::pair<size_t, size_t>{150, 200}));
  EXPECT_EQ(items("train[:1500]", 1500), (std::pair<size_t, size_t>{0, 1500}));
  EXPECT_FALSE(r("train[:1000]")->whole());
  // Against the file: counts past its rows, or ends that cross, in one line naming the count.
  EXPECT_EQ(r("train[:1000]")->misfit(600, "examples"),
            "split \"train[:1000]\" reaches item 1000 of 600 examples (give at most 600, or a percentage)");
  EXPECT_EQ(r("train[-700:]")->misfit(600, "examples"),
            "split \"train[-700:]\" starts 700 items before the end of 600 examples (give at most 600, or a percentage)");
  EXPECT_EQ(r("train[50%:40]")->misfit(100, "pairs"), "split \"train[50%:40]\" of 100 pairs holds none");
}

TEST(MixConfig, SourceConfigIsTheSourcesFileOneRowAtATime) {
  RunConfig c = parse_config_text(kSources);
  c.train.seq_len = 32;
  c.train.eval_tokens = 320;  // 10 rows
  const RunConfig b = source_config(c, 1, 0.25);
  EXPECT_TRUE(b.data.sources.empty());
  EXPECT_EQ(b.data.path, "/d/b.jsonl");
  EXPECT_EQ(b.data.format, "text_records");
  EXPECT_EQ(b.data.columns, std::vector<std::string>{"text=body"});
  EXPECT_EQ(b.train.batch_size, 1);
  EXPECT_EQ(b.train.seed, source_seed(c.train.seed, 1));
  EXPECT_EQ(b.train.eval_tokens, 3 * 32);  // ceil(10 x 0.25) rows
  c.data.columns = {"prompt=q"};
  EXPECT_EQ(source_config(c, 0, 0.75).data.columns, std::vector<std::string>{"prompt=q"});  // data.columns
}

// The report's "data" row names each source with its share (from run.toml, as run_identity reads it).
TEST(MixConfig, ReportNamesEachSourceWithItsShare) {
  RunConfig c = parse_config_text(kSources);
  const auto data_row = [](const RunConfig& config) {
    for (const auto& [label, value] : report::run_identity_rows(to_toml(config), std::nullopt))
      if (label == "data") return value;
    return std::string();
  };
  EXPECT_EQ(data_row(c), "2 sources mixed by weight: /d/a.jsonl weight 3, 85.7% of the rows; "
                         "/d/b.jsonl (text_records) weight 0.5, 14.3% of the rows");
  // A source's split is named with it.
  c.data.sources[0].split = "train[-500:]";
  EXPECT_EQ(data_row(c), "2 sources mixed by weight: /d/a.jsonl train[-500:] weight 3, 85.7% of the rows; "
                         "/d/b.jsonl (text_records) weight 0.5, 14.3% of the rows");
}

// --- through the binary ---

const std::string kRun =
    "train --set train.seq_len=32 --set train.batch_size=2 --set train.log_every=1 --set train.peak_gflops=100 "
    "--set data.cache_dir=off --set data.val_fraction=0 --set model.hidden_size=64 --set model.intermediate_size=160 "
    "--set model.num_hidden_layers=2 --set optim.schedule=constant --set optim.warmup_steps=0";

// A completion file and a text-records file, weights 3 : 1, as a --set.
std::string two_sources(const TempDir& dir) {
  std::string completions, documents;
  for (int i = 0; i < 40; ++i) {
    completions += R"({"prompt": "count )" + std::to_string(i) + R"( then", "completion": " )" +
                   std::to_string(i + 1) + "\"}\n";
    documents += R"({"text": "Document )" + std::to_string(i) + R"( says hello to the mix."})" "\n";
  }
  const std::string a = dir.file("c.jsonl", completions), b = dir.file("t.jsonl", documents);
  return " --set 'data.sources=[{path = \"" + a + "\", weight = 3}, {path = \"" + b +
         "\", format = \"text_records\", weight = 1}]'";
}

TEST(MixRun, TwoSourcesTrainWithTheirSharesInTheLog) {
  TempDir dir("mix_run_shares");
  const CommandResult r = run_meshtrain(kRun + two_sources(dir) + " --set train.steps=2 --out " + dir.path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("data: 2 sources mixed by weight"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("source 1: weight 3, 75.0% of the rows"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 40 train"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("source 2: weight 1, 25.0% of the rows"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(text records: 40 documents"), std::string::npos) << r.output;
  // The recorded run.toml repeats the mix.
  const std::string toml = read_file(fs::path(dir.path("run")) / "run.toml");
  EXPECT_NE(toml.find("format = \"text_records\", weight = 1.0"), std::string::npos) << toml;
}

// A completion file and a text-records file under `sub`, weights 3 : `second_weight`, as a --set.
std::string two_sources_in(const TempDir& dir, const std::string& sub, const std::string& second_weight) {
  fs::create_directories(dir.path(sub));
  std::string set = two_sources(dir);
  for (const char* name : {"c.jsonl", "t.jsonl"}) {
    fs::copy_file(dir.path(name), dir.path(sub + "/" + name), fs::copy_options::overwrite_existing);
    set.replace(set.find(dir.path(name)), dir.path(name).size(), dir.path(sub + "/" + name));
  }
  const std::string weight = "weight = 1}";
  set.replace(set.find(weight), weight.size(), "weight = " + second_weight + "}");
  return set;
}

// Stopped at step 4 of 8 (16 of the mix's ~70 rows a pass: mid-epoch for both sources) and
// resumed: the same losses as the run that went straight through, with the files moved
// meanwhile; a resume with another weight is refused.
TEST(MixRun, ResumeMidEpochRepeatsTheRun) {
  TempDir dir("mix_run_resume");
  const std::string run = kRun + two_sources(dir);
  CommandResult r = run_meshtrain(run + " --set train.steps=8 --out " + dir.path("a"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> loss = mt::testing::metric_loss_texts(fs::path(dir.path("a")) / "metrics.jsonl");
  ASSERT_EQ(loss.size(), 8u) << r.output;
  r = run_meshtrain(run + " --set train.steps=4 --set output.checkpoint_every=4 --out " + dir.path("b"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string resume = " --set train.steps=8 --set output.checkpoint_every=4 --set train.resume=latest --out " +
                             dir.path("b");
  r = run_meshtrain(kRun + two_sources_in(dir, "other", "2") + resume);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("what its weights and state mean: data.sources ["), std::string::npos) << r.output;
  r = run_meshtrain(kRun + two_sources_in(dir, "moved", "1") + resume);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(mt::testing::metric_loss_texts(fs::path(dir.path("b")) / "metrics.jsonl"), loss);
}

// Each source has a token-cache file of its own (its path, format and columns in the key): the
// first run writes two, the second reads both back and trains alike.
TEST(MixRun, EachSourceHasItsOwnTokenCache) {
  TempDir dir("mix_run_cache");
  const std::string run = kRun + two_sources(dir) + " --set train.steps=2 --set data.cache_dir=" + dir.path("cache");
  const std::regex cache_line(R"(token cache: (\S+) \((written|hit)\))");
  auto caches = [&](const std::string& output, const std::string& how) {
    std::vector<std::string> files;
    for (auto it = std::sregex_iterator(output.begin(), output.end(), cache_line); it != std::sregex_iterator(); ++it)
      if ((*it)[2] == how) files.push_back((*it)[1]);
    return files;
  };
  const CommandResult first = run_meshtrain(run + " --out " + dir.path("a"));
  ASSERT_EQ(first.code, 0) << first.output;
  const std::vector<std::string> written = caches(first.output, "written");
  ASSERT_EQ(written.size(), 2u) << first.output;
  EXPECT_NE(written[0], written[1]);
  EXPECT_NE(written[0].find("c-"), std::string::npos) << written[0];
  EXPECT_NE(written[1].find("t-"), std::string::npos) << written[1];
  const CommandResult second = run_meshtrain(run + " --out " + dir.path("b"));
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_EQ(caches(second.output, "hit"), written) << second.output;
  EXPECT_EQ(mt::testing::metric_loss_texts(fs::path(dir.path("b")) / "metrics.jsonl"), mt::testing::metric_loss_texts(fs::path(dir.path("a")) / "metrics.jsonl"));
}

// eval --run reads a mixed run's held-out rows as its validation did: the run's last validation
// loss again (fp32).
TEST(MixRun, EvalRunGivesTheMixedValidationLossAgain) {
  TempDir dir("mix_run_eval");
  const CommandResult r =
      run_meshtrain(kRun + two_sources(dir) + " --set data.val_fraction=0.2 --set train.steps=2 --set train.eval_every=2 "
                    "--set train.precision=fp32 --out " + dir.path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("validation: "), std::string::npos) << r.output;
  const std::map<int64_t, double> val = read_val_losses(dir.path("run") + "/metrics.jsonl");
  ASSERT_FALSE(val.empty()) << r.output;
  const CommandResult e = run_meshtrain("eval --run " + dir.path("run"));
  ASSERT_EQ(e.code, 0) << e.output;
  const size_t at = e.output.rfind("mean loss ");
  ASSERT_NE(at, std::string::npos) << e.output;
  const double loss = std::stod(e.output.substr(at + 10));
  EXPECT_NEAR(loss, val.rbegin()->second, 1e-6 * loss) << e.output;
}

// Two halves of one file, as two sources: each trains on its own slice of the examples.
TEST(MixRun, SlicesOfOneFileAreSourcesOfTheirOwn) {
  TempDir dir("mix_run_slices");
  std::string completions;
  for (int i = 0; i < 40; ++i)
    completions += R"({"prompt": "count )" + std::to_string(i) + R"( then", "completion": " )" + std::to_string(i + 1) +
                   "\"}\n";
  const std::string c = dir.file("c.jsonl", completions);
  const CommandResult r = run_meshtrain(kRun + " --set train.steps=2 --set 'data.sources=[{path = \"" + c +
                                        "\", split = \"train[:25%]\"}, {path = \"" + c +
                                        "\", split = \"train[25%:]\", weight = 3}]' --out " + dir.path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 10 train / 0 validation"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split train[:25%]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 30 train / 0 validation"), std::string::npos) << r.output;
  const CommandResult none = run_meshtrain(kRun + " --set train.steps=2 --set 'data.sources=[{path = \"" + c +
                                           "\", split = \"train[:1%]\"}]' --out " + dir.path("none"));
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.output.find("of 40 examples holds none"), std::string::npos) << none.output;
}

TEST(MixRun, PathAndSourcesTogetherAreRefused) {
  TempDir dir("mix_run_both");
  const std::string data = dir.file("a.txt", "some plain text for the run, long enough to be a file.\n");
  const CommandResult r = run_meshtrain(kRun + two_sources(dir) + " --set train.steps=1 --set data.path=" + data +
                                        " --out " + dir.path("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("meshtrain: error: data.path ('" + data + "') and [[data.sources]] both name the training data"),
            std::string::npos)
      << r.output;
}

// Two data-parallel (or FSDP) ranks take their halves of the one global order: the losses,
// validation losses and weights of one rank's run (mesh_runs.h's expect_same_run).
TEST(MixRun, TwoRanksConsumeTheSameGlobalOrder) {
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
  TempDir dir("mix_run_ranks");
  const std::string args =
      "--set train.seq_len=32 --set train.batch_size=4 --set train.steps=6 --set train.log_every=1 "
      "--set train.peak_gflops=100 --set data.cache_dir=off --set data.val_fraction=0.2 --set model.hidden_size=64 "
      "--set model.intermediate_size=160 --set model.num_hidden_layers=2 " +
      two_sources(dir) + " ";
  mt::testing::expect_same_run("mix_dp2", args, "dp=2", "/model/model.safetensors");
  mt::testing::expect_same_run("mix_fsdp2", args, "fsdp=2", "/model/model.safetensors");
}

}  // namespace
}  // namespace mt

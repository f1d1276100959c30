#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>


#include "core/error.h"
#include "train/metrics.h"
#include "temp_dirs.h"

namespace mt {
namespace {

TEST(MetricsFormat, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(12 * 1024 + 10), "12.0 KiB");
  EXPECT_EQ(format_bytes(300ll << 20), "300 MiB");
  EXPECT_EQ(format_bytes((1ll << 30) - 1), "1.00 GiB");  // not "1024 MiB"
  EXPECT_EQ(format_bytes(int64_t(1.23 * double(1ll << 30))), "1.23 GiB");
  EXPECT_EQ(format_bytes(3ll << 40), "3.00 TiB");
  EXPECT_EQ(format_bytes(-2048), "-2.00 KiB");
}

TEST(MetricsFormat, Duration) {
  EXPECT_EQ(format_duration(0), "0.00s");
  EXPECT_EQ(format_duration(3.456), "3.46s");
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(59.6), "1m00s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(7380), "2h03m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(MetricsFormat, ProgressLine) {
  StepMetrics m;
  m.step = 12;
  m.total_steps = 200;
  m.loss = 2.34561;
  m.lr = 1.2e-3;
  m.tokens_per_s = 1234.4;
  m.mfu = 0.412;
  m.peak_mem_bytes = int64_t(1.23 * double(1ll << 30));
  m.elapsed_s = 14.2;
  m.eta_s = 65;
  EXPECT_EQ(format_progress_line(m),
            "step  12/200 | loss 2.3456 | lr 1.20e-03 | 1234 tok/s | MFU 41.2% | mem 1.23 GiB | "
            "elapsed 14s | eta 1m05s");
  m.step = 200;
  m.eta_s = 0;
  std::string last = format_progress_line(m);
  EXPECT_EQ(last.rfind("step 200/200 | ", 0), 0u) << last;
  EXPECT_NE(last.find("eta 0.00s"), std::string::npos) << last;
}

TEST(MetricsFormat, ValidationLossOnlyOnStepsThatEvaluatedIt) {
  StepMetrics m;
  m.step = 4;
  m.total_steps = 10;
  m.loss = 2.34561;
  EXPECT_EQ(format_progress_line(m).find("val"), std::string::npos);
  EXPECT_FALSE(step_json(m).contains("val_loss"));
  m.val_loss = 2.5;
  const std::string line = format_progress_line(m);
  EXPECT_NE(line.find("| loss 2.3456 | val 2.5000 | lr "), std::string::npos) << line;
  EXPECT_EQ(step_json(m)["val_loss"].get<double>(), 2.5);
}

// A mixture of experts' routing losses beside the loss, and a capacity factor's drops; neither
// where the model has none.
TEST(MetricsFormat, MixtureOfExpertsFiguresOnlyWhereTheModelHasThem) {
  StepMetrics m;
  m.step = 4, m.total_steps = 10, m.loss = 2.34561;
  EXPECT_EQ(format_progress_line(m).find("routing"), std::string::npos);
  EXPECT_EQ(format_progress_line(m).find("dropped"), std::string::npos);
  EXPECT_FALSE(step_json(m).contains("routing_loss"));
  EXPECT_FALSE(step_json(m).contains("moe_dropped"));
  m.routing_loss = 0.01234, m.moe_dropped = 12;
  const std::string line = format_progress_line(m);
  EXPECT_NE(line.find("| loss 2.3456 (+routing 0.0123) | dropped 12 | lr "), std::string::npos) << line;
  EXPECT_DOUBLE_EQ(step_json(m)["routing_loss"].get<double>(), 0.01234);
  EXPECT_EQ(step_json(m)["moe_dropped"].get<int64_t>(), 12);
}

TEST(MetricsJsonl, OneValidJsonObjectPerLine) {
  const auto path = std::filesystem::path(testing::fresh_temp_dir("metrics")) / "sub" / "m.jsonl";
  {
    JsonlWriter w(path.string(), /*append=*/false);
    for (int i = 1; i <= 3; ++i) {
      StepMetrics m;
      m.step = i;
      m.total_steps = 3;
      m.loss = i == 2 ? std::nan("") : 5.0 / i;
      m.lr = 1e-3;
      m.peak_mem_bytes = 1000 * i;
      w.write(m);
    }
    w.write(nlohmann::json{{"event", "done"}, {"note", "two\nlines \"quoted\""}});
    // Flushed after every line: readable before the writer is closed.
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    EXPECT_EQ(n, 4);
  }
  {
    JsonlWriter w(path.string());  // append (a resumed run)
    w.write(nlohmann::json{{"step", 4}});
  }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << line;
    EXPECT_TRUE(j.is_object()) << line;
    rows.push_back(j);
  }
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0]["step"], 1);
  EXPECT_EQ(rows[0]["total_steps"], 3);
  EXPECT_DOUBLE_EQ(rows[0]["loss"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(rows[0]["lr"].get<double>(), 1e-3);
  EXPECT_EQ(rows[2]["peak_mem_bytes"], 3000);
  EXPECT_TRUE(rows[1]["loss"].is_null());  // NaN is written as null, keeping the line valid JSON
  for (const char* key : {"tokens_per_s", "mfu", "elapsed_s", "eta_s"})
    EXPECT_TRUE(rows[0].contains(key)) << key;
  EXPECT_EQ(rows[3]["note"], "two\nlines \"quoted\"");
  EXPECT_EQ(rows[4]["step"], 4);
}

TEST(MetricsJsonl, UnopenableFileNamesFile) {
  try {
    JsonlWriter w("/proc/meshtrain_no/m.jsonl");
    ADD_FAILURE() << "expected an mt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.jsonl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mt

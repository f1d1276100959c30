// Issue 34, item 4 (and 10's count messages): every count a user gives is checked before any
// allocation or loop, and answered in one line. Reproduced before the checks: train.threads=65536
// was a SIGSEGV in libgomp and 4096 minutes of thread creation; `plan --devices 10^12 --search`
// ran for minutes counting divisors; `eval --batch 2^57` put every window of the file into one
// batch (3 GB on 200 KB); `generate -n 2^63-1` said the prompt "leaves no room", `-n -1` printed a
// 309-digit range; `--steps 2^64` said "got a string".
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include "config_error.h"
#include "core/error.h"
#include "error_of.h"
#include "plan/search.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "train/run_config.h"
#include "train/thread_count.h"

namespace mt {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
size_t lines(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

using testing::config_error;

TEST(HostileCounts, ThreadsBeyondTheHardwareAreRefusedByKey) {
  const std::string hw = std::to_string(std::thread::hardware_concurrency());
  for (const int64_t n : {65536, 4096, 30000}) {
    const std::string e = error_of([&] { require_threads_fit_machine(n); });
    EXPECT_EQ(e, "train.threads (" + std::to_string(n) + ") is more than the " + hw +
                     " hardware threads of this machine; give at most " + hw + ", or 0 for all of them");
  }
  EXPECT_EQ(error_of([&] { require_threads_fit_machine(std::stoll(hw)); }), "");
  EXPECT_EQ(error_of([&] { require_threads_fit_machine(0); }), "");
  // The binary: one line and exit 1 within the timeout, where 65536 was a segfault (139).
  const std::string out = testing::fresh_temp_dir("hostile_threads");
  const auto r = testing::run_command("timeout 60 " + std::string(MESHTRAIN_BINARY) +
                                      " train --set train.steps=1 --set train.threads=65536 --out " + out + "/run");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
}

TEST(HostileCounts, FloatKeysMustBeFinite) {
  for (const std::string key : {"model.rope_theta", "model.rms_norm_eps", "optim.eps", "optim.min_lr", "optim.lr",
                                "optim.weight_decay", "lora.alpha", "optim.grad_clip"}) {
    for (const std::string v : {"inf", "-inf", "nan"}) {
      const std::string e = config_error({key + "=" + v});
      EXPECT_TRUE(has(e, key + " must be a finite number, got " + v)) << key << "=" << v << ": " << e;
    }
  }
  // A double past float's range becomes inf when read: refused the same way.
  EXPECT_TRUE(has(config_error({"optim.lr=1e300"}), "optim.lr must be a finite number, got inf"));
}

TEST(HostileCounts, AnIntegerPast64BitsIsNamedAsSuch) {
  const std::string e = config_error({"train.steps=18446744073709551616"});
  EXPECT_TRUE(has(e, "train.steps must be in (0, 1099511627776], got 18446744073709551616 (beyond 64-bit integers)"))
      << e;
  const auto r = testing::run_meshtrain("train --steps 18446744073709551616 --out " +
                                        testing::fresh_temp_dir("hostile_steps") + "/run");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "(beyond 64-bit integers)")) << r.output;
  EXPECT_FALSE(has(r.output, "got a string")) << r.output;
}

TEST(HostileCounts, StringValuesWithANulOrPastAPathAreRefusedQuotedShort) {
  const std::string nul = config_error({"data.path=\"a\\u0000b\""});
  EXPECT_TRUE(has(nul, "data.path holds a NUL byte at offset 1: \"a\\0b\"")) << nul;
  const std::string huge = config_error({"data.path=" + std::string(10'000'000, 'x')});
  EXPECT_TRUE(has(huge, "data.path is 10000000 bytes long, more than the 4096")) << huge.substr(0, 300);
  EXPECT_LT(huge.size(), 600u);
}

TEST(HostileCounts, PlanDevicesAreBoundedAndTheSearchAnswersAtOnce) {
  const auto r = testing::run_command("timeout 60 " + std::string(MESHTRAIN_BINARY) +
                                      " plan --devices 1000000000000 --search --model llama3-8b --cluster dgx-h100");
  EXPECT_NE(r.code, 0) << r.output;  // CLI11's code for a bad option
  EXPECT_NE(r.code, 124) << r.output;  // the timeout
  EXPECT_EQ(lines(r.output), 1u) << r.output;
  EXPECT_TRUE(has(r.output, "--devices: must be a whole number >= 0 and <= 1048576, got 1000000000000")) << r.output;
  // The most devices allowed, a count with many factors and a batch that many of them divide:
  // the meshes (or the pricing they would need) are counted and refused before any is priced.
  const auto many = testing::run_command(
      "timeout 60 " + std::string(MESHTRAIN_BINARY) +
      " plan --devices 720720 --search --model llama3-405b --cluster dgx-h100 --seq 8192 --global-batch 46126080");
  EXPECT_EQ(many.code, 1) << many.output;
  EXPECT_TRUE(has(many.output, "more than the search prices")) << many.output;
  const auto pricing = testing::run_command(
      "timeout 60 " + std::string(MESHTRAIN_BINARY) +
      " plan --devices 1024 --search --model llama3-405b --cluster dgx-h100 --seq 8192 --global-batch 4194304");
  EXPECT_EQ(pricing.code, 1) << pricing.output;
  EXPECT_TRUE(has(pricing.output, "give a smaller global batch, --grad-accum, or fewer devices")) << pricing.output;
  const auto ok = testing::run_command("timeout 60 " + std::string(MESHTRAIN_BINARY) +
                                       " plan --devices 1048576 --search --model llama3-8b --cluster dgx-h100");
  EXPECT_EQ(ok.code, 0) << ok.output;
}

TEST(HostileCounts, GenerateCountsAreAnsweredInOneLine) {
  const std::string dir = testing::stories_hf_dir(testing::fresh_temp_dir("hostile_generate"));
  ASSERT_FALSE(dir.empty());
  const auto neg = testing::run_meshtrain("generate --model " + dir + " -n -1");
  EXPECT_NE(neg.code, 0);
  EXPECT_EQ(lines(neg.output), 1u) << neg.output;
  EXPECT_TRUE(has(neg.output, "--max-new-tokens: must be a whole number >= 0, got -1")) << neg.output;
  const auto past = testing::run_meshtrain("generate --model " + dir + " -n 18446744073709551616");
  EXPECT_NE(past.code, 0);
  EXPECT_TRUE(has(past.output, "beyond 64-bit integers")) << past.output;
  // The largest count generates until the model's context is full.
  const auto max = testing::run_meshtrain("generate --model " + dir + " -p Once -n 9223372036854775807");
  EXPECT_EQ(max.code, 0) << max.output;
  EXPECT_FALSE(has(max.output, "leaves no room")) << max.output;
}

TEST(HostileCounts, EvalBatchIsCappedNotAllocated) {
  const std::string base = testing::fresh_temp_dir("hostile_eval");
  const std::string dir = testing::stories_hf_dir(base);
  ASSERT_FALSE(dir.empty());
  {
    std::ofstream f(base + "/text.txt");
    for (int i = 0; i < 4000; ++i) f << "Once upon a time there was a little girl named Lily. ";
  }
  // Under 2 GB of address space: every window in one batch needed more than that.
  const std::string eval = "eval --model " + dir + " --data " + base + "/text.txt --seq-len 64 --batch ";
  const auto capped = testing::run_command("ulimit -v 2000000 && " + std::string(MESHTRAIN_BINARY) + " " + eval +
                                           "144115188075855872");
  const auto small = testing::run_meshtrain(eval + "4");
  EXPECT_EQ(capped.code, 0) << capped.output;
  EXPECT_EQ(small.code, 0) << small.output;
  EXPECT_EQ(capped.output.substr(0, capped.output.find(", mean loss")), small.output.substr(0, small.output.find(", mean loss")));
}

}  // namespace
}  // namespace mt

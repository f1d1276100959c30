// Counts from users and files are range-checked before any arithmetic on them. Reproduced before
// the checks: train.batch_size = 2^57 segfaulted in BatchSampler::next and 2^56 ended in a raw
// vector::_M_default_append (the memory check's products wrapped around), and a checkpoint's
// sampler.rows_drawn = 10^15 made PackedSampler::restore replay epoch plans for minutes. Now each
// is one line naming the key (or the sampler), in milliseconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <string>

#include "config_error.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "data/example_table.h"
#include "data/packed_sampler.h"
#include "error_of.h"
#include "run_command.h"
#include "train/run_config.h"
#include "temp_dirs.h"

namespace mt {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using testing::config_error;

TEST(CheckedMath, ProductsThatDoNotFitAreNamed) {
  EXPECT_EQ(checked_mul(int64_t(1) << 31, int64_t(1) << 31), int64_t(1) << 62);
  EXPECT_FALSE(checked_mul(int64_t(1) << 32, int64_t(1) << 31).has_value());
  EXPECT_FALSE(checked_mul(INT64_MIN, -1).has_value());
  EXPECT_EQ(checked_add(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checked_add(INT64_MAX, 1).has_value());
  const std::string e = error_of([] { mul_or_fail(int64_t(1) << 40, int64_t(1) << 30, "a batch's tokens"); });
  EXPECT_EQ(e, "a batch's tokens (1099511627776 x 1073741824) is out of range (more than 2^63)");
}

TEST(CheckedCounts, HugeBatchSequenceAndStepCountsAreRefusedByKey) {
  const std::string b57 = config_error({"train.batch_size=144115188075855872"});  // 2^57: was a segfault
  EXPECT_TRUE(has(b57, "train.batch_size must be in (0, 16777216], got 144115188075855872")) << b57;
  const std::string b56 = config_error({"train.batch_size=72057594037927936"});  // 2^56: was vector::_M_default_append
  EXPECT_TRUE(has(b56, "train.batch_size must be in (0, 16777216], got 72057594037927936")) << b56;
  EXPECT_TRUE(has(config_error({"train.seq_len=1099511627776"}), "train.seq_len must be in [0, 16777216]"));
  EXPECT_TRUE(has(config_error({"train.grad_accum=9223372036854775807"}), "train.grad_accum must be in (0, 16777216]"));
  EXPECT_TRUE(has(config_error({"train.steps=2000000000000"}), "train.steps must be in (0, 1099511627776]"));
  EXPECT_TRUE(has(config_error({"output.checkpoint_every=9223372036854775807"}), "output.checkpoint_every must be in [0,"));
  EXPECT_TRUE(has(config_error({"train.threads=4294967296"}), "train.threads must be in [0, 65536]"));
  // Each within its range, their product past what a step may hold.
  const std::string product =
      config_error({"train.batch_size=16777216", "train.grad_accum=16777216", "train.seq_len=16"});
  EXPECT_TRUE(has(product, "train.batch_size x train.grad_accum x train.seq_len (16777216 x 16777216 x 16) must be "
                           "at most 2^40 tokens a step"))
      << product;
  EXPECT_EQ(config_error({"train.batch_size=4096", "train.grad_accum=64", "train.seq_len=4096",
                          "model.max_position_embeddings=4096"}),
            "accepted");
}

// The real binary: one line and exit 1, where a segfault (139) and a raw library error were.
TEST(CheckedCounts, TheBinaryRefusesHugeBatchSizesInOneLine) {
  for (const std::string n : {"144115188075855872", "72057594037927936"}) {
    const auto r = testing::run_meshtrain("train --set train.steps=1 --set train.batch_size=" + n +
                                          " --set output.dir=" + testing::fresh_temp_dir("huge_batch") + "/run");
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_TRUE(has(r.output, "meshtrain: error: --set train.batch_size=" + n + ": train.batch_size must be in (0, 16777216], got " + n))
        << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

ExampleTable examples(int n) {
  std::vector<Example> ex;
  for (int e = 0; e < n; ++e) {
    Example x;
    for (int i = 0; i < 3 + e % 5; ++i) x.tokens.push_back(int32_t(e * 10 + i)), x.trained.push_back(1);
    ex.push_back(std::move(x));
  }
  return ExampleTable(ex);
}

std::vector<uint32_t> ids(uint32_t n) {
  std::vector<uint32_t> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// Runs `f` in a child process that SIGALRM ends after `seconds`: a hang is a failure, not a stuck
// test. Returns the child's exit status (0: f returned; 1: it threw mt::Error), or -1 on timeout.
int bounded(const std::function<void()>& f, unsigned seconds) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    try {
      f();
    } catch (const Error&) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

TEST(CheckedCounts, RestoringASamplerNeverReplaysTheRowsDrawn) {
  const ExampleTable table = examples(50);
  const int64_t kHuge = 1'000'000'000'000'000;  // 10^15 rows: was minutes of replaying epoch plans
  // Without a saved position (a checkpoint from before): refused at once, naming the count.
  PackedSampler s(table, ids(50), 16, 4, 7);
  const std::string e = error_of([&] { s.restore(SamplerState{7, kHuge}); });
  EXPECT_TRUE(has(e, "packed sampler: 1000000000000000 rows drawn is about ")) << e;
  EXPECT_TRUE(has(e, "more than the 100000 a restore without the sampler's epoch and row replays")) << e;
  EXPECT_EQ(bounded([&] { PackedSampler t(table, ids(50), 16, 4, 7); t.restore(SamplerState{7, kHuge}); }, 10), 1);
  // With its position (what checkpoints now save): that epoch is planned alone, at once.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(bounded([&] { PackedSampler t(table, ids(50), 16, 4, 7); t.restore(SamplerState{7, kHuge, kHuge / 40, 3}); t.next(); }, 10), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // A position that the rows drawn cannot hold is refused.
  EXPECT_TRUE(has(error_of([&] { s.restore(SamplerState{7, 10, 0, 11}); }), "does not fit 10 rows drawn"));
  // And the saved position continues exactly where the sampler stood.
  PackedSampler ref(table, ids(50), 16, 4, 7);
  for (int i = 0; i < 37; ++i) ref.next();  // several epochs in
  PackedSampler resumed(table, ids(50), 16, 4, 7);
  resumed.restore(ref.sampler_state());
  for (int i = 0; i < 20; ++i) {
    const PackedBatch a = ref.next(), b = resumed.next();
    EXPECT_EQ(a.tokens, b.tokens) << "batch " << i;
  }
}

}  // namespace
}  // namespace mt

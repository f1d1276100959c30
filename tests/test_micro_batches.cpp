// Micro-batches are only a way of cutting a step's global batch: batch 16 x accum 1, batch 8 x
// accum 2 and batch 4 x accum 4 see the same sequences, and since the loss is weighted by tokens
// over the whole global batch they give the same losses, gradient norms and weights to fp32
// rounding, on one rank, across data-parallel ranks and through pipeline stages; a checkpoint
// resumes under another split.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/packed_sampler.h"
#include "data/text_dataset.h"
#include "mesh_runs.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";

const std::vector<int32_t>& tokens_of(const Batch& b) { return b.inputs; }
const std::vector<int32_t>& tokens_of(const PackedBatch& b) { return b.tokens; }

// Rows drawn in batches of `batch` until `rows` rows: the stream a step of that split sees.
template <class Sampler>
std::vector<std::vector<int32_t>> rows_of(Sampler& s, int64_t batch, int64_t rows) {
  std::vector<std::vector<int32_t>> out;
  while (int64_t(out.size()) < rows) {
    const auto b = s.next();
    const int64_t T = b.seq_len;
    const auto& t = tokens_of(b);
    for (int64_t r = 0; r < batch; ++r) out.emplace_back(t.begin() + r * T, t.begin() + (r + 1) * T);
  }
  return out;
}

TEST(MicroBatches, TextSamplerRowsDoNotDependOnTheBatchSize) {
  TextDataset d("", 0.1, 32);
  BatchSampler whole(d, 16, 7), halves(d, 8, 7), quarters(d, 4, 7), other_seed(d, 16, 8);
  const auto want = rows_of(whole, 16, 48);
  EXPECT_EQ(rows_of(halves, 8, 48), want);
  EXPECT_EQ(rows_of(quarters, 4, 48), want);
  EXPECT_NE(rows_of(other_seed, 16, 48), want);
  // A sampler restored from a state saved under another batch size continues the same stream.
  BatchSampler resumed(d, 4, 0);
  resumed.restore(SamplerState{7, 16});
  const auto rest = rows_of(resumed, 4, 32);
  EXPECT_EQ(rest, std::vector<std::vector<int32_t>>(want.begin() + 16, want.end()));
}

TEST(MicroBatches, PackedSamplerRowsDoNotDependOnTheBatchSize) {
  std::vector<Example> examples(40);
  for (int e = 0; e < 40; ++e)
    for (int i = 0; i < 2 + (e * 7) % 15; ++i) {
      examples[size_t(e)].tokens.push_back(1000 * (e + 1) + i);
      examples[size_t(e)].trained.push_back(1);
    }
  const ExampleTable table(examples);
  std::vector<uint32_t> ids(40);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  PackedSampler whole(table, ids, 32, 16, 5), quarters(table, ids, 32, 4, 5);
  // Past the end of the first epoch, so the split must also carry across the epoch boundary.
  const int64_t rows = 2 * whole.rows_in_epoch() + 16 - 2 * whole.rows_in_epoch() % 16;
  EXPECT_EQ(rows_of(quarters, 4, rows), rows_of(whole, 16, rows));
}

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 --set train.seq_len=64 "
    "--set train.log_every=100 --set optim.warmup_steps=2 --set train.eval_every=3 ";

std::string split(int64_t batch, int64_t accum) {
  return "--set train.batch_size=" + std::to_string(batch) + " --set train.grad_accum=" + std::to_string(accum) + " ";
}

TEST(MicroBatches, SplitsOfTheGlobalBatchTrainAlikeOnOneRank) {
  const std::string one = train_command("");
  expect_same_training("split_8x2", one, kRun + split(16, 1), one, kRun + split(8, 2), "/model/model.safetensors");
  expect_same_training("split_4x4", one, kRun + split(16, 1), one, kRun + split(4, 4), "/model/model.safetensors");
}

TEST(MicroBatches, SplitsOfTheGlobalBatchTrainAlikeAcrossDataParallelRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_training("split_dp2_8x2", train_command(""), kRun + split(16, 1), train_command("dp=2"),
                       kRun + split(8, 2), "/model/model.safetensors");
}

// Under pp x dp the micro-batches are also the pipeline's: each dp replica's rows go through the
// stages as grad_accum micro-batches (one micro-batch, 16 x 1, leaves the second stage idle in
// the forward and the first in the backward, but is still the same step). Each split equals the
// single rank's 16 x 1.
TEST(MicroBatches, SplitsOfTheGlobalBatchTrainAlikeOnPipelineStages) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string one = train_command(""), stages = train_command("pp=2,dp=2");
  expect_same_training("split_pp2_dp2_16x1", one, kRun + split(16, 1), stages, kRun + split(16, 1),
                       "/model/model.safetensors");
  expect_same_training("split_pp2_dp2_8x2", one, kRun + split(16, 1), stages, kRun + split(8, 2),
                       "/model/model.safetensors");
  expect_same_training("split_pp2_dp2_4x4", one, kRun + split(16, 1), stages, kRun + split(4, 4),
                       "/model/model.safetensors");
}

// Alpaca records of different lengths: the packed rows hold different numbers of answer tokens, so
// only a loss weighted by tokens over the whole global batch (not a mean of micro-batch means)
// makes the splits agree.
TEST(MicroBatches, SplitsOfExampleBatchesTrainAlike) {
  if (!fs::exists(kShared + "instruct/alpaca_tiny.json")) GTEST_SKIP() << "shared data not present";
  const std::string args = std::string(kRun) + "--set data.path=" + kShared + "instruct/alpaca_tiny.json " +
                           "--set train.seq_len=256 ";
  const std::string one = train_command("");
  expect_same_training("split_alpaca_4x4", one, args + split(16, 1), one, args + split(4, 4), "/model/model.safetensors");
}

TEST(MicroBatches, CheckpointResumesUnderAnotherSplit) {
  const std::string dir = fresh_temp_dir("split_resume") + "/run";
  const std::string a = std::string(kRun) + "--set output.checkpoint_every=3 --set output.dir=" + dir + " ";
  std::string out;
  ASSERT_EQ(run(train_command("") + a + split(16, 1), &out), 0) << out;
  const auto full = losses(dir);
  ASSERT_EQ(full.size(), 6u);
  fs::remove_all(dir + "/checkpoints/step-000006");
  fs::remove(dir + "/checkpoints/latest");  // the newest complete one is then step 3
  ASSERT_EQ(run(train_command("") + a + split(8, 2) + "--set train.resume=latest", &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  const auto all = losses(dir);  // cut to steps 1..3 at the resume, then steps 4..6 again
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 3; i < 6; ++i) EXPECT_NEAR(all[i], full[i], 1e-5 * full[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace mt::testing

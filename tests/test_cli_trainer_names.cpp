// The HF Trainer's names on train's command line (cli/key_options.h), through the binary: each a
// --set of its alias with '_' or '-', refused beside a --set of its key; an unknown option answered
// with the one it misspells; --tokenizer; the warning for a warm-up that reaches the run's end (by
// steps or by epochs).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::count_of;
using mt::testing::read_file;
using mt::testing::run_meshtrain;

const std::string kSmall = " --batch-size 2 --seq-len 32 --set train.peak_gflops=100 --set data.cache_dir=off";

TEST(CliTrainerNames, EachIsASetOfItsNameWithUnderscoresOrDashes) {
  const fs::path dir = mt::testing::fresh_temp_dir("trainer_names_cli");
  const CommandResult r = run_meshtrain(
      "train --learning_rate 1e-3 --max-steps 2 --logging_steps 1 --save-steps 2 --save_total_limit 1 --bf16 "
      "--warmup-ratio 0.5 --gradient_checkpointing --seed 7 --tokenizer byte --out " + (dir / "a").string() + kSmall);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("config: train.learning_rate -> optim.lr\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config: train.save_steps -> output.checkpoint_every\n"), std::string::npos) << r.output;
  const std::string recorded = read_file(dir / "a/run.toml");
  for (const char* line : {"\nlr = 0.001\n", "\nsteps = 2\n", "\nlog_every = 1\n", "\ncheckpoint_every = 2\n",
                           "\nkeep_checkpoints = 1\n", "\nprecision = \"bf16\"\n", "\nwarmup_ratio = 0.5\n",
                           "\nactivation_checkpointing = true\n", "\nseed = 7\n", "\ntokenizer = \"byte\"\n"})
    EXPECT_NE(recorded.find(line), std::string::npos) << line << recorded;
  EXPECT_EQ(recorded.find("warmup_steps"), std::string::npos) << recorded;
}

TEST(CliTrainerNames, RefusalsAreOneLine) {
  const fs::path dir = mt::testing::fresh_temp_dir("trainer_names_refused");
  const std::string out = " --out " + (dir / "b").string() + kSmall;
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--learning_rate 1e-3 --set optim.lr=1e-3", "both set optim.lr: give one"},
           {"--learning-rate 1e-3 --lr 1e-3", "both set optim.lr: give one"},
           {"--learning_rat 1e-3", "train: unknown option '--learning_rat' (did you mean '--learning_rate'?)"},
           {"--save_step 3", "(did you mean '--save_steps'?)"},
           {"--fp16", "train.fp16: meshtrain trains in bf16"},
           {"--per_device_train_batch_size 4", "give train.batch_size = 4 x dp x fsdp x ep"},
       }) {
    const CommandResult r = run_meshtrain("train " + args + out);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(count_of(r.output, "\n"), 1u) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "b"));
}

// The built-in run warms up over 20 steps: a 6-step run of it ends at 30% of its lr.
TEST(CliTrainerNames, AWarmUpLongerThanTheRunIsWarned) {
  const fs::path dir = mt::testing::fresh_temp_dir("trainer_names_warmup");
  CommandResult r = run_meshtrain("train --steps 6 --out " + (dir / "a").string() + kSmall);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the warm-up (20 steps) is longer than the run (6 steps): it ends at 30% of "
                          "optim.lr"), std::string::npos) << r.output;
  r = run_meshtrain("train --steps 6 --warmup_ratio 0.5 --out " + (dir / "b").string() + kSmall);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning: the warm-up"), std::string::npos) << r.output;
}

// A run by epochs knows its steps once its data is open: the trainer warns then.
TEST(CliTrainerNames, AWarmUpLongerThanARunByEpochsIsWarned) {
  const fs::path dir = mt::testing::fresh_temp_dir("trainer_names_warmup_epochs");
  CommandResult r = run_meshtrain("train --epochs 0.01 --out " + (dir / "a").string() + kSmall);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the warm-up (20 steps) is longer than the run ("), std::string::npos) << r.output;
  r = run_meshtrain("train --epochs 0.01 --warmup_ratio 0.1 --out " + (dir / "b").string() + kSmall);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning: the warm-up"), std::string::npos) << r.output;
}

}  // namespace

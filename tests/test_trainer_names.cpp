// The names people bring from the HF Trainer, PEFT and torchtune (issue 33 item 5): every HF Trainer
// argument of a run's shape accepted as a key in [train] (or refused with why and what to give),
// the warm-up as a ratio, PEFT's module names in lora.targets, and "did you mean" that never
// proposes a key of another meaning.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/did_you_mean.h"
#include "config_error.h"
#include "error_of.h"
#include "train/config_aliases.h"
#include "train/config_schema.h"
#include "train/lr_schedule.h"
#include "train/run_config.h"

namespace mt {
namespace {

using testing::config_text_error;
using testing::parse_config_text;

// The HF Trainer's names in a file's [train] and as --set, each to its key.
TEST(ConfigTrainerNames, EveryNameInAFileAndInSetSetsItsKey) {
  const std::string file =
      "[train]\nlearning_rate = 1e-4\nnum_train_epochs = 2\ngradient_accumulation_steps = 3\n"
      "warmup_ratio = 0.1\nlr_scheduler_type = \"linear\"\nweight_decay = 0.01\nmax_grad_norm = 0.5\n"
      "logging_steps = 7\neval_steps = 11\nsave_steps = 13\nsave_total_limit = 4\nbf16 = false\nfp16 = false\n"
      "seed = 42\ngradient_checkpointing = true\n";
  std::vector<std::string> renamed;
  const RunConfig c = parse_config_text(file, {}, &renamed);
  EXPECT_FLOAT_EQ(c.optim.lr, 1e-4f);
  EXPECT_EQ(c.train.epochs, 2.0f);
  EXPECT_EQ(c.train.grad_accum, 3);
  EXPECT_FLOAT_EQ(c.optim.warmup_ratio, 0.1f);
  EXPECT_EQ(c.optim.schedule, "linear");
  EXPECT_FLOAT_EQ(c.optim.weight_decay, 0.01f);
  EXPECT_EQ(c.optim.grad_clip, 0.5f);
  EXPECT_EQ(c.train.log_every, 7);
  EXPECT_EQ(c.train.eval_every, 11);
  EXPECT_EQ(c.output.checkpoint_every, 13);
  EXPECT_EQ(c.output.keep_checkpoints, 4);
  EXPECT_EQ(c.train.precision, Precision::fp32);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_TRUE(c.train.activation_checkpointing);
  EXPECT_NE(std::find(renamed.begin(), renamed.end(), "train.save_steps -> output.checkpoint_every"), renamed.end());
  // run.toml records the keys.
  const std::string recorded = to_toml(c);
  for (const char* alias : {"save_steps", "logging_steps", "warmup_ratio = 0.1", "bf16 = ", "fp16"})
    EXPECT_EQ(alias == std::string("warmup_ratio = 0.1") ? std::string::npos : recorded.find(alias),
              std::string::npos) << alias;
  EXPECT_EQ(to_toml(parse_config_text(recorded)), recorded);

  const RunConfig s = parse_config_text("", {"train.max_steps=9", "train.save_steps=3", "train.eval_steps=2", "train.logging_steps=5",
                                 "train.save_total_limit=1", "train.bf16=true", "train.gradient_checkpointing=true",
                                 "train.warmup_steps=4", "train.max_grad_norm=0"});
  EXPECT_EQ(s.train.steps, 9);
  EXPECT_EQ(s.output.checkpoint_every, 3);
  EXPECT_EQ(s.train.eval_every, 2);
  EXPECT_EQ(s.train.log_every, 5);
  EXPECT_EQ(s.output.keep_checkpoints, 1);
  EXPECT_EQ(s.train.precision, Precision::bf16);
  EXPECT_TRUE(s.train.activation_checkpointing);
  EXPECT_EQ(s.optim.warmup_steps, 4);
  EXPECT_EQ(s.optim.grad_clip, 0.0f);
}

TEST(ConfigTrainerNames, TheOnesMeshtrainCannotHonourAreRefusedWithWhy) {
  for (const std::string& given : {std::string("[train]\nfp16 = true\n"), std::string()}) {
    const std::string e = given.empty() ? config_text_error("", {"train.fp16=true"}) : config_text_error(given);
    EXPECT_NE(e.find("train.fp16: meshtrain trains in bf16"), std::string::npos) << e;
    EXPECT_NE(e.find("loss scaling"), std::string::npos) << e;
  }
  const std::string e = config_text_error("[train]\nper_device_train_batch_size = 8\n");
  EXPECT_EQ(e.rfind("run.toml: train.per_device_train_batch_size: meshtrain's train.batch_size is the micro-batch of "
                    "all data-parallel ranks together", 0), 0u) << e;
  EXPECT_NE(e.find("give train.batch_size = 8 x dp x fsdp x ep"), std::string::npos) << e;
  EXPECT_NE(config_text_error("", {"train.per_device_train_batch_size=8"}).find("give train.batch_size = 8 x dp"), std::string::npos);
  EXPECT_NE(config_text_error("[train]\nbf16 = \"yes\"\n").find("train.bf16 must be true or false"), std::string::npos);
  // bf16 is train.precision: both given is refused as every alias beside its key is.
  EXPECT_NE(config_text_error("[train]\nbf16 = true\nprecision = \"fp32\"\n").find("are both given: give one"), std::string::npos);
}

// A flat name, as the HF Trainer's arguments are, is answered with its name in [train].
TEST(ConfigTrainerNames, ABareNameIsAnsweredWithItsTrainName) {
  EXPECT_EQ(config_text_error("warmup_ratio = 0.1\n"), "run.toml: unknown section 'warmup_ratio' (did you mean 'train.warmup_ratio'?)");
  EXPECT_EQ(config_text_error("", {"learning_rate=1e-4"}),
            "--set learning_rate=1e-4: unknown section 'learning_rate' (did you mean 'train.learning_rate'?)");
}

TEST(ConfigWarmupRatio, IsAShareOfTheStepsAndReplacesWarmupSteps) {
  const RunConfig c = parse_run_config(default_run_config_toml(), {"train.steps=30", "train.warmup_ratio=0.1"},
                                       "<built-in default>");
  EXPECT_EQ(warmup_steps_of(c.optim, c.train.steps), 3);
  EXPECT_EQ(warmup_steps_of(c.optim, 25), 3);  // rounded up, as the HF Trainer does
  const std::string recorded = to_toml(c);
  EXPECT_EQ(recorded.find("warmup_steps"), std::string::npos) << recorded;
  EXPECT_EQ(parse_config_text(recorded).optim.warmup_ratio, c.optim.warmup_ratio);
  // A --set of the steps replaces the ratio, and the other way round; both in one file are refused.
  EXPECT_EQ(parse_config_text(recorded, {"optim.warmup_steps=5"}).optim.warmup_ratio, 0.0f);
  EXPECT_EQ(parse_config_text(recorded, {"optim.warmup_steps=5"}).optim.warmup_steps, 5);
  EXPECT_EQ(config_text_error("[optim]\nwarmup_steps = 5\nwarmup_ratio = 0.1\n"),
            "run.toml: optim.warmup_steps and optim.warmup_ratio both give the warm-up: give one");
  EXPECT_EQ(config_text_error("", {"optim.warmup_steps=5", "train.warmup_ratio=0.1"}),
            "--set: optim.warmup_steps and optim.warmup_ratio both give the warm-up: give one");
  EXPECT_NE(config_text_error("", {"optim.warmup_ratio=1.5"}).find("optim.warmup_ratio must be in [0, 1]"), std::string::npos);
  // The schedule warms up over the ratio's steps.
  OptimConfig o;
  o.warmup_ratio = 0.5f;
  EXPECT_EQ(fresh_lr_schedule(o, 10).warmup_steps, 5);
  EXPECT_EQ(fresh_lr_schedule(o, 10).decay.step, 5);
}

TEST(ConfigWarmupRatio, AWarmUpThatReachesTheRunsEndIsWarned) {
  OptimConfig o;
  o.warmup_steps = 20;
  EXPECT_EQ(warmup_warning(fresh_lr_schedule(o, 6)),
            "warning: the warm-up (20 steps) is longer than the run (6 steps): it ends at 30% of optim.lr, with no "
            "decay; set optim.warmup_steps below train.steps, or optim.warmup_ratio (e.g. 0.1)");
  EXPECT_NE(warmup_warning(fresh_lr_schedule(o, 20)).find("takes the whole run (20 steps)"), std::string::npos);
  EXPECT_EQ(warmup_warning(fresh_lr_schedule(o, 21)), "");
}

TEST(ConfigLoraTargets, TakePeftsModuleNamesAsTargetModulesDoes) {
  EXPECT_EQ(parse_config_text("[lora]\ntargets = [\"q_proj\", \"v\", \"down_proj\"]\n").lora.targets,
            (std::vector<std::string>{"q", "v", "down"}));
  EXPECT_EQ(parse_config_text("", {"lora.targets=[\"k_proj\",\"lm_head\"]"}).lora.targets,
            (std::vector<std::string>{"k", "lm_head"}));
  EXPECT_EQ(parse_config_text("[lora]\ntargets = \"all-linear\"\n").lora.targets,
            (std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down"}));
  EXPECT_NE(config_text_error("[lora]\ntargets = [\"qq_proj\"]\n").find("lora.targets"), std::string::npos);
}

// Every known name: the keys and the aliases, with what each means (its key).
std::vector<std::pair<std::string, std::string>> known_names() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ConfigKey& k : config_keys()) out.emplace_back(k.name, k.name);
  for (const ConfigAlias& a : config_aliases()) out.emplace_back(a.name, a.key);
  return out;
}

// One character away from `name`: each deleted, doubled, replaced by 'x' or swapped with the next.
std::vector<std::string> misspellings(const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < name.size(); ++i) {
    out.push_back(name.substr(0, i) + name.substr(i + 1));
    out.push_back(name.substr(0, i + 1) + name.substr(i));
    out.push_back(name.substr(0, i) + "x" + name.substr(i + 1));
    if (i + 1 < name.size()) out.push_back(name.substr(0, i) + name[i + 1] + name[i] + name.substr(i + 2));
  }
  return out;
}

// The case: train.save_steps (then unknown) answered "did you mean 'train.max_steps'?",
// and following it cut the run to 10 steps. No known name is a misspelling of a name of another
// meaning, and each name misspelt by one character is answered with a name of its own meaning or
// not at all.
TEST(DidYouMean, NeverProposesANameOfAnotherMeaning) {
  const auto names = known_names();
  std::vector<std::string_view> all;
  for (const auto& [name, key] : names) all.push_back(name);
  auto meaning = [&](std::string_view name) {
    for (const auto& [n, key] : names)
      if (n == name) return key;
    return std::string();
  };
  for (const auto& [a, key_a] : names)
    for (const auto& [b, key_b] : names)
      if (key_a != key_b) {
        EXPECT_EQ(closest_name(a, {b}), "") << a << " is no misspelling of " << b;
      }
  for (const auto& [name, key] : names)
    for (const std::string& typo : misspellings(name)) {
      if (!meaning(typo).empty()) continue;  // itself a name
      const std::string_view hint = closest_name(typo, all);
      if (!hint.empty()) {
        EXPECT_EQ(meaning(hint), key) << typo << " (from " << name << ") -> " << hint;
      }
    }
  EXPECT_EQ(closest_name("train.save_step", all), "train.save_steps");
  EXPECT_EQ(closest_name("train.sav_steps", all), "train.save_steps");
  EXPECT_EQ(closest_name("train.saves_steps", all), "train.save_steps");
}

TEST(DidYouMean, TyposAreFoundAndOtherWordsAreNot) {
  const std::vector<std::string_view> keys = {"train.steps", "train.max_steps", "mesh.dp", "mesh.tp",
                                              "optim.beta1", "optim.beta2", "optim"};
  EXPECT_EQ(closest_name("train.stpes", keys), "train.steps");           // transposed
  EXPECT_EQ(closest_name("train.maxsteps", keys), "train.max_steps");    // a separator left out
  EXPECT_EQ(closest_name("optimizer", keys), "optim");                   // a longer form
  EXPECT_EQ(closest_name("train.save_steps", keys), "");                 // another word
  EXPECT_EQ(closest_name("mesh.pp", keys), "");                          // short words are exact
  EXPECT_EQ(closest_name("optim.beta3", keys), "");                      // digits are exact
  EXPECT_EQ(closest_name(std::string(100000, 'a'), keys), "");
  EXPECT_EQ(typo_distance("stpes", "steps"), 1u);
  EXPECT_EQ(typo_distance("save", "max"), 3u);
}

}  // namespace
}  // namespace mt

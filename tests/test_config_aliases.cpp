// Other tools' names for config keys (train/config_aliases.h), "did you mean" for every unknown
// key, and the run's length given as train.epochs instead of train.steps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_error.h"
#include "error_of.h"
#include "plan/hardware.h"
#include "train/config_aliases.h"
#include "train/config_schema.h"
#include "train/run_config.h"

namespace mt {
namespace {

using testing::config_text_error;
using testing::parse_config_text;

TEST(ConfigAliases, PeftAndTrainerNamesInAFileSetTheirKeys) {
  std::vector<std::string> renamed;
  const RunConfig c = parse_config_text(
      "[lora]\nr = 32\nlora_alpha = 64\nlora_dropout = 0.05\ntarget_modules = [\"q_proj\", \"v_proj\", \"down_proj\"]\n"
      "[train]\nlearning_rate = 1e-4\ngradient_accumulation_steps = 4\nmax_steps = 77\nwarmup_steps = 3\n"
      "weight_decay = 0.0\nmax_grad_norm = 0.5\nadam_beta1 = 0.8\nadam_beta2 = 0.9\nadam_epsilon = 1e-6\n"
      "lr_scheduler_type = \"warmup_stable_decay\"\n",
      {}, &renamed);
  EXPECT_EQ(c.lora.rank, 32);
  EXPECT_EQ(c.lora.alpha, 64.0f);
  EXPECT_FLOAT_EQ(c.lora.dropout, 0.05f);
  EXPECT_EQ(c.lora.targets, (std::vector<std::string>{"q", "v", "down"}));
  EXPECT_FLOAT_EQ(c.optim.lr, 1e-4f);
  EXPECT_EQ(c.train.grad_accum, 4);
  EXPECT_EQ(c.train.steps, 77);
  EXPECT_EQ(c.optim.warmup_steps, 3);
  EXPECT_EQ(c.optim.weight_decay, 0.0f);
  EXPECT_EQ(c.optim.grad_clip, 0.5f);
  EXPECT_FLOAT_EQ(c.optim.beta1, 0.8f);
  EXPECT_FLOAT_EQ(c.optim.beta2, 0.9f);
  EXPECT_FLOAT_EQ(c.optim.eps, 1e-6f);
  EXPECT_EQ(c.optim.schedule, "wsd");
  // Each named once, for the log; run.toml records the keys, never the aliases.
  EXPECT_EQ(renamed.size(), 14u);
  EXPECT_NE(std::find(renamed.begin(), renamed.end(), "lora.r -> lora.rank"), renamed.end());
  EXPECT_NE(std::find(renamed.begin(), renamed.end(), "train.learning_rate -> optim.lr"), renamed.end());
  const std::string recorded = to_toml(c);
  EXPECT_NE(recorded.find("rank = 32"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("targets = [\"q\", \"v\", \"down\"]"), std::string::npos) << recorded;
  for (const char* alias : {"lora_alpha", "target_modules", "learning_rate", "lr_scheduler_type", "\nr = "})
    EXPECT_EQ(recorded.find(alias), std::string::npos) << alias;
  EXPECT_EQ(to_toml(parse_config_text(recorded)), recorded);
}

TEST(ConfigAliases, AcceptedInSetAndNamedOnce) {
  std::vector<std::string> renamed;
  const RunConfig c = parse_config_text("", {"lora.r=4", "lora.target_modules=all-linear", "train.num_train_epochs=2.5",
                                 "train.lr_scheduler_type=constant_with_warmup"},
                            &renamed);
  EXPECT_EQ(c.lora.rank, 4);
  EXPECT_EQ(c.lora.targets, (std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down"}));  // not lm_head
  EXPECT_FLOAT_EQ(c.train.epochs, 2.5f);
  EXPECT_EQ(c.optim.schedule, "constant");
  EXPECT_EQ(renamed, (std::vector<std::string>{"lora.r -> lora.rank", "lora.target_modules -> lora.targets",
                                               "train.num_train_epochs -> train.epochs",
                                               "train.lr_scheduler_type -> optim.schedule"}));
  // A later --set of the same alias replaces the earlier one, as for keys, and is named once.
  renamed.clear();
  EXPECT_EQ(parse_config_text("", {"lora.r=4", "lora.r=16"}, &renamed).lora.rank, 16);
  EXPECT_EQ(renamed, std::vector<std::string>{"lora.r -> lora.rank"});
  // The alias's value is checked as its key's, and blamed on the --set.
  EXPECT_EQ(config_text_error("", {"lora.r=0"}), "--set lora.r=0: lora.rank must be > 0, got 0");
}

TEST(ConfigAliases, AnAliasBesideItsKeyIsRefused) {
  EXPECT_EQ(config_text_error("[lora]\nr = 4\nrank = 8\n"),
            "run.toml: lora.r (PEFT's name for lora.rank) and lora.rank are both given: give one");
  EXPECT_EQ(config_text_error("[lora]\nr = 4\nlora_rank = 8\n"), "run.toml: lora.lora_rank and lora.r both give lora.rank: give one");
  EXPECT_EQ(config_text_error("[train]\nlearning_rate = 1e-4\n[optim]\nlr = 1e-3\n"),
            "run.toml: train.learning_rate (HF Trainer's name for optim.lr) and optim.lr are both given: give one");
  EXPECT_EQ(config_text_error("", {"lora.rank=8", "lora.r=4"}),
            "--set lora.r=4: lora.r and lora.rank (also given) both set lora.rank: give one");
  // A --set of the key over a file's alias (or the other way) is an override, as always.
  EXPECT_EQ(parse_config_text("[lora]\nr = 4\n", {"lora.rank=8"}).lora.rank, 8);
  EXPECT_EQ(parse_config_text("[lora]\nrank = 4\n", {"lora.r=8"}).lora.rank, 8);
}

TEST(ConfigAliases, PeftModuleNamesAreTranslatedOrRefused) {
  EXPECT_EQ(parse_config_text("[lora]\ntarget_modules = [\"lm_head\", \"gate_proj\"]\n").lora.targets,
            (std::vector<std::string>{"lm_head", "gate"}));
  EXPECT_EQ(config_text_error("[lora]\ntarget_modules = [\"q_prj\"]\n"),
            "run.toml: lora.target_modules: unknown module 'q_prj' (did you mean 'q_proj'?) (expected some of "
            "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head)");
  EXPECT_NE(config_text_error("[lora]\ntarget_modules = \".*proj\"\n").find("a string is a regular expression in PEFT"),
            std::string::npos);
  EXPECT_NE(config_text_error("", {"train.lr_scheduler_type=polynomial"}).find("has no meshtrain schedule"), std::string::npos);
}

// Every alias names a real key, and no alias is itself a key.
TEST(ConfigAliases, TheTableIsConsistent) {
  for (const ConfigAlias& a : config_aliases()) {
    EXPECT_NE(find_config_key(a.key), nullptr) << a.name << " -> " << a.key;
    EXPECT_EQ(find_config_key(a.name), nullptr) << a.name;
    EXPECT_EQ(canonical_config_key(a.name), a.key);
  }
}

// The cases: lora.r and train.epochs once got "unknown key" without a suggestion; now
// they are names, and every unknown key gets a suggestion or the keys of its section.
TEST(ConfigUnknownKeys, EveryUnknownKeyGetsAHint) {
  EXPECT_EQ(config_text_error("[lora]\nrnak = 4\n"), "run.toml: unknown key 'lora.rnak' (did you mean 'lora.rank'?)");
  EXPECT_EQ(config_text_error("", {"lora.lora_alph=4"}),
            "--set lora.lora_alph=4: unknown key 'lora.lora_alph' (did you mean 'lora.lora_alpha'?)");
  const std::string far = config_text_error("[lora]\nbias = \"none\"\n");
  EXPECT_EQ(far.rfind("run.toml: unknown key 'lora.bias' (the keys of [lora] are enabled, rank, alpha, targets, ", 0),
            0u) << far;
  EXPECT_NE(config_text_error("", {"train.foo=1"}).find("(the keys of [train] are steps, epochs, "), std::string::npos);
  EXPECT_EQ(config_text_error("[optimizer]\nlr = 1e-3\n"), "run.toml: unknown section 'optimizer' (did you mean 'optim'?)");
  EXPECT_EQ(config_text_error("", {"optimizer.lr=1e-3"}),
            "--set optimizer.lr=1e-3: unknown section 'optimizer' (did you mean 'optim.lr'?)");
  const std::string section = config_text_error("[foo]\nx = 1\n");
  EXPECT_NE(section.find("(expected model, lora, optim, train, data, preference, output, mesh, partition)"), std::string::npos)
      << section;
}

// The planner's cluster files answer an unknown key the same way.
TEST(ConfigUnknownKeys, ClusterFilesSuggestToo) {
  EXPECT_EQ(error_of([] { plan::parse_cluster_toml("devices_per_nod = 8\n", "c.toml"); }),
            "c.toml: unknown key 'devices_per_nod' (did you mean 'devices_per_node'?)");
  EXPECT_EQ(error_of([] { plan::parse_cluster_toml(
                "devices_per_node = 8\npeak_tflops = 1\nmemory_gb = 1\nmemory_bandwidth_gbs = 1\n"
                "[intra]\nbandwith_gbs = 8\n", "c.toml"); }),
            "c.toml: unknown key 'bandwith_gbs' in [intra] (did you mean 'bandwidth_gbs'?)");
}

TEST(ConfigEpochs, EpochsReplaceTheStepsOfTheDocumentAndAreRecordedAlone) {
  // The built-in run has steps = 200; --set train.epochs replaces it (and the other way round).
  const RunConfig c = parse_run_config(default_run_config_toml(), {"train.epochs=3"}, "<built-in default>");
  EXPECT_EQ(c.train.epochs, 3.0f);
  const std::string recorded = to_toml(c);
  EXPECT_EQ(recorded.find("\nsteps = "), std::string::npos) << recorded;  // computed from the data
  EXPECT_NE(recorded.find("epochs = 3.0"), std::string::npos) << recorded;
  EXPECT_EQ(parse_config_text(recorded).train.epochs, 3.0f);
  // run.toml of a run by steps has epochs = 0, which a --set of either replaces.
  const std::string by_steps = to_toml(parse_config_text("", {"train.steps=40"}));
  EXPECT_NE(by_steps.find("epochs = 0.0"), std::string::npos) << by_steps;
  EXPECT_EQ(parse_config_text(by_steps, {"train.epochs=1"}).train.epochs, 1.0f);
  EXPECT_EQ(parse_config_text(recorded, {"train.steps=9"}).train.steps, 9);
  EXPECT_EQ(parse_config_text(recorded, {"train.steps=9"}).train.epochs, 0.0f);
}

TEST(ConfigEpochs, StepsAndEpochsTogetherAreRefused) {
  EXPECT_EQ(config_text_error("[train]\nsteps = 10\nepochs = 2\n"),
            "run.toml: train.steps and train.epochs both give the run's length: give one");
  EXPECT_EQ(config_text_error("[train]\nmax_steps = 10\nnum_train_epochs = 2\n"),
            "run.toml: train.steps and train.epochs both give the run's length: give one");
  EXPECT_EQ(config_text_error("", {"train.steps=10", "train.num_train_epochs=2"}),
            "--set: train.steps and train.epochs both give the run's length: give one");
  EXPECT_NE(config_text_error("", {"train.epochs=-1"}).find("train.epochs must be in [0, 1000000], got -1"), std::string::npos);
}

TEST(ConfigSchedule, ChoicesAndDecayFraction) {
  EXPECT_EQ(parse_config_text("[optim]\nschedule = \"linear\"\n").optim.schedule, "linear");
  EXPECT_EQ(config_text_error("", {"optim.schedule=step"}),
            "--set optim.schedule=step: optim.schedule must be \"cosine\", \"linear\", \"constant\" or \"wsd\", got \"step\"");
  EXPECT_NE(config_text_error("", {"optim.decay_fraction=0"}).find("optim.decay_fraction must be in (0, 1]"), std::string::npos);
  EXPECT_NE(config_text_error("", {"lora.dropout=1"}).find("lora.dropout must be in [0, 1), got 1"), std::string::npos);
}

}  // namespace
}  // namespace mt

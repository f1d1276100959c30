// Running `meshtrain train` on one rank and under mpirun on a mesh, and comparing the two:
// shared by the data-parallel, sharded (FSDP / tensor-parallel) and pipeline tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "parallel/mesh.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/run_config.h"
#include "temp_dirs.h"

namespace mt::testing {

inline int run(const std::string& cmd, std::string* output = nullptr) {
  auto r = run_command(cmd);
  if (output) *output = r.output;
  return r.code;
}

inline bool have_mpirun() { return run("mpirun --version") == 0; }

inline std::string mpirun(int64_t n) {
  return "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n " + std::to_string(n) + " ";
}

// A mesh ("pp=2,tp=2") as a part of a test's tag: "pp_2_tp_2".
inline std::string tag_of(const std::string& mesh) {
  std::string t;
  for (char c : mesh) t += (c == '=' || c == ',') ? '_' : c;
  return t;
}

// LoRA on every adapter target, the head included, with a learning rate (1e-2) large enough that
// the adapters move, on a random base (lora.random_base) where no model is given: how the mesh
// tests compare layouts' adapter training.
inline constexpr const char* kLoraAllTargets =
    "--set lora.enabled=true --set lora.random_base=true --set lora.rank=4 --set optim.lr=1e-2 "
    "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\",\"lm_head\"]' ";

// `meshtrain train` on the ranks of `mesh` ("dp=1" or "" : one process without mpirun).
inline std::string train_command(const std::string& mesh) {
  // One rank names its mesh too: a resumed run takes the rest of its config from the run.toml of
  // the run it continues, whose mesh may be another.
  if (mesh.empty() || mesh == "dp=1")
    return "OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train --mesh dp=1 ";
  return mpirun(parallel::MeshShape::parse(mesh).world()) + MESHTRAIN_BINARY + " train --mesh " + mesh + " ";
}

// One field of every step in a run's metrics.jsonl.
inline std::vector<double> metric(const std::string& dir, const std::string& key) {
  std::vector<double> out;
  std::ifstream f(dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line)[key].get<double>());
  return out;
}

// What a job started in the background by a test's script left: its exit status, which the script
// wrote to <dir>.rc, and its output, <dir>.log.
struct BackgroundJob {
  int rc = 0;
  std::string log;
};
inline BackgroundJob background_job(const std::string& dir) {
  BackgroundJob job;
  std::ifstream(dir + ".rc") >> job.rc;
  std::stringstream log;
  log << std::ifstream(dir + ".log").rdbuf();
  job.log = log.str();
  return job;
}

inline std::vector<double> losses(const std::string& dir) { return metric(dir, "loss"); }

inline std::vector<float> weights(const std::string& file) {
  SafetensorsFile st(file);
  std::vector<float> all;
  for (const auto& name : st.names()) {
    std::vector<float> t(st.info(name).numel);
    st.read_f32(name, t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

// A run's run_summary.json and the planner's figures for it: `train` (a command whose output.dir is
// `dir`), then `plan` (a `meshtrain plan ... --json` command), each expected to succeed.
struct RunAndPlan {
  nlohmann::json summary, plan;
};
inline RunAndPlan train_then_plan(const std::string& train, const std::string& dir, const std::string& plan) {
  std::string out;
  EXPECT_EQ(run(train + " --set output.dir=" + dir + " 2>&1", &out), 0) << out;
  EXPECT_EQ(run(plan + " --json 2>&1", &out), 0) << out;
  RunAndPlan r;
  std::ifstream f(dir + "/run_summary.json");
  r.summary = nlohmann::json::parse(f);  // a missing or broken file fails the test (gtest catches it)
  r.plan = nlohmann::json::parse(out);
  return r;
}

// "validation loss 5.57 -> 3.97" from a run's output: {before, after}, empty without validation.
inline std::vector<double> validation_losses(const std::string& output) {
  const std::string key = "validation loss ";
  const size_t at = output.rfind(key);
  if (at == std::string::npos) return {};
  double before = 0, after = 0;
  if (std::sscanf(output.c_str() + at + key.size(), "%lf -> %lf", &before, &after) != 2) return {};
  return {before, after};
}

// Two training runs of the same model and data, `args_a` with `command_a` (train_command(mesh))
// and `args_b` with `command_b`, trained alike: their per-step losses (relative 1e-5), gradient
// norms (relative 1e-5 on the first step, 5e-5 after updates that rounding moved, see below),
// validation losses before, during and after training, and exported final parameters (absolute
// `weight_tolerance`: 1e-4 is 2% of the 5e-3 an element can move in six steps; 5e-5 held on the
// AVX-512 machines, and an AVX2-only CPU, whose f32 GEMMs block and sum otherwise, measured up to
// 8.7e-5 (GPT-2 LoRA on tp = 2, 2026-12-07)) are equal. The runs
// write to one/ and mesh/ under fresh_temp_dir("mesh_" + tag). (Sums over ranks or micro-batches
// round differently from one rank's sums; AdamW divides each update by the gradient's own
// magnitude, so for an element whose gradient is near zero that rounding can move the update by a
// visible fraction of lr. With optim.eps = 1 the update is linear in the gradient and the runs
// agree to ~1e-7: Sharded.WeightsAgreeToRoundingWhenUpdatesAreLinearInTheGradient.)
inline void expect_same_training(const std::string& tag, const std::string& command_a, const std::string& args_a,
                                 const std::string& command_b, const std::string& args_b,
                                 const std::string& weights_file, double weight_tolerance = 1e-4) {
  const std::string base = fresh_temp_dir("mesh_" + tag);
  const std::string one = base + "/one", many = base + "/mesh";
  const std::string what = command_b + args_b;
  std::string out_one, out;
  ASSERT_EQ(run(command_a + args_a + " --set output.dir=" + one, &out_one), 0) << out_one;
  ASSERT_EQ(run(command_b + args_b + " --set output.dir=" + many, &out), 0) << out;
  // Validation (before and after) runs the forward alone, partial batches included.
  const auto val_one = validation_losses(out_one), val = validation_losses(out);
  ASSERT_EQ(val_one.size(), 2u) << out_one;
  ASSERT_EQ(val.size(), 2u) << out;
  for (size_t i = 0; i < val.size(); ++i) EXPECT_NEAR(val_one[i], val[i], 1e-5 * val_one[i]) << what << " validation";
  // So does the validation during the run (train.eval_every), on the same steps.
  const auto step_val_one = read_val_losses(one + "/metrics.jsonl"), step_val = read_val_losses(many + "/metrics.jsonl");
  if (args_a.find("train.eval_every") != std::string::npos) {
    ASSERT_FALSE(step_val_one.empty()) << out_one;
  }
  ASSERT_EQ(step_val_one.size(), step_val.size()) << what << " steps with a validation loss";
  for (const auto& [step, v] : step_val_one) {
    ASSERT_TRUE(step_val.count(step)) << what << " has no validation loss at step " << step;
    EXPECT_NEAR(v, step_val.at(step), 1e-5 * v) << what << " validation at step " << step;
  }
  auto a = losses(one), b = losses(many);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << what << " step " << i;
  // The global gradient norm (each distinct block counted once) drives clipping.
  const auto na = metric(one, "grad_norm"), nb = metric(many, "grad_norm");
  for (size_t i = 0; i < na.size(); ++i)
    EXPECT_NEAR(na[i], nb[i], (i == 0 ? 1e-5 : 5e-5) * na[i]) << what << " grad norm, step " << i;
  auto wa = weights(one + weights_file), wb = weights(many + weights_file);
  ASSERT_EQ(wa.size(), wb.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < wa.size(); ++i) max_diff = std::max(max_diff, double(std::abs(wa[i] - wb[i])));
  EXPECT_LT(max_diff, weight_tolerance) << what << ": final parameters differ";
}

// The run on `mesh` equals the single-rank run with the same arguments (expect_same_training).
inline void expect_same_run(const std::string& tag, const std::string& args, const std::string& mesh,
                            const std::string& weights_file, double weight_tolerance = 1e-4) {
  expect_same_training(tag, train_command(""), args, train_command(mesh), args, weights_file, weight_tolerance);
}

// Saved at step 3 under `from`, resumed under `to` (train_command's meshes): steps 4..6 equal the
// uninterrupted run's, losses and validation losses (relative 1e-5), gradient norms (5e-5) and
// exported parameters (5e-5 absolute), with the tolerances of expect_same_training and for its
// reasons: the two halves of the resumed run sum over other ranks than the uninterrupted run.
inline void expect_resume_across(const std::string& tag, const std::string& args, const std::string& from,
                                 const std::string& to) {
  namespace fs = std::filesystem;
  const std::string dir = fresh_temp_dir("resume_" + tag) + "/run";
  const std::string a = args + "--set output.checkpoint_every=3 --set output.dir=" + dir;
  const std::string what = from + " -> " + to;
  std::string out;
  ASSERT_EQ(run(train_command(from) + a, &out), 0) << out;
  const auto full = losses(dir), full_norms = metric(dir, "grad_norm");
  const auto full_val = read_val_losses(dir + "/metrics.jsonl");
  ASSERT_EQ(full.size(), 6u);
  const std::string exported =
      fs::exists(dir + "/adapter") ? "/adapter/adapter_model.safetensors" : "/model/model.safetensors";
  const auto full_weights = weights(dir + exported);  // before the resumed run writes its own
  fs::remove_all(dir + "/checkpoints/step-000006");
  fs::remove(dir + "/checkpoints/latest");  // the newest complete one is then step 3
  ASSERT_EQ(run(train_command(to) + a + " --set train.resume=latest", &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  const auto all = losses(dir), norms = metric(dir, "grad_norm");  // cut to steps 1..3 at the resume, then 4..6 again
  ASSERT_EQ(all.size(), 6u);
  ASSERT_EQ(norms.size(), 6u);
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_NEAR(all[i], full[i], 1e-5 * full[i]) << what << " step " << i + 1;
    EXPECT_NEAR(norms[i], full_norms[i], 5e-5 * full_norms[i]) << what << " grad norm, step " << i + 1;
  }
  const auto val = read_val_losses(dir + "/metrics.jsonl");
  for (const auto& [step, v] : full_val) {
    if (step <= 3) continue;
    ASSERT_TRUE(val.count(step)) << what << " has no validation loss at step " << step;
    EXPECT_NEAR(val.at(step), v, 1e-5 * v) << what << " validation at step " << step;
  }
  const auto w = weights(dir + exported);
  ASSERT_EQ(w.size(), full_weights.size()) << what;
  double max_diff = 0.0;
  for (size_t i = 0; i < w.size(); ++i) max_diff = std::max(max_diff, double(std::abs(w[i] - full_weights[i])));
  EXPECT_LT(max_diff, 5e-5) << what << ": final parameters differ from the uninterrupted run's";
}

// A run on `mesh` that loses a rank to SIGKILL once a checkpoint exists ends non-zero within 30 s
// with mpirun's message, and its newest complete checkpoint loads into a whole model.
inline void expect_killed_rank_ends_job(const std::string& tag, const std::string& args_in,
                                        const std::string& mesh) {
  namespace fs = std::filesystem;
  const std::string dir = fresh_temp_dir("killed_" + tag) + "/run";
  const std::string args = args_in + " --set train.steps=100000 --set output.checkpoint_every=2 --set output.dir=" + dir;
  // Run in the background; once a checkpoint exists, kill one rank with SIGKILL, then wait (at
  // most 30 s) for the job to end.
  const std::string script_path = dir + ".sh";
  std::ofstream(script_path)
      << "(" << train_command(mesh) << args << " > " << dir << ".log 2>&1; echo $? > " << dir << ".rc) &\n"
      << "for i in $(seq 1 600); do [ -f " << dir << "/checkpoints/latest ] && break; sleep 0.1; done\n"
      << "pkill -9 -n -f 'output.dir=" << dir << "$'\n"
      << "for i in $(seq 1 300); do [ -f " << dir << ".rc ] && break; sleep 0.1; done\n";
  fs::remove(dir + ".rc");
  run("bash " + script_path);
  ASSERT_TRUE(fs::exists(dir + ".rc")) << "the job did not end within 30 s of losing a rank";
  const BackgroundJob job = background_job(dir);
  EXPECT_NE(job.rc, 0);
  EXPECT_NE(job.log.find("signal 9"), std::string::npos) << job.log;
  // The newest complete checkpoint loads into a model of the run's shape.
  RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  Transformer model(cfg.model, Precision::fp32, LoraConfig{});
  AdamW opt(model.trainable(), cfg.optim);
  const CheckpointState st = load_checkpoint(resolve_checkpoint("latest", dir), model, opt);
  EXPECT_GE(st.step, 2);
  EXPECT_EQ(st.step % 2, 0);
}

}  // namespace mt::testing

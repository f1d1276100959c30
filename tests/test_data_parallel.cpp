// Data parallelism on real MPI ranks: `mpirun -n N meshtrain train --mesh dp=N` gives the same
// per-step losses and final parameters as the single-rank run (fp32, tight tolerance).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "io/safetensors.h"

namespace {

namespace fs = std::filesystem;

int run(const std::string& cmd, std::string* output = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have_mpirun() { return run("mpirun --version") == 0; }

std::string mpirun(int n) {
  return "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n " + std::to_string(n) + " ";
}

std::vector<double> losses(const std::string& dir) {
  std::vector<double> out;
  std::ifstream f(dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

std::vector<float> weights(const std::string& file) {
  mt::SafetensorsFile st(file);
  std::vector<float> all;
  for (const auto& name : st.names()) {
    std::vector<float> t(st.info(name).numel);
    st.read_f32(name, t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

void expect_same_run(const std::string& args, int ranks, const std::string& weights_file) {
  const std::string base = (fs::temp_directory_path() / "meshtrain_dp").string();
  const std::string one = base + "_1", many = base + "_" + std::to_string(ranks);
  std::string out;
  ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train " + args +
                " --set output.dir=" + one, &out), 0) << out;
  ASSERT_EQ(run(mpirun(ranks) + MESHTRAIN_BINARY + " train --mesh dp=" + std::to_string(ranks) +
                " " + args + " --set output.dir=" + many, &out), 0) << out;
  auto a = losses(one), b = losses(many);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << "step " << i;
  auto wa = weights(one + weights_file), wb = weights(many + weights_file);
  ASSERT_EQ(wa.size(), wb.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < wa.size(); ++i) max_diff = std::max(max_diff, double(std::abs(wa[i] - wb[i])));
  EXPECT_LT(max_diff, 1e-5) << "final parameters differ";
}

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 "
    "--set optim.warmup_steps=2";

TEST(DataParallel, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run(kRun, 2, "/model/model.safetensors");
  expect_same_run(kRun, 4, "/model/model.safetensors");
}

TEST(DataParallel, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run(std::string(kRun) + " --set lora.enabled=true --set lora.rank=4", 2,
                  "/adapter/adapter_model.safetensors");
}

TEST(DataParallel, MeshThatDoesNotMatchTheWorldIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  EXPECT_NE(run(mpirun(3) + MESHTRAIN_BINARY + " train --mesh dp=2 " + kRun, &out), 0);
  EXPECT_NE(out.find("mesh dp=2 has 2 ranks but the world has 3"), std::string::npos) << out;
  EXPECT_NE(run(mpirun(2) + MESHTRAIN_BINARY + " train --mesh dp=2 " + kRun +
                " --set train.batch_size=3", &out), 0);
  EXPECT_NE(out.find("divisible"), std::string::npos) << out;
}

}  // namespace

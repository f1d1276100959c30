// Running `meshtrain train` on one rank and under mpirun on a mesh, and comparing the two:
// shared by the data-parallel and sharded (FSDP / tensor-parallel) tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/mesh.h"
#include "io/safetensors.h"
#include "run_command.h"

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

// `meshtrain train` on the ranks of `mesh` ("dp=1" or "" : one process without mpirun).
inline std::string train_command(const std::string& mesh) {
  if (mesh.empty() || mesh == "dp=1") return "OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train ";
  return mpirun(dist::MeshShape::parse(mesh).world()) + MESHTRAIN_BINARY + " train --mesh " + mesh + " ";
}

inline std::vector<double> losses(const std::string& dir) {
  std::vector<double> out;
  std::ifstream f(dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

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

// The per-step losses (relative 1e-5) and the exported final parameters (absolute
// `weight_tolerance`) of the run on `mesh` equal the single-rank run's. `tag` keeps the output
// directories of tests that ctest runs in parallel apart. (Sums over ranks round differently from
// one rank's sums; AdamW divides each update by the gradient's own magnitude, so for an element
// whose gradient is near zero that rounding can move the update by a visible fraction of lr.)
inline void expect_same_run(const std::string& tag, const std::string& args, const std::string& mesh,
                            const std::string& weights_file, double weight_tolerance = 1e-5) {
  namespace fs = std::filesystem;
  const std::string base = (fs::temp_directory_path() / ("meshtrain_mesh_" + tag)).string();
  const std::string one = base + "_one", many = base + "_mesh";
  fs::remove_all(one);
  fs::remove_all(many);
  std::string out;
  ASSERT_EQ(run(train_command("") + args + " --set output.dir=" + one, &out), 0) << out;
  ASSERT_EQ(run(train_command(mesh) + args + " --set output.dir=" + many, &out), 0) << out;
  auto a = losses(one), b = losses(many);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i])) << mesh << " step " << i;
  auto wa = weights(one + weights_file), wb = weights(many + weights_file);
  ASSERT_EQ(wa.size(), wb.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < wa.size(); ++i) max_diff = std::max(max_diff, double(std::abs(wa[i] - wb[i])));
  EXPECT_LT(max_diff, weight_tolerance) << mesh << ": final parameters differ";
}

}  // namespace mt::testing

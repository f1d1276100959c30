// Choosing the device (train.device, --device; backend/backend_factory.h): the GPU each local rank
// takes, and through the real binary, a device this build or machine cannot give is refused in one
// line with a non-zero exit before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "backend/backend_factory.h"
#include "core/error.h"
#ifdef MESHTRAIN_CUDA
#include "backend/cuda_device_count.h"
#endif
#include "error_of.h"
#include "run_command.h"
#include "train/config_schema.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::run_meshtrain;

TEST(DeviceChoice, EachLocalRankTakesItsOwnGpuOrSharesOnlyWhenAllowed) {
  EXPECT_EQ(gpu_for_local_rank(0, 1, false), 0);
  EXPECT_EQ(gpu_for_local_rank(3, 8, false), 3);
  EXPECT_EQ(gpu_for_local_rank(1, 1, true), 0);   // two ranks on the one GPU
  EXPECT_EQ(gpu_for_local_rank(5, 2, true), 1);   // round robin
  const std::string e = error_of([] { gpu_for_local_rank(2, 2, false); });
  EXPECT_NE(e.find("local rank 2 has no GPU of its own: this node has 2 GPUs"), std::string::npos) << e;
  EXPECT_NE(e.find("train.share_gpu = true"), std::string::npos) << e;
}

TEST(DeviceChoice, AnUnknownDeviceIsRefusedNamingTheChoices) {
  EXPECT_EQ(error_of([] { open_device_backend({"tpu", "--device", 0, false}); }),
            "--device tpu: unknown device; expected cpu or cuda");
  EXPECT_EQ(error_of([] { check_device_name("gpu", "train.device"); }),
            "train.device = \"gpu\": unknown device; expected cpu or cuda");
  EXPECT_EQ(&*open_device_backend({"cpu", "--device", 3, false}), &cpu_backend());
}

// The config key offers exactly the names the factory opens.
TEST(DeviceChoice, TheConfigKeyOffersTheFactorysDevices) {
  const auto& keys = config_keys();
  const auto it = std::find_if(keys.begin(), keys.end(), [](const ConfigKey& k) { return k.name == "train.device"; });
  ASSERT_NE(it, keys.end());
  std::vector<std::string> choices(it->choices.begin(), it->choices.end());
  EXPECT_EQ(choices, device_names());
}

#ifndef MESHTRAIN_CUDA
const char* kNoCuda = "this meshtrain was built without CUDA (configure with -DMESHTRAIN_CUDA=ON; see docs/gpu.md)";

// One line on stderr ("meshtrain: error: <what>"), nothing else.
void expect_one_error_line(const testing::CommandResult& r, const std::string& what) {
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "meshtrain: error: " + what + "\n");
}

TEST(DeviceChoice, CudaInABuildWithoutItIsOneLineAndWritesNothing) {
  const fs::path out = fs::path(mt::testing::fresh_temp_dir("device_choice_run")) / "run";
  expect_one_error_line(run_meshtrain("train --device cuda --out " + out.string()),
                        std::string("--device cuda: ") + kNoCuda);
  EXPECT_FALSE(fs::exists(out)) << "the run directory was created";
  expect_one_error_line(run_meshtrain("train --set train.device=cuda --out " + out.string()),
                        std::string("train.device = \"cuda\": ") + kNoCuda);
  EXPECT_FALSE(fs::exists(out)) << "the run directory was created";
  // --device overrides the key either way.
  expect_one_error_line(run_meshtrain("train --set train.device=cpu --device cuda --out " + out.string()),
                        std::string("--device cuda: ") + kNoCuda);
  EXPECT_FALSE(fs::exists(out));

  // An existing run directory is left exactly as it was.
  fs::create_directories(out);
  { std::ofstream(out / "metrics.jsonl") << "{\"step\": 1}\n"; }
  expect_one_error_line(run_meshtrain("train --device cuda --overwrite --out " + out.string()),
                        std::string("--device cuda: ") + kNoCuda);
  EXPECT_EQ(fs::file_size(out / "metrics.jsonl"), 12u);
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
}

TEST(DeviceChoice, EvalGenerateAndBenchRefuseCudaWithoutItBeforeLoadingAnything) {
  const std::string missing = mt::testing::fresh_temp_dir("no_such_model") + "/missing";
  // The device is refused first: the model path does not exist, and is never looked at.
  expect_one_error_line(run_meshtrain("eval --device cuda -m " + missing + " -d " + missing),
                        std::string("--device cuda: ") + kNoCuda);
  expect_one_error_line(run_meshtrain("generate --device cuda -m " + missing + " -p hi"),
                        std::string("--device cuda: ") + kNoCuda);
  expect_one_error_line(run_meshtrain("bench --device cuda --what full"), std::string("--device cuda: ") + kNoCuda);
}
#else
// A CUDA build on a machine without a usable GPU (CI's): the CUDA backend's one line after the
// same prefix, and still nothing written.
TEST(DeviceChoice, CudaWithoutAUsableGpuIsOneLineAndWritesNothing) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: the refusal cannot be seen here";
  const fs::path out = fs::path(mt::testing::fresh_temp_dir("device_choice_nogpu")) / "run";
  const auto r = run_meshtrain("train --device cuda --out " + out.string());
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("meshtrain: error: --device cuda: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(out)) << "the run directory was created";
}
#endif

TEST(DeviceChoice, AnUnknownDeviceOnTheCommandLineIsRefused) {
  const fs::path out = fs::path(mt::testing::fresh_temp_dir("device_choice_tpu")) / "run";
  for (const std::string& verb : {"train --out " + out.string(), std::string("bench --what full")}) {
    const auto r = run_meshtrain(verb + " --device tpu");
    EXPECT_NE(r.code, 0) << verb;
    EXPECT_EQ(r.output, "meshtrain: error: --device tpu: unknown device; expected cpu or cuda\n") << verb;
  }
  EXPECT_FALSE(fs::exists(out));
  const auto r = run_meshtrain("train --set train.device=tpu --out " + out.string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("train.device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"cpu\" or \"cuda\""), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace mt

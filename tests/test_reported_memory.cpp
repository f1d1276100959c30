// The peak memory a run reports is the run's: the bf16 GEMM measurement behind MFU (2048^2
// operands, ~100 MB with its staging copies, and on CPUs without a bf16 matmul the widened f32
// operands kept for reuse) is made before the run allocates anything and left out of the peaks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace mt {
namespace {

struct ReportedPeak {
  int64_t rss = 0, tensors = 0;
  std::string log;
};

ReportedPeak run_and_read_peak(const std::string& dir, const std::string& extra) {
  const auto r = testing::run_meshtrain("train --set train.steps=2 --out " + dir + " " + extra);
  EXPECT_EQ(r.code, 0) << r.output;
  const nlohmann::json s = nlohmann::json::parse(testing::read_file(dir + "/run_summary.json"));
  const nlohmann::json& rank0 = s.at("memory_per_rank").at(0);
  return {rank0.at("peak_rss_bytes").get<int64_t>(), rank0.at("peak_tensor_bytes").get<int64_t>(), r.output};
}

TEST(ReportedMemory, TheGemmMeasurementIsNotTheRunsPeak) {
  const std::string scratch = testing::fresh_temp_dir("reported_memory");
  const ReportedPeak given = run_and_read_peak(scratch + "/given", "--set train.peak_gflops=100");
  const ReportedPeak measured = run_and_read_peak(scratch + "/measured", "");
  ASSERT_NE(measured.log.find("(measured bf16 GEMM)"), std::string::npos) << measured.log;
  ASSERT_EQ(given.log.find("measured bf16 GEMM"), std::string::npos) << given.log;
  // Measured in a run of its own, the two runs' peaks differ by a few MB of noise; with the
  // measurement's buffers counted the measuring run's were ~60 MB higher (112 MiB against 50.5 on
  // the machine), its tensor peak by the 32 MB of the measurement's device buffers.
  const int64_t MiB = 1 << 20;
  EXPECT_LT(measured.rss, given.rss + 16 * MiB) << "measuring " << measured.rss / MiB << " MiB, given "
                                                << given.rss / MiB << " MiB";
  EXPECT_LE(measured.tensors, given.tensors + MiB) << measured.tensors << " vs " << given.tensors;
}

}  // namespace
}  // namespace mt

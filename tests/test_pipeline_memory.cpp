// What a pipeline stage holds: the schedule's micro-batches in flight and the pipeline's own
// buffers (parallel::pipeline_buffers, counted from the orders of a stage and its neighbours), on
// real pp=2 runs their measured peaks (run_summary.json), the peak of tensor memory growing with
// m under GPipe and not under 1F1B (issue 10: "1F1B holds at most pp - stage micro-batches"), and
// the planner's per-stage peak against the measured one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "mesh_runs.h"
#include "text_files.h"
#include "parallel/pipeline.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;
using parallel::PipelineSchedule, parallel::pipeline_buffers, parallel::pipeline_order;

TEST(PipelineBuffers, InFlightIsTheSchedulesDepth) {
  for (int p : {2, 3, 4})
    for (int64_t m : {1, 2, 4, 8, 16})
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, p, s, m).peak_in_flight,
                  std::min<int64_t>(p - s, m)) << p << " " << m << " " << s;
        // The last stage runs each micro-batch's forward and backward at once.
        EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, p, s, m).peak_in_flight, s + 1 == p ? 1 : m);
      }
  // Interleaved, pp=2 x 2 chunks, m=4: stage 0's warm-up is 2 (pp - 1) + pp = 4 forwards, and the
  // fifth runs before the first backward.
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 0, 4, 2).peak_in_flight, 5);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 1, 4, 2).peak_in_flight, 3);
}

// Every send is released at most once, only after it was sent, and only at a receive whose sender
// had by then run the receiving op; 1F1B's buffers do not grow with m.
TEST(PipelineBuffers, ReleasesAreSoundAndBounded) {
  for (auto schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe})
    for (int v : {1, 2})
      for (int p : {2, 4}) {
        if (v > 1 && schedule == PipelineSchedule::gpipe) continue;
        for (int64_t m : {4, 8, 16})
          for (int s = 0; s < p; ++s) {
            const auto order = pipeline_order(schedule, p, s, m, v);
            const auto b = pipeline_buffers(schedule, p, s, m, v);
            ASSERT_EQ(b.release_at_receive.size(), order.size());
            std::map<size_t, int> released;
            for (size_t i = 0; i < order.size(); ++i)
              for (size_t k : b.release_at_receive[i]) {
                EXPECT_LT(k, i);
                EXPECT_EQ(++released[k], 1);
              }
            if (schedule == PipelineSchedule::one_f_one_b && v == 1) {
              EXPECT_EQ(b.peak_buffers, pipeline_buffers(schedule, p, s, 4, v).peak_buffers)
                  << "stage " << s << " of " << p << ", m " << m;
            }
          }
      }
  // pp=2, GPipe: stage 0 holds all m outputs until stage 1's gradients come back; stage 1 all m
  // gradients, which stage 0 receives only after its last forward. 1F1B: stage 0 its two
  // micro-batches' outputs and the received gradient, stage 1 an input and two gradients.
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 0, 16).peak_buffers, 16);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 1, 16).peak_buffers, 17);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 0, 16).peak_buffers, 3);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 1, 16).peak_buffers, 3);
}

// Micro-batches of 2 x 256 tokens of the tiny width (128): each buffer a residual stream of
// 256 KiB, so m = 16 against m = 4 under GPipe is 12 more per stage, 3 MiB beside a peak of
// about 20.
constexpr int64_t kBuffer = 2 * 256 * 128 * 4;

struct Measured {
  nlohmann::json summary, plan;
};

Measured pp2_run(const std::string& schedule, int64_t m) {
  const std::string dir =
      (fs::temp_directory_path() / ("meshtrain_pp_memory_" + schedule + "_" + std::to_string(m))).string();
  fs::remove_all(dir);
  const std::string shape = "--set model.num_hidden_layers=4 --set train.seq_len=256 --set train.batch_size=2 ";
  std::string out;
  const int rc = run(train_command("pp=2") + shape + "--set train.pp_schedule=" + schedule +
                         " --set train.grad_accum=" + std::to_string(m) +
                         " --set train.steps=2 --set train.peak_gflops=100 --set output.dir=" + dir + " 2>&1",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  const int prc = run(std::string(MESHTRAIN_BINARY) + " plan --model " + dir + "/model --cluster cpu --mesh pp=2" +
                          " --pp-schedule " + schedule + " --seq 256 --micro-batch 2 --global-batch " +
                          std::to_string(2 * m) + " --json 2>&1",
                      &out);
  EXPECT_EQ(prc, 0) << out;
  Measured r;
  r.summary = nlohmann::json::parse(read_file(dir + "/run_summary.json"));
  r.plan = nlohmann::json::parse(out);
  return r;
}

int64_t tensor_peak(const Measured& r, int rank) {
  return r.summary.at("memory_per_rank").at(size_t(rank)).at("peak_tensor_bytes").get<int64_t>();
}

TEST(PipelineMemory, GpipeGrowsWithMicroBatchesAndOneFOneBDoesNotAndThePlannerAgrees) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::map<std::pair<std::string, int64_t>, Measured> runs;
  for (const char* schedule : {"gpipe", "1f1b"})
    for (int64_t m : {4, 16}) runs[{schedule, m}] = pp2_run(schedule, m);
  for (const auto& [key, r] : runs) {
    const auto& [schedule, m] = key;
    const auto sched = parallel::parse_pipeline_schedule(schedule);
    const auto& ranks = r.summary.at("pipeline_per_rank");
    ASSERT_EQ(ranks.size(), 2u) << r.summary.dump();
    for (int s = 0; s < 2; ++s) {
      const auto& t = ranks[size_t(s)];
      const auto expected = pipeline_buffers(sched, 2, s, m);
      // The engine counts its micro-batches and buffers as it runs: the orders' figures.
      EXPECT_EQ(t.at("peak_in_flight").get<int64_t>(), schedule == "gpipe" && s == 0 ? m : 2 - s) << schedule << m;
      EXPECT_EQ(t.at("peak_buffer_bytes").get<int64_t>(), expected.peak_buffers * kBuffer) << schedule << m;
      // The planner's stage s against its measured peak of tensor memory: within 1.1% here. What
      // is left: the tensor count rounds every allocation up (core/host_memory's padding) and sees
      // transient buffers inside an op (the optimizer's, a unit's gradient staging) that the
      // planner does not list, while the planner's arena items are upper bounds of what is alive
      // at the very moment of the peak.
      const auto& stage = r.plan.at("pipeline").at("stages").at(size_t(s)).at("memory_bytes");
      const double predicted = stage.at("total").get<double>() - stage.at("items").value("overhead", 0.0);
      const double measured = double(tensor_peak(r, s));
      EXPECT_NEAR(predicted / measured, 1.0, 0.05)
          << schedule << " m=" << m << " stage " << s << ": predicted " << predicted << ", measured " << measured;
    }
  }
  // GPipe keeps all m micro-batches' buffers: 12 more residual streams at m = 16 than at m = 4 on
  // both stages; 1F1B the same peak whatever m.
  for (int s = 0; s < 2; ++s) {
    const double gpipe = double(tensor_peak(runs[{"gpipe", 16}], s) - tensor_peak(runs[{"gpipe", 4}], s));
    const double one_f = double(tensor_peak(runs[{"1f1b", 16}], s) - tensor_peak(runs[{"1f1b", 4}], s));
    EXPECT_NEAR(gpipe / double(kBuffer), 12.0, 0.5) << "stage " << s;
    EXPECT_NEAR(one_f / double(kBuffer), 0.0, 0.5) << "stage " << s;
  }
}

}  // namespace
}  // namespace mt::testing

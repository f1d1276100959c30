// What a pipeline stage holds: the schedule's micro-batches in flight and the pipeline's own
// buffers (parallel::pipeline_buffers, counted from the orders of a stage and its neighbours), on
// real pp=2 runs their measured peaks (run_summary.json), the peak of tensor memory growing with
// m under GPipe and not under 1F1B (issue 10: "1F1B holds at most pp - stage micro-batches"), and
// the planner's per-stage peak against the measured one: within 2% on 2 and 4 stages, uneven
// splits and every schedule (issue 22: a stage's arena holds its own units only), and for the
// families' blocks on stages and on tensor-parallel ranks (issue 21).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "family_model_dir.h"
#include "mesh_runs.h"
#include "text_files.h"
#include "parallel/pipeline.h"
#include "temp_dirs.h"

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

// Every send is released at most once, only after it was sent, either at a receive whose sender
// had by then run the receiving op or, an output only, at the start of a later forward (which
// waits for its send to complete); 1F1B's buffers do not grow with m.
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
            ASSERT_EQ(b.release_before_forward.size(), order.size());
            std::map<size_t, int> released;
            for (size_t i = 0; i < order.size(); ++i) {
              for (size_t k : b.release_at_receive[i]) {
                EXPECT_LT(k, i);
                EXPECT_EQ(++released[k], 1);
              }
              for (size_t k : b.release_before_forward[i]) {
                EXPECT_LT(k, i);
                EXPECT_TRUE(order[i].forward && order[k].forward) << "only outputs, before a forward";
                EXPECT_EQ(v, 1) << "interleaved schedules keep only the proofs";
                EXPECT_EQ(++released[k], 1);
              }
            }
            if (schedule == PipelineSchedule::one_f_one_b && v == 1) {
              EXPECT_EQ(b.peak_buffers, pipeline_buffers(schedule, p, s, 4, v).peak_buffers)
                  << "stage " << s << " of " << p << ", m " << m;
            }
          }
      }
  // pp=2, GPipe: stage 0 frees each output when the next forward finds its send complete, so it
  // holds one output (the last, until the gradients come back) and the received gradient; stage 1
  // all m gradients, which stage 0 receives only after its last forward, and an input. 1F1B:
  // stage 0 its latest output and the received gradient, stage 1 an input and two gradients.
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 0, 16).peak_buffers, 2);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 1, 16).peak_buffers, 17);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 0, 16).peak_buffers, 2);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 1, 16).peak_buffers, 3);
  // 1F1B's stage s keeps up to pp - s inputs; its warm-up's outputs no longer pile up beside them
  // (they did until a gradient came back: stage 1 of 128 held 126 of them, the seed's 1T). Beside
  // its 127 inputs: its latest output, two gradients sent back and not yet known received (stage
  // 0's next forward proves the first) and the one received.
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 128, 1, 1024).peak_allocated, 127 + 4);
}

// A receive's buffer is allocated before the sends its arrival proves received are released: at
// most one buffer more than while a chunk computes, and that one only where a receive meets the
// peak (interleaved 1F1B's, whose outputs wait for proofs).
TEST(PipelineBuffers, AReceiveHoldsAtMostOneBufferMore) {
  for (auto schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe})
    for (int v : {1, 2})
      for (int p : {2, 3, 4}) {
        if (v > 1 && schedule == PipelineSchedule::gpipe) continue;
        for (int64_t m : {4, 8, 12})
          for (int s = 0; s < p; ++s) {
            if (m % p != 0 && v > 1) continue;  // interleaving needs whole groups of pp
            const auto b = pipeline_buffers(schedule, p, s, m, v);
            EXPECT_GE(b.peak_allocated, b.peak_buffers);
            EXPECT_LE(b.peak_allocated, b.peak_buffers + 1) << p << " " << s << " " << m << " " << v;
          }
      }
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 0, 16).peak_allocated, 2);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::gpipe, 2, 1, 16).peak_allocated, 17);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 2, 0, 16).peak_allocated, 2);
  // Stage 0 of 4: the latest of its warm-up outputs and the first gradient (it used to hold all
  // four warm-up outputs, and the gradient arrived beside them: 5).
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 4, 0, 8).peak_buffers, 2);
  EXPECT_EQ(pipeline_buffers(PipelineSchedule::one_f_one_b, 4, 0, 8).peak_allocated, 2);
}

// Micro-batches of 2 x 256 tokens of the tiny width (128), bf16 (the runs' default precision):
// each buffer a residual stream of 128 KiB, so m = 16 against m = 4 under GPipe is 12 more on the
// last stage, 1.5 MiB beside a peak of about 20.
constexpr int64_t kBuffer = 2 * 256 * 128 * 2;

struct Measured {
  nlohmann::json summary, plan;
};

// The run in `dir` (micro-batches of 2 x 256 tokens, `m` a step), beside what the planner predicts
// for the mesh and pipeline options `mesh_pp` ("pp=2 --pp-schedule gpipe").
Measured measured(const std::string& dir, const std::string& mesh_pp, int64_t m) {
  std::string out;
  const int prc = run(std::string(MESHTRAIN_BINARY) + " plan --model " + dir + "/model --cluster cpu --mesh " + mesh_pp +
                          " --seq 256 --micro-batch 2 --global-batch " + std::to_string(2 * m) + " --json 2>&1",
                      &out);
  EXPECT_EQ(prc, 0) << out;
  Measured r;
  r.summary = nlohmann::json::parse(read_file(dir + "/run_summary.json"));
  r.plan = nlohmann::json::parse(out);
  return r;
}

Measured pp2_run(const std::string& schedule, int64_t m) {
  const std::string dir = fresh_temp_dir("pp_memory_" + schedule + "_" + std::to_string(m)) + "/run";
  const std::string shape = "--set model.num_hidden_layers=4 --set train.seq_len=256 --set train.batch_size=2 ";
  std::string out;
  const int rc = run(train_command("pp=2") + shape + "--set train.pp_schedule=" + schedule +
                         " --set train.grad_accum=" + std::to_string(m) +
                         " --set train.steps=2 --set train.peak_gflops=100 --set output.dir=" + dir + " 2>&1",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  return measured(dir, "pp=2 --pp-schedule " + schedule, m);
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
  // GPipe's last stage keeps all m micro-batches' gradients: 12 more residual streams at m = 16
  // than at m = 4; its stage 0 frees each output once sent, so it stays flat, as 1F1B does on both.
  for (int s = 0; s < 2; ++s) {
    const double gpipe = double(tensor_peak(runs[{"gpipe", 16}], s) - tensor_peak(runs[{"gpipe", 4}], s));
    const double one_f = double(tensor_peak(runs[{"1f1b", 16}], s) - tensor_peak(runs[{"1f1b", 4}], s));
    EXPECT_NEAR(gpipe / double(kBuffer), s == 1 ? 12.0 : 0.0, 0.5) << "stage " << s;
    EXPECT_NEAR(one_f / double(kBuffer), 0.0, 0.5) << "stage " << s;
  }
}

// One pipeline layout of a real run and the planner's figures for it: `pp` stages of a model of
// `layers` blocks, `blocks` per chunk as train.pp_blocks (empty: the balanced split), `virt` chunks
// per stage, m micro-batches of 2 x 256 tokens.
struct Layout {
  int pp = 2;
  int64_t layers = 4;
  std::string schedule = "1f1b", blocks;
  int64_t virt = 1, m = 4;
  std::string name() const {
    return "pp" + std::to_string(pp) + "_" + schedule + "_v" + std::to_string(virt) + "_m" + std::to_string(m) +
           (blocks.empty() ? "" : "_" + blocks);
  }
};

// `model`: a model directory (of l.layers blocks) to fine-tune instead of the built-in config.
Measured layout_run(const Layout& l, const std::string& model_dir = "") {
  const std::string tag = model_dir.empty() ? l.name() : l.name() + "_" + fs::path(model_dir).filename().string();
  const std::string dir = fresh_temp_dir("stage_memory_" + tag) + "/run";
  std::string pp = " --set train.pp_schedule=" + l.schedule + " --set train.pp_virtual=" + std::to_string(l.virt);
  std::string plan_pp = " --pp-schedule " + l.schedule + " --pp-virtual " + std::to_string(l.virt);
  if (!l.blocks.empty()) pp += " --set train.pp_blocks=" + l.blocks, plan_pp += " --pp-blocks " + l.blocks;
  std::string out;
  const std::string model = model_dir.empty() ? "--set model.num_hidden_layers=" + std::to_string(l.layers)
                                              : "--set model.path=" + model_dir;
  const int rc = run(train_command("pp=" + std::to_string(l.pp)) + model + " --set train.seq_len=256 --set train.batch_size=2" + pp +
                         " --set train.grad_accum=" + std::to_string(l.m) +
                         " --set train.steps=2 --set train.peak_gflops=100 --set output.dir=" + dir + " 2>&1",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  return measured(dir, "pp=" + std::to_string(l.pp) + plan_pp, l.m);
}

// Issue 22: each stage plans activations for its own units only, and the planner's per-stage
// figure is the measured peak of tensor memory of that stage's rank within 2%, on 2 and 4 stages,
// uneven splits, GPipe, 1F1B and interleaved 1F1B.
TEST(PipelineMemory, EveryStagesPeakIsThePlannersWithinTwoPercent) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::vector<Layout> layouts = {
      {2, 4, "gpipe", "1,3", 1, 4},        // uneven, the head with three blocks
      {4, 8, "1f1b", "1,2,3,2", 1, 8},     // 4 stages, uneven
      {4, 8, "gpipe", "", 1, 4},           // 4 stages, the balanced split
      {2, 8, "1f1b", "2,1,3,2", 2, 4},     // interleaved: 2 stages x 2 chunks, uneven chunks
  };
  for (const Layout& l : layouts) {
    const Measured r = layout_run(l);
    const auto& stages = r.plan.at("pipeline").at("stages");
    ASSERT_EQ(stages.size(), size_t(l.pp)) << l.name();
    ASSERT_EQ(r.summary.at("memory_per_rank").size(), size_t(l.pp)) << l.name();
    for (int s = 0; s < l.pp; ++s) {
      const auto& stage = stages.at(size_t(s)).at("memory_bytes");
      const double predicted = stage.at("total").get<double>() - stage.at("items").value("overhead", 0.0);
      const double measured = double(tensor_peak(r, s));
      EXPECT_NEAR(predicted / measured, 1.0, 0.02)
          << l.name() << " stage " << s << ": predicted " << predicted << ", measured " << measured;
    }
  }
}

// The same for the families' parts (issue 21): a Qwen3-like block (q/k norms, head_dim 24 against
// hidden 128 / 8 heads = 16: q 192 wide) and a Mistral-like one (every layer a sliding window of
// 64 < seq 256), fine-tuned from their HF directories on 2 stages, and the Qwen3-like one on 2
// tensor-parallel ranks (each with 4 of the heads). The planner sizes q and the attention output
// at heads x head_dim, adds Qwen3's f32 pre-norm q and k and their norms' rstd and backward
// scratch, and nothing for a window (the attention keeps no scores).
TEST(PipelineMemory, FamilyPeaksAreThePlannersWithinTwoPercent) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string shape = "--set model.num_hidden_layers=4 --set train.seq_len=256 --set train.batch_size=2";
  const std::string qwen3 = family_model_dir("pp_memory_qwen3", shape, [](ModelConfig& c) {
    c.model_type = "qwen3";
    c.qk_norm = true;
    c.head_dim_override = c.hidden_size / c.num_attention_heads + 8;
  });
  const std::string mistral = family_model_dir("pp_memory_mistral", shape, [](ModelConfig& c) {
    c.model_type = "mistral";
    c.layer_window.assign(size_t(c.num_hidden_layers), 64);
  });
  // Six blocks for three stages (issue 31: Gemma 3 and Mistral missed by 2.4-2.5% at pp=3): a
  // Gemma-3-like block (post norms, GeGLU, q/k norms, head_dim 20, local layers with their own
  // RoPE base, scaled and tied embeddings: the last stage holds the embedding's copy as its head)
  // and the Mistral-like one.
  const std::string six = "--set model.num_hidden_layers=6 --set train.seq_len=256 --set train.batch_size=2";
  const std::string gemma3_six = family_model_dir("pp_memory_gemma3_6", six, [](ModelConfig& c) {
    c.model_type = "gemma3_text";
    c.qk_norm = true;
    c.head_dim_override = c.hidden_size / c.num_attention_heads + 4;
    c.norm_weight_offset = 1.0f, c.post_norms = c.geglu = c.scale_embeddings = true;
    c.attention_scale = 0.3f, c.rope_local_theta = 100.0f;
    c.layer_window.assign(size_t(c.num_hidden_layers), 0);
    for (int64_t l = 0; l < c.num_hidden_layers; l += 2) c.layer_window[size_t(l)] = 64;
    c.tie_word_embeddings = true;
  });
  const std::string mistral_six = family_model_dir("pp_memory_mistral_6", six, [](ModelConfig& c) {
    c.model_type = "mistral";
    c.layer_window.assign(size_t(c.num_hidden_layers), 64);
  });
  const std::vector<std::pair<Layout, std::string>> layouts = {
      {{2, 4, "1f1b", "", 1, 4}, qwen3},
      {{2, 4, "gpipe", "1,3", 1, 4}, qwen3},
      {{2, 4, "1f1b", "", 1, 4}, mistral},
      {{3, 6, "1f1b", "", 1, 4}, gemma3_six},
      {{3, 6, "1f1b", "", 1, 4}, mistral_six},
  };
  for (const auto& [l, model] : layouts) {
    const Measured r = layout_run(l, model);
    const auto& stages = r.plan.at("pipeline").at("stages");
    ASSERT_EQ(stages.size(), size_t(l.pp)) << l.name() << " " << model;
    ASSERT_EQ(r.summary.at("memory_per_rank").size(), size_t(l.pp)) << l.name() << " " << model;
    for (int s = 0; s < l.pp; ++s) {
      const auto& stage = stages.at(size_t(s)).at("memory_bytes");
      const double predicted = stage.at("total").get<double>() - stage.at("items").value("overhead", 0.0);
      const double measured = double(tensor_peak(r, s));
      EXPECT_NEAR(predicted / measured, 1.0, 0.02) << l.name() << " " << model << " stage " << s
                                                   << ": predicted " << predicted << ", measured " << measured;
      std::cout << l.name() << " " << fs::path(model).filename().string() << " stage " << s << ": predicted "
                << predicted << ", measured " << measured << " (" << predicted / measured << ")\n";
    }
  }
  const std::string dir = fresh_temp_dir("tp_memory_qwen3") + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("tp=2") + "--set model.path=" + qwen3 +
                    " --set train.seq_len=256 --set train.batch_size=2 --set train.grad_accum=4"
                    " --set train.steps=2 --set train.peak_gflops=100 --set output.dir=" + dir + " 2>&1",
                &out),
            0)
      << out;
  ASSERT_EQ(run(std::string(MESHTRAIN_BINARY) + " plan --model " + dir +
                    "/model --cluster cpu --mesh tp=2 --seq 256 --micro-batch 2 --global-batch 8 --json 2>&1",
                &out),
            0)
      << out;
  const auto plan = nlohmann::json::parse(out).at("memory_bytes");
  const double predicted = plan.at("total").get<double>() - plan.at("items").value("overhead", 0.0);
  const auto summary = nlohmann::json::parse(read_file(dir + "/run_summary.json"));
  for (int rank = 0; rank < 2; ++rank) {
    const double measured = double(summary.at("memory_per_rank").at(size_t(rank)).at("peak_tensor_bytes").get<int64_t>());
    EXPECT_NEAR(predicted / measured, 1.0, 0.02) << "tp=2 rank " << rank << ": predicted " << predicted
                                                 << ", measured " << measured;
  }
}

}  // namespace
}  // namespace mt::testing

// Pipeline parallelism on real MPI ranks: pp=2, pp=4, and pp=2 with dp, fsdp and tp (up to
// pp2 x fsdp2 x tp2 on 8 ranks) under GPipe and 1F1B, and pp=2 (alone and with dp, fsdp or tp)
// under interleaved 1F1B with 2 chunks per stage, give the single-rank run's per-step losses, gradient
// norms, validation losses and final parameters (fp32, full and LoRA training, untied and tied
// embeddings); each stage stores only its units; the pipeline's timing is recorded per step and
// per rank; a checkpoint saved under pp (each stage writing its units) resumes under other layouts
// and exports, and a single rank's resumes on stages; a killed stage ends the job; splits that
// cannot be made are refused in one line. The stage split, what each stage holds, the chunks of a
// rank and the schedules' order (simulated across stages) are checked without MPI. (bf16:
// test_pipeline_bf16.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "mesh_runs.h"
#include "text_files.h"
#include "model/config.h"
#include "model/transformer.h"
#include "model/param_shapes.h"
#include "parallel/pipeline.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;
using parallel::PipelineSchedule, parallel::PipeOp;

// Two micro-batches per step, so a schedule has more than one micro-batch to order.
const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.grad_accum=2 --set train.seq_len=32 "
    "--set train.log_every=100 --set optim.warmup_steps=2 --set train.eval_every=3 ";

struct PipeCase {
  const char* mesh;
  const char* schedule;
};

class PipelineEquality : public ::testing::TestWithParam<PipeCase> {
 protected:
  std::string args() const {
    return std::string(kRun) + "--set train.pp_schedule=" + GetParam().schedule + " ";
  }
  std::string tag() const { return tag_of(GetParam().mesh) + "_" + GetParam().schedule; }
};

// The schedule goes to the pipeline run only: one rank has no stages to order (and refuses gpipe).
TEST_P(PipelineEquality, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_training("pp_full_" + tag(), train_command(""), kRun, train_command(GetParam().mesh), args(),
                       "/model/model.safetensors");
}

TEST_P(PipelineEquality, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_training("pp_lora_" + tag(), train_command(""), std::string(kRun) + kLoraAllTargets,
                       train_command(GetParam().mesh), args() + kLoraAllTargets, "/adapter/adapter_model.safetensors");
}

// The tiny default model has 4 blocks: pp=4 puts one on each stage.
INSTANTIATE_TEST_SUITE_P(Meshes, PipelineEquality,
                         ::testing::Values(PipeCase{"pp=2", "1f1b"}, PipeCase{"pp=2", "gpipe"},
                                           PipeCase{"pp=4", "1f1b"}, PipeCase{"pp=4", "gpipe"},
                                           PipeCase{"pp=2,dp=2", "1f1b"}, PipeCase{"pp=2,dp=2", "gpipe"},
                                           PipeCase{"pp=2,fsdp=2", "1f1b"}, PipeCase{"pp=2,fsdp=2", "gpipe"},
                                           PipeCase{"pp=2,tp=2", "1f1b"}, PipeCase{"pp=2,tp=2", "gpipe"},
                                           PipeCase{"pp=2,dp=2,tp=2", "1f1b"}, PipeCase{"pp=2,dp=2,tp=2", "gpipe"},
                                           PipeCase{"pp=2,fsdp=2,tp=2", "1f1b"}, PipeCase{"pp=2,fsdp=2,tp=2", "gpipe"}),
                         [](const auto& info) {
                           return tag_of(info.param.mesh) + "_" + info.param.schedule;
                         });

// QLoRA (issue 12) on the stages: the NF4 base's bytes and the adapters' gradients are the single
// rank's. The default MLP width is not whole NF4 blocks, so 384 keeps the rows unpadded; with
// updates linear in the gradient (eps = 1) the adapters must agree to rounding.
// Interleaved 1F1B (train.pp_virtual = 2): the tiny model's 4 blocks in 4 chunks, chunks 0 and 2
// on stage 0, 1 and 3 on stage 1; 4 micro-batches, so the schedule has two groups of pp.
const char* kInterleaved =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=2 --set train.grad_accum=4 --set train.seq_len=32 "
    "--set train.log_every=100 --set optim.warmup_steps=2 --set train.eval_every=3 ";

TEST(Pipeline, InterleavedMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tied = "--set model.tie_word_embeddings=true ";
  // One rank is given the same run without train.pp_virtual (refused without pp).
  const auto same = [](const std::string& tag, const std::string& extra, const std::string& file,
                       const std::string& mesh = "pp=2") {
    const std::string args = std::string(kInterleaved) + extra;
    expect_same_training(tag, train_command(""), args, train_command(mesh),
                         args + " --set train.pp_virtual=2 ", file);
  };
  same("pp_virtual_full", "--set output.checkpoint_every=6 ", "/model/model.safetensors");
  same("pp_virtual_lora", kLoraAllTargets, "/adapter/adapter_model.safetensors");
  same("pp_virtual_tied_full", tied, "/model/model.safetensors");
  same("pp_virtual_tied_lora", tied + kLoraAllTargets, "/adapter/adapter_model.safetensors");
  same("pp_virtual_dp", "", "/model/model.safetensors", "pp=2,dp=2");
  // Each stage's chunks gathered over fsdp, or split over tp, unit by unit.
  same("pp_virtual_fsdp", "", "/model/model.safetensors", "pp=2,fsdp=2");
  same("pp_virtual_tp_lora", kLoraAllTargets, "/adapter/adapter_model.safetensors", "pp=2,tp=2");

  // Each stage wrote the units of its chunks (Pipeline::holds through rank_chunks): stage 0 the
  // embedding and blocks 0 and 2, stage 1 blocks 1 and 3 and the head.
  const std::string dir = temp_dir_of("mesh_pp_virtual_full") + "/mesh";
  const std::string step = dir + "/checkpoints/step-000006";
  const std::string shard0 = read_file(step + "/shard-00000.safetensors");
  const std::string shard1 = read_file(step + "/shard-00001.safetensors");
  ASSERT_FALSE(shard0.empty());
  ASSERT_FALSE(shard1.empty());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.0.", "model.layers.2."}) {
    EXPECT_NE(shard0.find(name), std::string::npos) << name;
    EXPECT_EQ(shard1.find(name), std::string::npos) << name;
  }
  for (const char* name : {"lm_head.weight", "model.layers.1.", "model.layers.3."}) {
    EXPECT_NE(shard1.find(name), std::string::npos) << name;
    EXPECT_EQ(shard0.find(name), std::string::npos) << name;
  }

  // The pipeline's timing. Stage 0 sends, per micro-batch, chunk 0's and chunk 2's activations and
  // chunk 2's input gradient; stage 1 chunk 1's activations and gradient and chunk 3's gradient:
  // three residual streams of 2 x 32 x 128 floats each, 4 micro-batches a step.
  const int64_t per_step = 3 * 4 * (2 * 32 * 128 * 4);
  const auto sent = metric(dir, "pp_sent_bytes"), compute = metric(dir, "pp_compute_s");
  ASSERT_EQ(sent.size(), 6u);
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(int64_t(sent[i]), per_step) << "step " << i + 1;
    EXPECT_GT(compute[i], 0.0) << "step " << i + 1;
  }
  EXPECT_EQ(metric(dir, "pp_recv_wait_s").size(), 6u);
  EXPECT_EQ(metric(dir, "pp_send_wait_s").size(), 6u);
  // run_summary.json: each rank's sums over the 5 steps after the first; rank 0's time in the
  // pipeline lies within its steps' time.
  const auto summary = nlohmann::json::parse(read_file(dir + "/run_summary.json"));
  const auto& ranks = summary.at("pipeline_per_rank");
  ASSERT_EQ(ranks.size(), 2u) << summary.dump();
  const double timed = summary.at("timed_seconds").get<double>();
  for (int r = 0; r < 2; ++r) {
    const auto& t = ranks[size_t(r)];
    EXPECT_EQ(t.at("rank").get<int>(), r);
    EXPECT_EQ(t.at("stage").get<int>(), r);
    EXPECT_EQ(t.at("sent_bytes").get<int64_t>(), 5 * per_step);
    const double busy = t.at("compute_s").get<double>(), waiting = t.at("recv_wait_s").get<double>();
    EXPECT_GT(busy, 0.0);
    EXPECT_GE(waiting, 0.0);
    const double sending = t.at("send_wait_s").get<double>();
    EXPECT_GE(sending, 0.0);
    if (r == 0) {
      EXPECT_LT(busy + waiting + sending, timed) << t.dump();
    }
  }
}

TEST(Pipeline, QloraMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string qlora = std::string(kRun) + kLoraAllTargets + "--set lora.base_dtype=nf4 --set model.intermediate_size=384 ";
  expect_same_run("pp_qlora", qlora, "pp=2", "/adapter/adapter_model.safetensors");
  expect_same_run("pp_qlora_linear_dp", qlora + "--set optim.eps=1.0 --set optim.lr=0.5 ", "pp=2,dp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

TEST(Pipeline, TiedEmbeddingsAndAnExplicitSplitMatchOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The tied matrix is the first stage's embedding and the last stage's head: its two gradients
  // are summed between them.
  // (The one-rank run has no stages to split: train.pp_blocks without pp is refused.)
  const std::string args = std::string(kRun) + "--set model.tie_word_embeddings=true ";
  const std::string split = "--set train.pp_blocks=1,3 ";
  const auto same = [&](const std::string& tag, const std::string& a, const std::string& mesh, const char* file) {
    expect_same_training(tag, train_command(""), a, train_command(mesh), a + split, file);
  };
  same("pp_tied_full", args, "pp=2", "/model/model.safetensors");
  same("pp_tied_lora", args + kLoraAllTargets, "pp=2", "/adapter/adapter_model.safetensors");
  // The two copies split further: over tp by vocabulary rows, over fsdp by blocks.
  same("pp_tied_full_fsdp_tp", args, "pp=2,fsdp=2,tp=2", "/model/model.safetensors");
  same("pp_tied_lora_tp", args + kLoraAllTargets, "pp=2,tp=2", "/adapter/adapter_model.safetensors");
}

TEST(Pipeline, EachStageStoresOnlyItsUnits) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Rank 0 (stage 0 of blocks 1,3) reports the trainable parameters it stores: the embedding and
  // block 0's, not the whole model's.
  const RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  const std::vector<int64_t> blocks = {1, int64_t(cfg.model.num_hidden_layers) - 1};
  const std::vector<bool> held = parallel::stage_holds(cfg.model, blocks, 0);
  int64_t mine = 0, whole = 0;
  for (const ParamShape& p : llama_param_shapes(cfg.model, LoraConfig{})) {
    whole += p.numel();
    if (held[size_t(param_unit(p.name, cfg.model))]) mine += p.numel();
  }
  ASSERT_LT(mine, whole / 2);
  const std::string dir = fresh_temp_dir("pp_stage_memory") + "/run";
  std::string out;
  std::string args = kRun;
  args.append("--set train.pp_blocks=1,").append(std::to_string(blocks[1])).append(" --set output.dir=").append(dir);
  ASSERT_EQ(run(train_command("pp=2") + args, &out), 0) << out;
  std::string says = "(";
  says.append(std::to_string(mine)).append(" trainable on this rank)");
  EXPECT_NE(out.find(says), std::string::npos) << "expected " << mine << " of " << whole << "\n" << out;
}

TEST(Pipeline, CheckpointsResumeAcrossPipelineLayouts) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_resume_across("pp2_tp2_to_one", kRun, "pp=2,tp=2", "dp=1");
  expect_resume_across("pp2_tp2_to_fsdp2_pp2", kRun, "pp=2,tp=2", "pp=2,fsdp=2");
  expect_resume_across("pp2_tp2_to_fsdp4", kRun, "pp=2,tp=2", "fsdp=4");
  expect_resume_across("lora_pp2_fsdp2_to_tp2", std::string(kRun) + kLoraAllTargets, "pp=2,fsdp=2", "tp=2");
}

TEST(Pipeline, ActivationCheckpointingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Each stage's recompute of its forward meets the model's own per-block recompute.
  expect_same_run("pp_ckpt", std::string(kRun) + "--set train.activation_checkpointing=true ", "pp=4",
                  "/model/model.safetensors");
}

TEST(Pipeline, CheckpointUnderPpResumesOnOneRankAndExports) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("resume_pp2_to_one") + "/run";
  const std::string a = std::string(kRun) + "--set output.checkpoint_every=3 --set output.dir=" + dir;
  std::string out;
  ASSERT_EQ(run(train_command("pp=2") + a, &out), 0) << out;
  const auto full = losses(dir);
  ASSERT_EQ(full.size(), 6u);
  // Each stage wrote its own units' tensors: two shard files, neither the whole model.
  const std::string step = dir + "/checkpoints/step-000006";
  ASSERT_TRUE(fs::exists(step + "/shard-00000.safetensors"));
  ASSERT_TRUE(fs::exists(step + "/shard-00001.safetensors"));
  const std::string shard0 = read_file(step + "/shard-00000.safetensors");
  const std::string shard1 = read_file(step + "/shard-00001.safetensors");
  EXPECT_NE(shard0.find("model.embed_tokens.weight"), std::string::npos);
  EXPECT_EQ(shard0.find("lm_head.weight"), std::string::npos);
  EXPECT_NE(shard1.find("lm_head.weight"), std::string::npos);
  EXPECT_EQ(shard1.find("model.embed_tokens.weight"), std::string::npos);
  // The manifest records the stages' blocks (the default split of 4 blocks: 2 and 2).
  EXPECT_NE(read_file(step + "/manifest.json").find("\"pipeline_blocks\": [\n    2,\n    2\n  ]"), std::string::npos)
      << read_file(step + "/manifest.json");
  // The step-6 checkpoint, exported by one process, is the run's own export.
  ASSERT_EQ(run(std::string(MESHTRAIN_BINARY) + " export-checkpoint --checkpoint " + dir +
                "/checkpoints/step-000006 --out " + dir + "/exported", &out), 0) << out;
  const std::string ours = read_file(dir + "/exported/model.safetensors");
  EXPECT_FALSE(ours.empty()) << out;
  EXPECT_EQ(ours, read_file(dir + "/model/model.safetensors"));
  // Resumed at step 3 on one rank: steps 4..6 equal the pipeline's.
  fs::remove_all(dir + "/checkpoints/step-000006");
  fs::remove(dir + "/checkpoints/latest");
  ASSERT_EQ(run(train_command("") + a + " --set train.resume=latest", &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  const auto all = losses(dir);
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(all[3 + i], full[3 + i], 1e-5 * full[3 + i]) << "step " << 4 + i;
}

// The other way: a checkpoint a single rank saved (one shard file holding every unit) resumes
// with each stage taking its units from it, and continues as the uninterrupted single-rank run.
TEST(Pipeline, OneRankCheckpointResumesOnStages) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_resume_across("one_to_pp4", kRun, "dp=1", "pp=4");
  expect_resume_across("one_to_pp2_dp2", kRun, "dp=1", "pp=2,dp=2");
  expect_resume_across("lora_one_to_pp2_dp2", std::string(kRun) + kLoraAllTargets, "dp=1", "pp=2,dp=2");
}

TEST(Pipeline, KilledRankEndsTheJobAndTheLastCheckpointLoads) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_killed_rank_ends_job("pp", kRun, "pp=2");
}

TEST(Pipeline, DebugModeChecksCollectivesBesideSendsAndReceives) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Signature checks gather every rank's collective: the stages' sends and receives, which only
  // two ranks make, must not enter them (or the ranks would be out of step at once).
  const std::string dir = fresh_temp_dir("pp_debug") + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("pp=2,dp=2") + kRun + "--set train.debug_collectives=true --set output.dir=" + dir, &out), 0) << out;
  EXPECT_NE(out.find("done: 6 steps"), std::string::npos) << out;
}

// A stage stopped mid-run (SIGSTOP: alive, so mpirun sees nothing wrong) leaves its neighbour
// blocked in a receive or a collective; the watchdog there names it and ends the job.
TEST(Pipeline, StoppedStageEndsTheJobWithTheWatchdogsReport) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("pp_stopped") + "/run";
  const std::string args = std::string(kRun) +
                           " --set train.steps=100000 --set train.collective_timeout=3 --set output.dir=" + dir;
  const std::string script = dir + ".sh";
  std::ofstream(script)
      << "(" << train_command("pp=2") << args << " > " << dir << ".log 2>&1; echo $? > " << dir << ".rc) &\n"
      << "for i in $(seq 1 600); do [ -s " << dir << "/metrics.jsonl ] && break; sleep 0.1; done\n"
      << "pkill -STOP -n -f 'output.dir=" << dir << "$'\n"
      << "for i in $(seq 1 600); do [ -f " << dir << ".rc ] && break; sleep 0.1; done\n"
      << "pkill -9 -f 'output.dir=" << dir << "$'\n"
      << "exit 0\n";
  run("bash " + script);
  ASSERT_TRUE(fs::exists(dir + ".rc")) << "the job did not end within 60 s of a stage stopping";
  const BackgroundJob job = background_job(dir);
  EXPECT_NE(job.rc, 0);
  EXPECT_NE(job.log.find("stuck in"), std::string::npos) << job.log;
  EXPECT_NE(job.log.find("(train.collective_timeout)"), std::string::npos) << job.log;
  // The stopped stage is the newest rank, 1: stage 0 waits for its message (or, between steps, in
  // a collective).
  EXPECT_TRUE(job.log.find("rank 1 of pp never matched it") != std::string::npos ||
              job.log.find("never joined it") != std::string::npos) << job.log;
}

TEST(Pipeline, SplitsThatCannotBeMadeAreRefusedInOneLine) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string refused_dir = fresh_temp_dir("pp_refused") + "/run";
  struct Case {
    std::string mesh, args, says;
  };
  for (const Case& c : {Case{"pp=2", "--set train.pp_blocks=1,2", "sums to 3 blocks but the model has 4"},
                        Case{"pp=2", "--set train.pp_blocks=4", "gives 1 stages but the mesh has pp=2"},
                        Case{"pp=2", "--set train.pp_blocks=0,4", "every stage needs at least one block"},
                        Case{"pp=2", "--set train.pp_blocks=2,x", "expected block counts separated by commas"},
                        Case{"pp=2", "--set model.num_hidden_layers=1", "fewer than its stages"},
                        Case{"pp=2", "--set train.pp_virtual=2 --set train.pp_schedule=gpipe",
                             "train.pp_virtual = 2 needs train.pp_schedule = \"1f1b\""},
                        Case{"pp=2", "--set train.pp_virtual=2 --set train.grad_accum=3",
                             "needs train.grad_accum (3 micro-batches) to be a multiple of mesh pp (2)"},
                        Case{"dp=1", "--set train.pp_virtual=2", "train.pp_virtual = 2 needs mesh pp > 1"},
                        Case{"dp=1", "--set train.pp_blocks=1,3", "train.pp_blocks = \"1,3\" needs mesh pp > 1"},
                        Case{"dp=1", "--set train.pp_schedule=gpipe", "train.pp_schedule = \"gpipe\" needs mesh pp > 1"},
                        Case{"pp=2", "--set train.pp_virtual=2 --set model.num_hidden_layers=3",
                             "mesh pp=2 x train.pp_virtual=2 makes 4 chunks, but the model has 3 blocks"},
                        Case{"pp=2", "--set train.pp_virtual=2 --set train.pp_blocks=2,2",
                             "gives 2 chunks but mesh pp=2 x train.pp_virtual=2 makes 4"}}) {
    std::string out, args = kRun;
    args.append(c.args).append(" --set output.dir=").append(refused_dir);
    EXPECT_NE(run(train_command(c.mesh) + args, &out), 0);
    EXPECT_NE(out.find(c.says), std::string::npos) << c.mesh << " " << c.args << "\n" << out;
  }
}

TEST(PipelineSplit, BalancedSplitCountsTheHeadWithTheLastStage) {
  ModelConfig c;
  c.hidden_size = 128, c.intermediate_size = 344, c.num_attention_heads = 8, c.num_key_value_heads = 4;
  c.num_hidden_layers = 4, c.vocab_size = 256;
  EXPECT_EQ(parallel::pipeline_blocks(c, 2, ""), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(parallel::pipeline_blocks(c, 4, ""), (std::vector<int64_t>{1, 1, 1, 1}));
  // A head as large as several blocks leaves the last stage fewer of them.
  c.vocab_size = 32000;  // 4.1M head parameters against 181k per block
  c.num_hidden_layers = 40;
  const auto blocks = parallel::pipeline_blocks(c, 2, "");
  EXPECT_EQ(blocks[0] + blocks[1], 40);
  EXPECT_GT(blocks[0], blocks[1] + 10);
  EXPECT_EQ(parallel::pipeline_blocks(c, 2, "30,10"), (std::vector<int64_t>{30, 10}));
  const auto last = parallel::stage_units({2, 3}, 1), first = parallel::stage_units({2, 3}, 0);
  EXPECT_EQ(first.first, 0);
  EXPECT_EQ(first.last, 2);
  EXPECT_EQ(last.first, 3);
  EXPECT_EQ(last.last, 6);  // blocks 2..4 (units 3..5) and the head (unit 6)
}

TEST(PipelineSplit, EachStageHoldsItsUnitsAndTheLastATiedEmbedding) {
  ModelConfig c;
  c.num_hidden_layers = 5;
  using Held = std::vector<bool>;
  EXPECT_EQ(parallel::stage_holds(c, {2, 3}, 0), (Held{true, true, true, false, false, false, false}));
  EXPECT_EQ(parallel::stage_holds(c, {2, 3}, 1), (Held{false, false, false, true, true, true, true}));
  EXPECT_EQ(parallel::stage_holds(c, {1, 3, 1}, 1), (Held{false, false, true, true, true, false, false}));
  c.tie_word_embeddings = true;  // the head is the embedding: the last stage keeps a copy
  EXPECT_EQ(parallel::stage_holds(c, {2, 3}, 1), (Held{true, false, false, true, true, true, true}));
  EXPECT_EQ(parallel::stage_holds(c, {1, 3, 1}, 1), (Held{false, false, true, true, true, false, false}));
}

TEST(PipelineSplit, OneFOneBHoldsAtMostStagesMinusStageMicroBatches) {
  const int p = 4;
  const int64_t m = 8;
  for (int s = 0; s < p; ++s) {
    for (auto schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe}) {
      const auto order = parallel::pipeline_order(schedule, p, s, m);
      ASSERT_EQ(order.size(), size_t(2 * m));
      int64_t in_flight = 0, peak = 0, next_backward = 0, next_forward = 0;
      for (const PipeOp& op : order) {
        if (op.forward) EXPECT_EQ(op.micro, next_forward++);
        else EXPECT_EQ(op.micro, next_backward++);  // gradients accumulate in micro-batch order
        in_flight += op.forward ? 1 : -1;
        peak = std::max(peak, in_flight);
        EXPECT_GE(in_flight, 0);
      }
      EXPECT_EQ(peak, schedule == PipelineSchedule::gpipe ? m : int64_t(p - s)) << "stage " << s;
    }
  }
}

// Runs every stage's order together, as the ranks do: each op once the outputs it must see
// received first have been (pipeline_buffers' release_before_forward: a forward waits for the
// sends of the outputs before it to complete, i.e. for the next stage's op to have received them)
// and what it receives has been sent (other sends never wait): every op runs (no stage waits
// forever). `chunks` per stage; chunk c of stage s is the model's chunk c * p + s.
void expect_orders_run_to_the_end(PipelineSchedule schedule, int p, int chunks, int64_t m) {
  std::vector<std::vector<PipeOp>> orders;
  std::vector<parallel::PipelineBuffers> buffers;
  for (int s = 0; s < p; ++s) {
    orders.push_back(parallel::pipeline_order(schedule, p, s, m, chunks));
    buffers.push_back(parallel::pipeline_buffers(schedule, p, s, m, chunks));
  }
  const int last = p * chunks - 1;
  // (forward, model chunk, micro-batch) of what was sent, and of what its receiver has received.
  std::set<std::tuple<bool, int, int64_t>> sent, received;
  std::vector<size_t> next(size_t(p), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      for (size_t& at = next[size_t(s)]; at < orders[size_t(s)].size(); ++at, moved = true) {
        const PipeOp& op = orders[size_t(s)][at];
        const int c = op.chunk * p + s;
        bool waits = false;
        for (size_t k : buffers[size_t(s)].release_before_forward[at]) {
          const PipeOp& out = orders[size_t(s)][k];
          waits = waits || !received.count({true, out.chunk * p + s, out.micro});
        }
        if (waits) break;
        if (op.forward) {
          if (c > 0 && !sent.count({true, c - 1, op.micro})) break;
          if (c > 0) received.insert({true, c - 1, op.micro});
          sent.insert({c != last, c, op.micro});  // the last chunk's backward runs with its forward
        } else if (c != last) {
          if (!sent.count({false, c + 1, op.micro})) break;
          received.insert({false, c + 1, op.micro});
          sent.insert({false, c, op.micro});
        }
      }
    }
  }
  for (int s = 0; s < p; ++s)
    EXPECT_EQ(next[size_t(s)], orders[size_t(s)].size())
        << "stage " << s << " of " << p << " waits forever (" << chunks << " chunks, " << m << " micro-batches)";
}

TEST(PipelineSplit, EveryScheduleRunsToTheEndOnEveryStage) {
  for (int p : {2, 3, 4})
    for (int64_t m : {int64_t(p), int64_t(2 * p), int64_t(4 * p)}) {
      expect_orders_run_to_the_end(PipelineSchedule::gpipe, p, 1, m);
      expect_orders_run_to_the_end(PipelineSchedule::one_f_one_b, p, 1, m);
      for (int v : {2, 3}) expect_orders_run_to_the_end(PipelineSchedule::one_f_one_b, p, v, m);
    }
}

TEST(PipelineSplit, InterleavedOrderKeepsMicroBatchOrderPerChunkAndBoundsWhatIsInFlight) {
  for (int p : {2, 4})
    for (int v : {2, 3})
      for (int64_t m : {int64_t(p), int64_t(2 * p), int64_t(4 * p)})
        for (int s = 0; s < p; ++s) {
          const auto order = parallel::pipeline_order(PipelineSchedule::one_f_one_b, p, s, m, v);
          const int64_t total = m * v;
          ASSERT_EQ(order.size(), size_t(2 * total));
          std::map<int, int64_t> next_forward, next_backward;
          int64_t in_flight = 0, peak = 0, before_first_backward = -1;
          for (size_t i = 0; i < order.size(); ++i) {
            const PipeOp& op = order[i];
            ASSERT_GE(op.chunk, 0);
            ASSERT_LT(op.chunk, v);
            // Each chunk's forwards, and its backwards, go in micro-batch order: both ends of every
            // (chunk, direction) stream see the same order, and gradients accumulate as on one rank.
            if (op.forward) EXPECT_EQ(op.micro, next_forward[op.chunk]++);
            else EXPECT_EQ(op.micro, next_backward[op.chunk]++);
            if (!op.forward && before_first_backward < 0) before_first_backward = int64_t(i);
            in_flight += op.forward ? 1 : -1;
            peak = std::max(peak, in_flight);
          }
          for (int c = 0; c < v; ++c) EXPECT_EQ(next_backward[c], m);
          // Megatron's warm-up: 2 (p - 1 - s) + (v - 1) p forwards, then one more before the
          // first backward; that many (chunk, micro-batch) inputs at most are kept at once.
          const int64_t warm = std::min<int64_t>(2 * (p - 1 - s) + (v - 1) * p, total);
          const int64_t expected = std::min(warm + 1, total);
          EXPECT_EQ(before_first_backward, expected) << "p " << p << " v " << v << " m " << m << " stage " << s;
          EXPECT_EQ(peak, expected) << "p " << p << " v " << v << " m " << m << " stage " << s;
          // The first forwards take pp micro-batches through chunk 0, then the same through chunk 1.
          if (m >= p && warm >= 2 * p) {
            for (int i = 0; i < 2 * p; ++i) EXPECT_EQ(order[size_t(i)], (PipeOp{true, i % p, i / p}));
          }
        }
}

TEST(PipelineSplit, RankChunksAreEveryPpthChunk) {
  // 4 blocks in 4 chunks over 2 stages: units 0 (embedding) .. 5 (head).
  const auto zero = parallel::rank_chunks({1, 1, 1, 1}, 2, 0), one = parallel::rank_chunks({1, 1, 1, 1}, 2, 1);
  ASSERT_EQ(zero.size(), 2u);
  ASSERT_EQ(one.size(), 2u);
  const auto span = [](const UnitSpan& u) { return std::pair{u.first, u.last}; };
  EXPECT_EQ(span(zero[0]), std::pair(0, 1));  // embedding, block 0
  EXPECT_EQ(span(zero[1]), std::pair(3, 3));  // block 2
  EXPECT_EQ(span(one[0]), std::pair(2, 2));   // block 1
  EXPECT_EQ(span(one[1]), std::pair(4, 5));   // block 3, head
  // What each stage stores and which stage writes each unit follow the chunks; a tied embedding's
  // copy is on the stage of the last chunk.
  ModelConfig c;
  using Held = std::vector<bool>;
  EXPECT_EQ(parallel::stage_holds(c, {1, 1, 1, 1}, 0, 2), (Held{true, true, false, true, false, false}));
  EXPECT_EQ(parallel::stage_holds(c, {1, 1, 1, 1}, 1, 2), (Held{false, false, true, false, true, true}));
  for (int unit = 0; unit <= 5; ++unit)
    EXPECT_EQ(parallel::stage_of_unit({1, 1, 1, 1}, unit, 2), (unit == 2 || unit >= 4) ? 1 : 0) << unit;
  c.tie_word_embeddings = true;
  EXPECT_EQ(parallel::stage_holds(c, {1, 1, 1, 1}, 1, 2), (Held{true, false, true, false, true, true}));
  // One chunk per stage is the stage's units.
  const auto plain = parallel::rank_chunks({2, 3}, 2, 1);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(span(plain[0]), span(parallel::stage_units({2, 3}, 1)));
}

}  // namespace
}  // namespace mt::testing

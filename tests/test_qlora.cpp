// QLoRA through the real binary: LoRA on a 4-bit NF4 base (lora.base_dtype = "nf4") trains on one
// rank beside the bf16-base run with the same data and seed, the pretrained stories260K keeps its
// perplexity on a held-out text with its base in NF4, the merged export is the dequantised base
// plus the adapter, a base without LoRA is refused, and `meshtrain shard` counts NF4 bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "io/safetensors.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

const char* kRun =
    "--set train.steps=12 --set train.peak_gflops=100 --set train.batch_size=4 --set train.seq_len=64 "
    "--set train.log_every=100 --set optim.warmup_steps=2 --set optim.lr=1e-2 --set lora.enabled=true "
    "--set lora.random_base=true --set lora.rank=4 ";

// The paths of this process's files and runs, in one scratch directory.
std::string tmp(const std::string& name) {
  static const std::string dir = fresh_temp_dir("qlora");
  return dir + "/" + name;
}

TEST(Qlora, TrainsOnOneRankBesideTheBf16Base) {
  const std::string bf = tmp("bf16"), q = tmp("nf4");
  fs::remove_all(bf), fs::remove_all(q);
  std::string out;
  ASSERT_EQ(run(train_command("") + kRun + "--set output.dir=" + bf, &out), 0) << out;
  ASSERT_EQ(run(train_command("") + kRun + "--set lora.base_dtype=nf4 --set output.dir=" + q, &out), 0) << out;
  const auto a = losses(bf), b = losses(q);
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);
  std::printf("step  bf16-base loss  nf4-base loss\n");
  for (size_t i = 0; i < a.size(); ++i) std::printf("%4zu  %14.4f  %13.4f\n", i + 1, a[i], b[i]);
  // Converges: the adapters lower the loss as they do on the bf16 base...
  EXPECT_LT(b.back(), b.front() - 0.2);
  EXPECT_NEAR(b.back(), a.back(), 0.05 * a.back());
  // ...but on another (quantised) base: the losses are not the bf16 run's.
  EXPECT_NE(a.front(), b.front());
  // The adapter is a PEFT adapter of the same shapes as the bf16 run's (for the unquantised base).
  SafetensorsFile fa(bf + "/adapter/adapter_model.safetensors"), fb(q + "/adapter/adapter_model.safetensors");
  EXPECT_EQ(fa.names(), fb.names());
}

TEST(Qlora, Nf4BaseNeedsLora) {
  auto r = run_command(train_command("") + "--set train.steps=1 --set lora.base_dtype=nf4 --set output.dir=" + tmp("nolora"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("lora.base_dtype = \"nf4\" quantises a frozen base: it needs lora.enabled = true"),
            std::string::npos)
      << r.output;
}

// A short story in the style stories260K was trained on, written for these tests (not from its
// data); scripts/qlora_figures.sh evaluates on it too.
std::string held_out() { return std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/heldout_story.txt"; }

double perplexity_of(const std::string& output) {
  const size_t at = output.rfind("perplexity ");
  return at == std::string::npos ? -1.0 : std::atof(output.c_str() + at + 11);
}

TEST(Qlora, PretrainedPerplexityWithAnNf4BaseIsCloseToBf16) {
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/";
  if (!fs::exists(data + "stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const std::string eval = "eval -m " + data + "stories260K.bin --tokenizer " + data + "tok512.bin -d " + held_out() +
                           " --seq-len 128 --precision bf16";
  const auto bf = run_meshtrain(eval), q = run_meshtrain(eval + " --base-dtype nf4");
  ASSERT_EQ(bf.code, 0) << bf.output;
  ASSERT_EQ(q.code, 0) << q.output;
  const double pb = perplexity_of(bf.output), pq = perplexity_of(q.output);
  std::printf("stories260K held-out perplexity: bf16 base %.3f, nf4 base %.3f (%+.2f%%)\n", pb, pq,
              100 * (pq / pb - 1));
  ASSERT_GT(pb, 1.0);
  EXPECT_NE(pb, pq);                // the base really is quantised
  EXPECT_LT(std::abs(pq / pb - 1), 0.25);  // and NF4 keeps the model working
}

TEST(Qlora, MergedExportIsTheDequantisedBasePlusTheAdapter) {
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/";
  if (!fs::exists(data + "stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const std::string run_dir = tmp("s260"), cfg = tmp("s260.toml"), merged = tmp("merged"), plain = tmp("plain");
  fs::remove_all(run_dir), fs::remove_all(merged), fs::remove_all(plain);
  std::ofstream(cfg) << "[model]\npath = \"" << data << "stories260K.bin\"\n[data]\ntokenizer = \"" << data
                     << "tok512.bin\"\n";
  std::string out;
  ASSERT_EQ(run(train_command("") + "--config " + cfg + " " + kRun +
                    "--set lora.random_base=false --set train.steps=4 --set lora.base_dtype=nf4 --set output.dir=" + run_dir,
                &out), 0) << out;
  const std::string adapter = run_dir + "/adapter";
  auto r = run_meshtrain("export -m " + data + "stories260K.bin --adapter " + adapter + " --base-dtype nf4 --merged " + merged);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_meshtrain("export -m " + data + "stories260K.bin --adapter " + adapter + " --merged " + plain);
  ASSERT_EQ(r.code, 0) << r.output;
  // The merged model evaluates as the NF4 base with the adapter does (bf16 rounding apart).
  const std::string eval = " --tokenizer " + data + "tok512.bin -d " + held_out() + " --seq-len 128";
  const auto m = run_meshtrain("eval -m " + merged + eval), q = run_meshtrain("eval -m " + data + "stories260K.bin --adapter " + adapter + " --base-dtype nf4" + eval),
             p = run_meshtrain("eval -m " + plain + eval);
  ASSERT_EQ(m.code, 0) << m.output;
  ASSERT_EQ(q.code, 0) << q.output;
  ASSERT_EQ(p.code, 0) << p.output;
  const double pm = perplexity_of(m.output), pq = perplexity_of(q.output), pp = perplexity_of(p.output);
  std::printf("perplexity: merged (nf4 base dequantised + adapter) %.4f, nf4 base + adapter %.4f, bf16 base + adapter merged %.4f\n",
              pm, pq, pp);
  EXPECT_NEAR(pm, pq, 0.01 * pq);
  EXPECT_NE(pm, pp);
}

TEST(Qlora, ShardCountsNf4BytesAndCutsBetweenRows) {
  // Llama 3.1 405B's base: ~810 GB in bf16, ~216 GB with the projections in NF4 (~4.13 bits).
  auto bytes = [](const std::string& dtype) {
    auto r = run_meshtrain("shard --preset llama3-405b --mesh dp=1 --json --set lora.enabled=true --set lora.base_dtype=" + dtype);
    EXPECT_EQ(r.code, 0) << r.output;
    const auto b = nlohmann::json::parse(r.output)["ranks"][0]["bytes"];
    return std::pair<double, double>(b["weights_bf16"].get<double>(), b["weights_nf4"].get<double>());
  };
  const auto [bf, none] = bytes("bf16");
  const auto [rest, nf4] = bytes("nf4");
  std::printf("405B base: bf16 %.1f GB, nf4 %.1f GB (projections %.1f GB)\n", bf / 1e9, (rest + nf4) / 1e9, nf4 / 1e9);
  EXPECT_EQ(none, 0.0);
  EXPECT_NEAR(bf / 1e9, 812.3, 1.0);
  EXPECT_NEAR((rest + nf4) / 1e9, 216.3, 1.0);
  EXPECT_NEAR((bf - rest) / nf4, 16.0 / 4.129, 0.01);  // the projections alone
  // The layout: fsdp cuts the column-parallel projections between rows, and they show as NF4.
  auto r = run_meshtrain("shard --mesh fsdp=2,tp=2 --set lora.enabled=true --set lora.base_dtype=nf4 --set model.intermediate_size=256");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.*.self_attn.q_proj.weight  x 4 layers\n  shape [128, 128]  spec ((tp, fsdp), "
                          "None)  local [32, 128]  frozen nf4"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nf4 weights per rank"), std::string::npos) << r.output;
}

// The run's first line says what trains: QLoRA, not plain LoRA, over an NF4 base (issue 33: it read
// "LoRA training, bf16 mixed" without a word of NF4).
TEST(Qlora, TheRunSaysItIsQlora) {
  const std::string dir = fresh_temp_dir("qlora_log");
  auto r = run_meshtrain("train --set lora.enabled=true --set lora.random_base=true --set lora.base_dtype=nf4 "
                         "--set train.steps=1 --set train.peak_gflops=100 --out " + dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("meshtrain: QLoRA (an NF4 base) training, bf16 mixed"), std::string::npos) << r.output;
  // And its closing line and summary, where the figures are read.
  EXPECT_NE(r.output.find("done: 1 steps of QLoRA (an NF4 base) training, final loss"), std::string::npos) << r.output;
  const nlohmann::json s = nlohmann::json::parse(read_file(dir + "/run/run_summary.json"));
  EXPECT_EQ(s.value("mode", ""), "QLoRA (an NF4 base)") << s.dump(1);
}

}  // namespace
}  // namespace mt::testing

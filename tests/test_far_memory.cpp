// Host code never reads device memory: training (full, LoRA, QLoRA), checkpoint save and resume,
// the PEFT adapter, the merged HF model and GGUF exports, and the split-units path of pipeline
// stages all run on a backend whose memory faults on any host access (tests/far_memory_backend.h)
// and give the CPU backend's results bit for bit (its kernels are the CPU's).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backend/device_buffer.h"
#include "far_memory_backend.h"
#include "io/gguf_export.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/peft_config.h"
#include "io/pretrained.h"
#include "model/generate.h"
#include "model/transformer.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::FarMemoryBackend;

const std::string kStories = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/stories260K.bin";

TEST(FarMemory, HostReadsOfItsMemoryFaultAndTheInterfaceMovesTheBytes) {
  FarMemoryBackend far;
  DeviceBuffer b(far, DType::f32, 64);
  std::vector<float> in(64), out(64, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.5f;
  far.copy_from_host(b.tensor(), in.data());
  DeviceBuffer c(far, DType::f32, 64);
  far.copy(c.tensor(), b.tensor());
  far.copy_to_host(out.data(), c.tensor());
  EXPECT_EQ(out, in);
  EXPECT_EQ(far.host_readable(b.tensor()), nullptr);
  // What the tests below rely on: a host read of a tensor's data is a crash, not a wrong value.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        volatile float x = *b.as<float>();
        (void)x;
      },
      "");
  // A tensor of host memory is refused, as every backend refuses another device's tensor.
  EXPECT_THROW(far.copy_to_host(out.data(), cpu_backend().view(in.data(), DType::f32, 1, 64)), Error);
}

// Every .safetensors and .gguf file under dir, by relative path, with its bytes.
std::map<std::string, std::string> weight_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".safetensors" && ext != ".gguf")) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out[fs::relative(e.path(), dir).string()] = ss.str();
  }
  return out;
}

enum class Kind { full, lora, qlora };

RunConfig run_config(Kind kind, const std::string& name) {
  RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  cfg.train.steps = 4;
  cfg.train.seq_len = 32;
  cfg.train.batch_size = 2;
  cfg.train.grad_accum = 2;
  cfg.train.log_every = 100;
  cfg.train.peak_gflops = 100.0f;
  cfg.output.checkpoint_every = 2;
  cfg.output.keep_checkpoints = 4;
  if (kind != Kind::full) {
    cfg = parse_run_config(default_run_config_toml(), {"model.path=" + kStories}, "<test>");
    cfg.train.steps = 4, cfg.train.seq_len = 32, cfg.train.batch_size = 2, cfg.train.grad_accum = 2;
    cfg.train.log_every = 100, cfg.train.peak_gflops = 100.0f;
    cfg.output.checkpoint_every = 2, cfg.output.keep_checkpoints = 4;
    cfg.lora.enabled = true;
    if (kind == Kind::qlora) cfg.lora.base_dtype = "nf4";
  }
  cfg.data.val_fraction = 0.0f;  // no validation passes: the steps are what is compared
  cfg.output.dir = testing::fresh_temp_dir(name) + "/run";
  return cfg;
}

// The same run on the CPU backend and on far memory: equal losses and equal weight files
// (checkpoints' shards and the exported model or adapter), then a far-memory resume from the
// step-2 checkpoint continues exactly like the uninterrupted run.
void expect_far_run_equals_cpu(Kind kind, const std::string& name) {
  std::ostringstream log;
  const RunConfig on_cpu = run_config(kind, "far_" + name + "_cpu");
  const TrainSummary cpu = train(on_cpu, log, cpu_backend());
  ASSERT_EQ(cpu.losses.size(), 4u);

  FarMemoryBackend far;
  const RunConfig on_far = run_config(kind, "far_" + name + "_far");
  const TrainSummary got = train(on_far, log, far);
  EXPECT_EQ(got.losses, cpu.losses);
  // The run lived in far memory (its parameters alone are more than this) and freed all of it.
  EXPECT_GT(far.peak_bytes(), size_t(100000));
  EXPECT_EQ(far.bytes_in_use(), 0u);
  const auto cpu_files = weight_files(on_cpu.output.dir), far_files = weight_files(on_far.output.dir);
  // Two checkpoints of one shard file each, and the exported weights.
  EXPECT_EQ(cpu_files.size(), 3u);
  ASSERT_EQ(far_files.size(), cpu_files.size());
  for (const auto& [path, bytes] : cpu_files) {
    ASSERT_TRUE(far_files.count(path)) << path;
    EXPECT_TRUE(far_files.at(path) == bytes) << path << " differs on far memory";
  }

  RunConfig resumed = run_config(kind, "far_" + name + "_resumed");
  fs::create_directories(resumed.output.dir + "/checkpoints");
  fs::copy(on_far.output.dir + "/checkpoints/step-000002", resumed.output.dir + "/checkpoints/step-000002",
           fs::copy_options::recursive);
  resumed.train.resume = "latest";
  const TrainSummary tail = train(resumed, log, far);
  ASSERT_EQ(tail.losses.size(), 2u) << log.str();
  EXPECT_EQ(tail.losses[0], cpu.losses[2]);
  EXPECT_EQ(tail.losses[1], cpu.losses[3]);
  const std::string exported = kind == Kind::full ? "model/model.safetensors" : "adapter/adapter_model.safetensors";
  ASSERT_TRUE(cpu_files.count(exported)) << exported;
  EXPECT_TRUE(weight_files(resumed.output.dir).at(exported) == cpu_files.at(exported));
}

TEST(FarMemory, FullTrainingCheckpointResumeAndExportEqualTheCpu) { expect_far_run_equals_cpu(Kind::full, "full"); }
TEST(FarMemory, LoraTrainingCheckpointResumeAndAdapterEqualTheCpu) { expect_far_run_equals_cpu(Kind::lora, "lora"); }
TEST(FarMemory, QloraTrainingCheckpointResumeAndAdapterEqualTheCpu) {
  expect_far_run_equals_cpu(Kind::qlora, "qlora");
}

// `meshtrain export`'s path on a backend: the base and a trained adapter loaded, the GGUF adapter
// written, the adapter merged (into the NF4 round trip of the base for a QLoRA adapter), then the
// merged HF model and GGUF files (f32 and q8_0) written.
std::map<std::string, std::string> exports(Backend& backend, const std::string& adapter, bool qlora,
                                           const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  LoraConfig lora = read_peft_config(adapter);
  auto model = load_pretrained(kStories, Precision::fp32, lora, 0, backend);
  load_peft_adapter(adapter, *model);
  if (qlora) model->round_trip_nf4();
  export_gguf_lora(*model, (dir / "adapter.gguf").string(), "stories260K");
  model->merge_adapters();
  save_base_model(*model, (dir / "merged").string(), ModelOrigin{kStories, {}});
  export_gguf_model(*model, (dir / "model-f32.gguf").string(), nullptr, GgufDtype::f32);
  export_gguf_model(*model, (dir / "model-q8_0.gguf").string(), nullptr, GgufDtype::q8_0);
  return weight_files(dir);
}

TEST(FarMemory, MergedHfAndGgufExportsEqualTheCpu) {
  std::ostringstream log;
  const RunConfig cfg = run_config(Kind::lora, "far_export_run");
  train(cfg, log, cpu_backend());
  const std::string adapter = cfg.output.dir + "/adapter";
  const fs::path scratch = testing::fresh_temp_dir("far_exports");
  for (bool qlora : {false, true}) {
    const auto cpu = exports(cpu_backend(), adapter, qlora, scratch / "cpu");
    FarMemoryBackend far;
    const auto got = exports(far, adapter, qlora, scratch / "far");
    EXPECT_EQ(cpu.size(), 4u);  // adapter.gguf, merged/model.safetensors, two GGUF models
    ASSERT_EQ(got.size(), cpu.size());
    for (const auto& [path, bytes] : cpu) EXPECT_TRUE(got.at(path) == bytes) << path << (qlora ? " (QLoRA)" : "");
  }
}

// eval's and generate's paths: a loss without gradients and sampled decoding over a KV cache.
TEST(FarMemory, EvaluationAndSampledDecodingEqualTheCpu) {
  FarMemoryBackend far;
  auto on_cpu = load_pretrained(kStories, Precision::bf16, LoraConfig{}, 0, cpu_backend());
  auto on_far = load_pretrained(kStories, Precision::bf16, LoraConfig{}, 0, far);
  std::vector<int32_t> tokens(64), targets(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 11) % 512), targets[i] = int32_t((i * 13 + 1) % 512);
  ModelInput in;
  in.tokens = tokens.data(), in.targets = targets.data(), in.B = 2, in.T = 32;
  const LossSum a = on_cpu->forward_loss(in), b = on_far->forward_loss(in);
  EXPECT_EQ(a.sum, b.sum);
  EXPECT_EQ(a.count, b.count);
  GenerateOptions opt;
  opt.max_new_tokens = 24, opt.temperature = 0.8f, opt.top_p = 0.9f, opt.seed = 5;
  const std::vector<int32_t> prompt = {1, 40, 80, 120};
  EXPECT_EQ(generate(*on_far, prompt, opt), generate(*on_cpu, prompt, opt));
}

// A pipeline stage's path: the model run as two spans of units whose cut is a device tensor,
// copied in and out by the backend (no host pointer), gives forward_backward's loss and gradients.
TEST(FarMemory, SplitUnitsChainThroughDeviceTensors) {
  ModelConfig c = parse_run_config(default_run_config_toml(), {}, "<test>").model;
  FarMemoryBackend far;
  const int64_t B = 2, T = 16, L = c.num_hidden_layers;
  std::vector<int32_t> tokens(size_t(B * T)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7) % 256), targets[i] = int32_t((i * 5 + 3) % 256);
  ModelInput in;
  in.tokens = tokens.data(), in.targets = targets.data(), in.B = B, in.T = T;

  Transformer whole(c, Precision::fp32, LoraConfig{}, true, cpu_backend());
  whole.init_weights(3);
  const LossSum expected = whole.forward_backward(in, 1.0f);

  Transformer split(c, Precision::fp32, LoraConfig{}, true, far);
  split.init_weights(3);
  DeviceBuffer cut(far, DType::f32, B * T * c.hidden_size), grad(far, DType::f32, B * T * c.hidden_size);
  UnitSpan front{0, int(L / 2), {}, cut.tensor(), grad.tensor(), {}};
  UnitSpan back{int(L / 2) + 1, int(L) + 1, cut.tensor(), {}, {}, grad.tensor()};
  split.run_units(in, front, false, 1.0f);
  const LossSum got = split.run_units(in, back, true, 1.0f);
  split.run_units(in, front, true, 1.0f);
  EXPECT_EQ(got.sum, expected.sum);
  EXPECT_EQ(got.count, expected.count);
  for (size_t i = 0; i < whole.base().params().size(); ++i) {
    const Param& p = whole.base().params()[i];
    if (!p.grad) continue;
    std::vector<float> ga(size_t(p.numel)), gb(ga.size());
    cpu_backend().copy_to_host(ga.data(), p.grad_tensor());
    far.copy_to_host(gb.data(), split.base().params()[i].grad_tensor());
    EXPECT_EQ(ga, gb) << p.name;
  }
}

}  // namespace
}  // namespace mt

// lora.train_router in the files users bring and take away: a mixture of experts' trained routers
// are PEFT's modules_to_save = ["gate"]. Loaded from a model directory, each router's copy starts
// as the router; the adapter directory says modules_to_save and holds the copy under the router's
// own name (as PEFT's get_peft_model_state_dict saves it), and reads back into the copy; merging
// puts the copy in the router's place; the GGUF adapter export and a dense model refuse it in one
// line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.h"
#include "io/gguf_export.h"
#include "io/peft.h"
#include "io/peft_config.h"
#include "io/pretrained.h"
#include "io/safetensors_index.h"
#include "model/param_shapes.h"
#include "moe_model_dir.h"
#include "train/run_config.h"

namespace mt::testing {
namespace {

const char* kRouter = "model.layers.0.mlp.gate.weight";
const char* kCopy = "model.layers.0.mlp.gate.modules_to_save.weight";

LoraConfig router_lora() {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.train_router = true;
  lora.targets = {"q", "v", "gate", "up", "down"};
  return lora;
}

std::vector<float> values_of(ParamStore& store, const std::string& name) {
  const Param& p = store.get(name);
  std::vector<float> v(size_t(p.numel));
  store.get_values(p, v.data());
  return v;
}

TEST(MoeRouterPeft, TheCopyStartsAsTheLoadedRouterAndTravelsAsModulesToSave) {
  const std::string dir = moe_model_dir("qwen3_moe", "router_peft");
  auto model = load_pretrained(dir, Precision::fp32, router_lora(), 3);
  const std::vector<float> router = values_of(model->base(), kRouter);
  EXPECT_EQ(values_of(model->adapters(), kCopy), router);  // after the base was read, not before

  // Trained: the copy moves away from the router.
  Param& copy = model->adapters().get(kCopy);
  std::vector<float> trained = router;
  for (size_t i = 0; i < trained.size(); ++i) trained[i] += 0.01f * float(int(i % 7) - 3);
  model->adapters().set_values(copy, trained.data());

  const std::string out = fresh_temp_dir("router_peft_out") + "/adapter";
  save_peft_adapter(*model, out, dir);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(out + "/adapter_config.json"));
  EXPECT_EQ(config["modules_to_save"], nlohmann::json::array({"gate"}));
  const SafetensorsCheckpoint file(out + "/adapter_model.safetensors");
  for (const std::string& name : file.names()) EXPECT_EQ(name.find("modules_to_save"), std::string::npos) << name;
  ASSERT_TRUE(file.contains(std::string("base_model.model.") + kRouter));
  std::vector<float> saved(trained.size());
  file.read_f32(std::string("base_model.model.") + kRouter, saved.data());
  EXPECT_EQ(saved, trained);

  // Read back: the config says the routers are trained, the copy gets the saved values.
  const LoraConfig read = read_peft_config(out);
  EXPECT_TRUE(read.train_router);
  auto back = load_pretrained(dir, Precision::fp32, read, 9);
  load_peft_adapter(out, *back);
  EXPECT_EQ(values_of(back->adapters(), kCopy), trained);
  EXPECT_EQ(values_of(back->base(), kRouter), router);  // the frozen router as loaded

  // Merged: the copy is the router (what a merged HF export and GGUF write).
  back->merge_adapters();
  EXPECT_EQ(values_of(back->base(), kRouter), trained);
}

TEST(MoeRouterPeft, WhatCannotCarryATrainedRouterIsOneLine) {
  // A dense model has no router.
  ModelConfig dense = parse_run_config(default_run_config_toml(), {}, "<test>").model;
  EXPECT_NE(error_of([&] { llama_param_shapes(dense, router_lora()); }).find("no router to train"),
            std::string::npos);
  // Without adapters there is nothing beside which to train it (full training trains it anyway).
  EXPECT_NE(error_of([] { parse_run_config(default_run_config_toml(), {"lora.train_router=true"}, "<test>"); })
                .find("lora.train_router"),
            std::string::npos);
  // A llama.cpp LoRA adapter holds lora_a / lora_b pairs only (Mixtral's: a family GGUF writes).
  const std::string dir = moe_model_dir("mixtral", "router_gguf");
  auto model = load_pretrained(dir, Precision::fp32, router_lora(), 3);
  const std::string gguf = fresh_temp_dir("router_gguf_out") + "/adapter.gguf";
  const std::string msg = error_of([&] { export_gguf_lora(*model, gguf, "base"); });
  EXPECT_NE(msg.find("lora.train_router"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(gguf));
}

}  // namespace
}  // namespace mt::testing

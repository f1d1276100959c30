// A model directory in a family's HF layout, for tests that train from model.path a model whose
// block has a family's parts (q/k norms, an explicit head_dim, biases, windows), which a run
// config's [model] keys cannot name: a one-step run of the built-in config exports its tokenizer
// and config, `parts` turns the config into the family's, and fresh random weights are saved.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "io/hf_config.h"
#include "io/model_files.h"
#include "mesh_runs.h"
#include "model/transformer.h"
#include "temp_dirs.h"

namespace mt::testing {

// `tag` names the scratch directory (fresh_temp_dir) and the model directory in it, <tag>;
// `train_args` shapes the source run ("--set model.num_hidden_layers=4 ..."). The weights are
// init_weights(`seed`), then whatever `values` sets. A gpt2 model's config.json keeps none of the
// LLaMA source's keys (its own name the same things). Returns the model directory.
inline std::string family_model_dir(const std::string& tag, const std::string& train_args,
                                    const std::function<void(ModelConfig&)>& parts, uint64_t seed = 7,
                                    const std::function<void(Transformer&)>& values = {}) {
  namespace fs = std::filesystem;
  const std::string scratch = fresh_temp_dir("family_dir_" + tag);
  const std::string src = scratch + "/src", dir = scratch + "/" + tag;
  std::string out;
  EXPECT_EQ(run(train_command("") + train_args + " --set train.steps=1 --set train.peak_gflops=100 --set output.dir=" +
                    src + " 2>&1",
                &out),
            0)
      << out;
  ModelConfig c = load_hf_config(src + "/model/config.json");
  parts(c);
  c.validate();
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(seed);
  if (values) values(m);
  save_base_model(m, dir, ModelOrigin{c.model_type == "gpt2" ? "" : src + "/model", {}});
  for (const auto& e : fs::directory_iterator(src + "/model")) {  // the tokenizer files
    const std::string name = e.path().filename().string();
    if (name != "config.json" && name != "model.safetensors" && name != "generation_config.json")
      fs::copy(e.path(), dir + "/" + name);
  }
  return dir;
}

}  // namespace mt::testing

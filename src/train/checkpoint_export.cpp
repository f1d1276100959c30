#include "train/checkpoint_export.h"

#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "io/adapter_template.h"
#include "io/box_shards.h"
#include "data/chat_jinja.h"
#include "data/tokenizer_files.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/pretrained.h"
#include "io/weight_shapes.h"
#include "model/param_shapes.h"
#include "train/added_vocab.h"
#include "train/checkpoint_files.h"
#include "train/run_config.h"
#include "train/training_data.h"

namespace mt {

std::vector<std::string> export_checkpoint(const std::string& checkpoint_dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  const CheckpointManifest m = read_checkpoint_manifest(checkpoint_dir);
  const std::string manifest_path = (fs::path(checkpoint_dir) / "manifest.json").string();
  // The run's own config says what the tensors are: the model shape (or model.path), LoRA, precision.
  RunConfig cfg = parse_run_config(m.config, {}, manifest_path);
  // The run's directory is the checkpoint's (<dir>/checkpoints/step-N), wherever this runs from:
  // its grown tokenizer (data.add_tokens) is read from there, never written under the working
  // directory's copy of a relative output.dir.
  fs::path step = fs::absolute(checkpoint_dir).lexically_normal();
  if (!step.has_filename()) step = step.parent_path();  // "step-N/"
  cfg.output.dir = step.parent_path().parent_path().string();
  ModelConfig shape = cfg.model_path.empty() ? cfg.model : pretrained_config(cfg.model_path);
  // data.add_tokens grew the run's vocabulary past the model's (train/added_vocab.h).
  if (!cfg.data.add_tokens.empty())
    shape.vocab_size = run_vocab_size(cfg, *run_tokenizer(cfg), shape.vocab_size, cfg.model_path);
  const BoxShardSet shards(verified_shard_files(checkpoint_dir, m));
  // Every tensor the export writes against the config, before any is read or written: the files
  // and the config that describes them must agree on each shape.
  const HeldTensors held{shards.names(), [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
                           if (!shards.contains(name)) return std::nullopt;
                           return shards.full_shape(name);
                         }};
  check_held_shapes(shape, cfg.lora, cfg.lora.enabled, held, "", checkpoint_dir);

  std::vector<ExportTensor> tensors;
  for (const auto& p : llama_param_shapes(shape, cfg.lora))
    if (p.adapter == cfg.lora.enabled) tensors.push_back({p.name, p.shape});
  const FetchValues read_whole = [&](const std::string& name) {
    const TensorBox whole = TensorBox::whole(shards.full_shape(name));
    std::vector<float> v(static_cast<size_t>(whole.numel()));
    shards.read_box_f32(name, whole, v.data(), BoxShardSet::Finite::required);
    return v;
  };
  if (cfg.lora.enabled) {
    std::vector<std::string> written =
        save_peft_adapter(cfg.lora, tensors, read_whole, out_dir, cfg.model_path);
    // The grown tokenizer goes with an adapter whose embedding has its rows.
    if (!cfg.data.add_tokens.empty()) {
      for (auto& f : save_tokenizer_files(tokenizer_source(cfg), out_dir)) written.push_back(f);
      if (!cfg.data.chat_template.empty())
        written.push_back(write_chat_template_beside(out_dir, user_chat_template(cfg)));
    }
    // The adapter stands without it (generate then uses no template unless told): a data file
    // that has moved since the run only costs the record.
    try {
      written.push_back(write_adapter_template(out_dir, prompt_template_of(cfg), user_chat_template(cfg)));
    } catch (const Error& e) {
      std::cerr << "export-checkpoint: warning: the prompt template is not recorded: " << e.what() << "\n";
    }
    return written;
  }
  const std::unique_ptr<Tokenizer> tok = run_tokenizer(cfg);
  const ModelOrigin origin{cfg.model_path, {true, tok->bos_id(), tok->eos_id()}};
  std::vector<std::string> written =
      save_base_model(shape, cfg.train.precision, tensors, read_whole, out_dir, origin);
  for (auto& f : save_tokenizer_files(tokenizer_source(cfg), out_dir)) written.push_back(f);
  if (!cfg.data.chat_template.empty())  // the user's template goes with the model (trainer.cpp)
    written.push_back(write_chat_template_beside(out_dir, user_chat_template(cfg)));
  return written;
}

}  // namespace mt

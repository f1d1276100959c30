// Training checkpoints: everything needed to continue a run exactly where it stopped, under the
// same mesh or another one.
//
//   <output.dir>/checkpoints/step-000050/
//     manifest.json            step, sampler state, optimizer step count, the run config (TOML),
//                              the mesh it was saved under (and under pp its stages' blocks),
//                              the tensor list, the shard files
//     manifest.json.crc32c     the CRC32C of manifest.json's bytes (train/checkpoint_manifest.h)
//     shard-00000.safetensors  per writing rank: its blocks of the trainable tensors (f32 master
//     shard-00001.safetensors  values under their model names, AdamW moments as <name>.exp_avg and
//     ...                      <name>.exp_avg_sq), each file recording which block of which whole
//                              tensor it holds (io/box_shards.h)
//   <output.dir>/checkpoints/latest   the newest complete checkpoint's directory name
//   <output.dir>/checkpoints/best     the lowest-validation-loss one's (output.keep_best)
//
// Each distinct block is written once (by the first rank holding it), so a replicated model
// (one rank, or data parallelism) writes one file with every tensor whole, and an FSDP x TP run
// writes one file per rank. A loader under any mesh reads the blocks it needs from whichever
// files cover them. A checkpoint is written into step-N.tmp/, every file fsynced, then renamed into
// place and only then named in `latest`, so a crash mid-save leaves the previous one intact
// (train/checkpoint_dir.h: listing, `latest`, pruning and the cleanup after a crash).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/text_dataset.h"
#include "parallel/comm.h"
#include "parallel/replica_agreement.h"
#include "core/tensor_box.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/checkpoint_manifest.h"
#include "train/lr_schedule.h"

namespace mt {

struct CheckpointState {
  int64_t step = 0;  // optimizer steps completed
  SamplerState sampler;
};

// One trainable tensor as this rank holds it: a block of the whole tensor, with its f32 values
// and AdamW moments (each box.numel() floats, in the optimizer's device memory: saving and loading
// copy them through the host with the optimizer's backend). Empty values: a tensor of the model
// this rank does not hold (another pipeline stage's), listed so that the manifest names every
// tensor.
struct HeldTensor {
  std::string name;
  std::vector<int64_t> full_shape;
  TensorBox box;
  Tensor values, exp_avg, exp_avg_sq;
  bool writer = true;  // this rank saves the block (one rank per distinct block)
};

// The CRC32C of each held block's AdamW moments ("<name>.exp_avg", "<name>.exp_avg_sq"), for the
// ranks holding the same block to compare after a load (parallel/replica_agreement.h).
std::vector<parallel::HeldBlock> moment_blocks(const std::vector<HeldTensor>& held, AdamW& optimizer);

// The trainable tensors of a store the optimizer updates, each whole.
std::vector<HeldTensor> whole_tensors(ParamStore& trainable, AdamW& optimizer);

struct CheckpointInfo {
  std::string config_toml;  // the run config, for the record
  std::string mesh;         // "dp=2,fsdp=2", for the record (loading works under any mesh)
  bool lora = false;
  bool best = false;        // name it in checkpoints/best too (output.keep_best)
  std::vector<int64_t> pipeline_blocks;  // blocks per pp stage, for the record (empty without pp)
  // Where the lr schedule's decay started (train/lr_schedule.h), for a resume to continue it;
  // nullopt: not recorded (a resume then takes the recorded config's fresh schedule).
  std::optional<LrDecayStart> lr_decay;
  // The model and tokenizer the run trains (train/model_identity.h), for a resume to refuse
  // another; empty: not recorded.
  std::vector<std::pair<std::string, std::string>> model_identity;
  // Where this run started (step 0, or the checkpoint it resumed) and the rows drawn then: the
  // manifest's rows are checked against the steps since (train/checkpoint_manifest.h). nullopt:
  // not recorded (a checkpoint of a hand-made state, in tests and tools).
  std::optional<SegmentStart> segment_start;
};

// Collective over `world`: every rank passes the tensors it holds. Writes the checkpoint for
// `state.step`, deletes older ones beyond `keep` (never the one `best` names), and returns its
// directory.
std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            const std::vector<HeldTensor>& held, const AdamW& optimizer,
                            const CheckpointInfo& info, int64_t keep, parallel::Comm& world);

// "latest" -> the newest checkpoint of output_dir; anything else is a checkpoint directory.
std::string resolve_checkpoint(const std::string& spec, const std::string& output_dir);

// Fills each held block (values and moments) from the checkpoint and sets the optimizer's step
// count; returns the state to continue from. mt::Error when the checkpoint is of the other kind
// (LoRA / full) or lacks a tensor or has it with another shape. The caller refreshes any bf16
// copies afterwards.
CheckpointState load_checkpoint(const std::string& dir, const std::vector<HeldTensor>& held,
                                 AdamW& optimizer, bool lora);

// The whole model on one process (tests, tools): the two calls above over its trainable tensors.
std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            Transformer& model, AdamW& optimizer, const std::string& config_toml,
                            int64_t keep);
CheckpointState load_checkpoint(const std::string& dir, Transformer& model, AdamW& optimizer);

}  // namespace mt

#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/shape_string.h"
#include "io/box_shards.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_files.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

std::string shard_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "shard-%05d.safetensors", rank);
  return buf;
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) ::fsync(fd), ::close(fd);
}

}  // namespace

std::vector<HeldTensor> whole_tensors(ParamStore& trainable, AdamW& optimizer) {
  std::vector<HeldTensor> out;
  for (auto& p : trainable.params()) {
    if (!p.grad) continue;
    out.push_back({p.name, p.shape, TensorBox::whole(p.shape), p.master_tensor(), optimizer.exp_avg(p),
                   optimizer.exp_avg_sq(p), true});
  }
  return out;
}

std::vector<parallel::HeldBlock> moment_blocks(const std::vector<HeldTensor>& held, AdamW& optimizer) {
  std::vector<parallel::HeldBlock> out;
  std::vector<float> host;
  for (const HeldTensor& t : held) {
    if (!t.values) continue;  // another stage's tensor
    for (const auto& [suffix, moment] : {std::pair{".exp_avg", &t.exp_avg}, std::pair{".exp_avg_sq", &t.exp_avg_sq}}) {
      host.resize(size_t(moment->numel()));
      optimizer.backend().copy_to_host(host.data(), *moment);
      out.push_back({t.name + suffix, t.box, crc32c(host.data(), host.size() * sizeof(float))});
    }
  }
  return out;
}

std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            const std::vector<HeldTensor>& held, const AdamW& optimizer,
                            const CheckpointInfo& info, int64_t keep, parallel::Comm& world) {
  const fs::path root = checkpoints_root(output_dir);
  const fs::path final_dir = root / checkpoint_name(state.step);
  const fs::path tmp = root / (checkpoint_name(state.step) + ".tmp");
  const bool leader = world.rank() == 0;
  if (leader) {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
  }
  world.barrier();

  // Every rank writes the blocks it is the writer of (read in place in host memory, else copied off
  // the device first); the leader learns who wrote.
  std::vector<BoxShardOut> boxes;
  std::vector<std::vector<float>> staged;  // host copies of device memory the boxes point into
  staged.reserve(3 * held.size());         // never reallocated: the boxes keep pointers into it
  const auto on_host = [&](const Tensor& t) -> const float* {
    Backend& backend = optimizer.backend();
    if (const void* p = backend.host_readable(t)) return static_cast<const float*>(p);
    staged.emplace_back(size_t(t.numel()));
    backend.copy_to_host(staged.back().data(), t);
    return staged.back().data();
  };
  for (const auto& t : held) {
    if (!t.writer) continue;
    boxes.push_back({t.name, t.full_shape, t.box, on_host(t.values)});
    boxes.push_back({t.name + ".exp_avg", t.full_shape, t.box, on_host(t.exp_avg)});
    boxes.push_back({t.name + ".exp_avg_sq", t.full_shape, t.box, on_host(t.exp_avg_sq)});
  }
  // One sum tells the leader who wrote ([0, n)) and each file's CRC32C ([n, 2n)), computed while
  // writing; every other rank contributes zeros to the slots that are not its own.
  const size_t n = size_t(world.size()), me = size_t(world.rank());
  std::vector<int64_t> wrote(2 * n, 0);
  if (!boxes.empty()) {
    wrote[n + me] = write_box_shard((tmp / shard_name(world.rank())).string(), boxes);
    wrote[me] = 1;
  }
  world.all_reduce_sum(wrote.data(), int64_t(wrote.size()));

  if (leader) {
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array(), files = nlohmann::ordered_json::array();
    for (const auto& t : held) tensors.push_back({{"name", t.name}, {"shape", t.full_shape}});
    std::map<std::string, uint32_t> crcs;
    for (size_t r = 0; r < n; ++r)
      if (wrote[r]) {
        files.push_back(shard_name(int(r)));
        crcs[shard_name(int(r))] = uint32_t(wrote[n + r]);
      }
    nlohmann::ordered_json m;
    m["format"] = kCheckpointFormat;
    m["version"] = kCheckpointFormatVersion;
    m["step"] = state.step;
    m["sampler"] = {{"seed", state.sampler.seed}, {"rows_drawn", state.sampler.rows_drawn}};
    if (state.sampler.epoch >= 0)  // packed examples: where the next row is
      m["sampler"]["epoch"] = state.sampler.epoch, m["sampler"]["row"] = state.sampler.row;
    m["optimizer_steps"] = optimizer.steps_taken();
    m["lora"] = info.lora;
    m["mesh"] = info.mesh;
    if (!info.pipeline_blocks.empty()) m["pipeline_blocks"] = info.pipeline_blocks;
    if (info.lr_decay) m["lr_decay"] = {{"step", info.lr_decay->step}, {"lr", info.lr_decay->lr}};
    if (info.segment_start)
      m["segment_start"] = {{"step", info.segment_start->step}, {"rows_drawn", info.segment_start->rows_drawn}};
    m["tensors"] = tensors;
    m["files"] = files;
    m[kCrc32cManifestKey] = crc32c_manifest_entry(crcs);
    if (!info.model_identity.empty()) {
      nlohmann::ordered_json model = nlohmann::ordered_json::object();
      for (const auto& [name, value] : info.model_identity) model[name] = value;
      m["model"] = model;
    }
    m["config"] = info.config_toml;
    const std::string manifest = m.dump(2) + "\n";
    write_file_atomically((tmp / "manifest.json").string(), [&](std::ostream& os) { os << manifest; });
    write_manifest_checksum(tmp.string(), manifest);
    fsync_dir(tmp);
    if (fs::exists(final_dir)) remove_checkpoint(final_dir);  // a re-save of the same step replaces it
    fs::rename(tmp, final_dir);
    fsync_dir(root);
    set_latest(output_dir, state.step);
    if (info.best) set_best(output_dir, state.step);  // before pruning, which keeps the best
    prune_checkpoints(output_dir, state.step, keep);
  }
  world.barrier();  // no rank runs ahead of a checkpoint it may need to resume from
  return final_dir.string();
}

std::string resolve_checkpoint(const std::string& spec, const std::string& output_dir) {
  // The best pointer is read when the run first prunes, after a step: checked now, so that a FIFO
  // or a name outside the run there is refused before the resume, not once a step has run.
  best_checkpoint_step(output_dir);
  if (spec != "latest") {
    if (!fs::exists(fs::path(spec) / "manifest.json"))
      fail("train.resume: '" + spec + "' is not a checkpoint directory (no manifest.json)");
    return spec;
  }
  const std::string dir = latest_checkpoint(output_dir);
  if (dir.empty())
    fail("train.resume = \"latest\": no checkpoint in " + checkpoints_root(output_dir).string() +
         " to resume from: the run wrote none (output.checkpoint_every = 0, or it stopped before its first); "
         "a run with output.checkpoint_every > 0 (the default, 500) writes one every that many steps and at its end");
  return dir;
}

CheckpointState load_checkpoint(const std::string& dir, const std::vector<HeldTensor>& held,
                                 AdamW& optimizer, bool lora) {
  const CheckpointManifest m = read_checkpoint_manifest(dir);
  if (m.lora != lora)
    fail(dir + ": checkpoint is from a " + std::string(m.lora ? "LoRA" : "full") + " run, this run is " +
         (lora ? "LoRA" : "full"));
  if (m.tensor_count != int64_t(held.size()))
    fail(dir + ": checkpoint and model have different trainable tensors");
  // Checksums first: a corrupt file must be named as such, not misread as a bad header or shape.
  const BoxShardSet shards(verified_shard_files(dir, m));
  // The manifest's tensor list against the shards that hold them, both written by one save.
  for (const auto& [name, shape] : m.tensors) {
    if (!shards.contains(name)) fail(dir + ": manifest.json lists tensor '" + name + "', which no shard holds");
    if (shards.full_shape(name) != shape)
      fail(dir + ": tensor '" + name + "' is " + shape_string(shape) + " in manifest.json but " +
           shape_string(shards.full_shape(name)) + " in its shards");
  }
  // A NaN or infinity written by a diverged run (or that survived a checksum recomputed over it)
  // would poison every later step; refuse it at load, where the tensor and file are known.
  constexpr auto finite = BoxShardSet::Finite::required;
  for (const auto& t : held) {
    if (!shards.contains(t.name)) fail(dir + ": checkpoint has no tensor '" + t.name + "'");
    if (shards.full_shape(t.name) != t.full_shape)
      fail(dir + ": tensor '" + t.name + "' is " + shape_string(shards.full_shape(t.name)) +
           " in the checkpoint, " + shape_string(t.full_shape) + " in this run's model");
  }
  // Each block is read (and checked) on the host, then copied to the device, one at a time.
  Backend& backend = optimizer.backend();
  std::vector<float> block;
  const auto read_into = [&](const std::string& name, const TensorBox& box, const Tensor& dst) {
    block.resize(size_t(box.numel()));
    shards.read_box_f32(name, box, block.data(), finite);
    backend.copy_from_host(dst, block.data());
  };
  for (const auto& t : held) {
    if (!t.values) continue;
    read_into(t.name, t.box, t.values);
    read_into(t.name + ".exp_avg", t.box, t.exp_avg);
    read_into(t.name + ".exp_avg_sq", t.box, t.exp_avg_sq);
  }
  optimizer.set_steps_taken(m.optimizer_steps);
  CheckpointState s;
  s.step = m.step;
  s.sampler = m.sampler;
  return s;
}

std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            Transformer& model, AdamW& optimizer, const std::string& config_toml,
                            int64_t keep) {
  parallel::LocalComm one;
  return save_checkpoint(output_dir, state, whole_tensors(model.trainable(), optimizer), optimizer,
                         {config_toml, "dp=1", model.has_lora(), false, {}, std::nullopt, {}, std::nullopt}, keep,
                         one);
}

CheckpointState load_checkpoint(const std::string& dir, Transformer& model, AdamW& optimizer) {
  CheckpointState s = load_checkpoint(dir, whole_tensors(model.trainable(), optimizer), optimizer,
                                      model.has_lora());
  model.sync_compute_weights();
  return s;
}

}  // namespace mt

// Filling and reading a ShardedModel's blocks: initialisation, Hugging Face loading (each rank
// reads only its blocks), and gathering whole tensors for export.
#include <filesystem>
#include <ostream>

#include "core/error.h"
#include "parallel/sharded_model.h"
#include "io/box_read.h"
#include "io/peft_names.h"
#include "io/pretrained.h"
#include "io/safetensors_index.h"
#include "core/normal_init.h"

namespace mt::parallel {

void ShardedModel::set_block(const std::string& name, const float* block) {
  set_param_values(backend_, *slot(name).shard, block);
}

void ShardedModel::set_quant_block(const std::string& name, const float* block_rows) {
  const ShardSlot& s = slot(name);
  const int64_t rows = s.box.shape()[0];
  std::vector<uint8_t> records(nf4::tensor_bytes(rows, s.box.shape()[1]));
  nf4::quantize_row_slice(records.data(), block_rows, rows, s.full_shape[1], s.box.begin[1], s.box.end[1]);
  backend_.copy_from_host(s.shard->quant_tensor(), records.data());
}

namespace {
// The rows of `box`, every column.
TensorBox whole_rows(const TensorBox& box, const std::vector<int64_t>& full_shape) {
  TensorBox r = box;
  r.begin[1] = 0, r.end[1] = full_shape[1];
  return r;
}
}  // namespace

void ShardedModel::set_block_from_whole(const std::string& name, const float* whole) {
  const ShardSlot& s = slot(name);
  if (s.shard->quant) {  // contiguous rows of the whole tensor
    const int64_t cols = s.full_shape[1];
    return set_quant_block(name, whole + s.box.begin[0] * cols);
  }
  std::vector<float> block(size_t(s.box.numel()), 0.0f);  // a padded vocabulary's rows stay zero
  if (s.true_box.numel() > 0) copy_box(whole, TensorBox::whole(s.true_shape), block.data(), s.box, s.true_box);
  set_block(name, block.data());
}

namespace {
// LoRA's A and B, and a trained router's copy (LoraConfig::train_router).
bool is_adapter(const ShardSlot& s) {
  return s.name.find(".lora_") != std::string::npos || moe_router_copy_param(s.name);
}
}  // namespace

void ShardedModel::init_weights(uint64_t seed) {
  std::vector<float> whole;
  for (const auto& s : slots_) {
    if (is_adapter(s)) continue;
    const int64_t n = TensorBox::whole(s.true_shape).numel();
    whole.assign(size_t(n), 1.0f - full_.norm_weight_offset);  // norms: the identity (Transformer::init_weights)
    if (s.full_shape.size() > 1) fill_normal(whole.data(), n, 0.02f, seed, s.name);
    set_block_from_whole(s.name, whole.data());
  }
  init_adapters(seed);
}

void ShardedModel::load_adapter(const std::string& dir) {
  if (lora_fuses_qkv(lora_))
    fail(dir + ": a GPT-2 c_attn adapter (q, k and v's rows of one lora_B) is not read into a sharded model; "
         "start it on one rank or dp only");
  const std::string path = adapter_weights_path(dir);
  SafetensorsCheckpoint ckpt(path);
  std::vector<float> whole;
  for (const auto& s : slots_) {
    if (!is_adapter(s)) continue;
    const std::string file = file_tensor_name(kPeftPrefix, s.name);
    if (!ckpt.contains(file)) fail(path + ": missing tensor '" + file + "'");
    if (ckpt.info(file).shape != s.true_shape) fail(path + ": tensor '" + file + "' has another shape than the model's");
    whole.resize(size_t(ckpt.info(file).numel));
    ckpt.read_f32(file, whole.data());
    set_block_from_whole(s.name, whole.data());
  }
}

void ShardedModel::init_adapters(uint64_t seed) {
  std::vector<float> whole;
  for (const auto& s : slots_) {
    if (!is_adapter(s)) continue;
    if (moe_router_copy_param(s.name)) {  // the router as this rank holds it: the same block
      const ShardSlot& router = slot(router_of_copy(s.name));
      MT_CHECK(router.box == s.box, s.name + " is not laid out as its router (parallel/partition.cpp)");
      whole.resize(size_t(s.box.numel()));
      get_param_values(backend_, *router.shard, whole.data());
      set_block(s.name, whole.data());
      continue;
    }
    const int64_t n = TensorBox::whole(s.true_shape).numel();
    whole.assign(size_t(n), 0.0f);  // B: zeros
    if (s.name.find("lora_A") != std::string::npos) fill_normal(whole.data(), n, lora_.init_std, seed, s.name);
    set_block_from_whole(s.name, whole.data());
  }
}

void ShardedModel::load_weights(const std::string& path, uint64_t adapter_seed, std::ostream* progress) {
  namespace fs = std::filesystem;
  const bool llama2c = fs::is_regular_file(path) && fs::path(path).extension() == ".bin";
  if (llama2c || full_.model_type == "gpt2") {
    // llama2.c files are small and not sliceable: read whole, keep this rank's blocks. GPT-2's
    // HF layout (io/gpt2_layout.h) fuses q, k and v and transposes its weights, so its tensors are
    // not our blocks either: read the whole model the same way (1.5B parameters at most).
    auto whole = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
    std::vector<float> values;
    for (auto& p : whole->base().params()) {
      if (!holds(p.name)) continue;
      values.resize(size_t(p.numel));
      whole->base().get_values(p, values.data());
      set_block_from_whole(p.name, values.data());
    }
    init_adapters(adapter_seed);  // after the base: a trained router's copy starts as the router
    return;
  }
  SafetensorsCheckpoint ckpt(path);
  std::vector<float> block;
  int64_t done = 0, total = 0, bytes = 0;
  for (const auto& s : slots_) total += !is_adapter(s);
  for (const auto& s : slots_) {
    if (is_adapter(s)) continue;
    if (!ckpt.contains(s.name)) fail(path + ": missing tensor '" + s.name + "'");
    if (ckpt.info(s.name).shape != s.true_shape)
      fail(path + ": tensor '" + s.name + "' has another shape than the config gives");
    // An NF4 block is quantised from whole rows (the statistics of tp's column split). A block of
    // a padded vocabulary reads its true rows, a prefix; the padding stays zero.
    const TensorBox read = s.shard->quant ? whole_rows(s.box, s.full_shape) : s.true_box;
    block.assign(size_t(s.shard->quant ? read.numel() : s.box.numel()), 0.0f);
    if (read.numel() > 0) read_box_f32(ckpt, s.name, read, block.data());
    if (s.shard->quant) set_quant_block(s.name, block.data());
    else set_block(s.name, block.data());
    bytes += read.numel() * int64_t(dtype_size(ckpt.info(s.name).dtype));
    ++done;
    if (progress && (done == total || done % 8 == 0)) {
      const int width = 30, filled = int(width * done / total);
      *progress << "\rloading " << path << " [" << std::string(size_t(filled), '#')
                << std::string(size_t(width - filled), ' ') << "] " << done << "/" << total
                << " tensors, " << bytes / (1 << 20) << " MiB read by this rank" << std::flush;
    }
  }
  if (progress) *progress << "\n";
  init_adapters(adapter_seed);  // after the base, as load_pretrained does for the whole model
}

std::vector<float> ShardedModel::gather_whole(const std::string& name) {
  // Tensors are never split over dp (or pp), so the ranks of this replica's fsdp x cp x tp group
  // hold every block: gather there (each replica in parallel), not over the whole world.
  const ShardSlot& s = slot(name);
  Comm& group = mesh_.group(Mesh::shard_axes() | axis_bit(Axis::tp));
  const int64_t n = s.box.numel(), members = group.size(), TP = mesh_.shape().tp, CP = mesh_.shape().cp;
  std::vector<float> mine(static_cast<size_t>(n)), all(static_cast<size_t>(n * members));
  MT_CHECK(s.shard->master || s.shard->compute, "gather_whole: a block without values: " + name);
  // The block comes off the device through the shard store (an NF4 base never gets here: its
  // export is refused earlier), and the gather runs on host memory.
  get_param_values(backend_, *s.shard, mine.data());
  group.all_gather(mine.data(), all.data(), n);
  const TensorBox whole_box = TensorBox::whole(s.full_shape);
  std::vector<float> whole(static_cast<size_t>(whole_box.numel()));
  Coords c = mesh_.coords();
  for (int64_t j = 0; j < members; ++j) {  // the group is row-major over (fsdp, cp, tp)
    c[size_t(Axis::fsdp)] = j / (CP * TP), c[size_t(Axis::cp)] = j / TP % CP, c[size_t(Axis::tp)] = j % TP;
    const int64_t r = rank_of(mesh_.shape(), c);
    TensorBox b;
    for (size_t d = 0; d < s.full_shape.size(); ++d) {
      Range rg = s.layout.range(r, d);
      b.begin.push_back(rg.begin), b.end.push_back(rg.end);
    }
    copy_box(all.data() + j * n, b, whole.data(), whole_box, b);
  }
  whole.resize(size_t(TensorBox::whole(s.true_shape).numel()));  // a padded vocabulary's rows are last
  return whole;
}

}  // namespace mt::parallel

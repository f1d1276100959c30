// Filling and reading a ShardedModel's blocks: initialisation, Hugging Face loading (each rank
// reads only its blocks), and gathering whole tensors for export.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <ostream>

#include "core/error.h"
#include "parallel/sharded_model.h"
#include "io/box_read.h"
#include "io/peft_names.h"
#include "io/pretrained.h"
#include "io/safetensors_index.h"
#include "core/normal_init.h"
#include "model/vocab_growth.h"

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
// LoRA's A and B, a trained router's copy (LoraConfig::train_router) and the embedding's and head's
// trained copies (LoraConfig::train_embeddings).
bool is_adapter(const ShardSlot& s) {
  return s.name.find(".lora_") != std::string::npos || moe_router_copy_param(s.name) ||
         embedding_copy_param(s.name);
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
    // A trained copy starts as its module (the router, the embedding or the head) as this rank
    // holds it: the same block.
    if (moe_router_copy_param(s.name) || embedding_copy_param(s.name)) {
      const ShardSlot& module =
          slot(moe_router_copy_param(s.name) ? router_of_copy(s.name) : module_of_copy(s.name));
      MT_CHECK(module.box == s.box, s.name + " is not laid out as its module (parallel/partition.cpp)");
      whole.resize(size_t(s.box.numel()));
      get_param_values(backend_, *module.shard, whole.data());
      set_block(s.name, whole.data());
      continue;
    }
    const int64_t n = TensorBox::whole(s.true_shape).numel();
    whole.assign(size_t(n), 0.0f);  // B: zeros
    if (s.name.find("lora_A") != std::string::npos) fill_normal(whole.data(), n, lora_.init_std, seed, s.name);
    set_block_from_whole(s.name, whole.data());
  }
}

namespace {

// Rows [begin, end) of the file's tensor, this block's columns, row-major.
using RowReader = std::function<void(int64_t begin, int64_t end, float* out)>;

// A vocabulary grown past the file's `file_rows` (data.add_tokens): this rank's block `s` of the
// embedding or head, the new rows the mean of the file's (model/vocab_growth.h).
void set_grown_block(ShardedModel& model, const ShardSlot& s, int64_t file_rows, const RowReader& read) {
  // The mean is over every row the file has, of this block's columns, as the block's store holds
  // them (a frozen bf16 table's rounded values): what grow_vocabulary takes the mean of in the
  // whole model, summed in the same order (add_rows), so every layout grows the same rows. The
  // file's rows pass through this block's store a block of rows at a time.
  const int64_t rows = s.box.shape()[0], cols = s.box.shape()[1];
  MT_CHECK(rows > 0 && s.true_box.numel() > 0, s.name + ": a grown vocabulary's block without rows");
  std::vector<double> sum(size_t(cols), 0.0);
  std::vector<float> block(size_t(s.box.numel()));
  for (int64_t r = 0; r < file_rows; r += rows) {
    const int64_t n = std::min(rows, file_rows - r);
    std::fill(block.begin(), block.end(), 0.0f);
    read(r, r + n, block.data());
    model.set_block(s.name, block.data());
    model.shard_base().get_values(*s.shard, block.data());
    add_rows(sum, block.data(), n, cols);
  }
  const std::vector<float> mean = mean_of_sum(sum, file_rows);
  // This block's own rows: the file's, then the mean; a padded vocabulary's rows stay zero.
  std::fill(block.begin(), block.end(), 0.0f);
  const int64_t begin = s.true_box.begin[0], end = s.true_box.end[0], held = std::min(end, file_rows);
  if (held > begin) read(begin, held, block.data());
  for (int64_t r = std::max(begin, file_rows); r < end; ++r)
    std::copy(mean.begin(), mean.end(), block.begin() + (r - s.box.begin[0]) * cols);
  model.set_block(s.name, block.data());
}

}  // namespace

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
      const ShardSlot& s = slot(p.name);
      if (!has_vocab_rows(p.name) || p.shape[0] == full_.vocab_size) {
        set_block_from_whole(p.name, values.data());
        continue;
      }
      // data.add_tokens past the file's vocabulary: rows grown as from a safetensors file.
      set_grown_block(*this, s, p.shape[0], [&](int64_t begin, int64_t end, float* out) {
        const int64_t C = p.shape[1], c0 = s.true_box.begin[1], c1 = s.true_box.end[1];
        for (int64_t r = begin; r < end; ++r)
          std::copy(values.begin() + r * C + c0, values.begin() + r * C + c1, out + (r - begin) * (c1 - c0));
      });
    }
    init_adapters(adapter_seed);  // after the base: a trained router's copy starts as the router
    return;
  }
  SafetensorsCheckpoint ckpt(path);
  // data.add_tokens took the run's vocabulary past the file's: the embedding's and head's rows
  // from there on are grown (set_grown_block).
  const int64_t file_vocab = pretrained_config(path).vocab_size;
  std::vector<float> block;
  int64_t done = 0, total = 0, bytes = 0;
  for (const auto& s : slots_) total += !is_adapter(s);
  for (const auto& s : slots_) {
    if (is_adapter(s)) continue;
    if (!ckpt.contains(s.name)) fail(path + ": missing tensor '" + s.name + "'");
    const bool grown = has_vocab_rows(s.name) && file_vocab < full_.vocab_size;
    std::vector<int64_t> expect = s.true_shape;
    if (grown) expect[0] = file_vocab;
    if (ckpt.info(s.name).shape != expect)
      fail(path + ": tensor '" + s.name + "' has another shape than the config gives");
    if (grown) {
      set_grown_block(*this, s, file_vocab, [&](int64_t begin, int64_t end, float* out) {
        TensorBox rows = s.true_box;
        rows.begin[0] = begin, rows.end[0] = end;
        read_box_f32(ckpt, s.name, rows, out);
      });
      bytes += file_vocab * (s.true_box.end[1] - s.true_box.begin[1]) * int64_t(dtype_size(ckpt.info(s.name).dtype));
    } else {
      // An NF4 block is quantised from whole rows (the statistics of tp's column split). A block
      // of a padded vocabulary reads its true rows, a prefix; the padding stays zero.
      const TensorBox read = s.shard->quant ? whole_rows(s.box, s.full_shape) : s.true_box;
      block.assign(size_t(s.shard->quant ? read.numel() : s.box.numel()), 0.0f);
      if (read.numel() > 0) read_box_f32(ckpt, s.name, read, block.data());
      if (s.shard->quant) set_quant_block(s.name, block.data());
      else set_block(s.name, block.data());
      bytes += read.numel() * int64_t(dtype_size(ckpt.info(s.name).dtype));
    }
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

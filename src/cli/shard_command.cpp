// meshtrain shard: how a model's parameters lie on a device mesh (a box grid per tensor in the
// manner of jax.debug.visualize_array_sharding) and the bytes each rank holds. Shape-only: no
// weights are read or allocated, and no MPI is needed (the world is the mesh's product). Under pp
// a rank holds only what its stage stores (parallel/pipeline.h stage_holds, as the trainer places
// it), split by its fsdp and tp blocks as without a pipeline; under ep a mixture of experts'
// experts lie on their ep coordinate's ranks only (parallel/expert_parallel.h), the rest as on a
// data-parallel replica.
#include <fstream>
#include <iostream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/shard_groups.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/shape_string.h"
#include "parallel/dist_config.h"
#include "parallel/grid_view.h"
#include "parallel/pipeline.h"
#include "parallel/shard_plan.h"
#include "parallel/vocab_padding.h"
#include "io/hub_model.h"
#include "io/pretrained.h"
#include "io/family_presets.h"
#include "train/run_config.h"
#include "train/run_layout.h"

namespace mt::cli {
namespace {

struct Options {
  std::string mesh, config, model, revision, preset, rules, pp_blocks;
  std::vector<std::string> overrides;
  bool json = false, all = false;
};

std::string read_text(const std::string& path) {
  require_regular_file(path, "input file");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Inputs {
  RunConfig run;
  parallel::MeshShape mesh;
  parallel::PartitionRules rules;
  parallel::StageSplit stages;  // no blocks when pp = 1
};

// A run config's [model] keys name the LLaMA shape alone: a family preset's parts (GPT-2's norm,
// MLP and positions, biases, q/k norms, head_dim, windows, Gemma 3's norm offset, post norms,
// GeGLU, scales, local RoPE and rope_scaling type, and a mixture of experts' experts) are taken from the preset, over the shape --set
// may have changed.
ModelConfig with_family_parts(ModelConfig shape, const ModelConfig& preset, const std::string& name) {
  shape.model_type = preset.model_type;
  shape.norm = preset.norm, shape.mlp = preset.mlp, shape.positions = preset.positions;
  shape.qkv_bias = preset.qkv_bias, shape.o_bias = preset.o_bias, shape.mlp_bias = preset.mlp_bias;
  shape.qk_norm = preset.qk_norm, shape.qk_norm_whole = preset.qk_norm_whole;
  shape.head_dim_override = preset.head_dim_override;
  // A mixture of experts' (model/moe.h): the experts, their width and routing, the dense layers.
  shape.num_experts = preset.num_experts, shape.num_experts_per_tok = preset.num_experts_per_tok;
  shape.moe_intermediate_size = preset.moe_intermediate_size, shape.norm_topk_prob = preset.norm_topk_prob;
  shape.decoder_sparse_step = preset.decoder_sparse_step, shape.mlp_only_layers = preset.mlp_only_layers;
  shape.output_router_logits = preset.output_router_logits;
  shape.router_aux_loss_coef = preset.router_aux_loss_coef;
  shape.norm_weight_offset = preset.norm_weight_offset, shape.post_norms = preset.post_norms;
  shape.geglu = preset.geglu, shape.scale_embeddings = preset.scale_embeddings;
  shape.attention_scale = preset.attention_scale, shape.rope_local_theta = preset.rope_local_theta;
  shape.rope_scaling.linear = preset.rope_scaling.linear;
  if (shape.num_hidden_layers == preset.num_hidden_layers) shape.layer_window = preset.layer_window;
  else if (!preset.layer_window.empty())
    fail("shard: --preset " + name + " has a window per layer: model.num_hidden_layers cannot be changed");
  shape.validate();
  return shape;
}

// The model's architecture and LoRA setup, the mesh and the rules, from whichever source was given.
Inputs resolve(const Options& o) {
  Inputs in;
  parallel::DistConfig dist;
  if (!o.config.empty()) {
    auto split = parallel::split_dist_config(read_text(o.config), o.config);
    dist = split.dist;
    in.run = load_run_config(o.config, o.overrides);  // paths relative to the file, as for train
  } else {
    RunConfig base;
    if (!o.preset.empty()) base.model = published_preset(o.preset);
    std::string text = o.model.empty() ? (o.preset.empty() ? default_run_config_toml() : to_toml(base))
                                       : "[model]\npath = " + nlohmann::json(o.model).dump() + "\n";
    in.run = parse_run_config(text, o.overrides, "<shard>");
    if (!o.preset.empty()) in.run.model = with_family_parts(in.run.model, base.model, o.preset);
  }
  // A Hub id: its config.json from the Hugging Face cache (downloaded alone when absent).
  if (!in.run.model_path.empty())
    in.run.model = pretrained_config(hub::resolve_model_path(in.run.model_path, o.revision, hub::HubFiles::config_only));

  if (!o.mesh.empty()) in.mesh = parallel::MeshShape::parse(o.mesh);
  else if (dist.mesh) in.mesh = *dist.mesh;
  else fail("shard: give the mesh with --mesh (e.g. --mesh dp=1,fsdp=2,tp=2) or [mesh] in --config");
  // Order of precedence: --rules file, then the config's rules, then the defaults.
  parallel::PartitionConfig user = dist.partition;
  if (!o.rules.empty()) {
    auto file = parallel::parse_partition_toml(read_text(o.rules), o.rules);
    user.rules = user.rules.after(file.rules);
    user.replace_defaults = user.replace_defaults || file.replace_defaults;
  }
  in.run.partition = user;
  if (!o.pp_blocks.empty()) in.run.train.pp_blocks = o.pp_blocks;  // --pp-blocks over the config's
  // The model's layout train refuses, shard refuses: one check for both (train/run_layout.h), so
  // they cannot drift apart. (The batch's splits are train's alone: the listing has no batch.)
  check_model_layout(in.run, in.run.model, in.mesh);
  // The trainer's split: train.pp_blocks, or balanced by cost, per chunk of train.pp_virtual.
  if (in.mesh.pp > 1) in.stages.chunks = int(in.run.train.pp_virtual);
  in.stages.blocks = run_stage_blocks(in.run.train, in.run.model, in.mesh);
  in.stages.config = in.run.model;
  in.rules = user.effective();
  return in;
}

int stage_of(const parallel::MeshShape& m, int64_t rank) {
  return int(parallel::coords_of(m, rank)[size_t(parallel::Axis::pp)]);
}

std::string rank_range(int64_t a, int64_t b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
}

// "stage 0", "stages 0,3" (a tied embedding).
std::string stages_text(const std::vector<int>& stages) {
  std::string out = stages.size() == 1 ? "stage " : "stages ";
  for (size_t i = 0; i < stages.size(); ++i) out += (i ? "," : "") + std::to_string(stages[i]);
  return out;
}

// Ranks holding each block of the tensor: the layout replicates it over every pp stage (pp never
// splits a tensor), but only the stages that hold it keep a copy.
int64_t replication(const Inputs& in, const parallel::TensorLayout& t) {
  return t.replication() / in.mesh.pp * int64_t(in.stages.stages_holding(t.name).size());
}

std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

const char* kAssumption =
    "bf16 mixed-precision AdamW: 2 B (bf16 weight) per element of every tensor, plus per trainable "
    "element 4 B f32 master + 4 B f32 grad + 8 B f32 Adam m,v (18 B in all); a frozen LoRA base is "
    "bf16 only; activations, buffers and gather scratch are not counted";

// "((pp*2 + dp)*1 + fsdp)*2 + tp": world rank from the coordinates in the mesh's rank order
// (parallel/mesh.h), dp, fsdp and tp always (so the formula reads the same on every mesh), pp, ep
// and cp only when split.
std::string rank_formula(const parallel::MeshShape& m) {
  std::string f;
  int terms = 0;
  for (parallel::Axis a : parallel::kAxes) {
    const bool always = a == parallel::Axis::dp || a == parallel::Axis::fsdp || a == parallel::Axis::tp;
    if (!always && m.size(a) == 1) continue;
    const std::string name = parallel::axis_name(a);
    if (terms == 0) f = name;
    else f = (terms > 1 ? "(" + f + ")" : f) + "*" + std::to_string(m.size(a)) + " + " + name;
    ++terms;
  }
  return f;
}

// The ranks of ep coordinate `c` (those holding its experts), within the stages `holds` accepts.
std::vector<int64_t> ep_ranks(const parallel::MeshShape& m, int64_t c, const std::function<bool(int64_t)>& holds) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < m.world(); ++r)
    if (parallel::coords_of(m, r)[size_t(parallel::Axis::ep)] == c && (!holds || holds(r))) out.push_back(r);
  return out;
}

// Under expert parallelism: which experts each ep coordinate holds, on which ranks, and what the
// other tensors and the batch do.
void print_expert_parallel(const Inputs& in) {
  const auto& m = in.mesh;
  const int64_t E = in.run.model.num_experts, per = E / m.ep;
  std::cout << "expert parallel (ep=" << m.ep << "): each MoE layer's " << E << " experts split in contiguous ranges of "
            << per << ", ep coordinate c holding experts [c*" << per << ", (c+1)*" << per << ")\n";
  for (int64_t c = 0; c < m.ep; ++c) {
    if (m.ep > 8 && c == 2) {
      std::cout << "  ...\n";
      c = m.ep - 1;
    }
    std::cout << "  ep " << c << ": experts " << c * per << "-" << (c + 1) * per - 1 << " on ranks "
              << parallel::rank_list(ep_ranks(m, c, nullptr)) << "\n";
  }
  std::cout << "Every other tensor lies on each ep coordinate as on a data-parallel replica (its gradient summed "
               "over dp x ep); the batch's rows are split over dp x fsdp x ep ("
            << m.batch_ranks() << " ranks), and each MoE layer sends every routed row to the ep rank holding its "
               "expert and back (all-to-all).\n\n";
}

// Under context parallelism: how each row is cut, which chunks a cp rank holds, and that the
// weights are sharded over fsdp x cp.
void print_context_parallel(const Inputs& in) {
  const auto& m = in.mesh;
  const int64_t seq = in.run.train.seq_len, chunks = 2 * m.cp;
  std::cout << "context parallel (cp=" << m.cp << "): each sequence of train.seq_len " << seq << " tokens is cut into "
            << chunks << " chunks of " << seq / chunks << " tokens";  // check_model_layout: they divide
  std::cout << "; cp rank r holds chunks r and " << chunks - 1 << "-r (" ;
  for (int64_t r = 0; r < m.cp; ++r) std::cout << (r ? ", " : "") << "cp " << r << ": " << r << "," << chunks - 1 - r;
  std::cout << "), " << seq / m.cp << " tokens a rank with their true positions; attention all-gathers the keys and values of the "
               "whole sequence over the cp group. Every tensor a rule splits over fsdp is split over fsdp x cp "
               "(" << m.shards() << " blocks; torchtitan's dp_shard x cp): weights, gradients and optimizer state "
               "below, the cp ranks' gradient partials summed by the reduce-scatter over fsdp x cp.\n\n";
}

void print_text(const Inputs& in, const std::vector<parallel::ShardedParam>& params, bool all) {
  const auto& m = in.mesh;
  const auto& c = in.run.model;
  std::cout << "mesh " << m.str() << " (" << m.world() << " ranks; rank = " << rank_formula(m) << ", tp fastest)\n";
  std::cout << "model: " << c.num_hidden_layers << " layers, hidden " << c.hidden_size
            << ", intermediate " << c.intermediate_size << ", heads " << c.num_attention_heads << "/"
            << c.num_key_value_heads << ", vocab " << c.vocab_size
            << (in.run.lora.enabled ? ", LoRA rank " + std::to_string(in.run.lora.rank) + " (base frozen" +
                                          (in.run.lora.quantized_base() ? ", blocks' projections in NF4)" : ")")
                                    : ", full training")
            << "\n";
  const std::string padding = parallel::vocab_padding_note(c.vocab_size, m.tp);
  if (!padding.empty())
    std::cout << padding << ": the blocks below hold the padded rows; checkpoints and exports the true ones\n";
  std::cout << "\n";
  if (m.pp > 1) {
    const int64_t per_stage = m.world() / m.pp;  // pp is the outermost axis
    std::cout << "pipeline stages (blocks " << parallel::blocks_text(in.stages.blocks)
              << (in.stages.chunks > 1 ? " in " + std::to_string(in.stages.chunks) + " chunks per stage" : "")
              << ")\n";
    for (int s = 0; s < int(m.pp); ++s)
      std::cout << "  stage " << s << " (ranks " << rank_range(s * per_stage, (s + 1) * per_stage - 1) << "): "
                << parallel::describe_stage_units(in.stages.config, in.stages.blocks, s, int(m.pp)) << "\n";
    if (in.stages.config.tie_word_embeddings)
      std::cout << "  (tied embedding: the last stage holds a copy as its head, its gradient summed with "
                   "stage 0's; only stage 0 writes it to checkpoints)\n";
    std::cout << "\n";
  }
  if (m.cp > 1) print_context_parallel(in);
  if (m.ep > 1) print_expert_parallel(in);

  // One entry per distinct (name with the layer and expert indices wildcarded, shape, spec, stages
  // holding it): a per-layer tensor is shown once per stage with its layer count, an expert's once
  // for all experts, unless --all.
  std::function<std::string(const std::string&)> stages_suffix;
  if (m.pp > 1) stages_suffix = [&](const std::string& n) { return "  (" + stages_text(in.stages.stages_holding(n)) + ")"; };
  for (const auto& g : group_tensors(params, all, stages_suffix)) {
    const auto& t = g.first->layout;
    std::cout << g.label;
    if (g.experts.size() > 1) {
      std::cout << "  x " << g.experts.size() << " experts";
      if (m.ep > 1) std::cout << " (" << ep_ranges(int64_t(g.experts.size()), m.ep) << ")";
    }
    if (g.layers() > 1) std::cout << "  x " << g.layers() << " layers";
    std::cout << "\n  shape " << shape_string(t.shape) << "  spec " << t.spec.str() << "  local "
              << shape_string(t.local_shape);
    const int64_t copies = replication(in, t);
    if (copies > 1) std::cout << "  replicated x" << copies;
    const std::string& name = g.first->param.name;
    std::cout << (g.first->trainable ? "" : "  frozen") << (g.first->nf4 ? " nf4" : "") << "\n";
    // Under ep the grid is of the group's first expert, on its ep coordinate's ranks; the others'
    // lie alike on theirs (the header above lists them).
    if (t.ep_owner >= 0 && g.experts.size() > 1)
      std::cout << "  (ep " << t.ep_owner << "'s experts; ep c's on its own ranks alike)\n";
    std::cout << parallel::render_grid(t, "  ", 120, [&](int64_t r) { return in.stages.holds(stage_of(m, r), name); });
  }

  const auto ranks = parallel::bytes_per_rank(params, m, in.stages);
  std::cout << "\nbytes per rank (" << kAssumption << (m.pp > 1 ? "; a rank holds only its stage's tensors" : "")
            << ")\n";
  char line[256];
  const std::string pp_col = m.pp > 1 ? "  pp" : "", cp_col = m.cp > 1 ? "   cp" : "";
  const std::string ep_col = m.ep > 1 ? "   ep" : "";
  std::snprintf(line, sizeof line, "%-9s%s %4s %4s%s%s %4s %13s %13s %13s %13s %18s %11s\n", "rank", pp_col.c_str(),
                "dp", "fsdp", ep_col.c_str(), cp_col.c_str(), "tp", "bf16 weights", "f32 master", "f32 grads",
                "f32 Adam m,v", "total bytes", "total");
  std::cout << line;
  // Ranks with identical rows are merged into a range once the table would pass 16 lines.
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    if (ranks.size() > 16)
      while (j + 1 < ranks.size() && stage_of(m, int64_t(j + 1)) == stage_of(m, int64_t(i)) &&
             ranks[j + 1].elements == ranks[i].elements &&
             ranks[j + 1].trainable_elements == ranks[i].trainable_elements)
        ++j;
    const auto& b = ranks[i];
    const auto cc = parallel::coords_of(m, b.rank);
    std::string who = j > i ? std::to_string(i) + "-" + std::to_string(j) : std::to_string(i);
    std::string dp = j > i ? "*" : std::to_string(cc[size_t(parallel::Axis::dp)]);
    std::string fs = j > i ? "*" : std::to_string(cc[size_t(parallel::Axis::fsdp)]);
    std::string tp = j > i ? "*" : std::to_string(cc[size_t(parallel::Axis::tp)]);
    // The column of an axis shown only when split: its coordinate, "*" for merged rows.
    auto column = [&](parallel::Axis a) {
      if (m.size(a) == 1) return std::string();
      char c[16];
      std::snprintf(c, sizeof c, " %4s", j > i ? "*" : std::to_string(cc[size_t(a)]).c_str());
      return std::string(c);
    };
    const std::string cp = column(parallel::Axis::cp), ep = column(parallel::Axis::ep);
    std::string pp;  // rows merge only within a stage, so its coordinate stays exact
    if (m.pp > 1) {
      char c[16];
      std::snprintf(c, sizeof c, " %3lld", (long long)cc[size_t(parallel::Axis::pp)]);
      pp = c;
    }
    std::snprintf(line, sizeof line, "%-9s%s %4s %4s%s%s %4s %13s %13s %13s %13s %18lld %11s\n",
                  who.c_str(), pp.c_str(), dp.c_str(), fs.c_str(), ep.c_str(), cp.c_str(), tp.c_str(),
                  human(b.weights_bf16()).c_str(),
                  human(b.master_f32()).c_str(), human(b.grads_f32()).c_str(),
                  human(b.adam_f32()).c_str(), (long long)b.total(), human(b.total()).c_str());
    std::cout << line;
    i = j + 1;
  }
  if (in.run.lora.quantized_base()) {
    // The NF4 records are in the totals; bf16 weights above are the rest of the base.
    std::cout << "nf4 weights per rank (in the totals):";
    for (const auto& b : ranks) std::cout << " " << human(b.weights_nf4());
    std::cout << "\n";
  }
  int64_t sum = 0;
  for (const auto& b : ranks) sum += b.total();
  const auto one = parallel::unsharded_bytes(params);
  std::cout << "sum over ranks: " << sum << " bytes (" << human(sum) << ")\n"
            << "one unsharded copy: " << one.total() << " bytes (" << human(one.total()) << "), "
            << one.elements << " parameters, " << one.trainable_elements << " trainable\n";
}

void print_json(const Inputs& in, const std::vector<parallel::ShardedParam>& params) {
  using nlohmann::json;
  const auto& m = in.mesh;
  json j;
  j["mesh"] = {{"dp", m.dp}, {"fsdp", m.fsdp}, {"tp", m.tp}, {"pp", m.pp}, {"cp", m.cp}, {"ep", m.ep}};
  if (m.ep > 1) {
    // Which experts each ep coordinate holds, and its ranks.
    const int64_t per = in.run.model.num_experts / m.ep;
    json shares = json::array();
    for (int64_t c = 0; c < m.ep; ++c)
      shares.push_back({{"ep", c}, {"experts", {c * per, (c + 1) * per - 1}}, {"ranks", ep_ranks(m, c, nullptr)}});
    j["expert_parallel"] = {{"experts", in.run.model.num_experts}, {"experts_per_rank", per}, {"shares", shares}};
  }
  if (m.cp > 1) {
    // What cp splits: the sequence (each cp rank's chunks of it), and with fsdp the tensors.
    const int64_t seq = in.run.train.seq_len, chunks = 2 * m.cp;
    json shares = json::array();
    for (int64_t r = 0; r < m.cp; ++r) shares.push_back({{"cp", r}, {"chunks", {r, chunks - 1 - r}}});
    j["context_parallel"] = {{"seq_len", seq}, {"chunks", chunks},
                             {"chunk_tokens", seq / chunks}, {"tokens_per_rank", seq / m.cp},
                             {"shares", shares}, {"weights", "sharded over fsdp x cp"}};
  }
  j["world"] = m.world();
  // The vocabulary rows the blocks below hold (parallel/vocab_padding.h): vocab_size unless tp
  // does not divide it.
  j["vocab_size"] = in.run.model.vocab_size;
  j["padded_vocab_size"] = parallel::padded_vocab_size(in.run.model.vocab_size, m.tp);
  j["assumption"] = kAssumption;
  if (m.pp > 1) {
    json stages = json::array();
    const int64_t per_stage = m.world() / m.pp;
    for (int s = 0; s < int(m.pp); ++s) {
      // Each chunk's units [first, last] (one chunk without train.pp_virtual).
      json chunks = json::array();
      int64_t blocks = 0;
      for (const UnitSpan& u : parallel::rank_chunks(in.stages.blocks, int(m.pp), s)) chunks.push_back({u.first, u.last});
      for (int64_t c = s; c < int64_t(in.stages.blocks.size()); c += m.pp) blocks += in.stages.blocks[size_t(c)];
      const bool tied_copy = s != 0 && parallel::stage_holds(in.stages.config, in.stages.blocks, s, in.stages.chunks)[0];
      stages.push_back({{"stage", s}, {"blocks", blocks}, {"units", chunks[0]}, {"chunks", chunks},
                        {"tied_head_copy", tied_copy},
                        {"describe", parallel::describe_stage_units(in.stages.config, in.stages.blocks, s, int(m.pp))},
                        {"ranks", {s * per_stage, (s + 1) * per_stage - 1}}});
    }
    j["stages"] = stages;
  }
  j["tensors"] = json::array();
  for (const auto& p : params) {
    const auto& t = p.layout;
    json spec = json::array();
    for (const auto& axes : t.spec.dims) {
      json a = json::array();
      for (auto ax : axes) a.push_back(parallel::axis_name(ax));
      spec.push_back(a);
    }
    json blocks = json::array();
    const std::vector<int> held = in.stages.stages_holding(t.name);
    for (int64_t r = 0; r < m.world(); ++r) {
      if (!in.stages.holds(stage_of(m, r), t.name) || !t.held_by(r)) continue;
      json ranges = json::array();
      for (size_t d = 0; d < t.shape.size(); ++d) ranges.push_back({t.range(r, d).begin, t.range(r, d).end});
      blocks.push_back({{"rank", r}, {"ranges", ranges}});
    }
    j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"spec", spec},
                            {"local_shape", t.local_shape}, {"trainable", p.trainable},
                            {"replication", replication(in, t)}, {"stages", held}, {"blocks", blocks}});
    // An expert's: its index and the ep coordinate holding it (-1: every ep coordinate).
    if (p.param.expert >= 0) j["tensors"].back()["expert"] = p.param.expert, j["tensors"].back()["ep_owner"] = t.ep_owner;
  }
  int64_t sum = 0;
  j["ranks"] = json::array();
  for (const auto& b : parallel::bytes_per_rank(params, m, in.stages)) {
    const auto cc = parallel::coords_of(m, b.rank);
    j["ranks"].push_back({{"rank", b.rank},
                          {"coords", {{"pp", cc[size_t(parallel::Axis::pp)]},
                                      {"dp", cc[size_t(parallel::Axis::dp)]},
                                      {"fsdp", cc[size_t(parallel::Axis::fsdp)]},
                                      {"ep", cc[size_t(parallel::Axis::ep)]},
                                      {"cp", cc[size_t(parallel::Axis::cp)]},
                                      {"tp", cc[size_t(parallel::Axis::tp)]}}},
                          {"elements", b.elements},
                          {"trainable_elements", b.trainable_elements},
                          {"bytes", {{"weights_bf16", b.weights_bf16()}, {"weights_nf4", b.weights_nf4()}, {"master_f32", b.master_f32()},
                                     {"grads_f32", b.grads_f32()}, {"adam_f32", b.adam_f32()},
                                     {"total", b.total()}}}});
    sum += b.total();
  }
  j["total_bytes"] = sum;
  j["unsharded_bytes"] = parallel::unsharded_bytes(params).total();
  std::cout << j.dump(2) << "\n";
}

}  // namespace

Action add_shard_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("shard", "Show how a model's tensors lie on a device mesh and the bytes per rank");
  sub->add_option("--mesh", o->mesh, "mesh axes, e.g. dp=1,fsdp=2,tp=2 (default: [mesh] of --config)");
  auto* cfg = sub->add_option("--config,-c", o->config,
                  "TOML run configuration (default: none, the built-in run)")->check(CLI::ExistingFile);
  auto* mdl = sub->add_option("--model,-m", o->model,
                  "HF model directory, llama2.c .bin or a Hugging Face Hub id ORG/NAME, only its config is read (default: none, the config's model)");
  sub->add_option("--revision", o->revision,
                  "with a Hugging Face Hub id as the model: its branch, tag or commit (default: main)");
  auto* pre = sub->add_option("--preset", o->preset, "published architecture (default: none, the config's model)")
                  ->check(CLI::IsMember(published_preset_names()));
  cfg->excludes(mdl)->excludes(pre);
  mdl->excludes(pre);
  sub->add_option("--set", o->overrides,
                  "override a config value: section.key=value, e.g. lora.enabled=true; repeatable (default: none)");
  sub->add_option("--rules", o->rules,
                  "TOML file with [[partition.rules]] tried before the config's and the defaults (default: none)")
      ->check(CLI::ExistingFile);
  sub->add_option("--pp-blocks", o->pp_blocks,
                  "blocks per pipeline stage, first to last (\"3,5\"), under pp (default: the config's "
                  "train.pp_blocks, else the trainer's split balanced by cost)");
  sub->add_flag("--json", o->json, "machine-readable output: every tensor's blocks and the bytes per rank");
  sub->add_flag("--all", o->all, "show every tensor instead of one entry per per-layer pattern");
  return [o] {
    Inputs in = resolve(*o);
    // As the trainer lays the model out: a vocabulary tp does not divide padded with zero rows.
    auto params = parallel::shard_params(parallel::laid_out_shapes(llama_param_shapes(in.run.model, in.run.lora), in.mesh.tp),
                                     in.run.lora.enabled, in.rules, in.mesh, in.run.lora.quantized_base());
    if (o->json) print_json(in, params);
    else print_text(in, params, o->all);
    return 0;
  };
}

}  // namespace mt::cli

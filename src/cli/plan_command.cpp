// meshtrain plan: before booking a cluster, whether a run fits, how fast it will go and which
// layout is best. Shape-only (nothing allocated): the model's tensors are laid out with the
// trainer's partition rules, then src/plan's memory and time models price them.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/count_check.h"
#include "core/error.h"
#include "core/work_gate.h"
#include "io/family_presets.h"
#include "io/hub_model.h"
#include "plan/report.h"
#include "plan/run_memory.h"

namespace mt::cli {
namespace {

struct PlanOptions {
  std::string model = "llama3-8b", revision, cluster = "mi300x-node", mesh, mode = "full", precision = "bf16";
  std::string base_dtype = "bf16", pp_blocks, pp_schedule = "1f1b";
  std::string lora_targets = "q,k,v,o,gate,up,down", svg;
  int64_t devices = 0, lora_rank = 8, seq = 2048, global_batch = 8, micro_batch = 1, top = 10;
  int zero = 0;
  int64_t pp_virtual = 1;
  int64_t grad_accum = 0;  // > 0 with --search: micro-batches per step fixed, as train.grad_accum
  double dp_bucket_mb = 25.0;  // as train.dp_bucket_mb
  double host_load = -1.0;     // >= 0: a shared host's background load (--host-load); < 0: the cluster's
  double moe_imbalance = 1.0;  // the busiest ep rank's expert rows over the mean (PlanInput::moe_imbalance)
  float moe_capacity_factor = 0.0f;  // train.moe_capacity_factor (0: dropless)
  bool checkpointing = false, search = false, json = false, no_overlap = false, keep_checkpointing = false;
  bool no_sequence_parallel = false;
  bool list_models = false;
  // Preference training's method and reference (train.method, preference.reference): the forwards
  // a step runs besides its training pass.
  std::string method = "sft", reference = "auto";
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

plan::PlanInput make_input(const PlanOptions& o) {
  plan::PlanInput in;
  // A Hub id: its config.json from the Hugging Face cache (downloaded alone when absent), the
  // model named as given rather than by its snapshot's commit.
  const std::string local = hub::resolve_model_path(o.model, o.revision, hub::HubFiles::config_only);
  in.model = plan::resolve_model(local);
  if (local != o.model) in.model.name = o.model;
  in.cluster = plan::resolve_cluster(o.cluster);
  if (o.host_load >= 0.0) {
    if (in.cluster.host_cores <= 0)
      fail("--host-load prices processes sharing a host's cores: cluster '" + in.cluster.name +
           "' is not a shared host (the cpu preset, or a TOML with host_cores)");
    in.cluster.host_load = o.host_load;
  }
  if (o.mode == "lora") {
    in.lora.enabled = true;
    in.lora.rank = o.lora_rank;
    in.lora.targets = split_commas(o.lora_targets);
    if (o.lora_rank <= 0) fail("--lora-rank must be > 0, got " + std::to_string(o.lora_rank));
    static const std::vector<std::string> known = {"q",    "k",  "v",       "o",      "gate",   "up",
                                                   "down", "lm_head", "c_attn", "c_proj", "c_fc"};
    for (const auto& t : in.lora.targets)
      if (std::find(known.begin(), known.end(), t) == known.end())
        fail("--lora-targets: unknown target '" + t +
             "' (expected some of q,k,v,o,gate,up,down,lm_head, or GPT-2's c_attn,c_proj,c_fc)");
  } else if (o.mode != "full") {
    fail("--mode must be full or lora, got '" + o.mode + "'");
  }
  in.base_dtype = plan::parse_base_dtype(o.base_dtype);
  if (o.precision == "bf16") in.precision = Precision::bf16;
  else if (o.precision == "fp32") in.precision = Precision::fp32;
  else fail("--precision must be bf16 or fp32, got '" + o.precision + "'");
  in.seq = o.seq, in.global_batch = o.global_batch, in.micro_batch = o.micro_batch;
  in.checkpointing = o.checkpointing;
  in.zero = o.zero;
  in.overlap = !o.no_overlap;
  in.sequence_parallel = !o.no_sequence_parallel;
  if (!(o.dp_bucket_mb >= 0) || o.dp_bucket_mb > 1e9)
    fail("--dp-bucket-mb must be between 0 and 1e9, got " + std::to_string(o.dp_bucket_mb));
  in.dp_bucket_bytes = o.dp_bucket_mb * 1e6;
  in.pp_blocks = o.pp_blocks;
  in.pp_schedule = parallel::parse_pipeline_schedule(o.pp_schedule);
  if (o.pp_virtual < 1) fail("--pp-virtual must be >= 1, got " + std::to_string(o.pp_virtual));
  in.pp_virtual = o.pp_virtual;
  in.moe_imbalance = o.moe_imbalance;
  if (o.moe_capacity_factor > 0.0f) {
    if (!in.model.config.moe())
      fail("--moe-capacity-factor caps a mixture of experts' experts; " + in.model.name + " is dense");
    in.model.config.moe_capacity_factor = o.moe_capacity_factor;
  }
  in.extra_forwards = plan::preference_forwards(o.method, in.lora.enabled, o.reference);
  if (o.devices < 0) fail("--devices must be > 0, got " + std::to_string(o.devices));
  if (o.top <= 0) fail("--top must be > 0, got " + std::to_string(o.top));
  if (o.grad_accum < 0) fail("--grad-accum must be > 0, got " + std::to_string(o.grad_accum));
  if ((o.grad_accum > 0 || o.keep_checkpointing) && !o.search)
    fail(std::string(o.grad_accum > 0 ? "--grad-accum" : "--keep-checkpointing") +
         " shapes the search: give it with --search (a single plan takes --micro-batch and --checkpointing)");
  if (!o.mesh.empty()) in.mesh = parallel::MeshShape::parse(o.mesh);
  else if (!o.search) fail("give --mesh dp=..,fsdp=..,tp=..,pp=..,cp=..,ep=.. (or --search with --devices)");
  if (!o.mesh.empty() && o.devices > 0 && in.mesh.world() != o.devices)
    fail("mesh " + in.mesh.str() + " has " + std::to_string(in.mesh.world()) + " ranks but --devices is " +
         std::to_string(o.devices));
  return in;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text)) fail(path + ": cannot write");
}

// Every preset --model takes, with the parameters plan counts for it (the tensors the model
// declares) and, for the families, the figure their model card publishes.
void list_models(std::ostream& os) {
  for (const auto& name : plan::model_preset_names()) {
    const plan::ModelShape m = plan::model_preset(name);
    const plan::ModelParts parts = plan::model_parts(m, LoraConfig{});
    const int64_t n = plan::total_params(parts, m.layers(), false);
    os << name << std::string(name.size() < 18 ? 18 - name.size() : 1, ' ') << n;
    if (m.config.moe()) os << ", " << plan::active_params(parts, m.config, m.layers()) << " active";
    if (const FamilyPreset* p = find_family_preset(name)) {
      os << "  (published " << p->published << ", " << p->source;
      if (*p->published_active) os << "; " << p->published_active << " active";
      os << ")";
    }
    os << "\n";
  }
}

int run_plan(const PlanOptions& o) {
  if (o.list_models) {
    list_models(std::cout);
    return 0;
  }
  plan::PlanInput in = make_input(o);
  // A shared host's memory (the cpu preset's, or a TOML with host_cores) is shared by its ranks.
  auto share_host_memory = [&](int64_t ranks) {
    if (in.cluster.host_cores > 0) in.cluster.memory_bytes /= double(ranks);
  };
  if (o.search) {
    const int64_t devices = o.devices > 0 ? o.devices : in.mesh.world();
    if (o.devices <= 0 && o.mesh.empty()) fail("--search needs --devices N");
    share_host_memory(devices);
    plan::SearchSpace space;
    space.grad_accum = o.grad_accum;
    space.vary_checkpointing = !o.keep_checkpointing;
    work_gate::reached("plan --search");
    const auto r = plan::search_layouts(in, devices, space);
    if (o.json) std::cout << plan::search_json(r, size_t(o.top)).dump(2) << "\n";
    else plan::print_search(std::cout, r, size_t(o.top));
    if (!o.svg.empty()) write_file(o.svg, plan::front_svg(r, in.cluster.memory_bytes));
    return 0;
  }
  plan::validate(in);
  share_host_memory(in.mesh.world());
  plan::Candidate c{in, plan::peak_memory(in), plan::step_time(in)};
  if (o.json) std::cout << plan::plan_json(c).dump(2) << "\n";
  else plan::print_plan(std::cout, c);
  if (!o.svg.empty()) write_file(o.svg, plan::memory_svg(c));
  return 0;
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand("plan", "Predict memory per device and time per step of a run, or search layouts");
  sub->add_option("--model", o->model,
                  "a preset (llama3-8b, qwen3-8b, mistral-7b, gpt-175b, ...: --list-models), a config.json "
                  "or a model directory, or a Hugging Face Hub id ORG/NAME (its config.json only)");
  sub->add_option("--revision", o->revision,
                  "with a Hub id: its branch, tag or commit (default: main)");
  sub->add_flag("--list-models", o->list_models, "print the presets --model takes, with their parameter counts");
  sub->add_option("--cluster", o->cluster,
                  "mi300x-node|frontier|dgx-h100|dgx-h200|cpu or a .toml file (cpu: this machine, one host whose "
                  "cores, memory and shared-memory link the ranks share)");
  sub->add_option("--devices", o->devices,
                  "device count: must equal the mesh's product, required for --search; 0: the mesh's product")
      ->check(count_in(0, plan::kMaxSearchDevices));
  sub->add_option("--host-load", o->host_load,
                  "with a shared host (--cluster cpu, or a TOML with host_cores): processes of other work on it "
                  "beside the ranks, as `train --mesh auto` reads them running now (default: the cluster's, "
                  "0 for cpu: an idle host)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--mesh", o->mesh,
                  "dp=..,fsdp=..,tp=..,pp=..,cp=..,ep=.. (ep: a mixture of experts' experts split over ranks) "
                  "(default: none; needed unless --search)");
  sub->add_option("--moe-imbalance", o->moe_imbalance,
                  "a mixture of experts under ep: the rows the busiest ep rank's experts compute over the mean, "
                  "a factor on the expert compute every rank waits for (1: balanced routing)")
      ->check(CLI::Range(1.0, 1e6));
  sub->add_option("--moe-capacity-factor", o->moe_capacity_factor,
                  "a mixture of experts' train.moe_capacity_factor: each expert takes at most ceil(factor N k / E) "
                  "of a rank's choices, which bounds the rows an ep rank receives (its activations) and the "
                  "imbalance (default: 0, dropless)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--mode", o->mode, "full or lora");
  sub->add_option("--method", o->method,
                  "sft, or preference training (dpo, ipo, simpo, orpo): a forward of the policy before each "
                  "training pass, and for dpo and ipo under LoRA one of the reference (adapters off)")
      ->check(CLI::IsMember({"sft", "dpo", "ipo", "simpo", "orpo"}));
  sub->add_option("--reference", o->reference,
                  "dpo and ipo's reference: auto (adapters_off under --mode lora, else precomputed), "
                  "adapters_off or precomputed (computed once before training: no forward a step)")
      ->check(CLI::IsMember({"auto", "adapters_off", "precomputed"}));
  sub->add_option("--lora-rank", o->lora_rank, "LoRA rank");
  sub->add_option("--lora-targets", o->lora_targets, "comma-separated: q,k,v,o,gate,up,down,lm_head");
  sub->add_option("--base-dtype", o->base_dtype,
                  "frozen base under LoRA: bf16 (the compute copy) or nf4 (QLoRA: the layers' matrices in 4 bits)");
  sub->add_option("--precision", o->precision, "bf16 (mixed) or fp32");
  sub->add_option("--seq", o->seq, "sequence length");
  sub->add_option("--global-batch", o->global_batch, "sequences per optimizer step");
  sub->add_option("--micro-batch", o->micro_batch, "sequences per micro-batch per data-parallel rank");
  sub->add_flag("--checkpointing", o->checkpointing, "activation checkpointing (recompute each layer)");
  sub->add_option("--zero", o->zero, "0-3: also shard optimizer (1), grads (2), weights (3) over dp");
  sub->add_flag("--no-overlap", o->no_overlap, "communication does not overlap compute (eager execution)");
  sub->add_flag("--no-sequence-parallel", o->no_sequence_parallel,
                "tp without sequence parallelism (train.sequence_parallel = false): the residual stream whole on every tp rank");
  sub->add_option("--dp-bucket-mb", o->dp_bucket_mb,
                  "megabytes per data-parallel gradient bucket, as train.dp_bucket_mb (default 25; 0: one "
                  "reduction after the backward, none of it hidden)");
  sub->add_option("--pp-blocks", o->pp_blocks,
                  "blocks per pipeline stage, first to last (\"3,5\"), as train.pp_blocks (default: none, "
                  "the trainer's split balanced by cost)");
  sub->add_option("--pp-schedule", o->pp_schedule,
                  "1f1b (at most pp - stage micro-batches in flight) or gpipe (all of them), as train.pp_schedule")
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
  sub->add_option("--pp-virtual", o->pp_virtual,
                  "chunks per pipeline stage, as train.pp_virtual (> 1: interleaved 1F1B; --pp-blocks then "
                  "gives blocks per chunk)");
  sub->add_flag("--search", o->search, "enumerate layouts for --devices and rank those that fit");
  sub->add_option("--grad-accum", o->grad_accum,
                  "with --search: micro-batches per step, as train.grad_accum, the same for every layout "
                  "(its micro-batch is then --global-batch / (dp x fsdp x ep x N)); the search `train --mesh auto` "
                  "makes (default: 0, micro-batches searched)");
  sub->add_flag("--keep-checkpointing", o->keep_checkpointing,
                "with --search: only layouts with --checkpointing as given, as `train --mesh auto` "
                "(default: both tried)");
  sub->add_option("--top", o->top, "rows of the search table");
  sub->add_flag("--json", o->json, "JSON output");
  sub->add_option("--svg", o->svg,
                  "write the memory breakdown (or with --search the front) as SVG (default: none, not written)");
  return [o] { return run_plan(*o); };
}

}  // namespace mt::cli

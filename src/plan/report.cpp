#include "plan/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "plan/expert_traffic.h"
#include "plan/memory_model.h"
#include "plan/model_shape.h"

namespace mt::plan {
namespace {

constexpr double kBytesPerGB = 1e9;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mode_str(const PlanInput& in) {
  // Preference training runs forwards besides the training pass (PlanInput::extra_forwards).
  const std::string pref = in.extra_forwards == 0 ? ""
                           : in.extra_forwards == 1 ? ", preference training: +1 forward a step"
                                                    : ", preference training: +2 forwards a step (policy, reference)";
  if (!in.lora.enabled) return "full" + pref;
  std::string t;
  for (const auto& s : in.lora.targets) t += (t.empty() ? "" : ",") + s;
  return "lora r=" + std::to_string(in.lora.rank) + " [" + t + "]" + pref;
}

// The parameters the plan priced: the whole base model, and what the optimizer updates (the
// base in full training, the adapters under LoRA).
// A mixture of experts also: the base parameters a token uses (active_params).
struct ParamCounts {
  int64_t base = 0, trainable = 0, active = 0;
};

ParamCounts param_counts(const PlanInput& in) {
  const ModelParts parts = model_parts(in.model, in.lora);
  const int64_t base = total_params(parts, in.model.layers(), /*adapters=*/false);
  return {base, in.lora.enabled ? total_params(parts, in.model.layers(), /*adapters=*/true) : base,
          active_params(parts, in.model.config, in.model.layers())};
}

// A mixture of experts' expert weights (their base matrices, as stored: NF4 under QLoRA): on one
// rank of the priced stage, and in the whole model. They are placed by the partition rules like
// every tensor (split over fsdp x cp, whole on each dp replica), and under ep a rank holds only
// its ep coordinate's E / ep of them (count_elems, from parallel::shard_params).
struct ExpertBytes {
  double per_rank = 0.0, total = 0.0;
};

ExpertBytes expert_bytes(const PlanInput& in, int64_t stage) {
  const ModelParts parts = model_parts(in.model, in.lora);
  std::vector<ParamShape> experts;
  for (const auto& t : parts.layer)
    if (!t.adapter && is_expert_param(t)) experts.push_back(t);
  const ElemCount e = count_elems(experts, in);
  const double wbytes = in.precision == Precision::bf16 ? 2.0 : 4.0;
  int64_t all = 0;
  for (const auto& t : experts) all += t.numel();
  const bool nf4 = in.lora.enabled && in.base_dtype == BaseDtype::nf4;
  const double per_elem = nf4 ? kNf4BytesPerWeight : wbytes;
  const std::vector<StageParams> stages = stage_params(in);
  const double layers = double(stages[size_t(std::clamp<int64_t>(stage, 0, int64_t(stages.size()) - 1))].layers);
  return {layers * (wbytes * double(e.local - e.local_nf4) + kNf4BytesPerWeight * double(e.local_nf4)),
          double(in.model.layers()) * per_elem * double(all)};
}

// 8030261248 -> "8.03 B"
std::string short_count(int64_t n) {
  const double v = double(n);
  if (v >= 1e9) return fmt("%.2f B", v / 1e9);
  if (v >= 1e6) return fmt("%.2f M", v / 1e6);
  if (v >= 1e3) return fmt("%.2f K", v / 1e3);
  return std::to_string(n);
}

std::string parameters_line(const PlanInput& in) {
  const ParamCounts n = param_counts(in);
  std::string s = "parameters: " + std::to_string(n.base) + " base (" + short_count(n.base) + "), " +
                  std::to_string(n.trainable) + " trainable (" + short_count(n.trainable) +
                  (in.lora.enabled ? ", LoRA adapters" : "") + ")";
  const auto& c = in.model.config;
  if (c.moe())
    s += ", " + std::to_string(n.active) + " active (" + short_count(n.active) + ": " +
         std::to_string(c.num_experts_per_tok) + " of " + std::to_string(c.num_experts) +
         " experts a token; FLOPs counted on these)";
  return s;
}

// "experts: 13.41 GB per rank of 107.3 GB": a mixture of experts only.
std::string experts_line(const PlanInput& in, int64_t stage) {
  const ExpertBytes b = expert_bytes(in, stage);
  const auto& m = in.mesh;
  const int64_t E = in.model.config.num_experts;
  std::string where = m.ep > 1 ? std::to_string(E / m.ep) + " of " + std::to_string(E) + " experts a layer on each of ep=" +
                                     std::to_string(m.ep) + " ranks"
                               : "all " + std::to_string(E) + " experts a layer on every rank (no ep)";
  if (m.shards() > 1) where += ", split over fsdp x cp = " + std::to_string(m.shards());
  return "experts: " + fmt("%.2f GB", b.per_rank / kBytesPerGB) + " per rank (stage " + std::to_string(stage) +
         ") of " + fmt("%.2f GB", b.total / kBytesPerGB) + " in all; " + where + " (tp refused)";
}

// "ep all-to-all: 33.55 MB a rank sends per exchange, 5 exchanges a MoE layer (2 forward, 3
// backward) on the intra-node link": under ep only.
std::string all_to_all_line(const PlanInput& in) {
  const ExpertExchange x = expert_exchange(in);
  return "ep all-to-all: " + fmt("%.2f MB", x.bytes / 1e6) + " a rank sends per exchange and micro-batch (" +
         fmt("%.3f ms", x.seconds * 1e3) + "), " + fmt("%.0f", kExpertExchangesForward) + " forward + " +
         fmt("%.0f", kExpertExchangesBackward) + " backward a MoE layer, on the " +
         (x.intra_node ? "intra-node" : "inter-node") + " link; expert compute imbalance x" +
         fmt("%.2f", in.expert_load()) +
         (in.model.config.moe_capacity_factor > 0.0f
              ? " (capacity factor " + fmt("%.2f", in.model.config.moe_capacity_factor) + ")"
              : std::string());
}

// "base weights: 215.73 GB (nf4: ...)": the figure QLoRA is about.
std::string weights_line(const PlanInput& in) {
  const bool nf4 = in.lora.enabled && in.base_dtype == BaseDtype::nf4;
  const std::string copy = in.precision == Precision::bf16 ? "bf16" : "f32";
  return "base weights: " + fmt("%.2f GB", base_weight_bytes(in) / kBytesPerGB) + " (" +
         (nf4 ? fmt("nf4: layer matrices at %.4f bits, embedding, head and norms ", kNf4BytesPerWeight * 8.0) + copy
              : copy) +
         ")";
}

const char* schedule_name(parallel::PipelineSchedule s) {
  return s == parallel::PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

// Each stage's units and memory (pp > 1): the busiest one is the peak above, but a pipeline's
// stages differ (the embedding, the head, the in-flight micro-batches of 1F1B's warm-up).
struct StageMemory {
  StageParams params;
  std::string units;
  MemoryBreakdown memory;
};

std::vector<StageMemory> stage_memory(const PlanInput& in) {
  const std::vector<int64_t> blocks = stage_blocks(in);
  std::vector<StageMemory> out;
  for (const StageParams& s : stage_params(in)) {
    std::string units;  // each of the stage's chunks (s, s + pp, ... under train.pp_virtual)
    for (int64_t c = s.index; c < int64_t(blocks.size()); c += in.mesh.pp)
      units += (units.empty() ? "" : "; ") + parallel::describe_units(in.model.config, blocks, int(c));
    out.push_back({s, units, memory_per_device(in, s)});
  }
  return out;
}

std::string mesh_str(const parallel::MeshShape& m) {
  return "dp=" + std::to_string(m.dp) + ",fsdp=" + std::to_string(m.fsdp) + ",tp=" + std::to_string(m.tp) +
         ",pp=" + std::to_string(m.pp) + (m.cp > 1 ? ",cp=" + std::to_string(m.cp) : "") +
         (m.ep > 1 ? ",ep=" + std::to_string(m.ep) : "");
}

}  // namespace

// What is sharded where: fsdp (over fsdp x cp) is ZeRO-3 by construction; --zero says what dp
// shards besides. "ZeRO-0" beside fsdp=8 read as if nothing were sharded.
std::string zero_str(const PlanInput& in) {
  // The blocks are split over fsdp x cp (parallel/layout.h shard_spec).
  const std::string over = in.mesh.fsdp > 1 && in.mesh.cp > 1 ? "fsdp x cp" : in.mesh.cp > 1 ? "cp" : "fsdp";
  const std::string fsdp = in.mesh.shards() > 1 ? "ZeRO-3 over " + over : "";
  if (!fsdp.empty() && in.mesh.dp == 1) return fsdp;
  return (fsdp.empty() ? "" : fsdp + ", ") + "ZeRO-" + std::to_string(in.zero) + (in.mesh.dp > 1 ? " over dp" : "");
}

// "8 devices = 1 node of mi300x-node": the devices and the nodes they fill ("8 x mi300x-node" read
// as eight nodes).
std::string devices_str(const PlanInput& in) {
  const int64_t n = in.mesh.world(), per = std::max<int64_t>(1, in.cluster.devices_per_node);
  const int64_t nodes = (n + per - 1) / per;
  return std::to_string(n) + (n == 1 ? " device = " : " devices = ") + std::to_string(nodes) +
         (nodes == 1 ? " node of " : " nodes of ") + in.cluster.name;
}

std::string describe_input(const PlanInput& in) {
  return in.model.name + ", " + mode_str(in) + (in.base_dtype == BaseDtype::nf4 ? ", nf4 base" : "") + ", " +
         precision_name(in.precision) +
         ", batch " + std::to_string(in.global_batch) + " x seq " + std::to_string(in.seq) + " (micro-batch " +
         std::to_string(in.micro_batch) + ", " + std::to_string(in.micro_batches()) + " per step)" +
         (in.checkpointing ? ", checkpointing" : "") + ", " + zero_str(in) + ", mesh " + mesh_str(in.mesh) + " on " +
         devices_str(in);
}

void print_plan(std::ostream& os, const Candidate& c) {
  const auto& m = c.memory;
  const auto& t = c.time;
  os << describe_input(c.input) << "\n" << parameters_line(c.input) << "\n" << weights_line(c.input) << "\n";
  if (c.input.model.config.moe()) os << experts_line(c.input, m.stage) << "\n";
  if (c.input.mesh.ep > 1) os << all_to_all_line(c.input) << "\n";
  os << "\n";
  os << "memory per device (pipeline stage " << m.stage << ", the largest)\n";
  for (const auto& i : m.items)
    os << "  " << i.name << std::string(24 - std::min<size_t>(22, i.name.size()), ' ') << fmt("%10.2f GB", i.bytes / kBytesPerGB)
       << fmt("  %5.1f%%\n", 100.0 * i.bytes / m.capacity);
  os << "  total" << std::string(19, ' ') << fmt("%10.2f GB", m.total / kBytesPerGB)
     << fmt("  %5.1f%% of ", 100.0 * m.total / m.capacity) << fmt("%.0f GB", m.capacity / kBytesPerGB)
     << (m.fits() ? "  fits\n" : "  DOES NOT FIT\n");
  if (c.input.mesh.pp > 1) {
    const auto& in = c.input;
    const bool virt = in.pp_virtual > 1;
    os << "\npipeline: " << in.mesh.pp << " stages, " << schedule_name(in.pp_schedule)
       << (virt ? " interleaved, " + std::to_string(in.pp_virtual) + " chunks per stage" : std::string())
       << ", blocks " << parallel::blocks_text(stage_blocks(in)) << ", " << in.micro_batches()
       << " micro-batches, bubble fraction " << fmt("%.3f", t.bubble_fraction)
       << (virt ? " = (p-1)/(v m+p-1)\n" : " = (p-1)/(m+p-1)\n");
    for (const StageMemory& s : stage_memory(in))
      os << "  stage " << s.params.index << fmt("  %8.2f GB  ", s.memory.total / kBytesPerGB) << s.units << "\n";
  }
  os << "\ntime per step (slowest stage)\n";
  auto row = [&](const char* name, double s) {
    os << "  " << name << std::string(24 - std::string(name).size(), ' ') << fmt("%10.4f s", s)
       << fmt("  %5.1f%%\n", t.step > 0 ? 100.0 * s / t.step : 0.0);
  };
  row("compute", t.compute);
  row("tp all-reduce", t.tp);
  row("fsdp exposed", t.fsdp_exposed);
  row("pp send/recv", t.pp);
  if (c.input.mesh.cp > 1) row("cp K/V exchange", t.cp);
  if (c.input.mesh.ep > 1) row("ep all-to-all", t.ep);
  row("pipeline bubble", t.bubble);
  row("dp exposed", t.dp_exposed);
  row("optimizer", t.optimizer);
  row("step", t.step);
  os << fmt("  (fsdp traffic %.4f s and dp traffic ", t.fsdp) << fmt("%.4f s before overlap; ", t.dp)
     << fmt("bubble fraction %.3f)\n", t.bubble_fraction);
  os << "\nthroughput\n"
     << fmt("  tokens/s                %12.1f\n", t.tokens_per_s)
     << fmt("  TFLOP/s per device      %12.2f\n", t.tflops_per_device)
     << fmt("  MFU                     %11.2f%%", 100.0 * t.mfu)
     << "  (model FLOPs per token: 6N + 12·L·Q·s, Q = heads x head_dim, a window's band of s x s; LoRA 4N + 6N_lora + the same)\n"
     << fmt("  Megatron %% of peak      %11.2f%%", 100.0 * t.megatron_fraction)
     << "  (24·c·B·s·l·h²·(1 + s/6h + V/16lh), c = " << (c.input.checkpointing ? "4)\n" : "3)\n");
}

void print_search(std::ostream& os, const SearchResult& r, size_t top) {
  // Every layout prices the same model and mode.
  for (const auto* v : {&r.ranked, &r.too_big})
    if (!v->empty()) {
      os << parameters_line(v->front().input) << "\n" << weights_line(v->front().input) << "\n";
      break;
    }
  os << r.considered << " layouts evaluated, " << r.ranked.size() << " fit, " << r.too_big.size()
     << " do not fit, " << r.invalid << " meshes skipped (model or batch not divisible)\n";
  os << "\n";
  if (r.ranked.empty()) {
    os << "no layout fits\n";
    return;
  }
  // The ep column for a mixture of experts only (a dense model has no experts to split).
  const bool moe = r.ranked.front().input.model.config.moe();
  os << "rank  dp  fsdp  tp  pp  cp" << (moe ? "  ep" : "") << "  mb  ckpt  mem/device GB  step s    tokens/s  TFLOP/s/dev    MFU\n";
  for (size_t i = 0; i < std::min(top, r.ranked.size()); ++i) {
    const auto& c = r.ranked[i];
    const auto& m = c.input.mesh;
    char ep[16] = "";
    if (moe) std::snprintf(ep, sizeof ep, " %3ld", long(m.ep));
    char buf[256];
    std::snprintf(buf, sizeof buf, "%4zu %3ld %5ld %3ld %3ld %3ld%s %3ld  %4s  %13.1f %7.3f %11.1f %12.1f %5.1f%%\n",
                  i + 1, long(m.dp), long(m.fsdp), long(m.tp), long(m.pp), long(m.cp), ep, long(c.input.micro_batch),
                  c.input.checkpointing ? "yes" : "no", c.memory.total / kBytesPerGB, c.time.step,
                  c.time.tokens_per_s, c.time.tflops_per_device, 100.0 * c.time.mfu);
    os << buf;
  }
}

nlohmann::json plan_json(const Candidate& c) {
  const auto& in = c.input;
  nlohmann::json j;
  j["model"] = in.model.name;
  j["mode"] = in.lora.enabled ? "lora" : "full";
  j["extra_forwards"] = in.extra_forwards;
  if (in.lora.enabled) j["lora"] = {{"rank", in.lora.rank}, {"targets", in.lora.targets}};
  j["precision"] = precision_name(in.precision);
  j["seq"] = in.seq;
  j["global_batch"] = in.global_batch;
  j["micro_batch"] = in.micro_batch;
  j["micro_batches"] = in.micro_batches();
  j["checkpointing"] = in.checkpointing;
  j["zero"] = in.zero;
  j["mesh"] = {{"dp", in.mesh.dp}, {"fsdp", in.mesh.fsdp}, {"tp", in.mesh.tp},
               {"pp", in.mesh.pp}, {"cp", in.mesh.cp}, {"ep", in.mesh.ep}};
  j["cluster"] = in.cluster.name;
  const ParamCounts n = param_counts(in);
  j["parameters"] = {{"base", n.base}, {"trainable", n.trainable}};
  if (in.model.config.moe()) {
    const ExpertBytes e = expert_bytes(in, c.memory.stage);
    j["parameters"]["active"] = n.active;
    j["experts"] = {{"num_experts", in.model.config.num_experts},
                    {"per_token", in.model.config.num_experts_per_tok},
                    {"bytes_per_rank", e.per_rank}, {"bytes_total", e.total},
                    {"per_ep_rank", in.model.config.num_experts / in.mesh.ep}, {"imbalance", in.expert_load()},
                    {"capacity_factor", in.model.config.moe_capacity_factor}};
    if (in.mesh.ep > 1) {
      const ExpertExchange x = expert_exchange(in);
      j["experts"]["all_to_all"] = {{"bytes_per_exchange", x.bytes}, {"seconds_per_exchange", x.seconds},
                                    {"count_seconds", x.count_seconds},
                                    {"exchanges_forward", kExpertExchangesForward},
                                    {"exchanges_backward", kExpertExchangesBackward},
                                    {"link", x.intra_node ? "intra-node" : "inter-node"}};
    }
  }
  j["base_dtype"] = base_dtype_name(in.base_dtype);
  j["base_weight_bytes"] = base_weight_bytes(in);
  nlohmann::json mem = nlohmann::json::object();
  for (const auto& i : c.memory.items) mem[i.name] = i.bytes;
  j["memory_bytes"] = {{"stage", c.memory.stage}, {"items", mem}, {"total", c.memory.total},
                       {"capacity", c.memory.capacity}, {"fits", c.memory.fits()}};
  if (in.mesh.pp > 1) {
    nlohmann::json stages = nlohmann::json::array();
    for (const StageMemory& s : stage_memory(in)) {
      nlohmann::json items = nlohmann::json::object();
      for (const auto& i : s.memory.items) items[i.name] = i.bytes;
      stages.push_back({{"stage", s.params.index}, {"units", s.units}, {"blocks", s.params.layers},
                        {"memory_bytes", {{"items", items}, {"total", s.memory.total}}}});
    }
    j["pipeline"] = {{"schedule", schedule_name(in.pp_schedule)}, {"virtual", in.pp_virtual},
                     {"blocks", stage_blocks(in)},
                     {"micro_batches", in.micro_batches()}, {"bubble_fraction", c.time.bubble_fraction},
                     {"stages", stages}};
  }
  const auto& t = c.time;
  j["time_s"] = {{"compute", t.compute}, {"tp", t.tp}, {"fsdp", t.fsdp}, {"fsdp_exposed", t.fsdp_exposed},
                 {"pp", t.pp}, {"cp", t.cp}, {"ep", t.ep}, {"dp", t.dp}, {"dp_exposed", t.dp_exposed}, {"bubble", t.bubble},
                 {"bubble_fraction", t.bubble_fraction}, {"optimizer", t.optimizer}, {"step", t.step}};
  j["throughput"] = {{"tokens_per_s", t.tokens_per_s}, {"tflops_per_device", t.tflops_per_device},
                     {"mfu", t.mfu}, {"model_flops_per_step", t.model_flops},
                     {"megatron_flops_per_step", t.megatron_flops}, {"megatron_fraction_of_peak", t.megatron_fraction}};
  return j;
}

nlohmann::json search_json(const SearchResult& r, size_t top) {
  nlohmann::json j;
  j["considered"] = r.considered;
  j["fit"] = r.ranked.size();
  j["too_big"] = r.too_big.size();
  j["invalid_meshes"] = r.invalid;
  j["top"] = nlohmann::json::array();
  for (size_t i = 0; i < std::min(top, r.ranked.size()); ++i) j["top"].push_back(plan_json(r.ranked[i]));
  return j;
}

std::string memory_svg(const Candidate& c) {
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  const double W = 760, left = 20, bar = 720, cap = std::max(c.memory.capacity, c.memory.total);
  std::ostringstream s;
  const int rows = int(c.memory.items.size());
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << 130 + 18 * rows
    << "' font-family='sans-serif' font-size='12'>\n";
  s << "<text x='20' y='20' font-size='14'>Memory per device: " << describe_input(c.input).substr(0, 110)
    << "</text>\n";
  double x = left;
  int k = 0;
  for (const auto& i : c.memory.items) {
    const double w = bar * i.bytes / cap;
    s << "<rect x='" << x << "' y='40' width='" << w << "' height='30' fill='" << colors[k % 10] << "'/>\n";
    s << "<rect x='20' y='" << 90 + 18 * k << "' width='12' height='12' fill='" << colors[k % 10] << "'/>"
      << "<text x='38' y='" << 100 + 18 * k << "'>" << i.name << ": " << fmt("%.2f GB", i.bytes / kBytesPerGB)
      << "</text>\n";
    x += w, ++k;
  }
  const double cx = left + bar * c.memory.capacity / cap;
  s << "<line x1='" << cx << "' y1='32' x2='" << cx << "' y2='78' stroke='black' stroke-width='2'/>\n";
  s << "<text x='" << std::min(cx, W - 200) << "' y='" << 100 + 18 * rows << "'>capacity "
    << fmt("%.0f GB", c.memory.capacity / kBytesPerGB) << ", total " << fmt("%.1f GB", c.memory.total / kBytesPerGB)
    << (c.memory.fits() ? " (fits)" : " (does not fit)") << "</text>\n</svg>\n";
  return s.str();
}

std::string front_svg(const SearchResult& r, double capacity) {
  const double W = 720, H = 480, L = 70, B = 50, T = 30, R = 20;
  double xmax = capacity, ymax = 0;
  for (const auto* v : {&r.ranked, &r.too_big})
    for (const auto& c : *v) xmax = std::max(xmax, c.memory.total), ymax = std::max(ymax, c.time.tokens_per_s);
  // Layouts far past the capacity would squeeze the interesting part: clip the axis at 3x.
  xmax = std::min(xmax, 3.0 * capacity) * 1.05, ymax = ymax > 0 ? ymax * 1.05 : 1.0;
  auto X = [&](double v) { return L + (W - L - R) * std::min(v, xmax) / xmax; };
  auto Y = [&](double v) { return H - B - (H - B - T) * v / ymax; };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n";
  s << "<text x='" << L << "' y='18' font-size='14'>Search: tokens/s against peak memory per device</text>\n";
  s << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='black'/>\n";
  s << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='black'/>\n";
  s << "<text x='" << (W / 2) << "' y='" << H - 12 << "'>memory per device (GB), max " << fmt("%.0f", xmax / kBytesPerGB)
    << "</text>\n";
  s << "<text x='12' y='" << T + 10 << "'>tok/s</text><text x='12' y='" << T + 26 << "'>" << fmt("%.0f", ymax)
    << "</text>\n";
  s << "<line x1='" << X(capacity) << "' y1='" << T << "' x2='" << X(capacity) << "' y2='" << H - B
    << "' stroke='red' stroke-dasharray='4'/><text x='" << X(capacity) + 4 << "' y='" << T + 12
    << "' fill='red'>capacity</text>\n";
  for (const auto& c : r.too_big)
    s << "<circle cx='" << X(c.memory.total) << "' cy='" << Y(c.time.tokens_per_s)
      << "' r='3' fill='none' stroke='#999'/>\n";
  for (const auto& c : r.ranked)
    s << "<circle cx='" << X(c.memory.total) << "' cy='" << Y(c.time.tokens_per_s) << "' r='3' fill='#4e79a7'/>\n";
  if (!r.ranked.empty()) {
    const auto& b = r.ranked.front();
    s << "<circle cx='" << X(b.memory.total) << "' cy='" << Y(b.time.tokens_per_s)
      << "' r='6' fill='none' stroke='#e15759' stroke-width='2'/>\n<text x='" << X(b.memory.total) + 8
      << "' y='" << Y(b.time.tokens_per_s) + 4 << "'>best: " << mesh_str(b.input.mesh) << " mb "
      << b.input.micro_batch << (b.input.checkpointing ? " ckpt" : "") << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace mt::plan

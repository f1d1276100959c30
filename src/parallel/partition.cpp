#include "parallel/partition.h"

#include "core/toml.h"

#include "core/error.h"

namespace mt::parallel {

std::string PartitionSpec::str() const {
  std::string s = "(";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d) s += ", ";
    const auto& axes = dims[d];
    if (axes.empty()) s += "None";
    if (axes.size() > 1) s += "(";
    for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::string(axis_name(axes[i]));
    if (axes.size() > 1) s += ")";
  }
  return s + ")";
}

void PartitionRules::add(const std::string& pattern, const PartitionSpec& spec) {
  unsigned used = 0;
  for (const auto& axes : spec.dims)
    for (Axis a : axes) {
      if (a == Axis::pp)
        fail("partition rule '" + pattern + "': pp cannot split a tensor (pipeline stages hold whole layers)");
      if (used & axis_bit(a))
        fail("partition rule '" + pattern + "': axis " + axis_name(a) + " used twice in " + spec.str());
      used |= axis_bit(a);
    }
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    fail("partition rule '" + pattern + "': bad regular expression (" + e.what() + ")");
  }
  rules_.push_back({pattern, std::move(re), spec});
}

PartitionRules PartitionRules::after(const PartitionRules& first) const {
  PartitionRules out = first;
  out.rules_.insert(out.rules_.end(), rules_.begin(), rules_.end());
  return out;
}

const PartitionRule& PartitionRules::match(const std::string& name) const {
  for (const auto& r : rules_)
    if (std::regex_search(name, r.regex)) return r;
  fail("no partition rule matches '" + name + "' (add a [[partition.rules]] entry for it)");
}

PartitionRules default_llama_rules() {
  const std::vector<Axis> tp = {Axis::tp}, fsdp = {Axis::fsdp}, tp_fsdp = {Axis::tp, Axis::fsdp};
  PartitionRules r;
  // Adapters first: their names also contain the projection's name. Ours are stored [r, in] (A)
  // and [out, r] (B). The seed splits the rank dimension r over mp, which compiler-inserted
  // collectives (GSPMD) can absorb but explicit Megatron tensor parallelism cannot: here each
  // adapter follows its base layer. Column-parallel layers (q/k/v/gate/up, lm_head): A whole over
  // tp, B's output rows over tp; row-parallel (o/down): A's input columns over tp, B whole. fsdp
  // then splits the large dimension (never r, which may be as small as 1).
  // An expert's are its projections' (Mixtral's w1 gate, w3 up, w2 down).
  r.add(R"((\.(q|k|v|gate|up)_proj|\.experts\.\d+\.(w1|w3)|\.c_attn|^lm_head)\.lora_A\.weight$)", {{}, fsdp});  // c_attn: GPT-2's q, k, v
  r.add(R"((\.(q|k|v|gate|up)_proj|\.experts\.\d+\.(w1|w3)|^lm_head)\.lora_B\.weight$)", {tp_fsdp});
  r.add(R"((\.(o|down)_proj|\.experts\.\d+\.w2)\.lora_A\.weight$)", {{}, tp_fsdp});
  r.add(R"((\.(o|down)_proj|\.experts\.\d+\.w2)\.lora_B\.weight$)", {fsdp});
  // The embedding's and head's trained copies (lora.train_embeddings) as the modules.
  r.add(R"(^model\.embed_tokens(\.modules_to_save)?\.weight$)", {tp, fsdp});  // [vocab, hidden]
  r.add(R"(\.self_attn\.(q|k|v)_proj\.weight$)", {tp, fsdp});              // column-parallel
  r.add(R"(\.mlp\.(gate|up)_proj\.weight$)", {tp, fsdp});                  // column-parallel
  r.add(R"(\.self_attn\.o_proj\.weight$)", {fsdp, tp});                    // row-parallel
  r.add(R"(\.mlp\.down_proj\.weight$)", {fsdp, tp});                       // row-parallel
  // Mixtures of experts (model/moe.h): each expert's projections as the MLP's; the router [E, C]
  // whole over tp (every rank routes every token), its hidden columns over fsdp; a trained
  // router's copy (lora.train_router) as the router, whose values it starts from block by block.
  r.add(R"(\.experts\.\d+\.(gate_proj|up_proj|w1|w3)\.weight$)", {tp, fsdp});  // column-parallel
  r.add(R"(\.experts\.\d+\.(down_proj|w2)\.weight$)", {fsdp, tp});             // row-parallel
  r.add(R"(\.(mlp|block_sparse_moe)\.gate(\.modules_to_save)?\.weight$)", {{}, fsdp});
  r.add(R"((input_layernorm|post_attention_layernorm|^model\.norm)\.weight$)", {});  // replicated
  r.add(R"((pre_feedforward_layernorm|post_feedforward_layernorm)\.weight$)", {});  // Gemma's, replicated
  // The families' biases (Megatron): a column-parallel layer's bias splits with its output rows; a
  // row-parallel layer's is whole on every rank and added once, after the partial sums are summed.
  r.add(R"(\.(self_attn\.(q|k|v)|mlp\.(gate|up))_proj\.bias$)", {tp});
  r.add(R"(\.(self_attn\.o|mlp\.down)_proj\.bias$)", {});
  // Qwen3's per-head q/k norms: one [head_dim] weight every head uses, replicated.
  r.add(R"(\.self_attn\.(q|k)_norm\.weight$)", {});
  // GPT-2's LayerNorm biases, replicated like their weights, and its learned positions: whole on
  // every tensor-parallel rank (each rank adds a token's position row), rows over fsdp.
  r.add(R"((input_layernorm|post_attention_layernorm|^model\.norm)\.bias$)", {});
  r.add(R"(^model\.embed_positions\.weight$)", {fsdp});                  // [positions, hidden]
  r.add(R"(^lm_head(\.modules_to_save)?\.weight$)", {tp, fsdp});           // [vocab, hidden]
  return r;
}

PartitionRules nf4_base_rules() {
  const std::vector<Axis> fsdp = {Axis::fsdp}, tp = {Axis::tp}, tp_fsdp = {Axis::tp, Axis::fsdp};
  PartitionRules r;
  r.add(R"(\.(self_attn\.(q|k|v)|mlp\.(gate|up))_proj\.weight$)", {tp_fsdp, {}});  // column-parallel
  r.add(R"(\.(self_attn\.o|mlp\.down)_proj\.weight$)", {fsdp, tp});             // row-parallel
  r.add(R"(\.experts\.\d+\.(gate_proj|up_proj|w1|w3)\.weight$)", {tp_fsdp, {}});
  r.add(R"(\.experts\.\d+\.(down_proj|w2)\.weight$)", {fsdp, tp});
  return r;
}

PartitionRules PartitionConfig::effective() const {
  return replace_defaults ? rules : default_llama_rules().after(rules);
}

namespace {

// An axis a rule may name: cp splits sequences; a rule does not name it, since every split over
// fsdp is over fsdp x cp already (parallel/layout.h shard_spec).
Axis parse_tensor_axis(const std::string& name, const std::string& where) {
  const Axis a = parse_axis(name, where);
  if (a == Axis::cp)
    fail(where + ": cp splits sequences; a rule's fsdp already shards over fsdp x cp (expected dp, fsdp, tp or pp)");
  return a;
}

std::vector<Axis> parse_dim(const toml::node& n, const std::string& where) {
  if (const auto* s = n.as_string()) {
    const std::string& v = s->get();
    if (v.empty() || v == "none" || v == "None") return {};
    return {parse_tensor_axis(v, where)};
  }
  if (const auto* arr = n.as_array()) {
    std::vector<Axis> axes;
    for (const auto& e : *arr) {
      if (!e.is_string()) fail(where + ": a list of axes must hold axis names");
      axes.push_back(parse_tensor_axis(e.as_string()->get(), where));
    }
    return axes;
  }
  fail(where + ": each dimension of spec must be an axis name, a list of axis names, or \"none\"");
}

}  // namespace

PartitionConfig parse_partition_toml(const std::string& toml_text, const std::string& where) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text, where);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    std::string msg(e.description());
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';  // errors are one line
    fail(where + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
         ": TOML syntax error: " + msg);
  }
  PartitionConfig out;
  const toml::node* part = doc.get("partition");
  if (!part) return out;
  const toml::table* pt = part->as_table();
  if (!pt) fail(where + ": 'partition' must be a table");
  for (auto&& [k, v] : *pt) {
    const std::string key(k.str());
    if (key == "replace_defaults") {
      if (!v.is_boolean()) fail(where + ": partition.replace_defaults must be true or false");
      out.replace_defaults = v.as_boolean()->get();
    } else if (key != "rules") {
      fail(where + ": unknown key 'partition." + key + "' (expected rules, replace_defaults)");
    }
  }
  const toml::node* rules = pt->get("rules");
  if (!rules) return out;
  const toml::array* arr = rules->as_array();
  if (!arr) fail(where + ": partition.rules must be an array of tables ([[partition.rules]])");
  size_t i = 0;
  for (const auto& item : *arr) {
    const std::string at = where + ": partition.rules[" + std::to_string(i++) + "]";
    const toml::table* t = item.as_table();
    if (!t) fail(at + " must be a table with pattern and spec");
    for (auto&& [k, v] : *t)
      if (k.str() != "pattern" && k.str() != "spec")
        fail(at + ": unknown key '" + std::string(k.str()) + "' (expected pattern, spec)");
    const toml::node* pattern = t->get("pattern");
    const toml::node* spec = t->get("spec");
    if (!pattern || !pattern->is_string()) fail(at + ": pattern (a string) is required");
    if (!spec || !spec->is_array()) fail(at + ": spec (an array, one entry per dimension) is required");
    PartitionSpec ps;
    for (const auto& d : *spec->as_array()) ps.dims.push_back(parse_dim(d, at + ".spec"));
    out.rules.add(pattern->as_string()->get(), ps);
  }
  return out;
}

}  // namespace mt::parallel

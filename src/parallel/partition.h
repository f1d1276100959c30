// Partition rules: which mesh axes split which dimension of each parameter, chosen by the first
// regular expression that matches the parameter's name (EasyLM's scheme; no catch-all, so a new
// tensor forces a decision instead of being silently replicated).
//
// A spec is written per dimension of the tensor AS STORED, row-major: for a LLaMA linear weight
// that is HF's [out, in]. EasyLM/JAX kernels are [in, out], so a seed spec (a, b) for a kernel is
// (b, a) here: the seed's q/k/v/gate/up "(fsdp, mp)" is our (tp, fsdp) — output rows over tp,
// column-parallel — and o/down "(mp, fsdp)" is our (fsdp, tp) — input columns over tp,
// row-parallel, as Megatron does. Embeddings are [vocab, hidden] in both conventions.
//
// Divisibility policy: no padding. A dimension of size S split over axes with product P must
// have S % P == 0; otherwise make_layout throws naming the tensor, dim, size and axes. Every rank
// then holds an equal block, which keeps collectives uniform and checkpoints shard-aligned.
#pragma once
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "parallel/mesh.h"

namespace mt::parallel {

struct PartitionSpec {
  // dims[i]: the axes splitting dimension i, major first (("fsdp","tp") puts fsdp outside tp);
  // empty = replicated along that dimension. Dimensions past dims.size() are replicated, so the
  // empty spec replicates a tensor of any rank.
  std::vector<std::vector<Axis>> dims;

  PartitionSpec() = default;
  PartitionSpec(std::initializer_list<std::vector<Axis>> d) : dims(d) {}
  // "(tp, fsdp)", "((fsdp, tp), None)", "()" for replicated.
  std::string str() const;
  bool operator==(const PartitionSpec&) const = default;
};

struct PartitionRule {
  std::string pattern;  // ECMAScript regex, searched anywhere in the name (anchor with ^ and $)
  std::regex regex;
  PartitionSpec spec;
};

class PartitionRules {
 public:
  // Appends a rule (later rules lose to earlier ones). Throws on a bad regex or a spec that
  // names pp (a pipeline stage holds whole layers, it does not split tensors) or an axis twice.
  void add(const std::string& pattern, const PartitionSpec& spec);
  // Returns a list with `first`'s rules ahead of this one's (user overrides before defaults).
  PartitionRules after(const PartitionRules& first) const;

  // The first rule whose pattern matches; throws "no partition rule matches 'NAME'".
  const PartitionRule& match(const std::string& name) const;
  const std::vector<PartitionRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<PartitionRule> rules_;
};

// The seed's rules for LLaMA (HF names, adapters included), in our [out, in] storage order.
PartitionRules default_llama_rules();
// With lora.base_dtype = "nf4", ahead of every other rule: an NF4 base's projections are split
// between rows (fsdp and column-parallel tp) so that every cut leaves NF4 blocks and groups whole
// (core/nf4.h); row-parallel o/down keep their tp column split, which must fall on whole blocks.
PartitionRules nf4_base_rules();

// Rules from TOML:
//   [[partition.rules]]
//   pattern = 'mlp\.down_proj\.weight$'
//   spec = ["fsdp", "tp"]          # per dim: "axis", ["axis", "axis"], or "" / "none" (replicated)
// plus optional `[partition] replace_defaults = true` (use only these rules). Other keys are
// refused. `where` names the source in errors. A document without [partition] gives no rules.
struct PartitionConfig {
  PartitionRules rules;
  bool replace_defaults = false;
  // The rules to use: the user's ahead of the defaults, or only the user's.
  PartitionRules effective() const;
};
PartitionConfig parse_partition_toml(const std::string& toml_text, const std::string& where);

}  // namespace mt::parallel

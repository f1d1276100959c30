#include "train/config_aliases.h"

#include <algorithm>
#include <array>
#include <map>

#include "core/clipped.h"
#include "core/did_you_mean.h"
#include "core/error.h"
#include "train/config_values.h"

namespace mt {
namespace {

// PEFT names a projection by its module in the HF model; meshtrain by its role.
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kPeftModules = {{
    {"q_proj", "q"}, {"k_proj", "k"}, {"v_proj", "v"}, {"o_proj", "o"},
    {"gate_proj", "gate"}, {"up_proj", "up"}, {"down_proj", "down"}, {"lm_head", "lm_head"},
}};

// PEFT's target_modules: a list of module names, or "all-linear" (every linear layer but the
// output head). Any other string is a regular expression to PEFT, which is not supported here.
void translate_target_modules(toml::table& table, std::string_view leaf, const std::string& where) {
  const toml::node* value = table.get(leaf);
  toml::array targets;
  if (const auto* s = value->as_string()) {
    if (s->get() != "all-linear")
      fail(where + ": lora.target_modules = \"" + clipped(s->get()) +
           "\": a string is a regular expression in PEFT, which meshtrain does not take; give a list of "
           "module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head) or "
           "\"all-linear\"");
    for (const auto& [module, target] : kPeftModules)
      if (module != "lm_head") targets.push_back(std::string(target));
  } else if (const auto* list = value->as_array()) {
    std::vector<std::string_view> names;
    for (const auto& [module, target] : kPeftModules) names.push_back(module);
    for (const toml::node& e : *list) {
      const auto* name = e.as_string();
      if (!name) fail(where + ": lora.target_modules must be an array of strings");
      const auto it = std::find_if(kPeftModules.begin(), kPeftModules.end(),
                                   [&](const auto& m) { return m.first == name->get(); });
      if (it == kPeftModules.end())
        fail(where + ": lora.target_modules: unknown module '" + clipped(name->get()) + "'" +
             did_you_mean(name->get(), names) +
             " (expected some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head)");
      targets.push_back(std::string(it->second));
    }
  } else {
    fail(where + ": lora.target_modules must be an array of module names or \"all-linear\"");
  }
  table.insert_or_assign(leaf, std::move(targets));
}

// The HF Trainer's lr_scheduler_type, as far as meshtrain has the same schedule.
void translate_scheduler(toml::table& table, std::string_view leaf, const std::string& where) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kSchedules = {{
      {"cosine", "cosine"}, {"cosine_with_min_lr", "cosine"}, {"linear", "linear"},
      {"constant", "constant"}, {"constant_with_warmup", "constant"}, {"warmup_stable_decay", "wsd"},
  }};
  const auto* s = table.get(leaf)->as_string();
  if (!s) fail(where + ": train.lr_scheduler_type must be a string");
  for (const auto& [hf, ours] : kSchedules)
    if (s->get() == hf) {
      table.insert_or_assign(leaf, std::string(ours));
      return;
    }
  fail(where + ": train.lr_scheduler_type = \"" + clipped(s->get()) +
       "\" has no meshtrain schedule (expected cosine, cosine_with_min_lr, linear, constant, "
       "constant_with_warmup or warmup_stable_decay)");
}

// The HF Trainer's bf16 switch: true is train.precision = "bf16", false is fp32 (the Trainer's
// precision without bf16 or fp16).
void translate_bf16(toml::table& table, std::string_view leaf, const std::string& where) {
  const auto* b = table.get(leaf)->as_boolean();
  if (!b) fail(where + ": train.bf16 must be true or false, got " + toml_type_name(*table.get(leaf)));
  table.insert_or_assign(leaf, std::string(b->get() ? "bf16" : "fp32"));
}

std::string refuse_fp16(const toml::node& value) {
  if (const auto* b = value.as_boolean(); b && !b->get()) return "";
  return "train.fp16: meshtrain trains in bf16 (train.precision = \"bf16\", mixed with fp32 master weights) or "
         "fp32, never fp16: fp16's narrow exponent range needs loss scaling to keep small gradients from "
         "underflowing, which bf16's fp32 range makes unnecessary; give train.bf16 = true (or leave it out: "
         "bf16 is the default)";
}

std::string refuse_per_device_batch(const toml::node& value) {
  const std::string n = value.as_integer() ? std::to_string(value.as_integer()->get()) : "N";
  return "train.per_device_train_batch_size: meshtrain's train.batch_size is the micro-batch of all "
         "data-parallel ranks together (split over mesh dp x fsdp x ep), not of one device: give "
         "train.batch_size = " + n + " x dp x fsdp x ep (" + n + " on one rank)";
}

std::vector<ConfigAlias> make_aliases() {
  return {
      {.name = "lora.r", .key = "lora.rank", .origin = "PEFT"},
      {.name = "lora.lora_rank", .key = "lora.rank", .origin = "torchtune"},
      {.name = "lora.lora_alpha", .key = "lora.alpha", .origin = "PEFT, torchtune"},
      {.name = "lora.lora_dropout", .key = "lora.dropout", .origin = "PEFT, torchtune"},
      {.name = "lora.target_modules", .key = "lora.targets", .origin = "PEFT",
       .translate = translate_target_modules,
       .note = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head -> q, k, v, o, "
               "gate, up, down, lm_head; \"all-linear\": all but lm_head"},
      {.name = "train.num_train_epochs", .key = "train.epochs", .origin = "HF Trainer"},
      {.name = "train.max_steps", .key = "train.steps", .origin = "HF Trainer"},
      {.name = "train.learning_rate", .key = "optim.lr", .origin = "HF Trainer"},
      {.name = "train.gradient_accumulation_steps", .key = "train.grad_accum",
       .origin = "HF Trainer, torchtune"},
      {.name = "train.warmup_steps", .key = "optim.warmup_steps", .origin = "HF Trainer"},
      {.name = "train.warmup_ratio", .key = "optim.warmup_ratio", .origin = "HF Trainer"},
      {.name = "train.weight_decay", .key = "optim.weight_decay", .origin = "HF Trainer"},
      {.name = "train.max_grad_norm", .key = "optim.grad_clip", .origin = "HF Trainer"},
      {.name = "train.adam_beta1", .key = "optim.beta1", .origin = "HF Trainer"},
      {.name = "train.adam_beta2", .key = "optim.beta2", .origin = "HF Trainer"},
      {.name = "train.adam_epsilon", .key = "optim.eps", .origin = "HF Trainer"},
      {.name = "train.lr_scheduler_type", .key = "optim.schedule", .origin = "HF Trainer",
       .translate = translate_scheduler,
       .note = "cosine, cosine_with_min_lr -> cosine; linear; constant, constant_with_warmup -> "
               "constant; warmup_stable_decay -> wsd"},
      {.name = "train.logging_steps", .key = "train.log_every", .origin = "HF Trainer"},
      {.name = "train.log_every_n_steps", .key = "train.log_every", .origin = "torchtune"},
      {.name = "train.eval_steps", .key = "train.eval_every", .origin = "HF Trainer"},
      {.name = "train.save_steps", .key = "output.checkpoint_every", .origin = "HF Trainer"},
      {.name = "train.save_total_limit", .key = "output.keep_checkpoints", .origin = "HF Trainer"},
      {.name = "train.gradient_checkpointing", .key = "train.activation_checkpointing", .origin = "HF Trainer"},
      {.name = "train.enable_activation_checkpointing", .key = "train.activation_checkpointing",
       .origin = "torchtune"},
      {.name = "train.bf16", .key = "train.precision", .origin = "HF Trainer", .translate = translate_bf16,
       .note = "true -> \"bf16\"; false -> \"fp32\""},
      {.name = "train.fp16", .key = "train.precision", .origin = "HF Trainer",
       .note = "refused: meshtrain trains bf16 or fp32 (fp16 needs loss scaling, bf16 does not); "
               "false is accepted and changes nothing",
       .refusal = refuse_fp16},
      {.name = "train.per_device_train_batch_size", .key = "train.batch_size", .origin = "HF Trainer",
       .note = "refused: train.batch_size counts the rows of all data-parallel ranks together; give "
               "train.batch_size = per_device_train_batch_size x dp x fsdp x ep",
       .refusal = refuse_per_device_batch},
  };
}

// The table holding the last part of `dotted` (created on the way when `create`), or null.
toml::table* parent_of(toml::table& doc, std::string_view dotted, bool create) {
  toml::table* t = &doc;
  for (size_t start = 0;;) {
    const size_t dot = dotted.find('.', start);
    if (dot == std::string_view::npos) return t;
    const std::string_view part = dotted.substr(start, dot - start);
    toml::node* n = t->get(part);
    if (!n) {
      if (!create) return nullptr;
      t->insert_or_assign(part, toml::table{});
      n = t->get(part);
    }
    t = n->as_table();
    if (!t) return nullptr;  // not a table: the strict reader reports it
    start = dot + 1;
  }
}

std::string_view leaf_of(std::string_view dotted) { return dotted.substr(dotted.rfind('.') + 1); }

}  // namespace

// lora.targets in PEFT's spelling, as lora.target_modules takes it: each PEFT module name among
// meshtrain's (GPT-2's c_attn, ... are both) becomes meshtrain's, "all-linear" the list it means;
// anything else is left for the reader to check.
void spell_lora_targets(toml::table& table, std::string_view leaf) {
  toml::node* value = table.get(leaf);
  if (const auto* s = value->as_string(); s && s->get() == "all-linear") {
    toml::array targets;
    for (const auto& [module, target] : kPeftModules)
      if (module != "lm_head") targets.push_back(std::string(target));
    table.insert_or_assign(leaf, std::move(targets));
    return;
  }
  if (auto* list = value->as_array())
    for (toml::node& e : *list)
      if (auto* name = e.as_string())
        for (const auto& [module, target] : kPeftModules)
          if (module == name->get()) name->get() = std::string(target);
}

const std::vector<ConfigAlias>& config_aliases() {
  static const std::vector<ConfigAlias> aliases = make_aliases();
  return aliases;
}

const ConfigAlias* find_config_alias(std::string_view name) {
  for (const ConfigAlias& a : config_aliases())
    if (a.name == name) return &a;
  return nullptr;
}

std::string_view canonical_config_key(std::string_view name) {
  const ConfigAlias* a = find_config_alias(name);
  return a ? a->key : name;
}

void rename_config_aliases(toml::table& doc, const std::string& where, std::vector<std::string>& renamed) {
  std::map<std::string_view, std::string_view> alias_of_key;  // key -> the alias that gave it here
  for (const ConfigAlias& a : config_aliases()) {
    toml::table* from = parent_of(doc, a.name, /*create=*/false);
    if (!from || !from->get(leaf_of(a.name))) continue;
    if (a.refusal) {
      if (std::string why = a.refusal(*from->get(leaf_of(a.name))); !why.empty()) fail(where + ": " + why);
      from->erase(leaf_of(a.name));
      continue;
    }
    if (auto it = alias_of_key.find(a.key); it != alias_of_key.end())
      fail(where + ": " + std::string(a.name) + " and " + std::string(it->second) + " both give " +
           std::string(a.key) + ": give one");
    toml::table* to = parent_of(doc, a.key, /*create=*/true);
    if (!to)
      fail(where + ": " + std::string(a.name) + " is " + std::string(a.key) + ", but '" +
           std::string(a.key.substr(0, a.key.rfind('.'))) + "' is not a table");
    if (to->get(leaf_of(a.key)))
      fail(where + ": " + std::string(a.name) + " (" + std::string(a.origin) + "'s name for " +
           std::string(a.key) + ") and " + std::string(a.key) + " are both given: give one");
    from->get(leaf_of(a.name))->visit([&](auto& node) { to->insert_or_assign(leaf_of(a.key), node); });
    from->erase(leaf_of(a.name));
    if (a.translate) a.translate(*to, leaf_of(a.key), where);
    alias_of_key[a.key] = a.name;
    renamed.push_back(std::string(a.name) + " -> " + std::string(a.key));
  }
  if (toml::table* lora = doc.get("lora") ? doc.get("lora")->as_table() : nullptr; lora && lora->get("targets"))
    spell_lora_targets(*lora, "targets");
}

std::string config_aliases_markdown() {
  std::string out = "| Alias | Key | From | Values |\n|---|---|---|---|\n";
  for (const ConfigAlias& a : config_aliases())
    out += "| `" + std::string(a.name) + "` | `" + std::string(a.key) + "` | " + std::string(a.origin) +
           " | " + (a.note.empty() ? "as the key's" : std::string(a.note)) + " |\n";
  return out;
}

}  // namespace mt

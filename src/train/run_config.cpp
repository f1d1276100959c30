// TOML -> RunConfig. Strict by design: every key is known, every value has the right type and
// range, and every problem is reported as one line naming the key and the file (or --set). The
// keys, their types and their per-key rules come from the schema (config_schema.h); this file
// walks the document, applies --set overrides and checks the rules that join several keys.
#include "train/run_config.h"

#include "data/added_tokens.h"

#include "core/toml.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/checked_math.h"
#include "core/clipped.h"
#include "core/did_you_mean.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "data/added_tokens.h"
#include "data/unicode.h"
#include "io/hub_cache.h"
#include "train/config_aliases.h"
#include "train/config_schema.h"
#include "train/config_values.h"

namespace mt {
namespace {

// ---------------------------------------------------------------------------------------------
// Unknown sections and keys.

// The closest known name: a key, or an alias (which the reader then accepts as it is); for a name
// with none close, the keys of its section, so that every unknown key is answered with what is
// there.
std::string suggestion(const std::string& key) {
  std::vector<std::string_view> names;
  for (const ConfigKey& k : config_keys()) names.push_back(k.name);
  for (const ConfigAlias& a : config_aliases()) names.push_back(a.name);
  if (std::string hint = did_you_mean(key, names); !hint.empty()) return hint;
  // A section of another spelling ("optimizer.lr"): the key in the section it names.
  if (const size_t first = key.find('.'); first != std::string::npos && !is_config_table(key.substr(0, first))) {
    std::vector<std::string_view> sections;
    for (const std::string& t : config_tables())
      if (t.find('.') == std::string::npos) sections.push_back(t);
    const std::string in = std::string(closest_name(key.substr(0, first), sections)) + key.substr(first);
    if (find_config_key(in) || find_config_alias(in)) return " (did you mean '" + in + "'?)";
  }
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string_view table = std::string_view(key).substr(0, dot);
  std::string keys;
  for (const ConfigKey& k : config_keys())
    if (table_of(k) == table) keys += (keys.empty() ? "" : ", ") + std::string(leaf_of(k));
  return keys.empty() ? "" : " (the keys of [" + std::string(table) + "] are " + keys + ")";
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& key) {
  fail(where + ": unknown key '" + clipped(key) + "'" + suggestion(key));
}

std::string section_list() {
  std::string out;
  for (const std::string& t : config_tables())
    if (t.find('.') == std::string::npos) out += (out.empty() ? "" : ", ") + t;
  return out;
}

// " (did you mean 'optim'?)" for [optimizer], else the list of sections.
std::string section_hint(const std::string& section) {
  // The HF Trainer's arguments are one flat list; a run config's are in sections, its names in
  // [train]: warmup_ratio = 0.1 at the top is answered with train.warmup_ratio.
  const std::string in_train = "train." + section;
  if (find_config_alias(in_train) || find_config_key(in_train)) return " (did you mean '" + in_train + "'?)";
  std::vector<std::string_view> sections;
  for (const std::string& t : config_tables())
    if (t.find('.') == std::string::npos) sections.push_back(t);
  std::string hint = did_you_mean(section, sections);
  return hint.empty() ? " (expected " + section_list() + ")" : hint;
}

[[noreturn]] void unknown_section(const std::string& where, const std::string& section,
                                  const std::string& hint) {
  fail(where + ": unknown section '" + clipped(section) + "'" + hint);
}

// Checks that `tbl` (the document, or a table at `prefix`) holds only known tables and keys.
// The keys' values are type-checked when they are read.
void check_known(const toml::table& tbl, const std::string& where, const std::string& prefix = "") {
  for (auto&& [k, node] : tbl) {
    const std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (find_config_key(path)) continue;
    if (!is_config_table(path)) {
      if (prefix.empty()) unknown_section(where, path, section_hint(path));
      unknown_key(where, path);
    }
    const toml::table* t = node.as_table();
    if (!t) {
      if (prefix.empty()) fail(where + ": '" + path + "' must be a table ([" + path + "])");
      fail(where + ": " + path + " must be a table, got " + toml_type_name(node));
    }
    check_known(*t, where, path);
  }
}

// ---------------------------------------------------------------------------------------------
// Reading.

const toml::node* node_at(const toml::table& doc, std::string_view dotted) {
  const toml::table* tbl = &doc;
  for (size_t start = 0;;) {
    const size_t dot = dotted.find('.', start);
    const toml::node* n = tbl->get(dotted.substr(start, dot - start));
    if (!n || dot == std::string_view::npos) return n;
    tbl = n->as_table();
    if (!tbl) return nullptr;  // check_known has refused it
    start = dot + 1;
  }
}

RunConfig convert(const toml::table& doc, const std::string& where) {
  check_known(doc, where);
  RunConfig c;
  for (const ConfigKey& key : config_keys())
    if (const toml::node* n = node_at(doc, key.name)) read_config_value(*n, key, c, where);
  // With a model to start from, the architecture is the model's: a [model] key would be ignored.
  if (!c.model_path.empty())
    for (const auto& [key, value] : *doc.get("model")->as_table())
      if (key.str() != "path")
        fail(where + ": model." + std::string(key.str()) +
             " cannot be combined with model.path (the architecture comes from the model's files)");
  return c;
}

// ---------------------------------------------------------------------------------------------
// Checking: each key's own rule from the schema, then the rules that join several keys.

// `where_for(key)` names the origin of a key's value: the file, or the --set that changed it.
// Every message below starts with the key it is about.
template <class WhereFor>
void validate_run(const RunConfig& c, const WhereFor& where_for) {
  auto bad = [&](const std::string& msg) {
    std::string key = msg.substr(0, msg.find_first_of(" :("));
    fail(where_for(key) + ": " + msg);
  };
  for (const ConfigKey& key : config_keys())
    if (std::string problem = check_config_value(key, c); !problem.empty()) bad(problem);

  // Model shape: the model's own rules (heads dividing the width, and so on).
  try {
    c.model.validate();
  } catch (const Error& e) {
    bad(e.what());
  }
  if (c.lora.enabled && c.lora.targets.empty())
    bad("lora.targets must not be empty when lora.enabled = true");
  if (!c.lora_init_adapter.empty() && !c.lora.enabled)
    bad("lora.init_adapter starts the LoRA adapters from a PEFT adapter: it needs lora.enabled = true");
  if (c.lora.train_router && !c.lora.enabled)
    bad("lora.train_router trains a copy of each router beside the adapters: it needs lora.enabled = true "
        "(full training trains the routers anyway)");
  // The tokens themselves; what they are added to (a tokenizer file, not the byte-level one) is
  // checked when the run writes its tokenizer (train/added_vocab.h), lm_head's adapter beside the
  // trained head with the model (model/param_shapes.h).
  try {
    check_added_tokens(c.data.add_tokens);
  } catch (const Error& e) {
    bad(e.what());
  }
  if (c.lora.base_dtype == "nf4" && !c.lora.enabled)
    bad("lora.base_dtype = \"nf4\" quantises a frozen base: it needs lora.enabled = true");
  if (c.model_path.empty() && c.train.seq_len > c.model.max_position_embeddings)
    bad("train.seq_len (" + std::to_string(c.train.seq_len) +
        ") must be <= model.max_position_embeddings (" +
        std::to_string(c.model.max_position_embeddings) + ")");
  // Each count is bounded by its range; their product, the tokens of a step, by what a step can
  // hold (and so that the trainer's and memory check's arithmetic on it fits in 64 bits).
  const TrainConfig& t = c.train;
  const std::optional<int64_t> rows = checked_mul(t.batch_size, t.grad_accum);
  const std::optional<int64_t> tokens = rows ? checked_mul(*rows, t.seq_len) : std::nullopt;
  if (!tokens || *tokens > kMaxTokensPerStep)
    bad("train.batch_size x train.grad_accum x train.seq_len (" + std::to_string(t.batch_size) + " x " +
        std::to_string(t.grad_accum) + " x " + std::to_string(t.seq_len) + ") must be at most 2^40 tokens a step");
  // Preference training: two rows a pair, whole in each micro-batch; its keys only with it.
  const PreferenceConfig& pref = c.preference;
  if (t.preference() && t.batch_size % 2 != 0)
    bad("train.batch_size (" + std::to_string(t.batch_size) + ") must be even under train.method = \"" + t.method +
        "\": a pair's chosen and rejected sequences are two rows of one micro-batch");
  if (pref.reference == "adapters_off" && !c.lora.enabled)
    bad("preference.reference = \"adapters_off\" is the base with the LoRA adapters off: it needs lora.enabled "
        "= true (full fine-tuning: \"precomputed\")");
  const PreferenceConfig defaults;
  if (!t.preference() &&
      (pref.beta != defaults.beta || pref.label_smoothing != defaults.label_smoothing ||
       pref.simpo_gamma != defaults.simpo_gamma || pref.cpo_alpha != defaults.cpo_alpha ||
       pref.max_prompt_length != defaults.max_prompt_length ||
       pref.truncation_mode != defaults.truncation_mode || pref.reference != defaults.reference))
    bad("train.method = \"sft\" does not read [preference]; set train.method = \"dpo\", \"ipo\", \"simpo\" or "
        "\"orpo\" for preference training");
  if (c.output.keep_best && c.train.eval_every == 0)
    bad("output.keep_best needs train.eval_every > 0 (the best is chosen by validation loss)");
  // The mesh against the world is checked when the ranks are known (Mesh's constructor).
}

// ---------------------------------------------------------------------------------------------
// Text and overrides.

std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& ch : out)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return out;
}

toml::table parse_doc(const std::string& text, const std::string& where) {
  try {
    return toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    fail(where + ":" + std::to_string(e.source().begin.line) + ":" +
         std::to_string(e.source().begin.column) + ": TOML syntax error: " +
         one_line(clipped(e.description(), 200)));
  }
}

// Parses the value of an override; a bare word that is not valid TOML is taken as a string.
toml::table parse_override_value(const std::string& value) {
  if (value.find_first_of("\n\r") == std::string::npos) {
    try {
      toml::table t = toml::parse("v = " + value);
      if (t.size() == 1 && t.contains("v")) return t;
    } catch (const toml::parse_error&) {
    }
  }
  toml::table t;
  t.insert_or_assign("v", value);
  return t;
}

// The key an override names as written ("lora.r" for "lora.r = 16"); "" without '='.
std::string override_path(const std::string& ov) {
  const size_t eq = ov.find('=');
  if (eq == std::string::npos) return "";
  std::string path = ov.substr(0, eq);
  // Allow "train.steps = 5" with spaces around the key.
  path.erase(0, path.find_first_not_of(' '));
  path.erase(path.find_last_not_of(' ') + 1);
  return path;
}

// Applies one override onto the document; returns the dotted key it set (an alias's key).
std::string apply_override(toml::table& doc, const std::string& ov) {
  const std::string where = "--set " + clipped(ov);
  size_t eq = ov.find('=');
  if (eq == std::string::npos) fail(where + ": expected section.key=value");
  const ConfigAlias* alias = find_config_alias(override_path(ov));
  const std::string path = alias ? std::string(alias->key) : override_path(ov);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (const auto& p : parts)
    if (p.empty()) fail(where + ": expected section.key=value, got key '" + clipped(path) + "'");
  if (parts.size() < 2) {
    if (!is_config_table(parts[0])) unknown_section(where, parts[0], section_hint(parts[0]));
    fail(where + ": expected section.key=value, got only the section '" + parts[0] + "'");
  }
  if (!is_config_table(parts[0])) {
    const std::string hint = suggestion(path);
    unknown_section(where, parts[0], hint.empty() ? section_hint(parts[0]) : hint);
  }
  const ConfigKey* key = find_config_key(path);
  if (!key) unknown_key(where, path);

  toml::table* tbl = &doc;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = tbl->get(parts[i]);
    if (!n) {
      tbl->insert_or_assign(parts[i], toml::table{});
      n = tbl->get(parts[i]);
    }
    if (!n->is_table()) {
      std::string sub;
      for (size_t j = 0; j <= i; ++j) sub += (j ? "." : "") + parts[j];
      fail(where + ": '" + sub + "' is not a table in the config");
    }
    tbl = n->as_table();
  }
  const std::string raw = ov.substr(eq + 1);
  // A config file is UTF-8 (toml++ refuses anything else); a --set value must be too, or the
  // run.toml written from it (to repeat or export the run) could not be read back.
  for (size_t i = 0; i < raw.size();) {
    const unicode::CodePoint u = unicode::decode_utf8(raw, i);
    if (u.cp == unicode::kInvalid) fail(where + ": the value is not valid UTF-8");
    i += u.len;
  }
  toml::table v = parse_override_value(raw);
  // For a string-valued key the raw text is the string, even when it happens to be valid TOML of
  // another type (--set output.dir=2024, --set data.path=inf).
  // An alias that translates its values reads them as TOML (train.bf16=true is a boolean).
  const bool translated = alias && alias->translate;
  if (!v.get("v")->is_string() && is_string_key(*key) && !translated) v.insert_or_assign("v", raw);
  if (alias && alias->refusal) {
    if (std::string why = alias->refusal(*v.get("v")); !why.empty()) fail(where + ": " + why);
    return path;  // a value that asks for nothing (train.fp16=false): the document is unchanged
  }
  if (translated) alias->translate(v, "v", where);
  if (path == "lora.targets") spell_lora_targets(v, "v");
  v.get("v")->visit([&](auto& node) { tbl->insert_or_assign(parts.back(), node); });

  // Type-check the value on its own now, so a bad value is blamed on this --set, not the file.
  toml::table mini;
  toml::table* m = &mini;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    m->insert_or_assign(parts[i], toml::table{});
    m = m->get(parts[i])->as_table();
  }
  v.get("v")->visit([&](auto& node) { m->insert_or_assign(parts.back(), node); });
  convert(mini, where);
  return path;
}

// The string an override gives its key, as apply_override() reads it; nullopt for another key.
std::optional<std::string> override_string(const std::string& ov, std::string_view key) {
  if (override_path(ov) != key) return std::nullopt;
  const std::string raw = ov.substr(ov.find('=') + 1);
  const toml::table v = parse_override_value(raw);
  const std::string* s = v.get("v")->as_string() ? &v.get("v")->as_string()->get() : nullptr;
  return s ? *s : raw;
}

// A model named on the command line brings its architecture with it, so it replaces the
// document's [model] section (the built-in run's tiny model without --config, or a file's)
// instead of clashing with it. A [model] key also given with --set still clashes.
void model_path_replaces_model_section(toml::table& doc, const std::vector<std::string>& overrides) {
  std::optional<std::string> model_path;
  for (const auto& ov : overrides)
    if (auto v = override_string(ov, "model.path")) model_path = v;
  toml::table* model = doc["model"].as_table();
  if (!model_path || model_path->empty() || !model) return;
  std::vector<std::string> others;
  for (auto&& [key, value] : *model)
    if (key.str() != "path") others.emplace_back(key.str());
  for (const std::string& key : others) model->erase(key);
}

// The keys naming files a run reads. In a config file they are relative to the file's directory,
// so a config works from any directory; on the command line, to the working directory. Their
// special values are not paths. (output.dir and data.cache_dir are where the run writes: relative
// to the working directory, like a command's output; train.resume too, as it points into a run.)
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kInputPaths = {
    {{"model.path", ""}, {"data.path", ""}, {"data.tokenizer", "byte"}, {"data.chat_template", ""}, {"lora.init_adapter", ""}}};

// A model.path that is a Hugging Face Hub id (ORG/NAME) and no file beside the config stays an id:
// the train verb resolves it in the Hub's cache (io/hub_model.h).
bool stays_as_given(std::string_view name, const std::string& value, const std::filesystem::path& base) {
  return name == "model.path" && hub::is_hub_id(value) && !std::filesystem::exists(base / value);
}

void resolve_input_paths(RunConfig& c, const std::filesystem::path& base,
                         const std::map<std::string, std::string>& overridden) {
  for (const auto& [name, special] : kInputPaths) {
    if (overridden.count(std::string(name))) continue;
    std::string& value = *std::get<std::string*>(field_of(*find_config_key(name), c));
    if (value.empty() || value == special || std::filesystem::path(value).is_absolute()) continue;
    if (stays_as_given(name, value, base)) continue;
    value = std::filesystem::absolute(base / value).lexically_normal().string();
  }
  // Each [[data.sources]] path likewise (a --set of the sources: relative to the working directory).
  if (!overridden.count("data.sources"))
    for (DataSource& s : c.data.sources)
      if (!s.path.empty() && !std::filesystem::path(s.path).is_absolute())
        s.path = std::filesystem::absolute(base / s.path).lexically_normal().string();
}

// Two overrides that name one key by different names (an alias and its key, or two aliases) are
// refused: a later --set of the same name replaces an earlier one, but which of two names the
// user meant is not ours to guess.
void refuse_two_names_for_one_key(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> named;  // key -> the name an earlier override used
  for (const auto& ov : overrides) {
    const std::string path = override_path(ov);
    if (path.empty()) continue;  // apply_override names the problem
    const std::string key(canonical_config_key(path));
    if (key == path && !find_config_key(path)) continue;
    const auto [it, first] = named.emplace(key, path);
    if (!first && it->second != path)
      fail("--set " + clipped(ov) + ": " + path + " and " + it->second + " (also given) both set " + key +
           ": give one");
  }
}

// Two keys of one table that give one thing two ways, the second only when not 0: train.steps or
// train.epochs (the run's length), optim.warmup_steps or optim.warmup_ratio (the warm-up). An
// override of either replaces the other in the document (the built-in run's steps = 200, a file's);
// both given in one place are refused. run.toml leaves the first out when the second is not 0
// (a run by epochs records no steps), and records the second as 0 otherwise.
void one_of_two(toml::table& doc, const std::vector<std::string>& overrides, const std::string& where,
                std::string_view table, std::string_view first, std::string_view second, std::string_view what) {
  const std::string first_key = std::string(table) + "." + std::string(first);
  const std::string second_key = std::string(table) + "." + std::string(second);
  const std::string both = first_key + " and " + second_key + " both give " + std::string(what) + ": give one";
  bool first_set = false, second_set = false;
  for (const auto& ov : overrides) {
    const std::string key(canonical_config_key(override_path(ov)));
    first_set |= key == first_key;
    second_set |= key == second_key;
  }
  if (first_set && second_set) fail("--set: " + both);
  toml::table* t = doc[table].as_table();
  if (!t) return;
  if (first_set) t->erase(second);
  if (second_set) t->erase(first);
  if (first_set || second_set) return;
  const toml::node* e = t->get(second);
  if (e && e->value<double>().value_or(0.0) != 0.0 && t->get(first)) fail(where + ": " + both);
}

// `doc` (read from `source_name`, its aliases renamed and its unknown keys already refused) with
// the overrides applied, converted and validated. `given` maps the keys that came from elsewhere
// than `source_name` to where they came from (a config file laid over a run's run.toml); their
// paths are already resolved, as are the overrides' (relative to the working directory).
// `aliases_used` (the document's) and the overrides' aliases are appended once each to `renamed`.
RunConfig parse(toml::table doc, const std::vector<std::string>& overrides, const std::string& source_name,
                const std::filesystem::path* file_dir, std::map<std::string, std::string> given = {},
                std::vector<std::string> aliases_used = {}, std::vector<std::string>* renamed = nullptr) {
  one_of_two(doc, overrides, source_name, "train", "steps", "epochs", "the run's length");
  one_of_two(doc, overrides, source_name, "optim", "warmup_steps", "warmup_ratio", "the warm-up");
  refuse_two_names_for_one_key(overrides);
  model_path_replaces_model_section(doc, overrides);
  for (const auto& ov : overrides) {
    const std::string key = apply_override(doc, ov);
    given[key] = "--set " + clipped(ov);  // the last one wins; quoted short, as the value may be megabytes
    const std::string path = override_path(ov);
    const ConfigAlias* alias = find_config_alias(path);
    if (alias && !alias->refusal) aliases_used.push_back(path + " -> " + key);
  }
  if (renamed)
    for (const std::string& r : aliases_used)
      if (std::find(renamed->begin(), renamed->end(), r) == renamed->end()) renamed->push_back(r);
  RunConfig c = convert(doc, source_name);
  // A length not given (absent, or 0): with a model the data decides when the run starts
  // (train/sequence_length.h); without one it is the built-in run's.
  if (!c.model_path.empty() && !node_at(doc, "train.seq_len")) c.train.seq_len = 0;
  if (c.model_path.empty() && c.train.seq_len == 0) c.train.seq_len = kBuiltinSeqLen;
  if (file_dir) resolve_input_paths(c, *file_dir, given);
  validate_run(c, [&](const std::string& key) {
    auto it = given.find(key);
    return it == given.end() ? source_name : it->second;
  });
  // The grown vocabulary's rows must learn: under LoRA the embedding and head train in full.
  c.lora.train_embeddings = c.lora.enabled && !c.data.add_tokens.empty();
  return c;
}

// A config text as a document: parsed, its aliases renamed to their keys (each appended to
// `aliases_used`), its unknown keys refused against `source_name` before overrides can touch it.
toml::table read_doc(const std::string& toml_text, const std::string& source_name,
                     std::vector<std::string>& aliases_used) {
  toml::table doc = parse_doc(toml_text, source_name);
  rename_config_aliases(doc, source_name, aliases_used);
  check_known(doc, source_name);
  return doc;
}

RunConfig parse(const std::string& toml_text, const std::vector<std::string>& overrides,
                const std::string& source_name, const std::filesystem::path* file_dir,
                std::vector<std::string>* renamed) {
  std::vector<std::string> aliases_used;
  toml::table doc = read_doc(toml_text, source_name, aliases_used);
  return parse(std::move(doc), overrides, source_name, file_dir, {}, std::move(aliases_used), renamed);
}

std::string read_config_file(const std::string& path) {
  require_regular_file(path, "config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open config file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read config file '" + path + "'");
  return ss.str();
}

toml::table read_config_doc(const std::string& path) {
  std::vector<std::string> aliases_used;  // a run.toml holds none; a file laid over it may
  return read_doc(read_config_file(path), path, aliases_used);
}

// The input paths a config file gives, made absolute against its directory, in the document (for
// a file laid over another: each file's paths are relative to itself).
void resolve_doc_input_paths(toml::table& doc, const std::filesystem::path& base) {
  for (const auto& [name, special] : kInputPaths) {
    toml::value<std::string>* value = doc.at_path(name).as_string();
    if (!value) continue;
    std::string& path = value->get();
    if (path.empty() || path == special || std::filesystem::path(path).is_absolute()) continue;
    if (stays_as_given(name, path, base)) continue;
    path = std::filesystem::absolute(base / path).lexically_normal().string();
  }
  if (toml::array* sources = doc.at_path("data.sources").as_array())
    for (toml::node& source : *sources)
      if (toml::table* t = source.as_table())
        if (toml::value<std::string>* value = t->get_as<std::string>("path")) {
          std::string& path = value->get();
          if (!path.empty() && !std::filesystem::path(path).is_absolute())
            path = std::filesystem::absolute(base / path).lexically_normal().string();
        }
}

// Copies every key of `over` into `doc` (tables merged key by key; values, lists and the
// partition rules replaced whole), recording each key -> `where` in `given`.
void lay_over(toml::table& doc, const toml::table& over, const std::string& prefix, const std::string& where,
              std::map<std::string, std::string>& given) {
  for (auto&& [k, node] : over) {
    const std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (find_config_key(path)) {
      const toml::key key = k;  // a structured binding cannot be captured (clang, which builds the fuzzers)
      node.visit([&](auto& n) { doc.insert_or_assign(key, n); });
      given[path] = where;
      continue;
    }
    if (!doc.get_as<toml::table>(k.str())) doc.insert_or_assign(k, toml::table{});
    lay_over(*doc.get_as<toml::table>(k.str()), *node.as_table(), path, where, given);  // check_known: a table
  }
}

}  // namespace

std::string config_string_as_given(const std::string& config_path, const std::vector<std::string>& overrides,
                                   std::string_view key) {
  std::vector<std::string> aliases_used;
  toml::table doc = config_path.empty() ? read_doc(default_run_config_toml(), "<built-in default>", aliases_used)
                                        : read_config_doc(config_path);
  for (const auto& ov : overrides) apply_override(doc, ov);
  if (const toml::node* n = node_at(doc, key))
    if (const auto* s = n->as_string()) return s->get();
  RunConfig defaults;
  return *std::get<std::string*>(field_of(*find_config_key(key), defaults));
}

RunConfig load_run_config_over(const std::string& base_path, const std::string& config_path,
                               const std::vector<std::string>& overrides, std::vector<std::string>* renamed) {
  toml::table doc = read_config_doc(base_path);
  std::map<std::string, std::string> given;
  if (!config_path.empty()) {
    toml::table over = read_config_doc(config_path);
    resolve_doc_input_paths(over, std::filesystem::path(config_path).parent_path());
    // The file's model brings its architecture, as a --set model.path does.
    const toml::value<std::string>* model_path = over.at_path("model.path").as_string();
    if (model_path && !model_path->get().empty())
      model_path_replaces_model_section(doc, {"model.path=" + model_path->get()});
    lay_over(doc, over, "", config_path, given);
  }
  const std::filesystem::path dir = std::filesystem::path(base_path).parent_path();
  return parse(std::move(doc), overrides, base_path, &dir, std::move(given), {}, renamed);
}

RunConfig parse_run_config(const std::string& toml_text, const std::vector<std::string>& overrides,
                           const std::string& source_name, std::vector<std::string>* renamed) {
  return parse(toml_text, overrides, source_name, nullptr, renamed);
}

void make_input_paths_absolute(RunConfig& cfg) {
  resolve_input_paths(cfg, std::filesystem::current_path(), {});
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          std::vector<std::string>* renamed) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return parse(read_config_file(path), overrides, path, &dir, renamed);
}

}  // namespace mt

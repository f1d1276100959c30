// TOML -> RunConfig. Strict by design: every key is known, every value has the right type and
// range, and every problem is reported as one line naming the key and the file (or --set). The
// keys, their types and their per-key rules come from the schema (config_schema.h); this file
// walks the document, applies --set overrides and checks the rules that join several keys.
#include "train/run_config.h"

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
#include "core/error.h"
#include "core/regular_file.h"
#include "data/unicode.h"
#include "train/config_schema.h"
#include "train/config_values.h"

namespace mt {
namespace {

// ---------------------------------------------------------------------------------------------
// Unknown sections and keys.

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(const std::string& key) {
  std::string_view best;
  size_t best_d = 3;  // suggest only close matches
  for (const ConfigKey& k : config_keys()) {
    // The distance is at least the difference in length: a key far longer than any name (10 MB in
    // a hostile file) is not compared at all, which took minutes.
    if (std::max(key.size(), k.name.size()) - std::min(key.size(), k.name.size()) >= best_d) continue;
    size_t d = edit_distance(key, k.name);
    if (d < best_d) best_d = d, best = k.name;
  }
  return best.empty() ? "" : " (did you mean '" + std::string(best) + "'?)";
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
      if (prefix.empty()) unknown_section(where, path, " (expected " + section_list() + ")");
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

// Applies one override onto the document; returns the dotted key it set.
std::string apply_override(toml::table& doc, const std::string& ov) {
  const std::string where = "--set " + clipped(ov);
  size_t eq = ov.find('=');
  if (eq == std::string::npos) fail(where + ": expected section.key=value");
  std::string path = ov.substr(0, eq);
  // Allow "train.steps = 5" with spaces around the key.
  while (!path.empty() && path.back() == ' ') path.pop_back();
  while (!path.empty() && path.front() == ' ') path.erase(path.begin());
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
    if (!is_config_table(parts[0])) unknown_section(where, parts[0], "");
    fail(where + ": expected section.key=value, got only the section '" + parts[0] + "'");
  }
  if (!is_config_table(parts[0])) unknown_section(where, parts[0], suggestion(path));
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
  if (!v.get("v")->is_string() && is_string_key(*key)) v.insert_or_assign("v", raw);
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
  const size_t eq = ov.find('=');
  if (eq == std::string::npos) return std::nullopt;
  std::string path = ov.substr(0, eq);
  path.erase(0, path.find_first_not_of(' '));
  path.erase(path.find_last_not_of(' ') + 1);
  if (path != key) return std::nullopt;
  const std::string raw = ov.substr(eq + 1);
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
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kInputPaths = {
    {{"model.path", ""}, {"data.path", ""}, {"data.tokenizer", "byte"}}};

void resolve_input_paths(RunConfig& c, const std::filesystem::path& base,
                         const std::map<std::string, std::string>& overridden) {
  for (const auto& [name, special] : kInputPaths) {
    if (overridden.count(std::string(name))) continue;
    std::string& value = *std::get<std::string*>(field_of(*find_config_key(name), c));
    if (value.empty() || value == special || std::filesystem::path(value).is_absolute()) continue;
    value = std::filesystem::absolute(base / value).lexically_normal().string();
  }
}

// `doc` (read from `source_name`, its unknown keys already refused) with the overrides applied,
// converted and validated. `given` maps the keys that came from elsewhere than `source_name` to
// where they came from (a config file laid over a run's run.toml); their paths are already
// resolved, as are the overrides' (relative to the working directory).
RunConfig parse(toml::table doc, const std::vector<std::string>& overrides, const std::string& source_name,
                const std::filesystem::path* file_dir, std::map<std::string, std::string> given = {}) {
  model_path_replaces_model_section(doc, overrides);
  for (const auto& ov : overrides) given[apply_override(doc, ov)] = "--set " + ov;  // the last one wins
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
  return c;
}

RunConfig parse(const std::string& toml_text, const std::vector<std::string>& overrides,
                const std::string& source_name, const std::filesystem::path* file_dir) {
  toml::table doc = parse_doc(toml_text, source_name);
  // Unknown keys in the file are reported against the file before overrides can touch it.
  check_known(doc, source_name);
  return parse(std::move(doc), overrides, source_name, file_dir);
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
  toml::table doc = parse_doc(read_config_file(path), path);
  check_known(doc, path);
  return doc;
}

// The input paths a config file gives, made absolute against its directory, in the document (for
// a file laid over another: each file's paths are relative to itself).
void resolve_doc_input_paths(toml::table& doc, const std::filesystem::path& base) {
  for (const auto& [name, special] : kInputPaths) {
    toml::value<std::string>* value = doc.at_path(name).as_string();
    if (!value) continue;
    std::string& path = value->get();
    if (path.empty() || path == special || std::filesystem::path(path).is_absolute()) continue;
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
      node.visit([&](auto& n) { doc.insert_or_assign(k, n); });
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
  toml::table doc = config_path.empty() ? parse_doc(default_run_config_toml(), "<built-in default>")
                                        : read_config_doc(config_path);
  for (const auto& ov : overrides) apply_override(doc, ov);
  if (const toml::node* n = node_at(doc, key))
    if (const auto* s = n->as_string()) return s->get();
  RunConfig defaults;
  return *std::get<std::string*>(field_of(*find_config_key(key), defaults));
}

RunConfig load_run_config_over(const std::string& base_path, const std::string& config_path,
                               const std::vector<std::string>& overrides) {
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
  return parse(std::move(doc), overrides, base_path, &dir, std::move(given));
}

RunConfig parse_run_config(const std::string& toml_text, const std::vector<std::string>& overrides,
                           const std::string& source_name) {
  return parse(toml_text, overrides, source_name, nullptr);
}

void make_input_paths_absolute(RunConfig& cfg) {
  resolve_input_paths(cfg, std::filesystem::current_path(), {});
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return parse(read_config_file(path), overrides, path, &dir);
}

}  // namespace mt

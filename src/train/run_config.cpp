// TOML <-> RunConfig. Strict by design: every key is known, every value has the right type and
// range, and every problem is reported as one line naming the key and the file (or --set).
#include "train/run_config.h"

#include "parallel/dist_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "core/error.h"

namespace mt {
namespace {

// ---------------------------------------------------------------------------------------------
// Schema: the only sections and keys that are accepted.

struct Section {
  std::string_view name;
  std::vector<std::string_view> keys;
};

const std::vector<Section>& schema() {
  static const std::vector<Section> s = {
      {"model",
       {"path", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps",
        "rope_theta", "rope_scaling", "tie_word_embeddings"}},
      {"lora", {"enabled", "rank", "alpha", "targets", "init_std"}},
      {"optim",
       {"lr", "min_lr", "warmup_steps", "weight_decay", "beta1", "beta2", "eps", "grad_clip"}},
      {"train",
       {"steps", "batch_size", "grad_accum", "seq_len", "seed", "precision",
        "activation_checkpointing", "log_every", "threads", "peak_gflops", "resume", "profile",
        "fsdp_prefetch"}},
      {"data", {"path", "format", "tokenizer", "cache_dir", "truncate", "val_fraction"}},
      {"output", {"dir", "checkpoint_every", "keep_checkpoints"}},
  };
  return s;
}

const std::vector<std::string_view>& rope_scaling_keys() {
  static const std::vector<std::string_view> k = {"factor", "low_freq_factor", "high_freq_factor",
                                                  "original_max_position_embeddings"};
  return k;
}

constexpr std::array<std::string_view, 8> kLoraTargets = {"q",    "k",  "v",    "o",
                                                          "gate", "up", "down", "lm_head"};

const Section* find_section(std::string_view name) {
  for (const auto& s : schema())
    if (s.name == name) return &s;
  return nullptr;
}

bool contains(const std::vector<std::string_view>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// All dotted keys, for "did you mean" suggestions.
std::vector<std::string> all_keys() {
  std::vector<std::string> out;
  for (const auto& s : schema())
    for (auto k : s.keys) out.push_back(std::string(s.name) + "." + std::string(k));
  for (auto k : rope_scaling_keys()) out.push_back("model.rope_scaling." + std::string(k));
  return out;
}

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
  std::string best;
  size_t best_d = 3;  // suggest only close matches
  for (const auto& k : all_keys()) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& key) {
  fail(where + ": unknown key '" + key + "'" + suggestion(key));
}

// Checks that `tbl` (the whole document) only uses known sections and keys.
void check_known(const toml::table& tbl, const std::string& where) {
  for (auto&& [k, node] : tbl) {
    std::string sec(k.str());
    const Section* s = find_section(sec);
    if (!s) fail(where + ": unknown section '" + sec + "' (expected model, lora, optim, train, data, output)");
    const toml::table* st = node.as_table();
    if (!st) fail(where + ": '" + sec + "' must be a table ([" + sec + "])");
    for (auto&& [kk, vv] : *st) {
      std::string key(kk.str());
      if (!contains(s->keys, key)) unknown_key(where, sec + "." + key);
      if (sec == "model" && key == "rope_scaling") {
        const toml::table* rt = vv.as_table();
        if (!rt) continue;  // the type error is reported by the reader
        for (auto&& [rk, rv] : *rt)
          if (!contains(rope_scaling_keys(), rk.str()))
            unknown_key(where, "model.rope_scaling." + std::string(rk.str()));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Typed reading.

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

class Reader {
 public:
  Reader(const toml::table* tbl, std::string where, std::string prefix)
      : tbl_(tbl), where_(std::move(where)), prefix_(std::move(prefix)) {}

  [[noreturn]] void type_error(const std::string& key, const char* expected,
                               const toml::node& n) const {
    fail(where_ + ": " + prefix_ + key + " must be " + expected + ", got " + type_name(n));
  }

  const toml::node* get(const std::string& key) const { return tbl_ ? tbl_->get(key) : nullptr; }

  void read(const std::string& key, int64_t& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_integer()) type_error(key, "an integer", *n);
    out = n->as_integer()->get();
  }
  void read(const std::string& key, uint64_t& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_integer()) type_error(key, "an integer", *n);
    int64_t v = n->as_integer()->get();
    if (v < 0) fail(where_ + ": " + prefix_ + key + " must be >= 0, got " + std::to_string(v));
    out = uint64_t(v);
  }
  void read(const std::string& key, float& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    if (n->is_floating_point())
      out = float(n->as_floating_point()->get());
    else if (n->is_integer())
      out = float(n->as_integer()->get());
    else
      type_error(key, "a number", *n);
  }
  void read(const std::string& key, bool& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_boolean()) type_error(key, "a boolean (true or false)", *n);
    out = n->as_boolean()->get();
  }
  void read(const std::string& key, std::string& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    if (!n->is_string()) type_error(key, "a string", *n);
    out = n->as_string()->get();
  }
  void read(const std::string& key, std::vector<std::string>& out) const {
    const toml::node* n = get(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) type_error(key, "an array of strings", *n);
    std::vector<std::string> v;
    for (const toml::node& e : *a) {
      if (!e.is_string())
        fail(where_ + ": " + prefix_ + key + " must be an array of strings, got an element that is " +
             type_name(e));
      v.push_back(e.as_string()->get());
    }
    out = std::move(v);
  }

 private:
  const toml::table* tbl_;
  std::string where_, prefix_;
};

const toml::table* section(const toml::table& doc, const char* name) {
  const toml::node* n = doc.get(name);
  return n ? n->as_table() : nullptr;  // check_known already rejected non-tables
}

RunConfig convert(const toml::table& doc, const std::string& where) {
  check_known(doc, where);
  RunConfig c;

  {
    const toml::table* model_table = section(doc, "model");
    Reader r(model_table, where, "model.");
    r.read("path", c.model_path);
    if (!c.model_path.empty())
      for (const auto& [key, value] : *model_table)
        if (key.str() != "path")
          fail(where + ": model." + std::string(key.str()) +
               " cannot be combined with model.path (the architecture comes from the model's files)");
    LlamaConfig& m = c.model;
    r.read("hidden_size", m.hidden_size);
    r.read("intermediate_size", m.intermediate_size);
    r.read("num_hidden_layers", m.num_hidden_layers);
    r.read("num_attention_heads", m.num_attention_heads);
    r.read("num_key_value_heads", m.num_key_value_heads);
    r.read("vocab_size", m.vocab_size);
    r.read("max_position_embeddings", m.max_position_embeddings);
    r.read("rms_norm_eps", m.rms_norm_eps);
    r.read("rope_theta", m.rope_theta);
    r.read("tie_word_embeddings", m.tie_word_embeddings);
    if (const toml::node* rs = r.get("rope_scaling")) {
      if (!rs->is_table()) r.type_error("rope_scaling", "a table", *rs);
      Reader rr(rs->as_table(), where, "model.rope_scaling.");
      rr.read("factor", m.rope_scaling.factor);
      rr.read("low_freq_factor", m.rope_scaling.low_freq_factor);
      rr.read("high_freq_factor", m.rope_scaling.high_freq_factor);
      rr.read("original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings);
    }
  }
  {
    Reader r(section(doc, "lora"), where, "lora.");
    r.read("enabled", c.lora.enabled);
    r.read("rank", c.lora.rank);
    r.read("alpha", c.lora.alpha);
    r.read("targets", c.lora.targets);
    r.read("init_std", c.lora.init_std);
  }
  {
    Reader r(section(doc, "optim"), where, "optim.");
    OptimConfig& o = c.optim;
    r.read("lr", o.lr);
    r.read("min_lr", o.min_lr);
    r.read("warmup_steps", o.warmup_steps);
    r.read("weight_decay", o.weight_decay);
    r.read("beta1", o.beta1);
    r.read("beta2", o.beta2);
    r.read("eps", o.eps);
    r.read("grad_clip", o.grad_clip);
  }
  {
    Reader r(section(doc, "train"), where, "train.");
    TrainConfig& t = c.train;
    r.read("steps", t.steps);
    r.read("batch_size", t.batch_size);
    r.read("grad_accum", t.grad_accum);
    r.read("seq_len", t.seq_len);
    r.read("seed", t.seed);
    std::string prec = t.precision == Precision::fp32 ? "fp32" : "bf16";
    r.read("precision", prec);
    if (prec == "fp32")
      t.precision = Precision::fp32;
    else if (prec == "bf16")
      t.precision = Precision::bf16;
    else
      fail(where + ": train.precision must be \"fp32\" or \"bf16\", got \"" + prec + "\"");
    r.read("activation_checkpointing", t.activation_checkpointing);
    r.read("fsdp_prefetch", t.fsdp_prefetch);
    r.read("log_every", t.log_every);
    r.read("threads", t.threads);
    r.read("peak_gflops", t.peak_gflops);
    r.read("resume", t.resume);
    r.read("profile", t.profile);
  }
  {
    Reader r(section(doc, "data"), where, "data.");
    r.read("path", c.data.path);
    r.read("format", c.data.format);
    r.read("tokenizer", c.data.tokenizer);
    r.read("cache_dir", c.data.cache_dir);
    r.read("truncate", c.data.truncate);
    r.read("val_fraction", c.data.val_fraction);
  }
  {
    Reader r(section(doc, "output"), where, "output.");
    r.read("dir", c.output.dir);
    r.read("checkpoint_every", c.output.checkpoint_every);
    r.read("keep_checkpoints", c.output.keep_checkpoints);
  }
  return c;
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// `where_for(key)` names the origin of a key's value: the file, or the --set that changed it.
// Every message below starts with the key it is about.
template <class WhereFor>
void validate_run(const RunConfig& c, const WhereFor& where_for) {
  auto bad = [&](const std::string& msg) {
    std::string key = msg.substr(0, msg.find_first_of(" :("));
    fail(where_for(key) + ": " + msg);
  };
  auto positive = [&](int64_t v, const char* key) {
    if (v <= 0) bad(std::string(key) + " must be > 0, got " + std::to_string(v));
  };
  auto positive_f = [&](float v, const char* key) {
    if (!(v > 0.0f)) bad(std::string(key) + " must be > 0, got " + num(v));
  };
  auto unit = [&](float v, const char* key) {  // [0, 1)
    if (!(v >= 0.0f && v < 1.0f)) bad(std::string(key) + " must be in [0, 1), got " + num(v));
  };

  // Model shape first: the other checks refer to it.
  try {
    c.model.validate();
  } catch (const Error& e) {
    bad(e.what());
  }
  if (c.model.rope_scaling.factor > 0.0f)
    positive(c.model.rope_scaling.original_max_position_embeddings,
             "model.rope_scaling.original_max_position_embeddings");

  const auto& l = c.lora;
  if (l.rank <= 0) bad("lora.rank must be > 0, got " + std::to_string(l.rank));
  positive_f(l.alpha, "lora.alpha");
  if (!(l.init_std >= 0.0f)) bad("lora.init_std must be >= 0, got " + num(l.init_std));
  for (size_t i = 0; i < l.targets.size(); ++i) {
    const std::string& t = l.targets[i];
    if (std::find(kLoraTargets.begin(), kLoraTargets.end(), t) == kLoraTargets.end())
      bad("lora.targets: unknown target '" + t +
          "' (expected some of q, k, v, o, gate, up, down, lm_head)");
    if (std::find(l.targets.begin(), l.targets.begin() + i, t) != l.targets.begin() + i)
      bad("lora.targets: '" + t + "' is listed twice");
  }
  if (l.enabled && l.targets.empty()) bad("lora.targets must not be empty when lora.enabled = true");

  const auto& o = c.optim;
  positive_f(o.lr, "optim.lr");
  // min_lr above lr is allowed (the schedule then rises), so --set optim.lr=... alone never fails.
  if (!(o.min_lr >= 0.0f)) bad("optim.min_lr must be >= 0, got " + num(o.min_lr));
  if (o.warmup_steps < 0) bad("optim.warmup_steps must be >= 0, got " + std::to_string(o.warmup_steps));
  if (!(o.weight_decay >= 0.0f)) bad("optim.weight_decay must be >= 0, got " + num(o.weight_decay));
  unit(o.beta1, "optim.beta1");
  unit(o.beta2, "optim.beta2");
  positive_f(o.eps, "optim.eps");
  if (std::isnan(o.grad_clip)) bad("optim.grad_clip must be a number, got nan");

  const auto& t = c.train;
  positive(t.steps, "train.steps");
  positive(t.batch_size, "train.batch_size");
  positive(t.grad_accum, "train.grad_accum");
  positive(t.seq_len, "train.seq_len");
  if (c.model_path.empty() && t.seq_len > c.model.max_position_embeddings)
    bad("train.seq_len (" + std::to_string(t.seq_len) +
        ") must be <= model.max_position_embeddings (" +
        std::to_string(c.model.max_position_embeddings) + ")");
  positive(t.log_every, "train.log_every");
  if (t.threads < 0) bad("train.threads must be >= 0 (0: all cores), got " + std::to_string(t.threads));
  if (!(t.peak_gflops >= 0.0)) bad("train.peak_gflops must be >= 0 (0: measure), got " + std::to_string(t.peak_gflops));

  unit(c.data.val_fraction, "data.val_fraction");
  if (c.data.format != "auto" && c.data.format != "text" && c.data.format != "alpaca" &&
      c.data.format != "chat")
    bad("data.format must be \"auto\", \"text\", \"alpaca\" or \"chat\", got \"" + c.data.format + "\"");
  if (c.output.dir.empty()) bad("output.dir must not be empty");
  if (c.output.checkpoint_every < 0) bad("output.checkpoint_every must be >= 0 (0: none)");
  if (c.output.keep_checkpoints < 1) bad("output.keep_checkpoints must be >= 1");
}

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
         one_line(e.description()));
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
  const std::string where = "--set " + ov;
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
    if (p.empty()) fail(where + ": expected section.key=value, got key '" + path + "'");
  if (parts.size() < 2) {
    if (!find_section(parts[0]))
      fail(where + ": unknown section '" + parts[0] + "'");
    fail(where + ": expected section.key=value, got only the section '" + parts[0] + "'");
  }
  const Section* s = find_section(parts[0]);
  if (!s) fail(where + ": unknown section '" + parts[0] + "'" + suggestion(path));
  bool known = contains(s->keys, parts[1]) && parts.size() == 2;
  if (parts.size() == 3 && parts[0] == "model" && parts[1] == "rope_scaling")
    known = contains(rope_scaling_keys(), parts[2]);
  if (!known) unknown_key(where, path);

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
  toml::table v = parse_override_value(raw);
  // For a string-valued key the raw text is the string, even when it happens to be valid TOML of
  // another type (--set output.dir=2024, --set data.path=inf).
  if (!v.get("v")->is_string() &&
      (path == "data.path" || path == "output.dir" || path == "train.precision" ||
       path == "data.format" || path == "data.tokenizer" || path == "data.cache_dir" ||
       path == "model.path" || path == "train.resume"))
    v.insert_or_assign("v", raw);
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

// ---------------------------------------------------------------------------------------------
// Writing.

std::string fmt_float(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // keep it a TOML float
  return s;
}

std::string fmt_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += char(ch);
        }
    }
  }
  return out + "\"";
}

const char* fmt_bool(bool b) { return b ? "true" : "false"; }

}  // namespace

RunConfig parse_run_config(const std::string& toml_text, const std::vector<std::string>& overrides,
                           const std::string& source_name) {
  parallel::SplitConfig split = parallel::split_dist_config(toml_text, source_name);
  toml::table doc = parse_doc(split.rest_toml, source_name);
  // Unknown keys in the file are reported against the file before overrides can touch it.
  check_known(doc, source_name);
  std::map<std::string, std::string> overridden;  // key -> the (last) --set that changed it
  for (const auto& ov : overrides) overridden[apply_override(doc, ov)] = ov;
  RunConfig c = convert(doc, source_name);
  c.mesh = split.dist.mesh.value_or(parallel::MeshShape{});
  c.partition = split.dist.partition;
  validate_run(c, [&](const std::string& key) {
    auto it = overridden.find(key);
    return it == overridden.end() ? source_name : "--set " + it->second;
  });
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open config file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read config file '" + path + "'");
  return parse_run_config(ss.str(), overrides, path);
}

std::string default_run_config_toml() {
  return R"(# meshtrain built-in default run: a small LLaMA trained from scratch on the built-in text
# with the byte-level tokenizer. About a minute on two cores.

[model]
hidden_size = 128
intermediate_size = 344
num_hidden_layers = 4
num_attention_heads = 8
num_key_value_heads = 4
vocab_size = 256               # byte-level tokenizer
max_position_embeddings = 256
rms_norm_eps = 1e-5
rope_theta = 10000.0
tie_word_embeddings = false

[model.rope_scaling]           # Llama 3.1 "llama3" scaling; factor 0 disables it
factor = 0.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 8192

[lora]
enabled = false                # full training
rank = 8
alpha = 16.0
targets = ["q", "k", "v", "o", "gate", "up", "down"]
init_std = 0.02

[optim]
lr = 2e-3
min_lr = 2e-4
warmup_steps = 20
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
grad_clip = 1.0

[train]
steps = 200
batch_size = 8
grad_accum = 1
seq_len = 128
seed = 1234
precision = "bf16"
activation_checkpointing = false
log_every = 10
threads = 0                    # 0: all cores
peak_gflops = 0.0              # MFU denominator; 0: measure this machine's bf16 GEMM
resume = ""                    # "latest" or a checkpoint directory to continue from
profile = false                # print the time per op at the end
fsdp_prefetch = true           # issue the next unit's FSDP gather before computing this one

[data]
path = ""                      # empty: the built-in demo text
format = "auto"                # auto, text, alpaca or chat
tokenizer = ""                 # empty: the model's own, else the byte-level tokenizer
cache_dir = ""                 # tokenised-example cache; empty: ~/.cache/meshtrain/tokens
truncate = false               # cut examples longer than seq_len instead of skipping them
val_fraction = 0.1

[output]
dir = "runs/default"
checkpoint_every = 0           # steps between checkpoints (0: none)
keep_checkpoints = 2           # newest checkpoints kept
)";
}

std::string to_toml(const RunConfig& c) {
  std::ostringstream o;
  const LlamaConfig& m = c.model;
  if (!c.model_path.empty()) {
    o << "[model]\npath = " << fmt_string(c.model_path) << "\n";
  } else {
  o << "[model]\n"
    << "hidden_size = " << m.hidden_size << "\n"
    << "intermediate_size = " << m.intermediate_size << "\n"
    << "num_hidden_layers = " << m.num_hidden_layers << "\n"
    << "num_attention_heads = " << m.num_attention_heads << "\n"
    << "num_key_value_heads = " << m.num_key_value_heads << "\n"
    << "vocab_size = " << m.vocab_size << "\n"
    << "max_position_embeddings = " << m.max_position_embeddings << "\n"
    << "rms_norm_eps = " << fmt_float(m.rms_norm_eps) << "\n"
    << "rope_theta = " << fmt_float(m.rope_theta) << "\n"
    << "tie_word_embeddings = " << fmt_bool(m.tie_word_embeddings) << "\n"
    << "\n[model.rope_scaling]\n"
    << "factor = " << fmt_float(m.rope_scaling.factor) << "\n"
    << "low_freq_factor = " << fmt_float(m.rope_scaling.low_freq_factor) << "\n"
    << "high_freq_factor = " << fmt_float(m.rope_scaling.high_freq_factor) << "\n"
    << "original_max_position_embeddings = " << m.rope_scaling.original_max_position_embeddings
    << "\n";
  }
  o << "\n[lora]\n"
    << "enabled = " << fmt_bool(c.lora.enabled) << "\n"
    << "rank = " << c.lora.rank << "\n"
    << "alpha = " << fmt_float(c.lora.alpha) << "\n"
    << "targets = [";
  for (size_t i = 0; i < c.lora.targets.size(); ++i)
    o << (i ? ", " : "") << fmt_string(c.lora.targets[i]);
  o << "]\n"
    << "init_std = " << fmt_float(c.lora.init_std) << "\n";
  const OptimConfig& op = c.optim;
  o << "\n[optim]\n"
    << "lr = " << fmt_float(op.lr) << "\n"
    << "min_lr = " << fmt_float(op.min_lr) << "\n"
    << "warmup_steps = " << op.warmup_steps << "\n"
    << "weight_decay = " << fmt_float(op.weight_decay) << "\n"
    << "beta1 = " << fmt_float(op.beta1) << "\n"
    << "beta2 = " << fmt_float(op.beta2) << "\n"
    << "eps = " << fmt_float(op.eps) << "\n"
    << "grad_clip = " << fmt_float(op.grad_clip) << "\n";
  const TrainConfig& t = c.train;
  // TOML integers are signed 64-bit; a seed above INT64_MAX is written as its two's complement
  // so the file still parses (and is rejected as negative), rather than silently changing.
  o << "\n[train]\n"
    << "steps = " << t.steps << "\n"
    << "batch_size = " << t.batch_size << "\n"
    << "grad_accum = " << t.grad_accum << "\n"
    << "seq_len = " << t.seq_len << "\n"
    << "seed = " << int64_t(t.seed) << "\n"
    << "precision = " << (t.precision == Precision::fp32 ? "\"fp32\"" : "\"bf16\"") << "\n"
    << "activation_checkpointing = " << fmt_bool(t.activation_checkpointing) << "\n"
    << "log_every = " << t.log_every << "\n"
    << "threads = " << t.threads << "\n"
    << "peak_gflops = " << fmt_float(t.peak_gflops) << "\n"
    << "resume = " << fmt_string(t.resume) << "\n"
    << "profile = " << fmt_bool(t.profile) << "\n"
    << "fsdp_prefetch = " << fmt_bool(t.fsdp_prefetch) << "\n";
  o << "\n[data]\n"
    << "path = " << fmt_string(c.data.path) << "\n"
    << "format = " << fmt_string(c.data.format) << "\n"
    << "tokenizer = " << fmt_string(c.data.tokenizer) << "\n"
    << "cache_dir = " << fmt_string(c.data.cache_dir) << "\n"
    << "truncate = " << fmt_bool(c.data.truncate) << "\n"
    << "val_fraction = " << fmt_float(c.data.val_fraction) << "\n";
  o << "\n[mesh]\n"
    << "dp = " << c.mesh.dp << "\nfsdp = " << c.mesh.fsdp << "\ntp = " << c.mesh.tp << "\n";
  if (!c.partition.rules.empty())
    o << "# (the run's [[partition.rules]] are in its original config file)\n";
  o << "\n[output]\n"
    << "dir = " << fmt_string(c.output.dir) << "\n"
    << "checkpoint_every = " << c.output.checkpoint_every << "\n"
    << "keep_checkpoints = " << c.output.keep_checkpoints << "\n";
  return o.str();
}

}  // namespace mt

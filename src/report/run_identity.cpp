#include "report/run_identity.h"

#include <cstdio>

#include "core/toml.h"

namespace mt::report {

namespace {

constexpr const char* kNotRecorded = "not recorded";

// "dp=2,tp=2": the axes above 1 of run.toml's [mesh], "one rank" when none is.
std::string mesh_of(const toml::table& t) {
  std::string mesh;
  for (const char* axis : {"pp", "dp", "fsdp", "ep", "cp", "tp"}) {
    const int64_t n = t["mesh"][axis].value_or(int64_t(1));
    if (n > 1) mesh += (mesh.empty() ? "" : ",") + std::string(axis) + "=" + std::to_string(n);
  }
  return mesh.empty() ? "one rank" : mesh;
}

std::string model_of(const toml::table& t) {
  const std::string path = t["model"]["path"].value_or(std::string());
  if (!path.empty()) return path;
  const auto layers = t["model"]["num_hidden_layers"].value<int64_t>();
  const auto hidden = t["model"]["hidden_size"].value<int64_t>();
  if (!layers || !hidden) return kNotRecorded;
  return "the [model] of run.toml, random init (" + std::to_string(*layers) + " layers, hidden " +
         std::to_string(*hidden) + ")";
}

// [[data.sources]]: each file with its format, split, weight and share of the training rows (the
// weight over the sum: data/source_mix.h's schedule holds it; a preference run's pairs alike).
std::string sources_of(const toml::array& sources) {
  double total = 0;
  for (const toml::node& s : sources) total += s.as_table() ? (*s.as_table())["weight"].value_or(1.0) : 0.0;
  std::string out = std::to_string(sources.size()) + " sources mixed by weight: ";
  for (size_t i = 0; i < sources.size(); ++i) {
    const toml::table* s = sources[i].as_table();
    if (!s) continue;
    const double weight = (*s)["weight"].value_or(1.0);
    const std::string format = (*s)["format"].value_or(std::string("auto"));
    const std::string split = (*s)["split"].value_or(std::string("train"));
    char share[64];
    std::snprintf(share, sizeof share, "weight %g, %.1f%% of the rows", weight, total > 0 ? 100.0 * weight / total : 0.0);
    out += (i ? "; " : "") + (*s)["path"].value_or(std::string("?")) + (format == "auto" ? "" : " (" + format + ")") +
           (split == "train" ? "" : " " + split) + " " + share;
  }
  return out;
}

std::string data_of(const toml::table& t) {
  if (const toml::array* sources = t["data"]["sources"].as_array(); sources && !sources->empty())
    return sources_of(*sources);
  const auto path = t["data"]["path"].value<std::string>();
  if (!path) return kNotRecorded;
  const std::string format = t["data"]["format"].value_or(std::string("auto"));
  return (path->empty() ? std::string("the built-in text") : *path) + (format == "auto" ? "" : " (" + format + ")");
}

std::string mode_of(const toml::table& t) {
  const auto lora = t["lora"]["enabled"].value<bool>();
  if (!lora) return kNotRecorded;
  std::string mode = "full (every weight trained)";
  if (*lora) {
    const std::string rank = std::to_string(t["lora"]["rank"].value_or(int64_t(0)));
    mode = t["lora"]["base_dtype"].value_or(std::string()) == "nf4" ? "QLoRA r" + rank + " (NF4 base)"
                                                                      : "LoRA r" + rank;
  }
  const std::string method = t["train"]["method"].value_or(std::string("sft"));
  if (method != "sft") mode += ", " + method;
  const std::string precision = t["train"]["precision"].value_or(std::string());
  if (!precision.empty()) mode += ", " + precision;
  return mode;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_identity_rows(
    const std::string& config_toml, const std::optional<nlohmann::json>& summary) {
  toml::table t;
  if (!config_toml.empty()) {
    try {
      t = toml::parse(config_toml);
    } catch (const toml::parse_error&) {
      t = {};
    }
  }
  std::string mesh = config_toml.empty() ? kNotRecorded : mesh_of(t);
  if (summary && summary->contains("mesh") && (*summary)["mesh"].is_string()) mesh = (*summary)["mesh"];
  if (config_toml.empty())
    return {{"model", kNotRecorded}, {"data", kNotRecorded}, {"mode", kNotRecorded}, {"mesh", mesh}};
  return {{"model", model_of(t)}, {"data", data_of(t)}, {"mode", mode_of(t)}, {"mesh", mesh}};
}

}  // namespace mt::report

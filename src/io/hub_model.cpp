#include "io/hub_model.h"

#include <algorithm>
#include <filesystem>

#include "core/bounded_json.h"
#include "core/error.h"
#include "io/hub_cache.h"
#include "io/hub_download.h"

namespace mt::hub {

namespace fs = std::filesystem;

namespace {

// Whether a snapshot holds what the caller reads: config.json, and for a whole model its
// safetensors (one file, or every shard its index names). A snapshot a Python user filled with
// hf_hub_download("config.json") alone is completed, not taken for a model.
bool snapshot_complete(const fs::path& snap, HubFiles files) {
  if (!fs::exists(snap / "config.json")) return false;
  if (files == HubFiles::config_only || fs::exists(snap / "model.safetensors")) return true;
  const fs::path index = snap / "model.safetensors.index.json";
  if (!fs::exists(index)) return false;
  const nlohmann::json j = read_json_file(index.string(), JsonKind::safetensors_index);
  if (!j.contains("weight_map") || !j["weight_map"].is_object()) return true;  // the loader says what is wrong
  for (const auto& [tensor, shard] : j["weight_map"].items())
    if (shard.is_string() && !fs::exists(snap / shard.get<std::string>())) return false;
  return true;
}

// A revision is a path under refs/ in the cache (huggingface_hub stores refs/pr/1 as
// refs/refs/pr/1): one that could name a file outside it, or none, is refused before it is used.
void check_revision(const std::string& rev) {
  bool ok = !rev.empty() && rev.size() <= 256 && rev.front() != '/' && rev.back() != '/';
  for (size_t at = 0; ok && at <= rev.size();) {
    const size_t slash = std::min(rev.find('/', at), rev.size());
    const std::string part = rev.substr(at, slash - at);
    ok = !part.empty() && part != "." && part != "..";
    at = slash + 1;
  }
  for (unsigned char c : rev) ok = ok && c > ' ' && c != 0x7f && c != '\\';
  if (!ok)
    fail("--revision '" + rev.substr(0, 100) + "' is not a branch, tag, commit or refs/pr/N name (no empty, '.' or "
         "'..' parts, spaces or backslashes)");
}

}  // namespace

std::string resolve_model_path(const std::string& model, const std::string& revision, HubFiles files) {
  if (model.empty() || fs::exists(model) || !is_hub_id(model)) {
    if (!revision.empty() && !model.empty())
      fail("--revision " + revision + " is for a Hugging Face Hub id (ORG/NAME); '" + model + "' is " +
           (fs::exists(model) ? "a local path" : "not one"));
    return model;
  }
  const std::string rev = revision.empty() ? "main" : revision;
  check_revision(rev);
  const fs::path repo = repo_dir(cache_dir(), model);
  if (const auto commit = cached_commit(repo, rev)) {
    const fs::path snap = repo / "snapshots" / *commit;
    if (snapshot_complete(snap, files)) return snap.string();
  }
  if (offline())
    fail("'" + model + "' (revision " + rev + ") is not in the Hugging Face cache at " + repo.string() +
         ", and HF_HUB_OFFLINE is set: download it where the network is (`meshtrain` or `huggingface-cli download " +
         model + "`) into that cache, or unset HF_HUB_OFFLINE");
  if (!download_compiled_in())
    fail("'" + model + "' (revision " + rev + ") is not in the Hugging Face cache at " + repo.string() +
         ", and this meshtrain was built without libcurl, so it cannot download it: install "
         "libcurl4-openssl-dev and rebuild, or run `huggingface-cli download " + model + "`");
  const std::string commit = download_snapshot(model, rev, repo, files == HubFiles::config_only);
  const fs::path snap = repo / "snapshots" / commit;
  if (!snapshot_complete(snap, files))
    fail("'" + model + "': the download of " + commit + " into " + snap.string() + " left files missing");
  return snap.string();
}

}  // namespace mt::hub

#include "io/hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mt::hub {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path expand_home(const std::string& p) {
  if (p == "~" || p.rfind("~/", 0) == 0) return fs::path(env("HOME")) / p.substr(std::min<size_t>(2, p.size()));
  return p;
}

}  // namespace

bool is_hub_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return false;
  const std::string org = s.substr(0, slash), name = s.substr(slash + 1);
  for (const std::string& part : {org, name}) {
    if (part.empty() || part.front() == '.') return false;
    for (char c : part)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool is_commit_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

fs::path cache_dir() {
  if (!env("HF_HUB_CACHE").empty()) return expand_home(env("HF_HUB_CACHE"));
  if (!env("HUGGINGFACE_HUB_CACHE").empty()) return expand_home(env("HUGGINGFACE_HUB_CACHE"));
  if (!env("HF_HOME").empty()) return expand_home(env("HF_HOME")) / "hub";
  const fs::path xdg = env("XDG_CACHE_HOME").empty() ? expand_home("~/.cache") : expand_home(env("XDG_CACHE_HOME"));
  return xdg / "huggingface" / "hub";
}

fs::path repo_dir(const fs::path& cache, const std::string& id) {
  std::string folder = "models--" + id;
  const size_t slash = folder.find('/');
  if (slash != std::string::npos) folder.replace(slash, 1, "--");
  return cache / folder;
}

std::optional<std::string> cached_commit(const fs::path& repo, const std::string& revision) {
  std::ifstream ref(repo / "refs" / revision);
  if (ref) {
    std::stringstream ss;
    ss << ref.rdbuf();
    std::string commit = ss.str();
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    if (!commit.empty()) return commit;
  }
  if (is_commit_hash(revision)) return revision;
  return std::nullopt;
}

bool offline() {
  std::string v = env("HF_HUB_OFFLINE");
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace mt::hub

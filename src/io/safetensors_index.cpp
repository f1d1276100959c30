#include "io/safetensors_index.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "io/safetensors_text.h"

namespace mt {

namespace fs = std::filesystem;

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) : path_(path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string index = path + "/model.safetensors.index.json";
    const std::string single = path + "/model.safetensors";
    if (fs::exists(index, ec)) {
      open_index(index);
      return;
    }
    if (!fs::exists(single, ec))
      fail(path + ": no model.safetensors or model.safetensors.index.json in this directory");
    shards_.push_back(std::make_unique<SafetensorsFile>(single));
  } else {
    shards_.push_back(std::make_unique<SafetensorsFile>(path));  // names the path if missing
  }
  for (const auto& name : shards_[0]->names()) owner_[name] = shards_[0].get();
  metadata_ = shards_[0]->metadata();
}

void SafetensorsCheckpoint::open_index(const std::string& index_path) {
  nlohmann::json j = parse_json(read_json_text(index_path, JsonKind::safetensors_index),
                                JsonKind::safetensors_index, index_path + ": malformed index");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index_path + ": malformed index: expected an object with a \"weight_map\" object");
  if (j.contains("metadata")) {
    if (!j["metadata"].is_object()) fail(index_path + ": malformed index: \"metadata\" is not an object");
    for (const auto& [k, v] : j["metadata"].items())
      metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }

  // Open each shard once, in order of first mention, and check the map against its contents.
  const std::string dir = fs::path(index_path).parent_path().string();
  std::map<std::string, const SafetensorsFile*> by_file;
  std::map<std::string, std::string> mapped;  // tensor -> shard file, as the index says
  for (const auto& [tensor, file_json] : j["weight_map"].items()) {
    if (!file_json.is_string())
      fail(index_path + ": malformed index: weight_map entry for " + quote_name(tensor) + " is not a string");
    const std::string file = file_json.get<std::string>();
    // Shards live next to the index; refusing paths keeps an index from reaching elsewhere.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      fail(index_path + ": shard name " + quote_name(file) + " is not a plain file name");
    mapped[tensor] = file;
    if (by_file.count(file)) continue;
    const std::string shard_path = dir + "/" + file;
    std::error_code ec;
    if (!fs::exists(shard_path, ec))
      fail(index_path + ": shard " + quote_name(file) + " not found (missing file " + shard_path + ")");
    shards_.push_back(std::make_unique<SafetensorsFile>(shard_path));
    by_file[file] = shards_.back().get();
  }
  for (const auto& [file, shard] : by_file) {
    for (const auto& name : shard->names()) {
      auto [it, inserted] = owner_.emplace(name, shard);
      if (!inserted)
        fail(index_path + ": tensor " + quote_name(name) + " is present in two shards: " +
             it->second->path() + " and " + shard->path());
      if (!mapped.count(name))
        fail(index_path + ": tensor " + quote_name(name) + " in shard " + shard->path() +
             " is not listed in the weight_map");
    }
  }
  for (const auto& [tensor, file] : mapped)
    if (!by_file[file]->contains(tensor))
      fail(index_path + ": tensor " + quote_name(tensor) + " is mapped to shard " + quote_name(file) +
           " but that file has no such tensor");
}

std::vector<std::string> SafetensorsCheckpoint::shard_paths() const {
  std::vector<std::string> out;
  for (const auto& s : shards_) out.push_back(s->path());
  return out;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& s : shards_)
    for (auto& n : s->names()) out.push_back(std::move(n));
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = owner_.find(name);
  if (it == owner_.end()) fail(path_ + ": no tensor named " + quote_name(name));
  return *it->second;
}

}  // namespace mt

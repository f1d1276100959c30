// The distributed sections of a run's TOML file:
//   [mesh]       dp = 1, fsdp = 8, tp = 1 (pp = 1)      -- or --mesh dp=1,fsdp=8 on the command line
//                (auto = true: train chose the sizes, plan/auto_mesh.h; read here as the sizes only)
//   [partition]  replace_defaults, [[partition.rules]]  -- see partition.h
// They live beside the run config's own sections. The run config reads them through its key table
// (train/config_schema.cpp); split_dist_config is for `meshtrain shard`, which must know whether
// [mesh] was given at all.
#pragma once
#include <optional>
#include <string>

#include "parallel/mesh.h"
#include "parallel/partition.h"

namespace mt::parallel {

struct DistConfig {
  std::optional<MeshShape> mesh;  // absent when the file has no [mesh]
  PartitionConfig partition;
};

struct SplitConfig {
  DistConfig dist;
  std::string rest_toml;  // the document without [mesh] and [partition]
};

SplitConfig split_dist_config(const std::string& toml_text, const std::string& where);

}  // namespace mt::parallel

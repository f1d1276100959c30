// Where each block of a tensor lives on the mesh: for a shape, a spec and a mesh shape, every
// rank's block (a half-open index range per dimension). Shape-only: nothing is allocated, so the
// shard command and the planner see the same layout the trainer uses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/partition.h"

namespace mt::parallel {

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

struct TensorLayout {
  std::string name;
  std::vector<int64_t> shape;
  PartitionSpec spec;
  MeshShape mesh;
  std::vector<int64_t> splits;       // per dim: number of blocks (product of its axes' sizes)
  std::vector<int64_t> local_shape;  // per dim: shape[d] / splits[d]; the same on every rank
  // Expert parallelism places a mixture of experts' expert tensors whole on one ep coordinate
  // (experts [c * E / ep, (c + 1) * E / ep) on coordinate c; parallel/expert_parallel.h): the
  // coordinate holding this one, or -1 for a tensor every ep rank holds. Within the ranks of that
  // coordinate the spec splits it as any other.
  int64_t ep_owner = -1;

  int64_t numel() const;
  int64_t local_numel() const;
  // Which block of dim d rank r holds: row-major over the dim's axes (first axis major).
  int64_t block_index(int64_t rank, size_t dim) const;
  Range range(int64_t rank, size_t dim) const;
  // Whether rank r stores a block of the tensor (every rank, but for an expert only those of its
  // ep coordinate).
  bool held_by(int64_t rank) const;
  // Ranks holding the same blocks as `rank` (those differing only along axes the spec leaves
  // out, among the ranks holding the tensor), ascending; the tensor is stored once per such replica.
  std::vector<int64_t> replicas(int64_t rank) const;
  int64_t replication() const;  // ranks holding it / number of distinct blocks
};

// The spec a rule's spec places on `mesh`: under context parallelism every dimension split over
// fsdp is split over fsdp x cp (cp right after fsdp, so block f*cp + c of the fsdp x cp group),
// torchtitan's dp_shard x cp: the cp ranks of a row hold no tensor of their own, so parameters,
// gradients and optimizer state are sharded over them as over fsdp. The same spec otherwise.
PartitionSpec shard_spec(const PartitionSpec& spec, const MeshShape& mesh);

// The layout of `spec` as shard_spec places it (TensorLayout::spec is that one). Throws for a
// spec longer than the tensor's rank or a dimension that does not divide:
// "model.embed_tokens.weight dim 0 (32000) is not divisible by tp=3".
TensorLayout make_layout(const std::string& name, const std::vector<int64_t>& shape,
                         const PartitionSpec& spec, const MeshShape& mesh);

}  // namespace mt::parallel

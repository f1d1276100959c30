#include "parallel/layout.h"

#include "core/error.h"

namespace mt::parallel {

int64_t TensorLayout::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorLayout::local_numel() const {
  int64_t n = 1;
  for (int64_t s : local_shape) n *= s;
  return n;
}

int64_t TensorLayout::block_index(int64_t rank, size_t dim) const {
  if (dim >= spec.dims.size()) return 0;
  const Coords c = coords_of(mesh, rank);
  int64_t idx = 0;
  for (Axis a : spec.dims[dim]) idx = idx * mesh.size(a) + c[size_t(a)];
  return idx;
}

Range TensorLayout::range(int64_t rank, size_t dim) const {
  const int64_t b = block_index(rank, dim);
  return {b * local_shape[dim], (b + 1) * local_shape[dim]};
}

bool TensorLayout::held_by(int64_t rank) const {
  return ep_owner < 0 || coords_of(mesh, rank)[size_t(Axis::ep)] == ep_owner;
}

std::vector<int64_t> TensorLayout::replicas(int64_t rank) const {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < mesh.world(); ++r) {
    bool same = held_by(r);
    for (size_t d = 0; d < shape.size() && same; ++d) same = block_index(r, d) == block_index(rank, d);
    if (same) out.push_back(r);
  }
  return out;
}

int64_t TensorLayout::replication() const {
  int64_t blocks = 1;
  for (int64_t s : splits) blocks *= s;
  return mesh.world() / (ep_owner < 0 ? 1 : mesh.ep) / blocks;
}

PartitionSpec shard_spec(const PartitionSpec& spec, const MeshShape& mesh) {
  if (mesh.cp == 1) return spec;
  PartitionSpec out = spec;
  for (auto& axes : out.dims)
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] == Axis::fsdp) {
        axes.insert(axes.begin() + std::ptrdiff_t(i) + 1, Axis::cp);
        break;
      }
  return out;
}

TensorLayout make_layout(const std::string& name, const std::vector<int64_t>& shape,
                         const PartitionSpec& spec, const MeshShape& mesh) {
  if (spec.dims.size() > shape.size())
    fail(name + ": spec " + spec.str() + " has " + std::to_string(spec.dims.size()) +
         " dimensions but the tensor has " + std::to_string(shape.size()));
  TensorLayout t{name, shape, shard_spec(spec, mesh), mesh, {}, {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t parts = 1;
    std::string axes;  // "tp=3" or "fsdp=2 x tp=3 (6)" for the error message
    if (d < t.spec.dims.size())
      for (Axis a : t.spec.dims[d]) {
        parts *= mesh.size(a);
        axes += (axes.empty() ? "" : " x ") + std::string(axis_name(a)) + "=" + std::to_string(mesh.size(a));
      }
    if (d < t.spec.dims.size() && t.spec.dims[d].size() > 1) axes += " (" + std::to_string(parts) + ")";
    if (shape[d] % parts != 0)
      fail(name + " dim " + std::to_string(d) + " (" + std::to_string(shape[d]) +
           ") is not divisible by " + axes + "; change the mesh or add a partition rule for it");
    t.splits.push_back(parts);
    t.local_shape.push_back(shape[d] / parts);
  }
  return t;
}

}  // namespace mt::parallel

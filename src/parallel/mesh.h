// The device mesh: the world's ranks laid out over named axes, outermost first
//   pp (pipeline stages, parallel/pipeline.h), dp (replicas), fsdp (sharded data
//   parallel), ep (expert parallel: a mixture of experts' experts split over ranks that are
//   otherwise data parallel, parallel/expert_parallel.h), cp (context parallel: a sequence's
//   chunks, parallel/context_parallel.h), tp (tensor parallel),
// row-major with the LAST axis fastest:
//   world rank r = ((((pp*DP + dp)*FSDP + fsdp)*EP + ep)*CP + cp)*TP + tp.
// So a tp group is TP adjacent ranks (one node's fast links), a cp group the next nearest (its
// K/V all-gathers run every layer), an ep group next (its all-to-alls run twice a MoE layer and
// pass), and pp stages are the slowest-varying.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {

// The values index Coords and AxisSet bits; kAxes is the rank order (cp and ep, added later, sit
// between fsdp and tp).
enum class Axis : int { pp = 0, dp = 1, fsdp = 2, tp = 3, cp = 4, ep = 5 };
inline constexpr int kNumAxes = 6;
inline constexpr std::array<Axis, kNumAxes> kAxes = {Axis::pp, Axis::dp, Axis::fsdp, Axis::ep, Axis::cp, Axis::tp};

const char* axis_name(Axis a);
// "dp", "fsdp", "tp", "pp", "cp", "ep" -> Axis; throws mt::Error naming `where` for anything else.
Axis parse_axis(const std::string& name, const std::string& where);

struct MeshShape {
  int64_t dp = 1, fsdp = 1, tp = 1, pp = 1, cp = 1, ep = 1;

  int64_t size(Axis a) const;
  int64_t& size(Axis a);
  int64_t world() const { return dp * fsdp * tp * pp * cp * ep; }
  // The ranks that see different rows of a batch: dp x fsdp x ep (the ep ranks are data parallel
  // for everything but the experts, as in Megatron and torchtitan).
  int64_t batch_ranks() const { return dp * fsdp * ep; }
  // The ranks a parameter's fsdp blocks are spread over: fsdp x cp (torchtitan's dp_shard x cp),
  // since the cp ranks of a row hold no tensor of their own (parallel/layout.h make_layout).
  int64_t shards() const { return fsdp * cp; }
  // "dp=2,fsdp=2,tp=2": the axes larger than 1, in rank order (or "dp=1" for a single rank).
  std::string str() const;

  // Parses "dp=2,fsdp=2,tp=2": any subset of dp, fsdp, tp, pp, cp, ep in any order, each a
  // positive integer, each at most once; the ones not named are 1. Refuses a product of the sizes
  // over kMaxWorld (no count a machine room reaches; it keeps every product in range).
  static constexpr int64_t kMaxWorld = int64_t(1) << 24;
  static MeshShape parse(const std::string& text);
  // Throws "mesh dp=2,fsdp=2 has 4 ranks but the world has 3" when the product differs.
  void check_world(int64_t world_size) const;
};

using Coords = std::array<int64_t, kNumAxes>;  // indexed by int(Axis)
Coords coords_of(const MeshShape& shape, int64_t rank);
int64_t rank_of(const MeshShape& shape, const Coords& c);

// A set of axes as a bit mask (bit int(Axis)), naming a sub-group of the mesh: the ranks that
// differ only along those axes.
using AxisSet = unsigned;
inline constexpr AxisSet axis_bit(Axis a) { return 1u << int(a); }

class Mesh {
 public:
  // Collective over `world`: builds a communicator for every non-empty set of axes (63 splits)
  // so no later call has to be collective. Throws (on every rank alike) when the mesh does not
  // have world.size() ranks. `world` must outlive the Mesh.
  Mesh(Comm& world, const MeshShape& shape);
  // Drops the groups from the highest axis set down: a device twin shared by groups of the same
  // ranks is made over the first of them (device_comms.h), which thereby outlives the others.
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  int rank() const { return world_.rank(); }
  const Coords& coords() const { return coords_; }
  int64_t coord(Axis a) const { return coords_[size_t(a)]; }

  Comm& world() { return world_; }
  // The ranks sharing all coordinates except along `a` (ordered by their coordinate on `a`).
  Comm& axis(Axis a) { return group(axis_bit(a)); }
  // The ranks differing only along the axes in `axes` (ordered row-major over those axes).
  Comm& group(AxisSet axes);
  // dp x fsdp x ep: the ranks that see different batches (the data-parallel group).
  Comm& data_parallel() { return group(batch_axes()); }
  static constexpr AxisSet batch_axes() { return axis_bit(Axis::dp) | axis_bit(Axis::fsdp) | axis_bit(Axis::ep); }
  // dp x fsdp x ep x cp: the ranks that see different tokens, over which token counts and losses
  // are summed (the cp ranks of a batch row each hold part of its tokens).
  Comm& token_parallel() { return group(token_axes()); }
  static constexpr AxisSet token_axes() { return batch_axes() | axis_bit(Axis::cp); }
  // fsdp x cp: the ranks that hold the blocks of a sharded parameter, over which the sharded model
  // gathers units and reduce-scatters their gradients (row-major: fsdp major, cp minor, the order
  // of the blocks in make_layout).
  Comm& shard_group() { return group(shard_axes()); }
  static constexpr AxisSet shard_axes() { return axis_bit(Axis::fsdp) | axis_bit(Axis::cp); }
  // The world, then every group above in a fixed order, the same on every rank: what device
  // twins are attached to (parallel/device_comms.h), one collective creation after another.
  std::vector<Comm*> all_groups();

 private:
  Comm& world_;
  MeshShape shape_;
  Coords coords_{};
  std::array<std::unique_ptr<Comm>, 1u << kNumAxes> groups_;
};

}  // namespace mt::parallel

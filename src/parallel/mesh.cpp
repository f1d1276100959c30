#include "parallel/mesh.h"

#include <charconv>
#include <vector>

#include "core/error.h"

namespace mt::parallel {

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::pp: return "pp";
    case Axis::dp: return "dp";
    case Axis::fsdp: return "fsdp";
    case Axis::tp: return "tp";
    case Axis::cp: return "cp";
    case Axis::ep: return "ep";
  }
  return "?";
}

Axis parse_axis(const std::string& name, const std::string& where) {
  for (Axis a : kAxes)
    if (name == axis_name(a)) return a;
  fail(where + ": unknown mesh axis '" + name + "' (expected dp, fsdp, tp, pp, cp or ep)");
}

int64_t MeshShape::size(Axis a) const { return const_cast<MeshShape*>(this)->size(a); }

int64_t& MeshShape::size(Axis a) {
  switch (a) {
    case Axis::pp: return pp;
    case Axis::dp: return dp;
    case Axis::fsdp: return fsdp;
    case Axis::cp: return cp;
    case Axis::ep: return ep;
    default: return tp;
  }
}

std::string MeshShape::str() const {
  std::string s;
  for (Axis a : kAxes)
    if (size(a) != 1) {
      if (!s.empty()) s += ',';  // piecewise: avoids g++ 12's false -Wrestrict on "lit" + string
      s += axis_name(a);
      s += '=';
      s += std::to_string(size(a));
    }
  return s.empty() ? "dp=1" : s;
}

MeshShape MeshShape::parse(const std::string& text) {
  const std::string where = "mesh '" + text + "'";
  if (text.empty()) fail("mesh: empty (expected e.g. dp=2,fsdp=2,tp=2)");
  MeshShape m;
  bool seen[kNumAxes] = {};
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos) fail(where + ": expected axis=size, got '" + item + "'");
    Axis a = parse_axis(item.substr(0, eq), where);
    if (seen[int(a)]) fail(where + ": axis '" + std::string(axis_name(a)) + "' given twice");
    seen[int(a)] = true;
    std::string num = item.substr(eq + 1);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (num.empty() || ec != std::errc() || end != num.data() + num.size())
      fail(where + ": size of '" + std::string(axis_name(a)) + "' must be an integer, got '" + num + "'");
    if (v <= 0)
      fail(where + ": size of '" + std::string(axis_name(a)) + "' must be positive, got " + num);
    m.size(a) = v;
    pos = comma + 1;
  }
  int64_t world = 1;
  for (Axis a : kAxes) {
    if (m.size(a) > kMaxWorld || world * m.size(a) > kMaxWorld)  // world <= kMaxWorld: no overflow
      fail(where + ": " + std::to_string(kMaxWorld) + " ranks at most (the sizes' product is larger)");
    world *= m.size(a);
  }
  return m;
}

void MeshShape::check_world(int64_t world_size) const {
  if (world() != world_size)
    fail("mesh " + str() + " has " + std::to_string(world()) + " ranks but the world has " +
         std::to_string(world_size));
}

Coords coords_of(const MeshShape& shape, int64_t rank) {
  Coords c{};
  for (int i = kNumAxes - 1; i >= 0; --i) {  // last axis of the rank order fastest
    const Axis a = kAxes[size_t(i)];
    const int64_t n = shape.size(a);
    c[size_t(a)] = rank % n;
    rank /= n;
  }
  return c;
}

int64_t rank_of(const MeshShape& shape, const Coords& c) {
  int64_t r = 0;
  for (Axis a : kAxes) r = r * shape.size(a) + c[size_t(a)];
  return r;
}

Mesh::Mesh(Comm& world, const MeshShape& shape) : world_(world), shape_(shape) {
  shape_.check_world(world.size());
  coords_ = coords_of(shape_, world.rank());
  for (AxisSet set = 1; set < (1u << kNumAxes); ++set) {
    // Color: the coordinates outside the set (the ranks agreeing on them form one group). Key:
    // the world rank, which is row-major over the axes inside the set, as documented.
    Coords outside = coords_;
    for (Axis a : kAxes)
      if (set & axis_bit(a)) outside[size_t(a)] = 0;
    groups_[set] = world.split(int(rank_of(shape_, outside)), world.rank());
    std::string name;
    for (Axis a : kAxes)
      if (set & axis_bit(a)) {
        if (!name.empty()) name += '+';  // piecewise, as in str()
        name += axis_name(a);
      }
    groups_[set]->set_name(name);
  }
}

Mesh::~Mesh() {
  for (AxisSet set = (1u << kNumAxes) - 1; set >= 1; --set) groups_[set].reset();
}

std::vector<Comm*> Mesh::all_groups() {
  std::vector<Comm*> out = {&world_};
  for (AxisSet set = 1; set < (1u << kNumAxes); ++set) out.push_back(groups_[set].get());
  return out;
}

Comm& Mesh::group(AxisSet axes) {
  MT_CHECK(axes > 0 && axes < (1u << kNumAxes), "empty or invalid axis set");
  return *groups_[axes];
}

}  // namespace mt::parallel

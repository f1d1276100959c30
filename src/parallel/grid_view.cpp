#include "parallel/grid_view.h"

#include <algorithm>

namespace mt::parallel {

std::string rank_list(const std::vector<int64_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "literal" + std::string here.
    if (!s.empty()) s += ',';
    s += std::to_string(ranks[i]);
    if (j > i) {
      s += j == i + 1 ? ',' : '-';
      s += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  if (s.size() > 16 && ranks.size() > 3)
    s = std::to_string(ranks[0]) + "," + std::to_string(ranks[1]) + ",...," +
        std::to_string(ranks.back()) + " (" + std::to_string(ranks.size()) + " ranks)";
  return s;
}

namespace {

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string centred(const std::string& s, size_t width) {
  const size_t left = (width - s.size()) / 2;
  return std::string(left, ' ') + s + std::string(width - s.size() - left, ' ');
}

}  // namespace

std::string render_grid(const TensorLayout& t, const std::string& indent, size_t max_width,
                        const std::function<bool(int64_t)>& holds) {
  // Dims 0 and 1 as rows and columns; a vector is one row of column blocks, a scalar one box.
  const size_t nd = t.shape.size();
  const int64_t rows = nd >= 2 ? t.splits[0] : 1;
  const int64_t cols = nd >= 2 ? t.splits[1] : nd == 1 ? t.splits[0] : 1;
  std::vector<std::vector<int64_t>> holders(size_t(rows * cols));
  for (int64_t r = 0; r < t.mesh.world(); ++r) {
    // An expert lies on its ep coordinate's ranks only (TensorLayout::held_by).
    if (!t.held_by(r) || (holds && !holds(r))) continue;
    const int64_t i = nd >= 2 ? t.block_index(r, 0) : 0;
    const int64_t j = nd >= 2 ? t.block_index(r, 1) : nd == 1 ? t.block_index(r, 0) : 0;
    holders[size_t(i * cols + j)].push_back(r);
  }
  std::vector<std::string> labels;
  size_t w = 3;
  for (const auto& h : holders) {
    labels.push_back(rank_list(h));
    w = std::max(w, labels.back().size() + 2);
  }
  if (size_t(cols) * (w + 1) + 1 > max_width || rows > 32)
    return indent + "(" + std::to_string(rows) + " x " + std::to_string(cols) +
           " blocks: too many to draw; see --json)\n";
  const std::string bar = repeat("─", w);
  auto rule = [&](const char* l, const char* m, const char* r) {
    std::string s = indent + l;
    for (int64_t j = 0; j < cols; ++j) s += bar + (j + 1 < cols ? m : r);
    return s + "\n";
  };
  std::string out = rule("┌", "┬", "┐");
  for (int64_t i = 0; i < rows; ++i) {
    out += indent + "│";
    for (int64_t j = 0; j < cols; ++j) out += centred(labels[size_t(i * cols + j)], w) + "│";
    out += "\n";
    out += i + 1 < rows ? rule("├", "┼", "┤") : rule("└", "┴", "┘");
  }
  return out;
}

}  // namespace mt::parallel

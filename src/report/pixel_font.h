// A 5x7 pixel font for the PNG charts' titles and tick labels: upper-case letters (lower case is
// drawn as upper case), digits and the punctuation the labels use; anything else is a blank.
// Drawn larger, each doubling is smoothed by Scale2x (a diagonal steps by one pixel, not by a
// block), so the 2x and 4x glyphs read cleanly at the PNGs' doubled resolution.
#pragma once
#include <string>
#include <vector>

namespace mt::report {

constexpr int kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;

// Whether the glyph of `c` has its pixel (x, y) set, 0 <= x < 5, 0 <= y < 7.
bool glyph_pixel(char c, int x, int y);

// The glyph of `c` at 2^level times the 5x7 design, row-major, `width` x `height` pixels.
struct GlyphBitmap {
  int width = 0, height = 0;
  std::vector<bool> bits;
  bool at(int x, int y) const {
    return x >= 0 && y >= 0 && x < width && y < height && bits[size_t(y) * size_t(width) + size_t(x)];
  }
};
GlyphBitmap glyph_bitmap(char c, int level);

inline int text_width(const std::string& text) { return int(text.size()) * kGlyphAdvance - 1; }

}  // namespace mt::report

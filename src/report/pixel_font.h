// A 5x7 pixel font for the PNG charts' titles and tick labels: upper-case letters (lower case is
// drawn as upper case), digits and the punctuation the labels use; anything else is a blank.
#pragma once
#include <string>

namespace mt::report {

constexpr int kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;

// Whether the glyph of `c` has its pixel (x, y) set, 0 <= x < 5, 0 <= y < 7.
bool glyph_pixel(char c, int x, int y);

inline int text_width(const std::string& text) { return int(text.size()) * kGlyphAdvance - 1; }

}  // namespace mt::report

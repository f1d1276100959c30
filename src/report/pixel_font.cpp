#include "report/pixel_font.h"

#include <cctype>
#include <utility>

namespace mt::report {
namespace {

// Seven rows of five pixels each, top to bottom ('#' set).
struct Glyph {
  char c;
  const char* rows;
};

constexpr Glyph kGlyphs[] = {
    {'A', ".###.#...##...#######...##...##...#"}, {'B', "####.#...##...#####.#...##...#####."},
    {'C', ".###.#...##....#....#....#...#.###."}, {'D', "####.#...##...##...##...##...#####."},
    {'E', "######....#....####.#....#....#####"}, {'F', "######....#....####.#....#....#...."},
    {'G', ".###.#...##....#.####...##...#.####"}, {'H', "#...##...##...#######...##...##...#"},
    {'I', ".###...#....#....#....#....#...###."}, {'J', "..###...#....#....#....#.#..#..##.."},
    {'K', "#...##..#.#.#..##...#.#..#..#.#...#"}, {'L', "#....#....#....#....#....#....#####"},
    {'M', "#...###.###.#.##.#.##...##...##...#"}, {'N', "#...##...###..##.#.##..###...##...#"},
    {'O', ".###.#...##...##...##...##...#.###."}, {'P', "####.#...##...#####.#....#....#...."},
    {'Q', ".###.#...##...##...##.#.##..#..##.#"}, {'R', "####.#...##...#####.#.#..#..#.#...#"},
    {'S', ".#####....#.....###.....#....#####."}, {'T', "#####..#....#....#....#....#....#.."},
    {'U', "#...##...##...##...##...##...#.###."}, {'V', "#...##...##...##...##...#.#.#...#.."},
    {'W', "#...##...##...##.#.##.#.##.#.#.#.#."}, {'X', "#...##...#.#.#...#...#.#.#...##...#"},
    {'Y', "#...##...#.#.#...#....#....#....#.."}, {'Z', "#####....#...#...#...#...#....#####"},
    {'0', ".###.#...##..###.#.###..##...#.###."}, {'1', "..#...##....#....#....#....#...###."},
    {'2', ".###.#...#....#...#...#...#...#####"}, {'3', "####.....#....#.###.....#....#####."},
    {'4', "...#...##..#.#.#..#.#####...#....#."}, {'5', "######....####.....#....##...#.###."},
    {'6', "..##..#...#....####.#...##...#.###."}, {'7', "#####....#...#...#...#....#....#..."},
    {'8', ".###.#...##...#.###.#...##...#.###."}, {'9', ".###.#...##...#.####....#...#..##.."},
    {'.', "..........................##...##.."}, {'-', "...............###................."},
    {'+', "......#....#..#####..#....#........"}, {'/', "....#....#...#...#...#...#....#...."},
    {'%', "##..###..#...#...#...#...#..###..##"}, {'(', "...#...#...#....#....#.....#.....#."},
    {')', ".#.....#.....#....#....#...#...#..."}, {'_', "..............................#####"},
    {'=', "..........#####.....#####.........."}, {',', "....................##....#...#...."},
    {':', ".....##...##.........##...##......."},
};

}  // namespace

bool glyph_pixel(char c, int x, int y) {
  if (x < 0 || x >= kGlyphWidth || y < 0 || y >= kGlyphHeight) return false;
  const char upper = char(std::toupper(static_cast<unsigned char>(c)));
  for (const Glyph& g : kGlyphs)
    if (g.c == upper) return g.rows[y * kGlyphWidth + x] == '#';
  return false;
}

GlyphBitmap glyph_bitmap(char c, int level) {
  GlyphBitmap g{kGlyphWidth, kGlyphHeight, {}};
  for (int y = 0; y < kGlyphHeight; ++y)
    for (int x = 0; x < kGlyphWidth; ++x) g.bits.push_back(glyph_pixel(c, x, y));
  // Scale2x: each pixel P becomes four; a corner takes the colour of the two neighbours beside it
  // when they agree and the two opposite ones do not, which rounds off the staircase of a diagonal.
  for (int l = 0; l < level; ++l) {
    GlyphBitmap big{2 * g.width, 2 * g.height, std::vector<bool>(size_t(4) * g.bits.size())};
    for (int y = 0; y < g.height; ++y)
      for (int x = 0; x < g.width; ++x) {
        const bool p = g.at(x, y), up = g.at(x, y - 1), right = g.at(x + 1, y), left = g.at(x - 1, y),
                   down = g.at(x, y + 1);
        const bool corners[4] = {left == up && left != down && up != right ? up : p,
                                 up == right && up != left && right != down ? right : p,
                                 down == left && down != right && left != up ? left : p,
                                 right == down && right != up && down != left ? down : p};
        for (int k = 0; k < 4; ++k)
          big.bits[size_t(2 * y + k / 2) * size_t(big.width) + size_t(2 * x + k % 2)] = corners[k];
      }
    g = std::move(big);
  }
  return g;
}

}  // namespace mt::report

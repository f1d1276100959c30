#include "core/did_you_mean.h"

#include <algorithm>
#include <optional>

namespace mt {
namespace {

bool is_separator(char c) { return c == '.' || c == '_' || c == '-'; }

std::vector<std::string_view> words_of(std::string_view name) {
  std::vector<std::string_view> words;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i)
    if (i == name.size() || is_separator(name[i])) {
      words.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  return words;
}

std::string without_separators(std::string_view name) {
  std::string out;
  for (char c : name)
    if (!is_separator(c)) out += c;
  return out;
}

std::string digits_of(std::string_view word) {
  std::string out;
  for (char c : word)
    if (c >= '0' && c <= '9') out += c;
  return out;
}

// The edits that make `given` the word `known` as a typo; nullopt when it is another word.
std::optional<size_t> word_edits(std::string_view given, std::string_view known) {
  if (given == known) return 0;
  if (digits_of(given) != digits_of(known)) return std::nullopt;
  const size_t longer = std::max(given.size(), known.size()), shorter = std::min(given.size(), known.size());
  const size_t allowed = longer < 4 ? 0 : longer < 8 ? 1 : 2;
  if (longer - shorter <= allowed) {
    const size_t d = typo_distance(given, known);
    if (d <= allowed) return d;
  }
  return std::nullopt;
}

// The edits that make `given` the name `known`; nullopt when some word of it is another word.
std::optional<size_t> name_edits(std::string_view given, std::string_view known) {
  const std::vector<std::string_view> a = words_of(given), b = words_of(known);
  // A longer form of a one-word name ("optimizer" for the section "optim"), ranked after any typo.
  // Not of a word within a key: "optimxmin" may be "optim" followed by another word.
  if (a.size() == 1 && b.size() == 1 && known.size() >= 4 && given.starts_with(known) &&
      given.size() - known.size() <= 8)
    return 3;
  if (a.size() == b.size()) {
    size_t total = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::optional<size_t> e = word_edits(a[i], b[i]);
      if (!e) return std::nullopt;
      total += *e;
    }
    return total;
  }
  if (without_separators(given) == without_separators(known)) return 1;
  return std::nullopt;
}

}  // namespace

size_t typo_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the transposition looks two back.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string_view closest_name(std::string_view name, const std::vector<std::string_view>& candidates) {
  size_t longest = 0;
  for (std::string_view c : candidates) longest = std::max(longest, c.size());
  // A longer form of a name adds a few letters to a word or two, never thousands.
  if (name.size() > 2 * longest + 16) return {};
  std::string_view best;
  size_t best_edits = 0;
  for (std::string_view c : candidates) {
    const std::optional<size_t> edits = name_edits(name, c);
    if (edits && (best.empty() || *edits < best_edits)) best_edits = *edits, best = c;
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates) {
  const std::string_view best = closest_name(name, candidates);
  return best.empty() ? "" : " (did you mean '" + std::string(best) + "'?)";
}

}  // namespace mt

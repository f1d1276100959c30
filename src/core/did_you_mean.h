// "did you mean ...?" for a name that is not known: the closest of the known names, so that a
// misspelt key, section or verb is answered with the one the user probably meant.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mt {

// Levenshtein distance (insertions, deletions and substitutions each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name` when it is close enough to be a likely misspelling (at most a
// third of the longer name's length, and at least 2 edits allowed) or one of the two is the
// other cut short (at least 4 characters: "optim" for "optimizer"), else "". Names far longer
// than every candidate are not compared at all (a 10 MB key in a hostile file took minutes).
std::string_view closest_name(std::string_view name, const std::vector<std::string_view>& candidates);

// " (did you mean 'x'?)" for closest_name, or "" when there is none.
std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates);

}  // namespace mt

// "did you mean ...?" for a name that is not known: the known name it is a misspelling of, so that
// a misspelt key, section or verb is answered with the one the user meant. Similar spelling is not
// enough: train.save_steps is two letters from train.max_steps and means something else, and
// following such a suggestion changes the run. So names are compared word by word (words split at
// '.', '_' and '-'), and a suggestion needs every word to be the same word or a typo of it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mt {

// Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
// two neighbours ("stpes" for "steps") each cost 1.
size_t typo_distance(std::string_view a, std::string_view b);

// The candidate `name` is a misspelling of, else "". `name` misspells a candidate when:
//   - both have as many words, and each word of one is the other's, or a typo of it: at most one
//     edit in a word of 4 to 7 letters, two in a longer one, none in a shorter one ("dp" is not a
//     typo of "tp") or in its digits ("beta1" is not of "beta2");
//   - or both are one word, and `name` is a longer form of it ("optimizer" for "optim");
//   - or both are the same once the separators are dropped ("warmupsteps").
// Of several, the one with the fewest edits (the first listed on a tie). Names far longer than
// every candidate are not compared at all (a 10 MB key in a hostile file once took minutes).
std::string_view closest_name(std::string_view name, const std::vector<std::string_view>& candidates);

// " (did you mean 'x'?)" for closest_name, or "" when there is none.
std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates);

}  // namespace mt

// "Did you mean": the nearest of some names to a mistyped one, for the CLI's and the
// console's unknown options, subcommands and settings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember {

// The optimal string alignment distance (Levenshtein with adjacent transpositions,
// Damerau 1964): insertions, deletions, substitutions and swaps of two neighbours, 1 each.
int edit_distance(std::string_view a, std::string_view b);

// The name of `names` nearest to `word`, or "" when none is near enough: a distance of at
// most 1 for words of up to 5 letters (leading dashes not counted), 2 up to 9, else 3; a
// one-letter word gets no suggestion. Ties: the first in `names`. Failing that, a word of 3
// letters or more that begins exactly one name ("--vocab": "--vocab-text") gets that name.
std::string nearest_name(std::string_view word, const std::vector<std::string>& names);

// "; did you mean NAME?" for nearest_name, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names);

}  // namespace ember

#include "runtime/suggest.h"

#include <algorithm>

namespace ember {

int edit_distance(std::string_view a, std::string_view b) {
    // d[i][j]: the distance of a[0, i) to b[0, j), three rows kept.
    const size_t m = b.size();
    std::vector<int> prev2(m + 1), prev(m + 1), cur(m + 1);
    for (size_t j = 0; j <= m; ++j) prev[j] = static_cast<int>(j);
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = static_cast<int>(i);
        for (size_t j = 1; j <= m; ++j) {
            const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
        }
        std::swap(prev2, prev);
        std::swap(prev, cur);
    }
    return prev[m];
}

std::string nearest_name(std::string_view word, const std::vector<std::string>& names) {
    const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
    const int most = letters <= 1 ? 0 : letters <= 5 ? 1 : letters <= 9 ? 2 : 3;
    std::string best;
    int best_d = most + 1;
    for (const std::string& n : names) {
        const int d = edit_distance(word, n);
        if (d < best_d) {
            best_d = d;
            best = n;
        }
    }
    if (!best.empty() || letters < 3) return best;
    // A shortened name ("--vocab" for "--vocab-text"): the one name it begins, if only one.
    std::string prefixed;
    for (const std::string& n : names) {
        if (n.size() > word.size() && n.compare(0, word.size(), word) == 0) {
            if (!prefixed.empty() && prefixed != n) return "";
            prefixed = n;
        }
    }
    return prefixed;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
    const std::string n = nearest_name(word, names);
    return n.empty() ? std::string() : "; did you mean " + n + "?";
}

}  // namespace ember

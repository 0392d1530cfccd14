#include "runtime/stop_strings.h"

#include <algorithm>

#include "runtime/error.h"

namespace ember {

StopStrings::StopStrings(std::vector<std::string> stops, size_t max_feed) : stops_(std::move(stops)) {
    size_t longest = 0;
    for (size_t i = 0; i < stops_.size(); ++i) {
        if (stops_[i].empty()) fail("stop string ", i + 1, " is empty");
        longest = std::max(longest, stops_[i].size());
    }
    pending_.reserve(longest + max_feed);
    out_.reserve(longest + max_feed);
}

void StopStrings::reset() {
    pending_.clear();
    out_.clear();
    which_ = -1;
}

std::string_view StopStrings::feed(std::string_view text) {
    out_.clear();
    if (matched()) return out_;
    pending_.append(text.data(), text.size());
    // A whole stop string: everything before the earliest one goes out, the rest is dropped.
    size_t first = std::string::npos;
    for (size_t i = 0; i < stops_.size(); ++i) {
        const size_t at = pending_.find(stops_[i]);
        if (at < first) {
            first = at;
            which_ = static_cast<int>(i);
        }
    }
    if (first != std::string::npos) {
        out_.assign(pending_, 0, first);
        pending_.clear();
        return out_;
    }
    // Hold back the longest suffix that is a proper prefix of a stop string.
    size_t hold = 0;
    for (const std::string& s : stops_) {
        for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
            if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    const size_t keep = pending_.size() - hold;
    out_.assign(pending_, 0, keep);
    pending_.erase(0, keep);
    return out_;
}

std::string_view StopStrings::finish() {
    out_.clear();
    out_.swap(pending_);  // both keep their capacity
    return out_;
}

}  // namespace ember

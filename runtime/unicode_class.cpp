#include "runtime/unicode_class.h"

#include <algorithm>
#include <iterator>

namespace ember {

namespace {

constexpr uint8_t kLetter = static_cast<uint8_t>(UnicodeClass::Letter);
constexpr uint8_t kNumber = static_cast<uint8_t>(UnicodeClass::Number);
constexpr uint8_t kSpace = static_cast<uint8_t>(UnicodeClass::Space);

struct Range {
    uint32_t first, last;
    uint8_t cls;
};

constexpr Range kRanges[] = {
#include "runtime/unicode_classes.inc"
};

}  // namespace

UnicodeClass unicode_class(uint32_t cp) {
    if (cp < 0x80) {  // ASCII without the search
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return UnicodeClass::Letter;
        if (cp >= '0' && cp <= '9') return UnicodeClass::Number;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return UnicodeClass::Space;
        return UnicodeClass::Other;
    }
    // The last range whose first <= cp.
    const Range* end = kRanges + std::size(kRanges);
    const Range* it = std::upper_bound(kRanges, end, cp, [](uint32_t v, const Range& r) { return v < r.first; });
    if (it == kRanges) return UnicodeClass::Other;
    --it;
    return cp <= it->last ? static_cast<UnicodeClass>(it->cls) : UnicodeClass::Other;
}

}  // namespace ember

#include "runtime/memory.h"

#include <fstream>

#include "runtime/error.h"

namespace ember {

uint64_t available_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t kb = 0;
    while (in >> key >> kb) {
        if (key == "MemAvailable:") return kb * 1024;
        std::getline(in, unit);  // the rest of the line ("kB")
    }
    return 0;
}

std::string memory_size_text(uint64_t b) {
    return b < (uint64_t{10} << 20) ? std::to_string(b) + " bytes" : std::to_string((b + (1u << 20) - 1) >> 20) + " MiB";
}

void check_memory(uint64_t bytes, uint64_t limit, const std::string& what, const std::string& detail) {
    const bool measured = limit == 0;
    if (measured) limit = available_memory_bytes();
    if (limit == 0 || bytes <= limit) return;
    fail(what, " needs ", memory_size_text(bytes), " of working memory", detail, " but ", measured ? "this machine has " : "the limit is ",
         memory_size_text(limit),
         measured ? " available (MemAvailable)" : "");
}

}  // namespace ember

// How much memory the machine can give, and the check every large buffer passes first: an
// arena or a text larger than the machine, zero-filled or encoded, ends in the OOM killer
// rather than in an error.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

// Bytes the kernel can hand out without swapping: MemAvailable of /proc/meminfo (Linux);
// 0 when it cannot be read (then no limit is applied).
uint64_t available_memory_bytes();

// A size for a message: "N bytes" below 10 MiB, else "M MiB" (rounded up).
std::string memory_size_text(uint64_t bytes);

// Throws ember::Error "WHAT needs N of working memory DETAIL but this machine has M available
// (MemAvailable)" ("but the limit is M" for a given limit) when bytes > limit (0 =
// available_memory_bytes(); nothing is checked when that cannot be read).
void check_memory(uint64_t bytes, uint64_t limit, const std::string& what, const std::string& detail);

}  // namespace ember

// How much memory the machine can give, and the check every large buffer passes first: an
// arena or a text larger than the machine, zero-filled or encoded, ends in the OOM killer
// rather than in an error.
#pragma once

#include <cstddef>
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

// Anonymous memory (mmap MAP_PRIVATE | MAP_ANONYMOUS, zero-filled by the kernel) for `size`
// bytes, rounded up to the page size and aligned to 2 MiB, madvised for transparent huge pages
// (where the kernel has THP "madvise" or "always"; else small pages): huge pages for each whole
// 2 MiB, small pages for the rest, so it costs no more than its size. Sets *len to its length,
// the length to munmap. MAP_FAILED (errno set) when the kernel refuses it.
void* map_anonymous(size_t size, size_t* len);

// Zero-filled working memory (the arenas), resident from construction on: map_anonymous's
// pages, each faulted in at once (MADV_POPULATE_WRITE, Linux 5.14; older kernels: one write
// per 4 KiB page), so that decode never takes a page fault and a machine short of memory
// says so here, not with the OOM killer mid-generation. Against aligned_alloc + memset, which
// it replaces: no user-space zeroing and, with huge pages, a fault per 2 MiB instead of 4 KiB
// (bench/startup.sh: docs/benchmarks.md).
class ResidentMemory {
public:
    ResidentMemory() = default;
    // Throws ember::Error "cannot allocate WHAT: N bytes (REASON)" when the kernel refuses the
    // mapping or cannot commit its pages.
    ResidentMemory(size_t bytes, const std::string& what);
    ~ResidentMemory();
    ResidentMemory(ResidentMemory&& o) noexcept;
    ResidentMemory& operator=(ResidentMemory&& o) noexcept;
    ResidentMemory(const ResidentMemory&) = delete;
    ResidentMemory& operator=(const ResidentMemory&) = delete;

    uint8_t* data() const { return data_; }  // 2 MiB-aligned; null when default-constructed
    size_t mapped_bytes() const { return len_; }  // the mapping: bytes rounded up to the page size

private:
    uint8_t* data_ = nullptr;
    size_t len_ = 0;
};

}  // namespace ember

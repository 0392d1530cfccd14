#include "runtime/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <utility>

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

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t page_size() {
    const long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<size_t>(page) : 4096;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (include/uapi/asm-generic/mman-common.h)
#endif

// Faults in [p, p + len) for writing; false with errno set when the kernel cannot commit them.
bool populate(uint8_t* p, size_t len) {
    // The kernel faults the range in at once (Linux 5.14); EINVAL from older kernels.
    if (madvise(p, len, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) return false;  // ENOMEM, EFAULT, EHWPOISON
    // Then a write per page: a fault each where the kernel had no MADV_POPULATE_WRITE, or where
    // it was taken as a hint and ignored (qemu-user); else a pass over resident pages (0.9 ms
    // for 76 MB on the 2-vCPU EPYC, against 8 ms and more for the populate). The pages hold the
    // kernel's zeros already.
    const size_t page = page_size();
    for (size_t i = 0; i < len; i += page) static_cast<volatile uint8_t*>(p)[i] = 0;
    return true;
}

}  // namespace

void* map_anonymous(size_t size, size_t* len) {
    const size_t page = page_size();
    if (size > SIZE_MAX - page - kHugePage) {  // no rounding up past SIZE_MAX
        errno = ENOMEM;
        return MAP_FAILED;
    }
    *len = size == 0 ? page : (size + page - 1) / page * page;
    const size_t over = *len + kHugePage;
    void* p = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return p;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (lo + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > lo) munmap(p, aligned - lo);
    if (lo + over > aligned + *len) munmap(reinterpret_cast<void*>(aligned + *len), lo + over - (aligned + *len));
    // EINVAL where the kernel has no THP: the memory is still good, in small pages. Huge pages
    // back the whole 2 MiB pieces; a tail shorter than 2 MiB stays in small pages.
    madvise(reinterpret_cast<void*>(aligned), *len, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
}

ResidentMemory::ResidentMemory(size_t bytes, const std::string& what) {
    void* p = map_anonymous(bytes, &len_);
    if (p == MAP_FAILED) fail("cannot allocate ", what, ": ", bytes, " bytes (mmap: ", std::strerror(errno), ")");
    data_ = static_cast<uint8_t*>(p);
    if (!populate(data_, len_)) {
        const int e = errno;
        munmap(data_, len_);
        data_ = nullptr;
        fail("cannot allocate ", what, ": ", bytes, " bytes (committing its pages: ", std::strerror(e), ")");
    }
}

ResidentMemory::~ResidentMemory() {
    if (data_) munmap(data_, len_);
}

ResidentMemory::ResidentMemory(ResidentMemory&& o) noexcept : data_(std::exchange(o.data_, nullptr)), len_(std::exchange(o.len_, 0)) {}

ResidentMemory& ResidentMemory::operator=(ResidentMemory&& o) noexcept {
    if (this != &o) {
        if (data_) munmap(data_, len_);
        data_ = std::exchange(o.data_, nullptr);
        len_ = std::exchange(o.len_, 0);
    }
    return *this;
}

}  // namespace ember

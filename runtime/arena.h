// The one arena planner: every memory plan (the CPU backend's, the CUDA backend's, the
// training arena) lays its buffers out with it. Pure arithmetic: it hands out offsets, each
// rounded up to `alignment`; the caller allocates total() bytes once (or takes a caller-owned
// buffer of that size) and adds the offsets to its base.
#pragma once

#include <cstddef>

namespace ember {

class ArenaPlanner {
public:
    // alignment: a power of two (64 for host arenas, kDataAlignment; 256 on a CUDA device).
    explicit ArenaPlanner(size_t alignment = 64) : align_(alignment) {}
    // Offset of a new region of `bytes` (0 bytes gives a region of size 0 at the current end).
    size_t take(size_t bytes) {
        const size_t at = off_;
        off_ += (bytes + align_ - 1) / align_ * align_;
        return at;
    }
    size_t total() const { return off_; }
    size_t alignment() const { return align_; }

private:
    size_t align_;
    size_t off_ = 0;
};

}  // namespace ember

// Sizing the converter's big buffers (whole files, tensors' values): std::bad_alloc becomes an
// ember::Error that names what was being read and how many bytes it needed.
#pragma once

#include <new>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/memory.h"

namespace ember::convert {

// v.resize(n); out of memory: "out of memory: WHAT needs 1536 MiB more (std::bad_alloc)".
template <class T>
void resize_or_fail(std::vector<T>& v, size_t n, const std::string& what) {
    try {
        v.resize(n);
    } catch (const std::bad_alloc&) {
        const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(T);
        fail("out of memory: ", what, " needs ", memory_size_text(bytes), " more (std::bad_alloc)");
    }
}

}  // namespace ember::convert

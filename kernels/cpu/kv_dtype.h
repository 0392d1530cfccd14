// The element type of a CPU KV cache (attention.h): IEEE binary16 (the default; half the bytes)
// or f32.
#pragma once

#include <cstddef>
#include <cstring>
#include <initializer_list>

namespace ember::kernels {

enum class KvDType { F16, F32 };

constexpr size_t kv_dtype_bytes(KvDType t) { return t == KvDType::F16 ? 2 : 4; }
constexpr const char* kv_dtype_name(KvDType t) { return t == KvDType::F16 ? "f16" : "f32"; }

// "f16" or "f32" to its KvDType; false for anything else (out untouched).
inline bool parse_kv_dtype(const char* name, KvDType* out) {
    for (KvDType t : {KvDType::F16, KvDType::F32}) {
        if (std::strcmp(name, kv_dtype_name(t)) == 0) {
            *out = t;
            return true;
        }
    }
    return false;
}

}  // namespace ember::kernels

// The element type of a CPU KV cache (attention.h): IEEE binary16 (the default; half the bytes)
// or f32.
#pragma once

#include <cstddef>

namespace ember::kernels {

enum class KvDType { F16, F32 };

constexpr size_t kv_dtype_bytes(KvDType t) { return t == KvDType::F16 ? 2 : 4; }
const char* kv_dtype_name(KvDType t);  // "f16", "f32" (attention.cpp)
// "f16" or "f32" to its KvDType; false for anything else.
bool parse_kv_dtype(const char* name, KvDType* out);

}  // namespace ember::kernels

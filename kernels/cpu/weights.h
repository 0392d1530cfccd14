// How a kernel sees a weight matrix W [rows, cols] (row-major, PyTorch's nn.Linear layout
// [out_features, in_features]) in one of the three stored dtypes.
//
// int8: symmetric groups of `group_size` consecutive elements along a row (the last group of
// a row may be shorter); value = q * scales[row * groups_per_row + g], groups_per_row =
// ceil(cols / group_size), q in [-127, 127]: never -128, which the AVX2 kernels cannot negate
// (the model loader refuses it). Kernels know no file or model: the runtime fills these views.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels {

// The one enum of stored weight dtypes: kernels, the loader (runtime/file_dtype.h maps the
// file's fb::DType to it), the converter (convert::WeightDType) and the front ends use it.
enum class WType { F32, F16, I8 };
// Its names as the file format, the converter's --dtype and `ember info` spell them: "f32",
// "f16", "int8".
const char* wtype_name(WType t);

struct WeightView {
    WType type = WType::F32;
    const void* data = nullptr;     // f32 | uint16 (binary16) | int8, rows * cols elements
    const float* scales = nullptr;  // int8 only: [rows, groups_per_row()]
    int rows = 0;
    int cols = 0;
    int group_size = 0;             // int8 only: 1..cols (the converter maps 0 to cols)
    // int8 decode hint, set by the runtime: the whole model's weights fit in the last-level
    // cache (last_level_cache_bytes(), cpu_features.h), so decode reads W from cache, not DRAM.
    // The x86 row kernels (avx2, avx-vnni, avx512) then take their 8-row, far-prefetching loop
    // (linear_rows8_x86.h).
    bool cache_resident = false;

    int groups_per_row() const { return type == WType::I8 ? (cols + group_size - 1) / group_size : 0; }
};

// Writes row `row` of W as f32 into out [cols]. Plain code; used for embeddings and tests.
void dequantize_row(const WeightView& w, int row, float* out);

}  // namespace ember::kernels

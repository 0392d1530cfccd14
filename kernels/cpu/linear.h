// Linear layer, torch.nn.functional.linear: y [T, N] = x [T, K] @ W^T + bias, W [N, K]
// in f32, f16 or int8 groups (weights.h), bias [N] or null. Accumulation in f32.
//
// The int8 path quantizes each row of x to int8 with the weight's groups (symmetric,
// scale = absmax / 127, as ggml's q8_0 does for activations) and accumulates integer dot
// products per group: y = sum_g (xq . wq)_g * xs_g * ws_g. Its error against linear_ref is
// that of 8-bit activations (about 0.5% of |x| |w| per group; see tests/test_kernels.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weights.h"

namespace ember::kernels {

// Caller-owned scratch for linear(): the int8 path's quantized rows of x, and the x86 f32 / f16
// prefill GEMM's packed panels of x (linear_gemm_f32.h), one part per thread of the pool.
struct LinearScratch {
    int8_t* xq = nullptr;  // [T, K]
    float* xs = nullptr;   // [T, groups_per_row]
    // [pool.size(), xf_floats], 64-byte aligned, xf_floats a multiple of 16 and at least
    // linear_scratch_xf_floats(K). Null, or too small for K: f32 / f16 prefill on x86 runs the
    // row kernels (correct, about half as fast); int8 weights never read it.
    float* xf = nullptr;
    size_t xf_floats = 0;
};

// Bytes of scratch linear() needs for T rows of K inputs with int8 groups of group_size.
size_t linear_scratch_xq_bytes(int T, int K);
size_t linear_scratch_xs_bytes(int T, int K, int group_size);
// Floats of LinearScratch::xf per thread for rows of up to K inputs (a multiple of 16): 64 rows
// of x and 8 of W, of K in blocks of at most 1024 (216 KiB, 221,184 bytes, a thread for K = 1536).
size_t linear_scratch_xf_floats(int K);
// Whether linear()'s kernels (those of cpu_level()) read LinearScratch::xf: the x86 levels
// from avx2 up; plain and the ARM levels do not, so a session there plans none.
bool linear_uses_xf();

// Plain reference: W dequantized, x as given, double accumulation. y may not alias x.
void linear_ref(const float* x, int T, const WeightView& w, const float* bias, float* y);

// Fast: the kernels of cpu_level() (cpu_features.h: chosen once by the CPU's features, capped
// by EMBER_CPU_KERNELS), rows of W split across the pool. T >= 8 (prefill) runs the level's
// blocked GEMM (tiles of rows of W x rows of x; int8: linear_gemm_int8.h, linear_i8mm.cpp),
// split over panels of x and chunks of N. Allocates nothing. y may not alias x.
// The int8 variants all quantize x to the same integers; they differ from one another only
// in the order of f32 additions.
void linear(const float* x, int T, const WeightView& w, const float* bias, float* y,
            const LinearScratch& scratch, ThreadPool& pool);

// linear() with the kernels of `level`, or of the highest level below it that this CPU runs
// (cpu_level_clamp): for tests and benchmarks.
void linear_at(CpuLevel level, const float* x, int T, const WeightView& w, const float* bias, float* y,
               const LinearScratch& scratch, ThreadPool& pool);

// The kernel linear() runs for weights of `type`, e.g. "int8: avx512-vnni", "f32: avx2",
// "int8: dotprod"; with `level`, the one linear_at(level, ...) runs.
const char* linear_kernel_name(WType type);
const char* linear_kernel_name(WType type, CpuLevel level);
// The kernel decode (T == 1) runs for `w`: as above, but with " (8-row decode: weights in
// cache)" after the int8 name (e.g. "int8: avx2 (8-row decode: weights in cache)") where an x86
// level (avx2, avxvnni, avx512) takes its 8-row loop (cache_resident int8 weights in groups of
// 64 or 32 that divide the row; weights.h, linear_rows8_x86.h).
const char* linear_kernel_name(const WeightView& w);

// Backward to the input of a frozen linear layer: dx [T, K] (+)= dy [T, N] @ W (W [N, K]).
// W is dequantized on the fly one row at a time into `row_scratch` ([pool.size(), K] floats;
// unused for f32), never copied whole. accumulate: add to dx instead of overwriting it.
// Rows of dx are split across the pool; allocates nothing.
void linear_backward_input_ref(const float* dy, int T, const WeightView& w, float* dx, bool accumulate);
void linear_backward_input(const float* dy, int T, const WeightView& w, float* dx, bool accumulate, float* row_scratch,
                           ThreadPool& pool);

}  // namespace ember::kernels

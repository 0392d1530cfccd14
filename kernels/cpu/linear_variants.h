// Internal to linear.cpp and its per-CPU variants (linear_avx2.cpp, linear_avxvnni.cpp,
// linear_avx512.cpp, linear_neon.cpp, linear_dotprod.cpp, linear_i8mm.cpp). Each variant is compiled with its
// own target flags; linear.cpp, compiled without them, calls one only after
// cpu_features.h says the CPU has it. So this header holds plain declarations only: no
// inline function or template that a variant's flags could leak into shared code through.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels::linear_detail {

// One linear() call, flattened. Letters: T rows of x, K inputs, N outputs.
struct Args {
    const float* x = nullptr;       // [T, K]
    int T = 0, K = 0, N = 0;
    const void* w = nullptr;        // [N, K]: f32 | binary16 | int8
    const float* wscales = nullptr; // int8: [N, gpr]
    int group = 0;                  // int8: elements per group (the last of a row may be shorter)
    int gpr = 0;                    // int8: groups per row, ceil(K / group)
    const float* bias = nullptr;    // [N] or null
    float* y = nullptr;             // [T, N]
    const int8_t* xq = nullptr;     // int8: x quantized per group [T, K], values in [-127, 127]
    const float* xs = nullptr;      // int8: x's scales [T, gpr]
    bool cache_resident = false;    // int8: WeightView::cache_resident (weights.h)
    float* xf = nullptr;            // f32 / f16 GEMM (x86): this task's thread's scratch,
                                    // f_gemm_scratch_floats(K) floats, 64-byte aligned
};

// Whether the x86 int8 row kernels take their 8-row decode loop (linear_rows8_x86.h) for these
// rows: cache_resident weights, T == 1, groups of 64 or 32 that divide K. Plain code
// (linear.cpp), also what linear_kernel_name(const WeightView&) reports.
bool takes_rows8_decode(bool cache_resident, int T, int K, int group);

// Decode (T == 1) in the x86 4-row int8 kernels (linear_int8_block.h, linear_avx512.cpp):
// every decode the 8-row kernel does not take (takes_rows8_decode), above all weights that are
// not cache_resident (weights.h: larger than the last-level cache, so every token reads them
// from DRAM). They prefetch the line kStreamAhead bytes on from every chunk they read, into L2
// (prefetcht1), not L1. One block ahead into L1 kept too few lines in
// flight: an L1 has few miss buffers. On a 2-vCPU AMD EPYC with AVX-512 VNNI (2026-12-04,
// GPT-2 124M int8, alternated runs; docs/benchmarks.md) this took decode from about 84 to 196
// tokens/s on one thread and from 155 to 240 on two; 16 KiB beat 8 and equalled 32 and 64.
// Against no software prefetch (2026-12-07, alternated): 1.15x to 1.82x on one thread and
// 1.12x to 1.68x on two, mapped or --no-mmap alike.
// Measured only for weights from DRAM; cache_resident weights with other group sizes take it
// too. ARM keeps one block ahead into L1: not measured there (qemu's speed means nothing).
constexpr size_t kStreamAhead = 16384;

// The f32 / f16 GEMMs (linear_gemm_f32.h): K is cut into equal blocks of at most kFBlockK
// columns; a task holds at most kFGemmRows rows of x (Kernels::f_gemm_rows) and a tile at most
// kFGemmMaxR rows of W. Their scratch per thread: f_gemm_scratch_floats(K) (linear.cpp).
constexpr int kFBlockK = 1024;
constexpr int kFGemmRows = 64;
constexpr int kFGemmMaxR = 8;
size_t f_gemm_scratch_floats(int K);

// Writes y[:, n_begin:n_end] (bias added). Int8 reads xq/xs, which a QuantizeFn wrote.
using RowsFn = void (*)(const Args& a, int n_begin, int n_end);
// One row x [K] -> xq [K], xs [ceil(K / group)]: xs = absmax / 127, xq = round_half_even(x / xs),
// per group as group_quant_factor() below says.
using QuantizeFn = void (*)(const float* x, int K, int group, int8_t* xq, float* xs);

// Below this largest magnitude a group of x quantizes to zeros: 127 / amax would overflow f32
// (under about 3.7e-37).
constexpr float kMinQuantAmax = 1e-36f;

// One group's scale, the same in every QuantizeFn (so that all give the same integers), from
// its largest magnitude and whether every value in it is finite:
//   - finite, amax >= kMinQuantAmax: xs = amax / 127, returns 127 / amax;
//   - finite, amax smaller: xs = amax / 127, returns 0 (its xq are zeros);
//   - an inf or a NaN in it (activations that overflowed f32): xs = NaN, returns 0, and the caller
//     writes zeros: every output the group feeds is then NaN, as in f32 arithmetic (it was a
//     finite, wrong number: the cast of inf or NaN to int8 is undefined, and plain and avx2 made
//     different integers of it).
inline float group_quant_factor(float amax, bool finite, float* xs) {
    if (!finite) {
        *xs = __builtin_nanf("");
        return 0.0f;
    }
    *xs = amax / 127.0f;
    return amax >= kMinQuantAmax ? 127.0f / amax : 0.0f;
}

// Writes y[t_begin:t_end, n_begin:n_end] (bias added) as a blocked GEMM (linear_gemm_int8.h
// for int8): prefill, T >= kGemmMinRows in linear.cpp. Int8 reads xq/xs, which a QuantizeFn wrote.
using GemmFn = void (*)(const Args& a, int t_begin, int t_end, int n_begin, int n_end);

struct Kernels {
    RowsFn f32, f16, i8;
    QuantizeFn quantize;
    const char *f32_name, *f16_name, *i8_name;  // e.g. "f32: avx2", "int8: avx512-vnni"
    GemmFn f32_gemm = nullptr, f16_gemm = nullptr, i8_gemm = nullptr;  // null: the row kernels
    int f_gemm_rows = 0, i8_gemm_rows = 0;  // rows of x per panel: a task's rows are a multiple
    const char* i8_cached_name = nullptr;   // int8 decode of cache_resident weights, where it differs
    bool f_gemm_scratch = false;            // f32_gemm / f16_gemm read Args::xf (linear_gemm_f32.h)
};

#if defined(__x86_64__) || defined(__i386__)
void f32_rows_avx2(const Args& a, int n_begin, int n_end);
void f16_rows_avx2(const Args& a, int n_begin, int n_end);
void i8_rows_avx2(const Args& a, int n_begin, int n_end);
void quantize_avx2(const float* x, int K, int group, int8_t* xq, float* xs);
void i8_rows_avxvnni(const Args& a, int n_begin, int n_end);
void i8_rows_avx512(const Args& a, int n_begin, int n_end);
void f32_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void f16_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_avxvnni(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void f32_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void f16_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
#endif
#if defined(__aarch64__)
void f32_rows_neon(const Args& a, int n_begin, int n_end);
void f16_rows_neon(const Args& a, int n_begin, int n_end);
void i8_rows_neon(const Args& a, int n_begin, int n_end);
void quantize_neon(const float* x, int K, int group, int8_t* xq, float* xs);
void i8_rows_dotprod(const Args& a, int n_begin, int n_end);
void f32_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void f16_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_dotprod(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
void i8_gemm_i8mm(const Args& a, int t_begin, int t_end, int n_begin, int n_end);
#endif

}  // namespace ember::kernels::linear_detail

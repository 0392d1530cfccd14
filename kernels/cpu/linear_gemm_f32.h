// The f32 and f16 GEMMs of linear()'s prefill (T >= kGemmMinRows, linear.cpp), shared by the
// x86 variants (linear_avx2.cpp on YMM, linear_avx512.cpp on ZMM):
//   y[t, n] = sum_k x[t, k] * W[n, k] + bias[n]   (torch.nn.functional.linear)
// with vector lanes over rows of x (t), as in linear_gemm_int8.h, not over k:
//
//   - per K block (at most kFBlockK, cut into equal parts), the task's rows of x are packed
//     transposed, in panels of PT = P * NB rows: panel[k][PT] (rows past the task's end zero),
//     into the caller's scratch (LinearScratch::xf, one part per thread);
//   - a register tile is R rows of W x one panel: per k, NB vectors of x and R broadcasts of
//     W[n + r, k], R * NB fmas into R * NB accumulators, nothing else;
//   - the tile's R rows of W (R * K block values, f16 widened once into the scratch) stay in
//     L1 while every panel of the task runs against them, and each panel is read from L2;
//   - at the end of a K block each accumulator's P lanes go to y[t, n + r]: the first block
//     writes (bias added), later ones add.
// Lanes over k (the kernels before this one) needed a horizontal sum per output and read W's
// rows and x's rows in equal measure; here x is read once per R rows of W and no sum crosses
// lanes. K blocks bound the scratch (a block of 1024 is 256 KiB a thread for 64 rows).
//
// The ISA comes in as a policy D with:
//   P, NB, R                                  lanes per vector, vectors per panel, rows of W a tile
//   VecF                                      P f32 lanes
//   VecF zero(), load(const float* p)         p aligned to the vector
//   VecF bcast(const float* p)                *p in every lane
//   VecF fma(VecF a, VecF b, VecF c)          a * b + c
//   void store(float* out, VecF v)            P floats, out aligned
//   void widen(const uint16_t* src, float* dst, int n)   n binary16 values to f32
// Only the variant files include this header, each with its own target flags; everything has
// internal linkage (see linear_int8_block.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {
namespace {

inline int f_min(int a, int b) { return a < b ? a : b; }

// Packs rows [t0, t1) of x, columns [k0, k0 + kb), into panels of PT rows: panel p holds rows
// t0 + p * PT.. as out[p * kb * PT + k * PT + i]; a last panel's rows past t1 are zero.
template <int PT>
void pack_f_panels(const Args& a, int t0, int t1, int k0, int kb, float* out) {
    const int panels = (t1 - t0 + PT - 1) / PT;
    for (int p = 0; p < panels; ++p) {
        float* dst = out + static_cast<size_t>(p) * kb * PT;
        for (int i = 0; i < PT; ++i) {
            const int t = t0 + p * PT + i;
            if (t >= t1) {
                for (int k = 0; k < kb; ++k) dst[static_cast<size_t>(k) * PT + i] = 0.0f;
                continue;
            }
            const float* src = a.x + static_cast<size_t>(t) * a.K + k0;
            for (int k = 0; k < kb; ++k) dst[static_cast<size_t>(k) * PT + i] = src[k];
        }
    }
}

// The next tile's rows of W (`rows` segments of `seg` bytes, `stride` apart), prefetched line
// by line while this tile computes: W comes from L3 or DRAM once per task, and its rows are
// too short (1.5 KiB at K = 384) for the hardware prefetcher to run ahead of the broadcasts.
struct NextRows {
    const char* p = nullptr;  // null: nothing to prefetch
    size_t seg = 0, stride = 0;
    int rows = 0;
    int lines = 0;  // lines per 8 steps of k: what the tile reads of its own rows in that time
    int r = 0;
    size_t off = 0;
    void step() {
        for (int i = 0; i < lines && r < rows; ++i) {
            __builtin_prefetch(p + static_cast<size_t>(r) * stride + off, 0, 3);
            off += 64;
            if (off >= seg) off = 0, ++r;
        }
    }
};

// RR rows of W (w: row r at w + r * ldw, the block's first column) x one panel of kb columns;
// y rows t0.. (those < t1), columns n..; first: write with the bias, else add.
template <class D, int RR>
void f_tile(const Args& a, const float* panel, const float* w, size_t ldw, int kb, int n, int t0, int t1, bool first,
            NextRows& next) {
    constexpr int P = D::P, NB = D::NB, PT = P * NB;
    typename D::VecF acc[RR][NB];
#pragma GCC unroll 16
    for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) acc[r][b] = D::zero();
    auto step = [&](int k) __attribute__((always_inline)) {
        typename D::VecF xv[NB];
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) xv[b] = D::load(panel + static_cast<size_t>(k) * PT + b * P);
#pragma GCC unroll 16
        for (int r = 0; r < RR; ++r) {
            const typename D::VecF wv = D::bcast(w + static_cast<size_t>(r) * ldw + k);
#pragma GCC unroll 4
            for (int b = 0; b < NB; ++b) acc[r][b] = D::fma(xv[b], wv, acc[r][b]);
        }
    };
    NextRows nx = next;  // in registers (through the reference gcc stores its cursor every step)
    int k = 0;
    for (; k + 8 <= kb; k += 8) {
        if (nx.p) nx.step();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) step(k + j);
    }
    for (; k < kb; ++k) step(k);
    next = nx;
    // Every loop over acc unrolled: an indexed array of vectors is kept in memory by gcc 12,
    // which then stores each accumulator on every step of k.
    const int rows = f_min(PT, t1 - t0);
    alignas(64) float out[RR][PT];
#pragma GCC unroll 16
    for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) D::store(out[r] + b * P, acc[r][b]);
    // Row by row: a row's RR outputs are adjacent in y, so each of its lines is written once in
    // a burst (column by column, every line of the tile's rows was revisited RR times).
    float bias[RR];
    for (int r = 0; r < RR; ++r) bias[r] = first && a.bias ? a.bias[n + r] : 0.0f;
    for (int i = 0; i < rows; ++i) {
        float* y = a.y + static_cast<size_t>(t0 + i) * a.N + n;
        if (first) {
#pragma GCC unroll 16
            for (int r = 0; r < RR; ++r) y[r] = out[r][i] + bias[r];
        } else {
#pragma GCC unroll 16
            for (int r = 0; r < RR; ++r) y[r] += out[r][i];
        }
    }
}

// RR rows of W from n against every panel of the task (rows [t_begin, t_end)), K block [k0, k0 + kb).
template <class D, int RR, typename W>
void f_rows(const Args& a, const float* panels, float* wide, int n, int n_end, int t_begin, int t_end, int k0, int kb) {
    constexpr int PT = D::P * D::NB;
    const W* w = static_cast<const W*>(a.w) + static_cast<size_t>(n) * a.K + k0;
    const float* wf;
    size_t ldw;
    if constexpr (sizeof(W) == 2) {
        for (int r = 0; r < RR; ++r) D::widen(w + static_cast<size_t>(r) * a.K, wide + static_cast<size_t>(r) * kb, kb);
        wf = wide;
        ldw = static_cast<size_t>(kb);
    } else {
        wf = w;
        ldw = static_cast<size_t>(a.K);
    }
    // The first panel's tile prefetches the next tile's rows (the later panels find their own in L1).
    NextRows next;
    if (n + 2 * RR <= n_end) {
        next.p = reinterpret_cast<const char*>(w + static_cast<size_t>(RR) * a.K);
        next.seg = static_cast<size_t>(kb) * sizeof(W);
        next.stride = static_cast<size_t>(a.K) * sizeof(W);
        next.rows = RR;
        next.lines = (8 * RR * static_cast<int>(sizeof(W)) + 63) / 64;
    }
    NextRows none;
    for (int t0 = t_begin, p = 0; t0 < t_end; t0 += PT, ++p)
        f_tile<D, RR>(a, panels + static_cast<size_t>(p) * kb * PT, wf, ldw, kb, n, t0, t_end, k0 == 0, p == 0 ? next : none);
}

// y[t_begin:t_end, n_begin:n_end] with W of element type W (float or binary16 as uint16_t);
// xf: this thread's scratch, f_gemm_scratch_floats(K) floats (t_end - t_begin <= kFGemmRows).
template <class D, typename W>
void f_gemm(const Args& a, int t_begin, int t_end, int n_begin, int n_end, float* xf) {
    constexpr int PT = D::P * D::NB, R = D::R;
    if (a.K <= 0) {  // no inputs: y is the bias (no block would write it)
        for (int t = t_begin; t < t_end; ++t)
            for (int n = n_begin; n < n_end; ++n) a.y[static_cast<size_t>(t) * a.N + n] = a.bias ? a.bias[n] : 0.0f;
        return;
    }
    const int blocks = (a.K + kFBlockK - 1) / kFBlockK;
    const int kb_max = (a.K + blocks - 1) / blocks;
    const int panels = (t_end - t_begin + PT - 1) / PT;
    float* wide = xf + static_cast<size_t>(panels) * PT * kb_max;
    for (int k0 = 0; k0 < a.K; k0 += kb_max) {
        const int kb = f_min(kb_max, a.K - k0);
        pack_f_panels<PT>(a, t_begin, t_end, k0, kb, xf);
        int n = n_begin;
        for (; n + R <= n_end; n += R) f_rows<D, R, W>(a, xf, wide, n, n_end, t_begin, t_end, k0, kb);
        for (; n < n_end; ++n) f_rows<D, 1, W>(a, xf, wide, n, n_end, t_begin, t_end, k0, kb);
    }
}

}  // namespace
}  // namespace ember::kernels::linear_detail

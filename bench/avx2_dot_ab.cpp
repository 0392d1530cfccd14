// The avx2 int8 decode dot product before and after 2026-12-07, interleaved call by call in one
// process (this VM's speed moves by up to 2x from one second to the next, so two builds timed
// one after the other compare poorly). Both run the kernels' own templates and policies
// (linear_avx2_dot.h): linear_rows8_x86.h's 8-row kernel (weights in cache) and
// linear_int8_block.h's 4-row kernel, the before form swapping in its dot alone.
//   before: maddubs(|w|, x with w's sign), 5 instructions a row per 32 bytes;
//   after:  maddubs(|x|, w with x's sign), |x| made once per chunk for every row: 4.
// W [rows, 384] in groups of 64 (the full configuration's fc shape) for 64, 1024 and 12288 rows
// (24 KiB, 384 KiB, 4.5 MiB). Prints the median and quartiles of 400 before/after time ratios.
//   g++ -O3 -mavx2 -mfma -mf16c -std=c++17 -I. bench/avx2_dot_ab.cpp -o bench/out/avx2_dot_ab && bench/out/avx2_dot_ab
// (bench/decode_kernel.sh does both on a CPU with AVX2.)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/linear_avx2_dot.h"
#include "kernels/cpu/linear_rows8_x86.h"

namespace {

using namespace ember::kernels::linear_detail;

// Before: |w| times x with w's sign, two vpsignb per row; x as loaded (no |x|).
__m256i dot_before(__m256i x, __m256i w) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}

XAbs load_before(const int8_t* p) {
    const __m256i x = load32(p);
    return {x, x};
}

// The kernels' own policies (linear_avx2_dot.h) with the dot before in place of theirs.
struct Rows8Before : Avx2Rows8 {
    static X load_x(const int8_t* p) { return load_before(p); }
    static I dot(I s, const X& x, const int8_t* w) { return _mm256_add_epi32(s, dot_before(x.x, load32(w))); }
};

struct Rows4Before : Avx2Dot {
    static XVec load_x(const int8_t* p) { return load_before(p); }
    static Sum dot(Sum s, const XVec& x, Vec w) { return _mm256_add_epi32(s, dot_before(x.x, w)); }
};

struct Quartiles {
    double q1, median, q3;
};

Quartiles quartiles(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 4], v[v.size() / 2], v[3 * v.size() / 4]};
}

}  // namespace

int main() {
    constexpr int kK = 384, kGroup = 64, kPairs = 400;
    std::mt19937 rng(3);
    std::printf("avx2 int8 decode dot, after / before (speed ratio: >1 is faster), %d interleaved pairs; W [rows, %d], groups of %d\n",
                kPairs, kK, kGroup);
    for (const int rows : {64, 1024, 12288}) {
        std::vector<int8_t> w(static_cast<size_t>(rows) * kK), xq(kK);
        std::vector<float> ws(static_cast<size_t>(rows) * (kK / kGroup), 0.01f), xs(kK / kGroup, 0.02f), y[2];
        for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        for (int8_t& v : xq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        y[0].resize(rows), y[1].resize(rows);
        Args a;
        a.T = 1, a.K = kK, a.N = rows, a.w = w.data(), a.wscales = ws.data(), a.group = kGroup, a.gpr = kK / kGroup;
        a.xq = xq.data(), a.xs = xs.data();
        const int calls = std::max(1, static_cast<int>(4e6 / (static_cast<double>(rows) * kK)));
        auto seconds = [&](auto&& f) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < calls; ++i) f();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        auto none = [](const Args&, int, int) {};
        std::vector<double> r8, r4;
        for (int p = 0; p < kPairs; ++p) {
            a.y = y[0].data();
            const double b8 = seconds([&] { rows8<Rows8Before, 16384>(a, 0, rows, none); });
            a.y = y[1].data();
            const double a8 = seconds([&] { rows8<Avx2Rows8, 16384>(a, 0, rows, none); });
            if (y[0] != y[1]) return std::fprintf(stderr, "the 8-row kernels disagree\n"), 1;
            a.y = y[0].data();
            const double b4 = seconds([&] { i8_rows<Rows4Before>(a, 0, rows); });
            a.y = y[1].data();
            const double a4 = seconds([&] { i8_rows<Avx2Dot>(a, 0, rows); });
            if (y[0] != y[1]) return std::fprintf(stderr, "the 4-row kernels disagree\n"), 1;
            r8.push_back(b8 / a8), r4.push_back(b4 / a4);
        }
        const Quartiles q8 = quartiles(r8), q4 = quartiles(r4);
        std::printf("%5d rows (%7.1f KiB): 8-row kernel %.3f (quartiles %.3f, %.3f); 4-row kernel %.3f (%.3f, %.3f)\n", rows,
                    rows * kK / 1024.0, q8.median, q8.q1, q8.q3, q4.median, q4.q1, q4.q3);
    }
    return 0;
}

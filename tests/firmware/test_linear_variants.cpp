// Every linear() kernel variant this CPU runs (kernels/cpu/cpu_features.h: plain, avx2,
// avxvnni, avx512 on x86-64; plain, neon, dotprod, i8mm on aarch64) against the plain reference
// linear_ref on random data; levels the CPU lacks are skipped with a message. In the device
// test binary so that the aarch64 variants run under qemu (scripts/cross-aarch64.sh runs it
// with -cpu max, which has dotprod and i8mm, and cortex-a57, which has neither).
//
// Tolerances: f32 and f16 weights, max |y - ref| / max(1, max |ref|) < 1e-5 (f32 sums over at
// most 3000 terms in another order). int8 against linear_ref (dequantized W, unquantized x):
// NMSE < 1e-4, the 8-bit rounding of x. int8 variants against int8 plain: every variant
// quantizes x to the same integers and sums the same integer products per group, so they
// differ only in the order of f32 additions: max relative difference < 1e-5.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/linear.h"
#include "../kernel_test_util.h"
#include "variant_test_util.h"

using namespace ember::kernels;

using ember::test::levels_to_test;
using ember::test::randn;
using ember::test::max_rel;
using ember::test::nmse;

namespace {

// The converter's symmetric int8 groups (converter/quantize.cpp), which this binary does not link.
struct Quantized {
    std::vector<int8_t> q;
    std::vector<float> scales;
};
Quantized quantize(const std::vector<float>& w, int N, int K, int group) {
    const int gpr = (K + group - 1) / group;
    Quantized out{std::vector<int8_t>(w.size()), std::vector<float>(static_cast<size_t>(N) * gpr)};
    for (int n = 0; n < N; ++n) {
        for (int g = 0; g < gpr; ++g) {
            const int begin = g * group, end = std::min(K, begin + group);
            float amax = 0.0f;
            for (int k = begin; k < end; ++k) amax = std::max(amax, std::fabs(w[static_cast<size_t>(n) * K + k]));
            const float s = amax / 127.0f;
            out.scales[static_cast<size_t>(n) * gpr + g] = s;
            for (int k = begin; k < end; ++k) {
                const float v = w[static_cast<size_t>(n) * K + k];
                out.q[static_cast<size_t>(n) * K + k] = static_cast<int8_t>(s > 0.0f ? std::nearbyint(v / s) : 0.0f);
            }
        }
    }
    return out;
}

// LinearScratch::xf for `threads` threads and rows of up to K inputs: 64-byte aligned.
struct XfScratch {
    std::vector<float> buf;
    float* xf = nullptr;
    size_t per = 0;
    XfScratch(int threads, int K) : buf(static_cast<size_t>(threads) * linear_scratch_xf_floats(K) + 16), per(linear_scratch_xf_floats(K)) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(buf.data());
        xf = buf.data() + ((64 - at % 64) % 64) / sizeof(float);
    }
};

// Shape i of a random-shape case: x [T, K] ~ N(0, 1), W [N, K] ~ N(0, 0.05^2), a bias [N] on
// odd i; seeds from seed + i, seed + 100 + i and seed + 200 + i.
struct RandomInputs {
    std::vector<float> x, w, bias;
    const float* b = nullptr;
    RandomInputs(int i, int T, int K, int N, uint32_t seed)
        : x(randn(static_cast<size_t>(T) * K, seed + i, 1.0f)),
          w(randn(static_cast<size_t>(N) * K, seed + 100 + i, 0.05f)),
          bias(randn(N, seed + 200 + i, 1.0f)),
          b(i % 2 ? bias.data() : nullptr) {}
};

// The int8 view of q, W [N, K] in groups of `group`.
WeightView i8_view(const Quantized& q, int N, int K, int group) {
    WeightView v;
    v.type = WType::I8;
    v.rows = N;
    v.cols = K;
    v.data = q.q.data();
    v.scales = q.scales.data();
    v.group_size = group;
    return v;
}

// LinearScratch for int8 rows of x [T, K] (xq and xs, no xf); not copyable (it points into itself).
struct I8Scratch {
    std::vector<int8_t> xq;
    std::vector<float> xs;
    LinearScratch scratch;
    I8Scratch(int T, int K, int group)
        : xq(linear_scratch_xq_bytes(T, K)), xs(linear_scratch_xs_bytes(T, K, group) / sizeof(float)), scratch{xq.data(), xs.data()} {}
    I8Scratch(const I8Scratch&) = delete;
    I8Scratch& operator=(const I8Scratch&) = delete;
};

struct Case {
    int T, K, N, group;
};

// T = 1 and 3 (decode, the row kernels) and T >= 8 (prefill, the blocked GEMMs): 9, 17, 33
// and 100 are not multiples of any GEMM panel (8, 16, 32 rows), 64 and 96 are; K a multiple of
// the SIMD width or not (7, 33, 100, 200, 385); groups of 32, 64, 128, a whole row, 48 (not a
// multiple of 32), 7 and 200, and a short last group wherever K is not a multiple of the group
// (odd lengths pad avx2's int16 pairs); N not a multiple of 4 or 16 (tail rows of W). T = 100
// is avx2's task of 64 rows and one of 36 (three panels of 16, the last partly empty). K = 3000
// in groups of 64 takes several K blocks of the int8 GEMMs' packed panels; a whole row of 1100
// as one group is too long for one block of the avx512 GEMM (32 rows) or of the avx2 one (256
// pairs of k): those two fall back to their row kernels there, the others do not.
// T = 1 with groups of 64 or 32 that divide K and cache_resident weights takes the 8-row decode
// kernel of avx2, avxvnni and avx512 (linear_rows8_x86.h), their rows past the last multiple of
// 8 the 4-row one: 384, 1536 and 768 inputs, 37, 24 and 83 rows; 64 and 128 inputs in groups of 32.
const Case kCases[] = {{1, 64, 37, 32},    {1, 100, 37, 64},  {9, 100, 37, 32},  {1, 384, 37, 128}, {9, 384, 40, 64},
                       {1, 200, 37, 128},  {9, 200, 13, 200}, {1, 33, 5, 32},    {3, 7, 6, 7},      {1, 384, 37, 48},
                       {9, 256, 8, 64},    {1, 130, 9, 64},   {17, 385, 37, 64}, {33, 100, 21, 48}, {64, 7, 5, 7},
                       {100, 384, 50, 64}, {96, 33, 17, 32},  {40, 3000, 9, 64}, {40, 1100, 6, 1100}, {8, 200, 19, 200},
                       {1, 384, 37, 64},   {1, 1536, 24, 64}, {1, 768, 83, 64},  {1, 128, 16, 32}};
}  // namespace

TEST_CASE("linear: every kernel variant this CPU runs matches the plain reference (f32, f16, int8)") {
    ThreadPool pool(2);
    // A pool that never runs on its caller alone (its measuring windows never close), so that
    // every dispatch splits; and one thread.
    ThreadPool split(2), one(1);
    split.set_window(1 << 30, INT64_MAX);
    for (CpuLevel level : levels_to_test()) {
        for (const Case& c : kCases) {
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            CAPTURE(c.T);
            CAPTURE(c.K);
            CAPTURE(c.N);
            CAPTURE(c.group);
            const auto x = randn(static_cast<size_t>(c.T) * c.K, 11 + c.K + c.T, 1.0f);
            const auto w = randn(static_cast<size_t>(c.N) * c.K, 12 + c.K + c.N, 0.05f);
            const auto bias = randn(c.N, 13, 1.0f);
            std::vector<int8_t> xq(linear_scratch_xq_bytes(c.T, c.K));
            std::vector<float> xs(linear_scratch_xs_bytes(c.T, c.K, c.group) / sizeof(float));
            XfScratch xf(2, c.K);
            const LinearScratch scratch{xq.data(), xs.data(), xf.xf, xf.per};
            std::vector<float> y(static_cast<size_t>(c.T) * c.N), ref(y.size()), plain(y.size());
            WeightView v;
            v.rows = c.N;
            v.cols = c.K;

            v.type = WType::F32;
            v.data = w.data();
            linear_at(level, x.data(), c.T, v, bias.data(), y.data(), scratch, pool);
            linear_ref(x.data(), c.T, v, bias.data(), ref.data());
            CHECK(max_rel(y, ref) < 1e-5);

            std::vector<uint16_t> h(w.size());
            for (size_t i = 0; i < w.size(); ++i) h[i] = float_to_half(w[i]);
            v.type = WType::F16;
            v.data = h.data();
            linear_at(level, x.data(), c.T, v, nullptr, y.data(), scratch, pool);
            linear_ref(x.data(), c.T, v, nullptr, ref.data());
            CHECK(max_rel(y, ref) < 1e-5);

            const Quantized q = quantize(w, c.N, c.K, c.group);
            v.type = WType::I8;
            v.data = q.q.data();
            v.scales = q.scales.data();
            v.group_size = c.group;
            linear_at(level, x.data(), c.T, v, bias.data(), y.data(), scratch, pool);
            linear_ref(x.data(), c.T, v, bias.data(), ref.data());
            CHECK(nmse(y, ref) < 1e-4);
            linear_at(CpuLevel::Plain, x.data(), c.T, v, bias.data(), plain.data(), scratch, pool);
            CHECK(max_rel(y, plain) < 1e-5);
            // The same with the runtime's hint that the weights sit in cache (weights.h), which
            // moves the x86 levels' decode to their 8-row kernels.
            v.cache_resident = true;
            linear_at(level, x.data(), c.T, v, bias.data(), y.data(), scratch, pool);
            CHECK(max_rel(y, plain) < 1e-5);
            // Threads split rows of W, never a sum, so one thread gives the same bits: a range
            // that began off a multiple of 8 used to run rows of the 8-row kernel's in the
            // 4-row one, and a 2-thread session's logits differed from a 1-thread one's.
            for (bool resident : {false, true}) {
                CAPTURE(resident);
                v.cache_resident = resident;
                std::vector<float> y1(y.size());
                linear_at(level, x.data(), c.T, v, bias.data(), y.data(), scratch, split);
                linear_at(level, x.data(), c.T, v, bias.data(), y1.data(), scratch, one);
                CHECK(y1 == y);
            }
        }
    }
}

TEST_CASE("linear f32 and f16: random shapes, every variant's GEMM against linear_ref (panels, K blocks, tails, no scratch)") {
    // 40 shapes drawn with a fixed seed: T 8 to 150 (the GEMMs: tasks of 64 rows, panels of 16
    // or 32 with empty rows), K 1 to 2600 (past 1024 the x86 GEMMs cut K into blocks whose sums
    // are added to y), N 1 to 40 (tiles of 6 or 8 rows of W and single rows), a bias on every
    // other shape, one to four threads. Each also without LinearScratch::xf, and with one float
    // too few, where the x86 levels run their row kernels: the same tolerance.
    std::mt19937 rng(20261206);
    auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const auto levels = levels_to_test();
    // Shape 40: no inputs (K = 0), where y is the bias alone.
    for (int i = 0; i <= 40; ++i) {
        const int T = i == 40 ? 9 : draw(8, 150), K = i == 40 ? 0 : i % 4 == 0 ? draw(1025, 2600) : draw(1, 700), N = i == 40 ? 5 : draw(1, 40),
                  threads = i == 40 ? 2 : draw(1, 4);
        CAPTURE(i);
        CAPTURE(T);
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(threads);
        ThreadPool pool(threads);
        const RandomInputs in(i, T, K, N, 400);
        const auto& x = in.x;
        const auto& w = in.w;
        const float* b = in.b;
        std::vector<uint16_t> h(w.size());
        for (size_t j = 0; j < w.size(); ++j) h[j] = float_to_half(w[j]);
        XfScratch xf(threads, K);
        const LinearScratch with{nullptr, nullptr, xf.xf, xf.per};
        const LinearScratch short_by_one{nullptr, nullptr, xf.xf, xf.per - 1};
        const LinearScratch none{};
        for (WType type : {WType::F32, WType::F16}) {
            WeightView v;
            v.type = type;
            v.rows = N;
            v.cols = K;
            v.data = type == WType::F32 ? static_cast<const void*>(w.data()) : static_cast<const void*>(h.data());
            std::vector<float> y(static_cast<size_t>(T) * N, NAN), ref(y.size());
            linear_ref(x.data(), T, v, b, ref.data());
            for (CpuLevel level : levels) {
                const std::string level_name = cpu_level_name(level);
                CAPTURE(level_name);
                CAPTURE(type == WType::F32 ? "f32" : "f16");
                for (const LinearScratch* sc : {&with, &short_by_one, &none}) {
                    std::fill(y.begin(), y.end(), NAN);
                    linear_at(level, x.data(), T, v, b, y.data(), *sc, pool);
                    CHECK(max_rel(y, ref) < 1e-5);
                }
            }
        }
    }
}

TEST_CASE("linear int8: random shapes, every variant against the plain kernel (GEMM panels, K blocks, odd groups)") {
    // 60 shapes drawn with a fixed seed: T 1 to 140 (the row kernels, partial and several GEMM
    // panels and tasks), K 1 to 700, N 1 to 30 (tail tiles), groups from 1 to K, half of them
    // odd (avx2's int16 pairs pad an odd group), and a bias on every other shape; one to four
    // threads, so that tasks split over N as well.
    std::mt19937 rng(20261201);
    auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const auto levels = levels_to_test();  // once: it says which levels it skips
    for (int i = 0; i < 60; ++i) {
        const int T = i % 5 == 0 ? draw(1, 7) : draw(8, 140), K = draw(1, 700), N = draw(1, 30);
        const int group = i % 3 == 0 ? std::min(K, 64) : draw(1, K);
        const int threads = draw(1, 4);
        CAPTURE(i);
        CAPTURE(T);
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(group);
        CAPTURE(threads);
        ThreadPool pool(threads);
        const RandomInputs in(i, T, K, N, 100);
        const auto& x = in.x;
        const float* b = in.b;
        const Quantized q = quantize(in.w, N, K, group);
        const WeightView v = i8_view(q, N, K, group);
        const I8Scratch s8(T, K, group);
        const LinearScratch& scratch = s8.scratch;
        std::vector<float> y(static_cast<size_t>(T) * N), plain(y.size());
        linear_at(CpuLevel::Plain, x.data(), T, v, b, plain.data(), scratch, pool);
        for (CpuLevel level : levels) {
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            linear_at(level, x.data(), T, v, b, y.data(), scratch, pool);
            CHECK(max_rel(y, plain) < 1e-5);
        }
    }
}

TEST_CASE("linear int8: signed x signed extremes (+-127 in W and in x) give the exact integer sums") {
    // x = +-1 quantizes to +-127 (scale 1/127); W's bytes take every value in [-127, 127] (the
    // range weights.h allows) with scale 1. Each y is then 1/127 times an integer sum below
    // 2^24, so every variant must match the plain kernel to f32 rounding, whatever trick makes
    // vpdpbusd's or maddubs' unsigned operand (a wrapped negation or a saturated pair fails).
    ThreadPool pool(1);
    struct Extreme {
        int T, K, group;
        bool cache_resident;
    };
    // The row kernels and the GEMMs; then decode with the cache hint: the 8-row kernels (rows 0..7,
    // row 0 all -127) and the 4-row one (row 8), groups of 64 and of 32.
    for (const Extreme e : {Extreme{2, 300, 64, false}, Extreme{40, 300, 64, false}, Extreme{1, 320, 64, true}, Extreme{1, 320, 32, true}}) {
    const int T = e.T, K = e.K, N = 9, group = e.group;
    CAPTURE(T);
    CAPTURE(K);
    CAPTURE(group);
    std::vector<float> x(static_cast<size_t>(T) * K);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i * 7 % 3 == 0) ? -1.0f : 1.0f;
    std::vector<int8_t> wq(static_cast<size_t>(N) * K);
    for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
    for (int k = 0; k < K; ++k) wq[k] = -127;  // row 0: all -127
    const int gpr = (K + group - 1) / group;
    std::vector<float> scales(static_cast<size_t>(N) * gpr, 1.0f);
    WeightView v;
    v.type = WType::I8;
    v.data = wq.data();
    v.scales = scales.data();
    v.rows = N;
    v.cols = K;
    v.group_size = group;
    v.cache_resident = e.cache_resident;
    std::vector<int8_t> xq(linear_scratch_xq_bytes(T, K));
    std::vector<float> xs(linear_scratch_xs_bytes(T, K, group) / sizeof(float));
    const LinearScratch scratch{xq.data(), xs.data()};
    std::vector<double> exact(static_cast<size_t>(T) * N);
    for (int t = 0; t < T; ++t) {
        for (int n = 0; n < N; ++n) {
            long s = 0;
            for (int k = 0; k < K; ++k) s += static_cast<long>(x[static_cast<size_t>(t) * K + k] > 0 ? 127 : -127) * wq[static_cast<size_t>(n) * K + k];
            exact[static_cast<size_t>(t) * N + n] = static_cast<double>(s) / 127.0;
        }
    }
    for (CpuLevel level : levels_to_test()) {
        const std::string level_name = cpu_level_name(level);
        CAPTURE(level_name);
        std::vector<float> y(exact.size());
        linear_at(level, x.data(), T, v, nullptr, y.data(), scratch, pool);
        for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(exact[i]).epsilon(1e-6));
    }
    }
}

TEST_CASE("linear int8: a row of x holding an inf or a NaN gives NaN outputs at every level, one of magnitudes under 1e-36 gives zeros") {
    // Activations that overflowed f32 (a model whose weights are too large): the cast of inf or
    // NaN to int8 was undefined behaviour, plain gave a finite wrong y and avx2 another one. Now
    // such a group's scale is NaN and its integers 0 (linear_variants.h, group_quant_factor),
    // so every output of that row is NaN, as f32 weights give. A row whose values are all below
    // kMinQuantAmax (127 / amax would overflow) quantizes to zeros: y = bias.
    ThreadPool pool(2);
    const int K = 200, N = 12, group = 64;
    for (const int T : {4, 40}) {  // row kernels, GEMMs
        CAPTURE(T);
        std::vector<float> x = randn(static_cast<size_t>(T) * K, 77, 1.0f);
        x[1 * K + 70] = INFINITY;                                    // row 1: an inf in group 1
        x[2 * K + 199] = NAN;                                        // row 2: a NaN in the short last group
        x[3 * K + 5] = -INFINITY;                                    // row 3: -inf in group 0
        for (int k = 0; k < K; ++k) x[static_cast<size_t>(4 % T) * K + k] = (k % 2 ? 1e-38f : -3e-39f);  // row 0 (T 4) or 4
        const auto w = randn(static_cast<size_t>(N) * K, 78, 0.05f);
        const auto bias = randn(N, 79, 1.0f);
        const Quantized q = quantize(w, N, K, group);
        const WeightView v = i8_view(q, N, K, group);
        const I8Scratch s8(T, K, group);
        const LinearScratch& scratch = s8.scratch;
        std::vector<float> plain(static_cast<size_t>(T) * N);
        linear_at(CpuLevel::Plain, x.data(), T, v, bias.data(), plain.data(), scratch, pool);
        for (CpuLevel level : levels_to_test()) {
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            std::vector<float> y(plain.size(), 0.0f);
            linear_at(level, x.data(), T, v, bias.data(), y.data(), scratch, pool);
            for (int t = 0; t < T; ++t) {
                CAPTURE(t);
                for (int n = 0; n < N; ++n) {
                    const float got = y[static_cast<size_t>(t) * N + n];
                    if (t >= 1 && t <= 3) {
                        CHECK(std::isnan(got));
                    } else if (t == 4 % T) {
                        CHECK(got == bias[n]);
                    } else {
                        CHECK(std::isfinite(got));
                        CHECK(got == doctest::Approx(plain[static_cast<size_t>(t) * N + n]).epsilon(1e-5));
                    }
                }
            }
        }
    }
}

// scripts/cross-aarch64.sh runs the suite under qemu twice and names the level each emulated
// CPU must give (i8mm with -cpu max, neon with -cpu cortex-a57), so that a pass meant to run the
// NEON kernels cannot quietly run the dotprod ones. Unset (a native run): the level is only shown.
TEST_CASE("CPU levels: the highest level detected here is EMBER_EXPECT_CPU_LEVEL, where a run names one") {
    const CpuLevel detected = cpu_level_clamp(CpuLevel::I8mm, detect_cpu_features());
    const CpuLevel detected_x86 = cpu_level_clamp(CpuLevel::Avx512, detect_cpu_features());
    const CpuLevel highest = detected != CpuLevel::Plain ? detected : detected_x86;
    const char* expect = std::getenv("EMBER_EXPECT_CPU_LEVEL");
    const std::string shown = std::string("highest CPU level detected: ") + cpu_level_name(highest) +
                              (expect && *expect ? "" : " (EMBER_EXPECT_CPU_LEVEL unset: not checked)");
    MESSAGE(shown);
    if (!expect || !*expect) return;
    const std::string expected = expect;
    CpuLevel want = CpuLevel::Plain;
    INFO("EMBER_EXPECT_CPU_LEVEL=" << expected);
    REQUIRE(parse_cpu_level(expect, &want));
    CHECK(std::string(cpu_level_name(highest)) == std::string(cpu_level_name(want)));
}

TEST_CASE("CPU levels: clamped to what the CPU has, named and parsed, and the kernel names say which ran") {
    CpuFeatures none;
    CHECK(cpu_level_clamp(CpuLevel::Avx512, none) == CpuLevel::Plain);
    CHECK(cpu_level_clamp(CpuLevel::Dotprod, none) == CpuLevel::Plain);
    CHECK(cpu_level_clamp(CpuLevel::I8mm, none) == CpuLevel::Plain);
    CpuFeatures f;
#if defined(__x86_64__)
    f.avx2 = true;
    CHECK(cpu_level_clamp(CpuLevel::Avx512, f) == CpuLevel::Avx2);
    f.avx_vnni = true;
    CHECK(cpu_level_clamp(CpuLevel::Avx512, f) == CpuLevel::AvxVnni);
    CHECK(cpu_level_clamp(CpuLevel::Avx2, f) == CpuLevel::Avx2);
    CHECK(cpu_level_clamp(CpuLevel::Neon, f) == CpuLevel::Plain);  // another architecture's name
    f.avx512_vnni = true;
    CHECK(cpu_level_clamp(CpuLevel::Avx512, f) == CpuLevel::Avx512);
    CHECK(std::string(linear_kernel_name(WType::I8, CpuLevel::Plain)) == "int8: plain");
    // What decode runs for one view: the cache hint changes the name on avx2, avxvnni and avx512.
    WeightView hinted;
    hinted.type = WType::I8;
    hinted.cols = 384;
    hinted.group_size = 64;
    CHECK(std::string(linear_kernel_name(hinted)) == linear_kernel_name(WType::I8));
    hinted.cache_resident = true;
    const bool x86_simd = cpu_level() == CpuLevel::Avx2 || cpu_level() == CpuLevel::AvxVnni || cpu_level() == CpuLevel::Avx512;
    CHECK(std::string(linear_kernel_name(hinted)) ==
          std::string(linear_kernel_name(WType::I8)) + (x86_simd ? " (8-row decode: weights in cache)" : ""));
    hinted.group_size = 128;  // the 4-row kernel runs, and is named
    CHECK(std::string(linear_kernel_name(hinted)) == linear_kernel_name(WType::I8));
    if (cpu_level_supported(CpuLevel::Avx512, detect_cpu_features())) {
        CHECK(std::string(linear_kernel_name(WType::I8, CpuLevel::Avx512)) == "int8: avx512-vnni");
        // decode on AVX2's f32 / f16 row kernels, prefill on the ZMM GEMM (linear_avx512.cpp)
        CHECK(std::string(linear_kernel_name(WType::F32, CpuLevel::Avx512)) == "f32: avx2, prefill avx512");
        CHECK(std::string(linear_kernel_name(WType::F16, CpuLevel::Avx512)) == "f16: avx2, prefill avx512");
        CHECK(std::string(linear_kernel_name(WType::F32, CpuLevel::AvxVnni)) == "f32: avx2");
    }
#elif defined(__aarch64__)
    f.neon = true;
    CHECK(cpu_level_clamp(CpuLevel::Dotprod, f) == CpuLevel::Neon);
    CHECK(cpu_level_clamp(CpuLevel::Avx2, f) == CpuLevel::Plain);
    f.dotprod = true;
    CHECK(cpu_level_clamp(CpuLevel::Dotprod, f) == CpuLevel::Dotprod);
    CHECK(cpu_level_clamp(CpuLevel::I8mm, f) == CpuLevel::Dotprod);
    f.i8mm = true;
    CHECK(cpu_level_clamp(CpuLevel::I8mm, f) == CpuLevel::I8mm);
    if (cpu_level_supported(CpuLevel::I8mm, detect_cpu_features())) {
        CHECK(std::string(linear_kernel_name(WType::I8, CpuLevel::I8mm)) == "int8: i8mm");
    }
    CHECK(std::string(linear_kernel_name(WType::I8, CpuLevel::Neon)) == "int8: neon");
    CHECK(detect_cpu_features().neon);
    if (cpu_level_supported(CpuLevel::Dotprod, detect_cpu_features())) {
        CHECK(std::string(linear_kernel_name(WType::I8, CpuLevel::Dotprod)) == "int8: dotprod");
    }
#endif
    for (CpuLevel l : kCpuLevels) {
        CpuLevel parsed = CpuLevel::Plain;
        CHECK(parse_cpu_level(cpu_level_name(l), &parsed));
        CHECK(parsed == l);
    }
    CpuLevel unchanged = CpuLevel::Avx2;
    CHECK_FALSE(parse_cpu_level("avx-512", &unchanged));
    CHECK(unchanged == CpuLevel::Avx2);
    // What linear() runs is the chosen level's kernel, and is one this CPU has.
    CHECK(cpu_level_supported(cpu_level(), detect_cpu_features()));
    CHECK(std::string(linear_kernel_name(WType::I8)) == linear_kernel_name(WType::I8, cpu_level()));
    MESSAGE("linear kernels in use: " << std::string(linear_kernel_name(WType::F32)) << ", "
                                      << std::string(linear_kernel_name(WType::F16)) << ", "
                                      << std::string(linear_kernel_name(WType::I8)));
}

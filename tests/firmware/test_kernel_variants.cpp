// Every variant of attention, layernorm and activation this CPU runs (kernels/cpu/ops_variants.h:
// plain, avx2 on x86-64; plain, neon on aarch64; the higher levels use these) against the plain
// double references on random data; levels the CPU lacks are skipped with a message. In the
// device test binary, so the NEON bodies run under qemu (scripts/cross-aarch64.sh).
//
// Tolerances, as max |y - ref| / max(1, max |ref|):
//   attention < 1e-5 (f32 sums of at most 100 products and a softmax in f32, ref in double), over
//     an f32 and an f16 cache, each as [S, C] and as the backend's head-major [n_head, S, hs]
//     (f16: against the reference on the same binary16 values widened exactly to f32, so the
//     bound is the same);
//   f16 rounding of a new cache row: bit for bit half.h's float_to_half (round to nearest even);
//   softmax < 1e-6 (the vector e^x within a few ulp; probabilities at most 1);
//   layernorm < 1e-5 (f32 two-pass mean and variance over up to 769 values, ref in double);
//   activation < 1e-6 (ReLU exact; the vector GELUs' e^x within a few ulp and erf within 1.5e-7).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/ops_variants.h"
#include "../kernel_test_util.h"
#include "variant_test_util.h"

using namespace ember::kernels;

using ember::test::levels_to_test;
using ember::test::randn;
using ember::test::max_rel;

// The values of an [S, C] cache k, v moved to the CPU backend's head-major layout,
// [n_head, cap, hs] with cap = S + 3 (a block_size past the keys; those slots hold `fill`), and
// attention there checked against ref (attention_ref on the [S, C] values).
template <typename E>
void check_head_major(CpuLevel level, const std::vector<float>& q, const std::vector<E>& k, const std::vector<E>& v,
                      const AttentionShape& s, E fill, const std::vector<float>& ref, std::vector<float>& scores, int scores_ld,
                      ThreadPool& pool) {
    const int C = s.n_head * s.head_size, S = static_cast<int>(k.size() / C), cap = S + 3;
    std::vector<E> kh(static_cast<size_t>(s.n_head) * cap * s.head_size, fill), vh(kh.size(), fill);
    for (int j = 0; j < S; ++j)
        for (int h = 0; h < s.n_head; ++h)
            for (int d = 0; d < s.head_size; ++d) {
                const size_t at = (static_cast<size_t>(h) * cap + j) * s.head_size + d;
                const size_t from = static_cast<size_t>(j) * C + h * s.head_size + d;
                kh[at] = k[from];
                vh[at] = v[from];
            }
    AttentionShape sh = s;
    sh.kv_row = s.head_size;
    sh.kv_head = static_cast<size_t>(cap) * s.head_size;
    std::vector<float> out(ref.size(), 7.0f);
    attention_at(level, q.data(), kh.data(), vh.data(), sh, out.data(), scores.data(), scores_ld, pool);
    CHECK(max_rel(out, ref) < 1e-5);
}

TEST_CASE("kernel variants: attention at every level this CPU runs matches attention_ref") {
    ThreadPool pool(2);
    struct Case {
        int T, n_head, hs, n_keys0;
    };
    // head sizes: multiples of 32 (the wide path), of 8 but not 32 (40: 32 + 8), of 4 only (20),
    // neither (6, 13); key counts not multiples of 4; prefill from row 0 with no visible key
    // for query 0 (n_keys0 = 0); decode over a full cache.
    // Each case runs twice: scores scratch of one row per thread (one query at a time) and of
    // kAttentionQueryBlock rows (prefill's four-query loops where the level has them: T >= 4, a
    // T not a multiple of 4 leaves single queries, n_keys0 = 0 a first block with a keyless query).
    const Case cases[] = {{8, 4, 16, 1}, {1, 6, 64, 37}, {5, 2, 64, 20}, {1, 3, 40, 99}, {3, 2, 20, 9},
                          {4, 3, 6, 2},  {1, 2, 13, 11}, {2, 2, 32, 0},  {9, 6, 64, 1},  {37, 2, 64, 0},
                          {22, 3, 40, 5}, {13, 2, 20, 0}, {16, 2, 13, 3}};
    for (CpuLevel level : levels_to_test()) {
        for (const int rows : {1, kAttentionQueryBlock})
        for (const Case& c : cases) {
            CAPTURE(rows);
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            CAPTURE(c.T);
            CAPTURE(c.hs);
            CAPTURE(c.n_keys0);
            const int C = c.n_head * c.hs, S = c.n_keys0 + c.T;
            const auto k = randn(static_cast<size_t>(S) * C, 31 + C, 1.0f);
            const auto v = randn(static_cast<size_t>(S) * C, 32 + C, 1.0f);
            const auto q = randn(static_cast<size_t>(c.T) * 3 * C, 33 + c.T, 1.0f);
            AttentionShape s;
            s.T = c.T;
            s.n_head = c.n_head;
            s.head_size = c.hs;
            s.n_keys0 = c.n_keys0;
            s.ldq = 3 * C;
            s.scale = 1.0f / std::sqrt(static_cast<float>(c.hs));
            std::vector<float> scores(static_cast<size_t>(pool.size()) * rows * S);
            std::vector<float> out(static_cast<size_t>(c.T) * C, 7.0f), ref(out.size());
            attention_at(level, q.data(), k.data(), v.data(), s, out.data(), scores.data(), rows * S, pool);
            attention_ref(q.data(), k.data(), v.data(), s, ref.data());
            CHECK(max_rel(out, ref) < 1e-5);
            if (c.n_keys0 == 0) {
                for (int d = 0; d < C; ++d) CHECK(out[d] == 0.0f);  // query 0 sees no key
            }
            // the CPU backend's head-major cache: the same values, against the same reference
            check_head_major(level, q, k, v, s, 9.0f, ref, scores, rows * S, pool);
            // f16 cache: the rows rounded by this level, read back by this level; the reference
            // sees the same binary16 values widened to f32
            std::vector<uint16_t> k16(k.size()), v16(v.size());
            kv_round_f16_at(level, k.data(), k16.data(), static_cast<int>(k.size()));
            kv_round_f16_at(level, v.data(), v16.data(), static_cast<int>(v.size()));
            std::vector<float> kw(k.size()), vw(v.size());
            for (size_t i = 0; i < k.size(); ++i) kw[i] = half_to_float(k16[i]);
            for (size_t i = 0; i < v.size(); ++i) vw[i] = half_to_float(v16[i]);
            std::fill(out.begin(), out.end(), 7.0f);
            attention_at(level, q.data(), k16.data(), v16.data(), s, out.data(), scores.data(), rows * S, pool);
            attention_ref(q.data(), kw.data(), vw.data(), s, ref.data());
            CHECK(max_rel(out, ref) < 1e-5);
            if (c.n_keys0 == 0) {
                for (int d = 0; d < C; ++d) CHECK(out[d] == 0.0f);
            }
            check_head_major(level, q, k16, v16, s, uint16_t{0x7e00}, ref, scores, rows * S, pool);  // NaN past the keys
        }
    }
}

TEST_CASE("kernel variants: f16 rounding of a cache row at every level this CPU runs is half.h's, bit for bit") {
    // normal values at several magnitudes, the subnormal range, overflow past 65504, exact ties
    // (1 + 2^-11 rounds down to even, 1 + 3 * 2^-11 up), zeros and infinities; lengths that
    // leave tails after the 8- and 4-wide loops
    std::vector<float> x;
    for (float scale : {1.0f, 1e-3f, 3e-6f, 3e-8f, 300.0f, 3e4f}) {
        const auto r = randn(101, 50 + static_cast<uint32_t>(x.size()), scale);
        x.insert(x.end(), r.begin(), r.end());
    }
    const float specials[] = {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 0x1p-11f), 65504.0f, 65519.0f, 65520.0f, 1e6f,
                              -1e6f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 0x1.ffcp-15f, INFINITY, -INFINITY};
    x.insert(x.end(), std::begin(specials), std::end(specials));
    std::vector<uint16_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = float_to_half(x[i]);
    for (CpuLevel level : levels_to_test()) {
        const std::string level_name = cpu_level_name(level);
        CAPTURE(level_name);
        for (int n : {static_cast<int>(x.size()), 1, 7, 13}) {
            std::vector<uint16_t> got(x.size(), 0x1234);
            kv_round_f16_at(level, x.data(), got.data(), n);
            int wrong = 0;
            for (int i = 0; i < n; ++i) wrong += got[i] != want[i];
            CHECK(wrong == 0);
            CHECK(got[n < static_cast<int>(x.size()) ? n : 0] == (n < static_cast<int>(x.size()) ? 0x1234 : want[0]));  // nothing past n
        }
    }
}

TEST_CASE("kernel variants: softmax at every level this CPU runs matches a double softmax, over a wide range") {
    for (CpuLevel level : levels_to_test()) {
        for (int n : {1, 3, 8, 13, 64, 257}) {
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            CAPTURE(n);
            auto w = randn(n, 40 + n, 30.0f);  // e^(w - max) from 1 down to below f32's range
            std::vector<float> ref(n);
            double mx = -INFINITY, sum = 0.0;
            for (float e : w) mx = std::max(mx, static_cast<double>(e));
            for (int j = 0; j < n; ++j) sum += std::exp(w[j] - mx);
            for (int j = 0; j < n; ++j) ref[j] = static_cast<float>(std::exp(w[j] - mx) / sum);
            ops_detail::op_kernels_at(level).softmax(w.data(), n);
            CHECK(max_rel(w, ref) < 1e-6);
        }
    }
}

TEST_CASE("kernel variants: layernorm at every level this CPU runs matches layernorm_ref") {
    for (CpuLevel level : levels_to_test()) {
        for (int C : {7, 8, 20, 96, 100, 384, 769}) {
            const std::string level_name = cpu_level_name(level);
            CAPTURE(level_name);
            CAPTURE(C);
            const int T = 3;
            const auto x = randn(static_cast<size_t>(T) * C, 11 + C, 3.0f);
            auto shifted = x;
            for (auto& e : shifted) e += 50.0f;  // a mean far from 0
            const auto w = randn(C, 12, 1.0f);
            const auto b = randn(C, 13, 1.0f);
            std::vector<float> y(x.size()), ref(x.size());
            const std::vector<float>* inputs[] = {&x, &shifted};
            for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
                for (const std::vector<float>* in : inputs) {
                    layernorm_at(level, in->data(), T, C, w.data(), bias, 1e-5f, y.data());
                    layernorm_ref(in->data(), T, C, w.data(), bias, 1e-5f, ref.data());
                    CHECK(max_rel(y, ref) < 1e-5);
                }
            }
            auto inplace = x;  // out may alias x
            layernorm_at(level, inplace.data(), T, C, w.data(), b.data(), 1e-5f, inplace.data());
            layernorm_ref(x.data(), T, C, w.data(), b.data(), 1e-5f, ref.data());
            CHECK(max_rel(inplace, ref) < 1e-5);
        }
        // Large equal magnitudes: a one-pass variance would cancel; outputs are +1/-1.
        const int C = 100;
        std::vector<float> alt(C), ones(C, 1.0f), out(C);
        for (int c = 0; c < C; ++c) alt[c] = c % 2 ? -300.0f : 300.0f;
        layernorm_at(level, alt.data(), 1, C, ones.data(), nullptr, 1e-5f, out.data());
        for (int c = 0; c < C; ++c) CHECK(out[c] == doctest::Approx(c % 2 ? -1.0 : 1.0).epsilon(1e-6));
    }
}

TEST_CASE("kernel variants: activations at every level this CPU runs match activation_ref") {
    // Random values, then the tails of both GELUs (e^x clamped, erfc underflowing) and zeros.
    auto x = randn(1003, 21, 3.0f);
    for (float e : {-100.0f, -30.0f, -12.0f, -9.0f, -5.0f, -1e-6f, -0.0f, 0.0f, 1e-6f, 5.0f, 9.0f, 12.0f, 30.0f, 100.0f}) {
        x.push_back(e);
    }
    for (CpuLevel level : levels_to_test()) {
        for (auto kind : {ActivationKind::ReLU, ActivationKind::GeluErf, ActivationKind::GeluTanh}) {
            for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{13}, x.size()}) {
                const std::string level_name = cpu_level_name(level);
                CAPTURE(level_name);
                CAPTURE(static_cast<int>(kind));
                CAPTURE(n);
                std::vector<float> a(x.begin(), x.begin() + n), r = a, plain = a;
                activation_at(level, kind, a.data(), n);
                activation_ref(kind, r.data(), n);
                CHECK(max_rel(a, r) < 1e-6);
                for (size_t i = 0; i < n; ++i) CHECK(std::isfinite(a[i]));
                if (kind == ActivationKind::ReLU) {
                    activation_at(CpuLevel::Plain, kind, plain.data(), n);
                    CHECK(a == plain);
                }
            }
        }
        // Values from PyTorch: F.gelu(torch.tensor([1.0, -0.5])) and approximate='tanh'.
        std::vector<float> v = {1.0f, -0.5f, 1.0f, -0.5f, 1.0f, -0.5f, 1.0f, -0.5f};
        activation_at(level, ActivationKind::GeluErf, v.data(), v.size());
        CHECK(v[6] == doctest::Approx(0.8413447).epsilon(1e-6));
        CHECK(v[7] == doctest::Approx(-0.1542687).epsilon(1e-6));
        std::vector<float> u(8, 1.0f);
        activation_at(level, ActivationKind::GeluTanh, u.data(), u.size());
        CHECK(u[0] == doctest::Approx(0.8411920).epsilon(1e-6));
    }
}

TEST_CASE("kernel variants: each level runs its architecture's bodies, and the chosen one is in use") {
    CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Plain).name) == "plain");
    const CpuFeatures cpu = detect_cpu_features();
#if defined(__x86_64__)
    if (cpu.avx2) {
        CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Avx2).name) == "avx2");
        CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Avx512).name) == "avx2");  // or clamped below
    }
    CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Neon).name) == "plain");
#elif defined(__aarch64__)
    CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Neon).name) == "neon");
    CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Dotprod).name) == "neon");
    CHECK(std::string(ops_detail::op_kernels_at(CpuLevel::Avx2).name) == "plain");
#endif
    CHECK(&ops_detail::op_kernels() == &ops_detail::op_kernels_at(cpu_level()));
    MESSAGE("attention / layernorm / activation kernels in use: " << std::string(ops_detail::op_kernels().name));
}

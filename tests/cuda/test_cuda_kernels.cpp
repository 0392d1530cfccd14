// Every kernel of kernels/cuda against its CPU reference (kernels/cpu/*_ref, double
// precision) on random data, with the tolerance stated at each check, and the fp16 hazards:
// attention scores past 65504, LayerNorm over +300/-300, a query with every key masked.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/linear.cuh"
#include "runtime/error.h"

using namespace ember;
using kernels::WType;
using test::DeviceBuffer;

namespace {

__half* as_half(const DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__half*>(b.get()); }

// act(linear_ref(x, W) + bias) in double via the CPU references.
std::vector<float> linear_act_ref(const std::vector<float>& x, int T, const kernels::WeightView& w, const float* bias, cuda::Act act) {
    std::vector<float> y(static_cast<size_t>(T) * w.rows);
    kernels::linear_ref(x.data(), T, w, bias, y.data());
    if (act == cuda::Act::ReLU) kernels::activation_ref(kernels::ActivationKind::ReLU, y.data(), y.size());
    if (act == cuda::Act::GeluErf) kernels::activation_ref(kernels::ActivationKind::GeluErf, y.data(), y.size());
    if (act == cuda::Act::GeluTanh) kernels::activation_ref(kernels::ActivationKind::GeluTanh, y.data(), y.size());
    return y;
}

// sum_k |W[n,k] x[k]| for each output: the scale of the accumulation error.
std::vector<double> abs_scale(const std::vector<float>& x, int T, const kernels::WeightView& w) {
    std::vector<double> s(static_cast<size_t>(T) * w.rows, 0.0);
    std::vector<float> row(w.cols);
    for (int n = 0; n < w.rows; ++n) {
        kernels::dequantize_row(w, n, row.data());
        for (int t = 0; t < T; ++t)
            for (int k = 0; k < w.cols; ++k) s[static_cast<size_t>(t) * w.rows + n] += std::fabs(row[k] * x[static_cast<size_t>(t) * w.cols + k]);
    }
    return s;
}

}  // namespace

TEST_CASE("cuda embedding: wte[id] + wpe[pos0 + t] for int8 and f16 tables equals dequantize_row") {
    std::mt19937 rng(1);
    const int V = 37, S = 20, C = 48, T = 6;
    test::TestWeight wte(test::random_vec(static_cast<size_t>(V) * C, rng), V, C, WType::I8, 16);
    test::TestWeight wpe(test::random_vec(static_cast<size_t>(S) * C, rng), S, C, WType::F16);
    const std::vector<int> ids = {0, 36, 5, 5, 17, 2};
    const int pos0 = 11;
    DeviceBuffer<int> d_ids(ids), d_pos(std::vector<int>{pos0});
    DeviceBuffer<float> d_x(static_cast<size_t>(T) * C);
    cuda::embedding(wte.device, wpe.device, d_ids.get(), d_pos.get(), T, d_x.get(), nullptr);
    const auto x = d_x.download();
    std::vector<float> a(C), b(C);
    double err = 0.0;
    for (int t = 0; t < T; ++t) {
        kernels::dequantize_row(wte.host, ids[t], a.data());
        kernels::dequantize_row(wpe.host, pos0 + t, b.data());
        for (int i = 0; i < C; ++i) err = std::max(err, std::fabs(static_cast<double>(x[static_cast<size_t>(t) * C + i]) - (a[i] + b[i])));
    }
    CHECK(err < 1e-5);  // the same f32 sums, up to FMA contraction
}

TEST_CASE("cuda layernorm: random rows within fp16 rounding of layernorm_ref") {
    std::mt19937 rng(2);
    const int T = 5, C = 300;  // C not a multiple of the block: strided loops
    auto x = test::random_vec(static_cast<size_t>(T) * C, rng, 3.0f);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < C; ++i) x[static_cast<size_t>(t) * C + i] += 10.0f * t;  // rows with a mean far from 0
    const auto w = test::random_vec(C, rng), b = test::random_vec(C, rng);
    std::vector<float> ref(x.size());
    kernels::layernorm_ref(x.data(), T, C, w.data(), b.data(), 1e-5f, ref.data());
    DeviceBuffer<float> d_x(x), d_w(w), d_b(b);
    DeviceBuffer<uint16_t> d_y(x.size());
    cuda::layernorm(d_x.get(), T, C, d_w.get(), d_b.get(), 1e-5f, as_half(d_y), nullptr);
    const auto y = test::from_half(d_y.download());
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
    CHECK(worst < 2e-3);  // fp16 output: relative rounding 2^-11 ~ 4.9e-4
    // Without bias (nanoGPT bias=False).
    kernels::layernorm_ref(x.data(), T, C, w.data(), nullptr, 1e-5f, ref.data());
    cuda::layernorm(d_x.get(), T, C, d_w.get(), nullptr, 1e-5f, as_half(d_y), nullptr);
    const auto y2 = test::from_half(d_y.download());
    worst = 0.0;
    for (size_t i = 0; i < y2.size(); ++i) worst = std::max(worst, std::fabs(y2[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
    CHECK(worst < 2e-3);
}

TEST_CASE("cuda layernorm hazard: rows alternating +300/-300 give +1/-1, no inf or NaN") {
    const int T = 3, C = 384;
    std::vector<float> x(static_cast<size_t>(T) * C);
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? -300.0f : 300.0f;
    const std::vector<float> w(C, 1.0f), b(C, 0.0f);
    DeviceBuffer<float> d_x(x), d_w(w), d_b(b);
    DeviceBuffer<uint16_t> d_y(x.size());
    cuda::layernorm(d_x.get(), T, C, d_w.get(), d_b.get(), 1e-5f, as_half(d_y), nullptr);
    const auto y = test::from_half(d_y.download());
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i) bad += !(std::fabs(y[i] - (i % 2 ? -1.0f : 1.0f)) < 1e-3f);
    CHECK(bad == 0);
}

TEST_CASE("cuda linear_gemv: f32, f16, int8 weights, bias, activations, fp16 and f32 (residual) outputs vs linear_ref") {
    std::mt19937 rng(3);
    const cuda::Act acts[] = {cuda::Act::None, cuda::Act::ReLU, cuda::Act::GeluErf, cuda::Act::GeluTanh};
    for (const WType type : {WType::F32, WType::F16, WType::I8}) {
        // 96 and 1552 (16 x 97, two rounds of in-flight loads for f16, a partial round for int8):
        // the 16-byte paths; 50: the element-wise fallback for int8 and 2-wide for f16.
        for (const int K : {96, 50, 1552}) {
            // int8 groups: 32, 48 and a whole row take the 16-byte path; 12 the 4-byte one.
            for (const int group : {32, 0, 48, 12}) {
                if (type != WType::I8 && group != 0) continue;
                CAPTURE(std::string(kernels::wtype_name(type)));
                CAPTURE(K);
                CAPTURE(group);
                const int N = 70;
                test::TestWeight w(test::random_vec(static_cast<size_t>(N) * K, rng, 0.2f), N, K, type, group);
                const auto x = test::round_half(test::random_vec(K, rng));
                const auto bias = test::random_vec(N, rng);
                DeviceBuffer<uint16_t> d_x(test::to_half(x));
                DeviceBuffer<float> d_b(bias);
                const auto scale = abs_scale(x, 1, w.host);
                for (const cuda::Act act : acts) {
                    CAPTURE(static_cast<int>(act));
                    const auto ref = linear_act_ref(x, 1, w.host, bias.data(), act);
                    DeviceBuffer<uint16_t> d_y(N);
                    cuda::linear_gemv(as_half(d_x), w.device, d_b.get(), act, as_half(d_y), nullptr);
                    const auto y = test::from_half(d_y.download());
                    int bad = 0;
                    for (int n = 0; n < N; ++n) bad += !(std::fabs(y[n] - ref[n]) <= 1e-3 * (1.0 + std::fabs(ref[n])) + 1e-5 * scale[n]);
                    CHECK(bad == 0);
                }
                // f32 out, accumulate: y = y0 + x W^T + b (the residual add), then no bias, no accumulate.
                const auto y0 = test::random_vec(N, rng);
                DeviceBuffer<float> d_y(y0);
                cuda::linear_gemv(as_half(d_x), w.device, d_b.get(), cuda::Act::None, true, d_y.get(), nullptr);
                const auto ref = linear_act_ref(x, 1, w.host, bias.data(), cuda::Act::None);
                auto y = d_y.download();
                int bad = 0;
                for (int n = 0; n < N; ++n) bad += !(std::fabs(y[n] - (y0[n] + ref[n])) <= 1e-5 * (1.0 + scale[n] + std::fabs(y0[n])));
                CHECK(bad == 0);
                const auto ref_nb = linear_act_ref(x, 1, w.host, nullptr, cuda::Act::None);
                cuda::linear_gemv(as_half(d_x), w.device, nullptr, cuda::Act::None, false, d_y.get(), nullptr);
                y = d_y.download();
                bad = 0;
                for (int n = 0; n < N; ++n) bad += !(std::fabs(y[n] - ref_nb[n]) <= 1e-5 * (1.0 + scale[n]));
                CHECK(bad == 0);
            }
        }
    }
}

TEST_CASE("cuda layernorm_linear_gemv (decode: LayerNorm fused in front) vs layernorm_ref, fp16 rounding, linear_ref") {
    std::mt19937 rng(9);
    for (const WType type : {WType::F32, WType::F16, WType::I8}) {
        for (const int K : {96, 50, 384}) {
            for (const bool ln_bias : {true, false}) {
                CAPTURE(std::string(kernels::wtype_name(type)));
                CAPTURE(K);
                CAPTURE(ln_bias);
                const int N = 70;
                test::TestWeight w(test::random_vec(static_cast<size_t>(N) * K, rng, 0.2f), N, K, type, 32);
                auto x = test::random_vec(K, rng, 2.0f);
                for (auto& e : x) e += 5.0f;  // a mean far from 0
                const auto ln_w = test::random_vec(K, rng), ln_b = test::random_vec(K, rng), bias = test::random_vec(N, rng);
                std::vector<float> xn(K);
                kernels::layernorm_ref(x.data(), 1, K, ln_w.data(), ln_bias ? ln_b.data() : nullptr, 1e-5f, xn.data());
                xn = test::round_half(xn);  // what the kernel holds in shared memory
                const auto scale = abs_scale(xn, 1, w.host);
                const auto ref = linear_act_ref(xn, 1, w.host, bias.data(), cuda::Act::GeluTanh);
                DeviceBuffer<float> d_x(x), d_lw(ln_w), d_lb(ln_b), d_b(bias);
                DeviceBuffer<uint16_t> d_y(N);
                cuda::layernorm_linear_gemv(d_x.get(), d_lw.get(), ln_bias ? d_lb.get() : nullptr, 1e-5f, w.device, d_b.get(),
                                            cuda::Act::GeluTanh, as_half(d_y), nullptr);
                const auto y = test::from_half(d_y.download());
                // fp16 output rounding, plus one fp16 rounding step of a normalized value
                // landing the other way (f32 statistics summed in another order): 2^-11 of scale.
                int bad = 0;
                for (int n = 0; n < N; ++n) bad += !(std::fabs(y[n] - ref[n]) <= 1e-3 * (1.0 + std::fabs(ref[n])) + 5e-4 * scale[n]);
                CHECK(bad == 0);
            }
        }
    }
}

TEST_CASE("cuda dequantize_f16: int8 groups and f32 expand to the fp16 of dequantize_row") {
    std::mt19937 rng(4);
    const int N = 33, K = 72;
    for (const WType type : {WType::I8, WType::F32, WType::F16}) {
        CAPTURE(std::string(kernels::wtype_name(type)));
        test::TestWeight w(test::random_vec(static_cast<size_t>(N) * K, rng), N, K, type, 24);
        DeviceBuffer<uint16_t> d_out(static_cast<size_t>(N) * K);
        cuda::dequantize_f16(w.device, as_half(d_out), nullptr);
        const auto got = d_out.download();
        std::vector<float> row(K);
        int bad = 0;
        for (int n = 0; n < N; ++n) {
            kernels::dequantize_row(w.host, n, row.data());
            for (int k = 0; k < K; ++k) bad += got[static_cast<size_t>(n) * K + k] != kernels::float_to_half(row[k]);
        }
        CHECK(bad == 0);  // both round the same f32 product to nearest even
    }
}

TEST_CASE("cuda gemm (cuBLASLt) + epilogue: [T, K] x [N, K]^T with bias, activation and residual vs linear_ref") {
    std::mt19937 rng(5);
    DeviceBuffer<uint8_t> workspace(4u << 20);
    cuda::Gemm gemm(workspace.get(), 4u << 20);
    for (const auto& [T, N, K] : {std::tuple<int, int, int>{7, 40, 64}, {33, 96, 80}, {256, 1152, 384}}) {
        CAPTURE(T);
        CAPTURE(N);
        CAPTURE(K);
        test::TestWeight w(test::random_vec(static_cast<size_t>(N) * K, rng, 0.1f), N, K, WType::F16);
        const auto x = test::round_half(test::random_vec(static_cast<size_t>(T) * K, rng));
        const auto bias = test::random_vec(N, rng);
        DeviceBuffer<uint16_t> d_x(test::to_half(x));
        DeviceBuffer<float> d_b(bias), d_y(static_cast<size_t>(T) * N);
        const auto scale = abs_scale(x, T, w.host);
        gemm.run(as_half(d_x), T, static_cast<const __half*>(w.device.data), N, K, d_y.get(), nullptr);
        // An x 16 bytes into its buffer: cuBLASLt's algorithm may assume 256-byte alignment.
        CHECK_THROWS_WITH_AS(gemm.run(as_half(d_x) + 8, T, static_cast<const __half*>(w.device.data), N, K, d_y.get(), nullptr),
                             doctest::Contains("x at"), ember::Error);
        const auto raw = d_y.download();
        const auto ref_raw = linear_act_ref(x, T, w.host, nullptr, cuda::Act::None);
        int bad = 0;
        for (size_t i = 0; i < raw.size(); ++i) bad += !(std::fabs(raw[i] - ref_raw[i]) <= 1e-4 * (1.0 + scale[i]));
        CHECK(bad == 0);  // f32 accumulation (cuBLASLt may split K: a few f32 roundings more)
        // Epilogue to fp16 with bias + GELU.
        DeviceBuffer<uint16_t> d_h(static_cast<size_t>(T) * N);
        cuda::linear_epilogue(d_y.get(), T, N, d_b.get(), cuda::Act::GeluErf, as_half(d_h), nullptr);
        const auto h = test::from_half(d_h.download());
        const auto ref_g = linear_act_ref(x, T, w.host, bias.data(), cuda::Act::GeluErf);
        bad = 0;
        for (size_t i = 0; i < h.size(); ++i) bad += !(std::fabs(h[i] - ref_g[i]) <= 1e-3 * (1.0 + std::fabs(ref_g[i])) + 1e-4 * scale[i]);
        CHECK(bad == 0);
        // Epilogue accumulating into an f32 residual.
        const auto r0 = test::random_vec(static_cast<size_t>(T) * N, rng);
        DeviceBuffer<float> d_r(r0);
        cuda::linear_epilogue(d_y.get(), T, N, d_b.get(), cuda::Act::None, true, d_r.get(), nullptr);
        const auto r = d_r.download();
        const auto ref_b = linear_act_ref(x, T, w.host, bias.data(), cuda::Act::None);
        bad = 0;
        for (size_t i = 0; i < r.size(); ++i) bad += !(std::fabs(r[i] - (r0[i] + ref_b[i])) <= 1e-4 * (1.0 + scale[i] + std::fabs(r0[i])));
        CHECK(bad == 0);
    }
}

TEST_CASE("cuda gemm: kept plans are reused and replaced (20 shapes, each twice, fresh data each time)") {
    std::mt19937 rng(10);
    DeviceBuffer<uint8_t> workspace(1u << 20);
    cuda::Gemm gemm(workspace.get(), 1u << 20);
    int bad = 0;
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < 20; ++i) {
            const int T = 2 + i, N = 8 + 3 * i, K = 16 + 8 * (i % 3);
            test::TestWeight w(test::random_vec(static_cast<size_t>(N) * K, rng, 0.1f), N, K, WType::F16);
            const auto x = test::round_half(test::random_vec(static_cast<size_t>(T) * K, rng));
            DeviceBuffer<uint16_t> d_x(test::to_half(x));
            DeviceBuffer<float> d_y(static_cast<size_t>(T) * N);
            gemm.run(as_half(d_x), T, static_cast<const __half*>(w.device.data), N, K, d_y.get(), nullptr);
            const auto y = d_y.download();
            const auto ref = linear_act_ref(x, T, w.host, nullptr, cuda::Act::None);
            const auto scale = abs_scale(x, T, w.host);
            for (size_t j = 0; j < y.size(); ++j) bad += !(std::fabs(y[j] - ref[j]) <= 1e-4 * (1.0 + scale[j]));
        }
    }
    CHECK(bad == 0);
}

namespace {

// Runs the CUDA attention (prefill for T > 1, decode for T == 1) and attention_ref on the
// same fp16-rounded data; q lives in a [T, 3C] buffer as in the runtime. Returns max |diff|.
double attention_error(int T, int n_head, int hs, int S, int n_keys0, std::mt19937& rng, float spread = 1.0f) {
    const int C = n_head * hs;
    const auto qkv = test::round_half(test::random_vec(static_cast<size_t>(T) * 3 * C, rng, spread));
    const auto k = test::round_half(test::random_vec(static_cast<size_t>(S) * C, rng, spread));
    const auto v = test::round_half(test::random_vec(static_cast<size_t>(S) * C, rng));
    kernels::AttentionShape rs;
    rs.T = T;
    rs.n_head = n_head;
    rs.head_size = hs;
    rs.n_keys0 = n_keys0;
    rs.ldq = 3 * C;
    rs.scale = 1.0f / std::sqrt(static_cast<float>(hs));
    std::vector<float> ref(static_cast<size_t>(T) * C);
    kernels::attention_ref(qkv.data(), k.data(), v.data(), rs, ref.data());
    DeviceBuffer<uint16_t> d_q(test::to_half(qkv)), d_k(test::to_half(k)), d_v(test::to_half(v)), d_o(ref.size());
    DeviceBuffer<int> d_n(std::vector<int>{n_keys0});
    cuda::AttentionShape s;
    s.T = T;
    s.n_head = n_head;
    s.head_size = hs;
    s.S = S;
    s.ldq = 3 * C;
    s.scale = rs.scale;
    if (T == 1) {
        cuda::attention_decode(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), nullptr, as_half(d_o), nullptr);
    } else {
        cuda::attention_prefill(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), as_half(d_o), nullptr);
    }
    const auto o = test::from_half(d_o.download());
    double err = 0.0;
    for (size_t i = 0; i < o.size(); ++i) err = std::isfinite(o[i]) ? std::max(err, std::fabs(static_cast<double>(o[i]) - ref[i])) : 1e30;
    return err;
}

}  // namespace

TEST_CASE("cuda attention: prefill and decode (online softmax over the cache) vs attention_ref") {
    std::mt19937 rng(6);
    // Outputs are convex combinations of v (|v| ~ 1..4): fp16 output rounding ~2e-3 at most.
    CHECK(attention_error(5, 3, 40, 16, 9, rng) < 4e-3);     // head_size not a multiple of 32
    CHECK(attention_error(16, 6, 64, 16, 1, rng) < 4e-3);    // a whole window from an empty cache
    CHECK(attention_error(1, 6, 64, 256, 256, rng) < 4e-3);  // decode over a full ring
    CHECK(attention_error(1, 12, 64, 1024, 700, rng) < 4e-3);
    CHECK(attention_error(1, 2, 256, 40, 33, rng) < 4e-3);   // the largest head_size
    CHECK(attention_error(3, 4, 32, 64, 50, rng, 4.0f) < 4e-3);  // peaked softmax
    CHECK(attention_error(4, 3, 12, 70, 60, rng) < 4e-3);    // head_size not a multiple of 8 (element loads of K)
    CHECK(attention_error(1, 3, 12, 70, 70, rng) < 4e-3);
    CHECK(attention_error(1, 4, 64, 300, 33, rng) < 4e-3);   // one key past a chunk of 32
}

TEST_CASE("cuda attention_decode with store_row: writes the new K/V row into the cache, then attends to it") {
    std::mt19937 rng(8);
    const int H = 4, hs = 48, S = 12, C = H * hs;
    for (const auto& [row, n_keys0] : {std::pair<int, int>{5, 6}, {0, 1}, {7, 12}}) {  // append; first token; full ring
        CAPTURE(row);
        const auto qkv = test::round_half(test::random_vec(3 * C, rng));
        auto k = test::round_half(test::random_vec(static_cast<size_t>(S) * C, rng));
        auto v = test::round_half(test::random_vec(static_cast<size_t>(S) * C, rng));
        DeviceBuffer<uint16_t> d_q(test::to_half(qkv)), d_k(test::to_half(k)), d_v(test::to_half(v)), d_o(C);
        DeviceBuffer<int> d_n(std::vector<int>{n_keys0}), d_row(std::vector<int>{row});
        cuda::AttentionShape s;
        s.T = 1;
        s.n_head = H;
        s.head_size = hs;
        s.S = S;
        s.ldq = 3 * C;
        s.scale = 1.0f / std::sqrt(static_cast<float>(hs));
        cuda::attention_decode(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), d_row.get(), as_half(d_o), nullptr);
        for (int i = 0; i < C; ++i) {  // the reference cache holds the new row too
            k[static_cast<size_t>(row) * C + i] = qkv[C + i];
            v[static_cast<size_t>(row) * C + i] = qkv[2 * C + i];
        }
        CHECK(test::from_half(d_k.download()) == k);
        CHECK(test::from_half(d_v.download()) == v);
        kernels::AttentionShape rs;
        rs.T = 1;
        rs.n_head = H;
        rs.head_size = hs;
        rs.n_keys0 = n_keys0;
        rs.ldq = 3 * C;
        rs.scale = s.scale;
        std::vector<float> ref(C);
        kernels::attention_ref(qkv.data(), k.data(), v.data(), rs, ref.data());
        const auto o = test::from_half(d_o.download());
        double err = 0.0;
        for (int i = 0; i < C; ++i) err = std::isfinite(o[i]) ? std::max(err, std::fabs(static_cast<double>(o[i]) - ref[i])) : 1e30;
        CHECK(err < 4e-3);
    }
}

TEST_CASE("cuda attention hazard: q.k past 65504 (head_size 64, all q and k 32) gives the mean of v") {
    const int H = 1, hs = 64, S = 10, C = H * hs;
    std::mt19937 rng(7);
    std::vector<float> qkv(3 * C, 32.0f), k(static_cast<size_t>(S) * C, 32.0f);
    const auto v = test::round_half(test::random_vec(static_cast<size_t>(S) * C, rng));
    DeviceBuffer<uint16_t> d_q(test::to_half(qkv)), d_k(test::to_half(k)), d_v(test::to_half(v)), d_o(C);
    DeviceBuffer<int> d_n(std::vector<int>{S});
    cuda::AttentionShape s;
    s.T = 1;
    s.n_head = H;
    s.head_size = hs;
    s.S = S;
    s.ldq = 3 * C;
    s.scale = 0.125f;
    for (const bool decode : {true, false}) {
        CAPTURE(decode);
        if (decode) {
            cuda::attention_decode(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), nullptr, as_half(d_o), nullptr);
        } else {
            cuda::attention_prefill(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), as_half(d_o), nullptr);
        }
        const auto o = test::from_half(d_o.download());
        int bad = 0;
        for (int d = 0; d < hs; ++d) {
            double mean = 0.0;
            for (int j = 0; j < S; ++j) mean += v[static_cast<size_t>(j) * C + d];
            mean /= S;
            bad += !(std::isfinite(o[d]) && std::fabs(o[d] - mean) < 2e-3);
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("cuda attention hazard: a query with every key masked gives 0, not NaN") {
    const int H = 2, hs = 32, S = 8, C = H * hs;
    std::vector<float> ones(static_cast<size_t>(S) * 3 * C, 1.0f);
    DeviceBuffer<uint16_t> d_q(test::to_half(ones)), d_k(test::to_half(ones)), d_v(test::to_half(ones)), d_o(C);
    DeviceBuffer<int> d_n(std::vector<int>{0});
    cuda::AttentionShape s;
    s.T = 1;
    s.n_head = H;
    s.head_size = hs;
    s.S = S;
    s.ldq = 3 * C;
    s.scale = 1.0f;
    for (const bool decode : {true, false}) {
        CAPTURE(decode);
        DeviceBuffer<uint16_t> d_out(std::vector<uint16_t>(C, 0x7e00));  // start from NaN
        if (decode) {
            cuda::attention_decode(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), nullptr, as_half(d_out), nullptr);
        } else {
            cuda::attention_prefill(as_half(d_q), as_half(d_k), as_half(d_v), s, d_n.get(), as_half(d_out), nullptr);
        }
        const auto o = test::from_half(d_out.download());
        int bad = 0;
        for (float x : o) bad += !(x == 0.0f);
        CHECK(bad == 0);
    }
}

TEST_CASE("cuda kv_store: K and V parts of qkv land in cache rows row0.., rows past S are skipped") {
    const int T = 3, C = 8, S = 6;
    std::vector<float> qkv(static_cast<size_t>(T) * 3 * C);
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i);
    DeviceBuffer<uint16_t> d_qkv(test::to_half(qkv)), d_k(std::vector<uint16_t>(S * C, 0)), d_v(std::vector<uint16_t>(S * C, 0));
    DeviceBuffer<int> d_row(std::vector<int>{4});  // rows 4, 5; row 6 is past S
    cuda::kv_store(as_half(d_qkv), T, C, S, d_row.get(), as_half(d_k), as_half(d_v), nullptr);
    const auto k = test::from_half(d_k.download()), v = test::from_half(d_v.download());
    int bad = 0;
    for (int r = 0; r < S; ++r) {
        for (int i = 0; i < C; ++i) {
            const int t = r - 4;
            const float want_k = t >= 0 && t < 2 ? qkv[static_cast<size_t>(t) * 3 * C + C + i] : 0.0f;
            const float want_v = t >= 0 && t < 2 ? qkv[static_cast<size_t>(t) * 3 * C + 2 * C + i] : 0.0f;
            bad += k[static_cast<size_t>(r) * C + i] != want_k;
            bad += v[static_cast<size_t>(r) * C + i] != want_v;
        }
    }
    CHECK(bad == 0);
}

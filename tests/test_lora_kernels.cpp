// Backward kernels of fine-tuning: each against its plain reference on random data, and each
// reference against central finite differences of the forward it differentiates.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "converter/quantize.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/lora.h"
#include "kernel_test_util.h"

using namespace ember;
using namespace ember::kernels;

using ember::test::randn;

namespace {

// max |a - b| / max |b|
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double err = 0.0, mag = 1e-30;
    for (size_t i = 0; i < a.size(); ++i) {
        err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
        mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
    }
    return err / mag;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

// Central differences of the scalar f at `n_probe` random coordinates of x against grad:
// max |fd - grad| / max |grad| over the probes.
double fd_error(const std::function<double(const std::vector<float>&)>& f, std::vector<float> x, const std::vector<float>& grad,
                double h, uint32_t seed, int n_probe = 40) {
    std::mt19937 g(seed);
    double err = 0.0, mag = 1e-30;
    for (float v : grad) mag = std::max(mag, std::fabs(static_cast<double>(v)));
    for (int p = 0; p < n_probe; ++p) {
        const size_t i = g() % x.size();
        const float keep = x[i];
        x[i] = static_cast<float>(keep + h);
        const double up = f(x);
        x[i] = static_cast<float>(keep - h);
        const double down = f(x);
        x[i] = keep;
        const double fd = (up - down) / (2.0 * h);
        err = std::max(err, std::fabs(fd - grad[i]));
    }
    return err / mag;
}

}  // namespace

TEST_CASE("layernorm backward: fast vs reference, reference vs finite differences") {
    const int T = 5, C = 48;
    const float eps = 1e-5f;
    auto x = randn(T * C, 1, 2.0f);
    auto w = randn(C, 2);
    auto b = randn(C, 3);
    auto dy = randn(T * C, 4);
    std::vector<float> dx(T * C, 0.5f), ref(T * C, 0.5f);  // accumulates onto what is there
    layernorm_backward(x.data(), T, C, w.data(), eps, dy.data(), dx.data());
    layernorm_backward_ref(x.data(), T, C, w.data(), eps, dy.data(), ref.data());
    CHECK(rel_err(dx, ref) < 1e-5);
    std::vector<float> g(T * C, 0.0f);
    layernorm_backward_ref(x.data(), T, C, w.data(), eps, dy.data(), g.data());
    auto f = [&](const std::vector<float>& xv) {
        std::vector<float> y(T * C);
        layernorm_ref(xv.data(), T, C, w.data(), b.data(), eps, y.data());
        return dot(y, dy);
    };
    CHECK(fd_error(f, x, g, 1e-2, 5) < 2e-3);
}

TEST_CASE("activation backward: ReLU, GELU (erf) and GELU (tanh)") {
    const size_t n = 200;
    auto pre = randn(n, 7, 2.0f);
    auto dy = randn(n, 8);
    for (auto kind : {ActivationKind::ReLU, ActivationKind::GeluErf, ActivationKind::GeluTanh}) {
        CAPTURE(static_cast<int>(kind));
        std::vector<float> dx(n), ref(n);
        activation_backward(kind, pre.data(), dy.data(), dx.data(), n);
        activation_backward_ref(kind, pre.data(), dy.data(), ref.data(), n);
        CHECK(rel_err(dx, ref) < 1e-5);
        auto f = [&](const std::vector<float>& xv) {
            std::vector<float> y = xv;
            activation_ref(kind, y.data(), n);
            return dot(y, dy);
        };
        // keep ReLU's probes away from its kink at 0
        std::vector<float> p = pre;
        for (auto& v : p) {
            if (std::fabs(v) < 0.05f) v = 0.5f;
        }
        activation_backward_ref(kind, p.data(), dy.data(), ref.data(), n);
        CHECK(fd_error(f, p, ref, 1e-2, 9) < 2e-3);
    }
}

TEST_CASE("attention backward: fast vs reference, reference vs finite differences") {
    const int B = 2, T = 7, H = 2, hs = 8, C = H * hs;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    auto qkv = randn(static_cast<size_t>(B) * T * 3 * C, 11);
    auto dout = randn(static_cast<size_t>(B) * T * C, 12);
    std::vector<float> dq(qkv.size(), 9.0f), ref(qkv.size());
    ThreadPool pool(2);
    std::vector<float> scratch(static_cast<size_t>(pool.size()) * 2 * T);
    attention_backward(qkv.data(), dout.data(), B, T, H, hs, scale, dq.data(), scratch.data(), pool);
    attention_backward_ref(qkv.data(), dout.data(), B, T, H, hs, scale, ref.data());
    CHECK(rel_err(dq, ref) < 1e-5);
    // forward: the inference kernel's reference on each sequence (k, v copied out of qkv)
    auto f = [&](const std::vector<float>& xv) {
        std::vector<float> out(static_cast<size_t>(B) * T * C), k(T * C), v(T * C);
        for (int b = 0; b < B; ++b) {
            const float* base = xv.data() + static_cast<size_t>(b) * T * 3 * C;
            for (int t = 0; t < T; ++t) {
                for (int c = 0; c < C; ++c) {
                    k[t * C + c] = base[t * 3 * C + C + c];
                    v[t * C + c] = base[t * 3 * C + 2 * C + c];
                }
            }
            AttentionShape s;
            s.T = T;
            s.n_head = H;
            s.head_size = hs;
            s.n_keys0 = 1;
            s.ldq = 3 * C;
            s.scale = scale;
            attention_ref(base, k.data(), v.data(), s, out.data() + static_cast<size_t>(b) * T * C);
        }
        return dot(out, dout);
    };
    CHECK(fd_error(f, qkv, ref, 1e-2, 13, 60) < 2e-3);
}

TEST_CASE("linear backward to the input for f32, f16 and int8 weights") {
    ThreadPool pool(2);
    const int T = 21, N = 40, K = 96;
    auto w = randn(static_cast<size_t>(N) * K, 21, 0.1f);
    auto dy = randn(static_cast<size_t>(T) * N, 22);
    auto x = randn(static_cast<size_t>(T) * K, 23);
    const auto q = convert::quantize_int8(w.data(), N, K, 32);
    const auto h = convert::to_f16(w.data(), w.size());
    std::vector<float> rows(static_cast<size_t>(pool.size()) * K);
    for (WType type : {WType::F32, WType::F16, WType::I8}) {
        CAPTURE(static_cast<int>(type));
        WeightView v;
        v.type = type;
        v.rows = N;
        v.cols = K;
        v.data = type == WType::F32 ? static_cast<const void*>(w.data()) : type == WType::F16 ? static_cast<const void*>(h.data()) : q.q.data();
        v.scales = q.scales.data();
        v.group_size = 32;
        for (bool acc : {false, true}) {
            std::vector<float> dx(x.size(), 1.0f), ref(x.size(), 1.0f);
            linear_backward_input(dy.data(), T, v, dx.data(), acc, rows.data(), pool);
            linear_backward_input_ref(dy.data(), T, v, ref.data(), acc);
            CHECK(rel_err(dx, ref) < 1e-5);
        }
        std::vector<float> g(x.size());
        linear_backward_input_ref(dy.data(), T, v, g.data(), false);
        auto f = [&](const std::vector<float>& xv) {
            std::vector<float> y(static_cast<size_t>(T) * N);
            linear_ref(xv.data(), T, v, nullptr, y.data());
            return dot(y, dy);
        };
        CHECK(fd_error(f, x, g, 1e-2, 24) < 2e-3);
    }
}

TEST_CASE("LoRA forward and backward: fast vs reference, reference vs finite differences") {
    ThreadPool pool(2);
    for (int rank : {4, 8, 12}) {  // below, at and past one AVX register of rank
    CAPTURE(rank);
    LoraShape s;
    s.T = 9;
    s.K = 40;
    s.N = 24;
    s.r = rank;
    s.scale = 2.0f;
    auto x = randn(static_cast<size_t>(s.T) * s.K, 31);
    auto A = randn(static_cast<size_t>(s.r) * s.K, 32, 0.3f);
    auto B = randn(static_cast<size_t>(s.N) * s.r, 33, 0.3f);
    auto dy = randn(static_cast<size_t>(s.T) * s.N, 34);
    auto y0 = randn(static_cast<size_t>(s.T) * s.N, 35);
    std::vector<float> u(static_cast<size_t>(s.T) * s.r), ur(u.size()), y = y0, yr = y0;
    lora_forward(x.data(), A.data(), B.data(), s, u.data(), y.data(), pool);
    lora_forward_ref(x.data(), A.data(), B.data(), s, ur.data(), yr.data());
    CHECK(rel_err(u, ur) < 1e-5);
    CHECK(rel_err(y, yr) < 1e-5);

    std::vector<float> dA(A.size(), 0.25f), dB(B.size(), 0.25f), dx(x.size(), 0.25f), du(u.size());
    std::vector<float> rA = dA, rB = dB, rx = dx, rdu(u.size());
    lora_backward(x.data(), u.data(), dy.data(), A.data(), B.data(), s, dA.data(), dB.data(), du.data(), dx.data(), pool);
    lora_backward_ref(x.data(), ur.data(), dy.data(), A.data(), B.data(), s, rA.data(), rB.data(), rdu.data(), rx.data());
    CHECK(rel_err(dA, rA) < 1e-5);
    CHECK(rel_err(dB, rB) < 1e-5);
    CHECK(rel_err(dx, rx) < 1e-5);

    std::vector<float> gA(A.size(), 0.0f), gB(B.size(), 0.0f), gx(x.size(), 0.0f);
    lora_backward_ref(x.data(), ur.data(), dy.data(), A.data(), B.data(), s, gA.data(), gB.data(), rdu.data(), gx.data());
    auto loss = [&](const std::vector<float>& xv, const std::vector<float>& Av, const std::vector<float>& Bv) {
        std::vector<float> uu(u.size()), yy(y.size(), 0.0f);
        lora_forward_ref(xv.data(), Av.data(), Bv.data(), s, uu.data(), yy.data());
        return dot(yy, dy);
    };
    CHECK(fd_error([&](const std::vector<float>& v) { return loss(x, v, B); }, A, gA, 1e-2, 36) < 2e-3);
    CHECK(fd_error([&](const std::vector<float>& v) { return loss(x, A, v); }, B, gB, 1e-2, 37) < 2e-3);
    CHECK(fd_error([&](const std::vector<float>& v) { return loss(v, A, B); }, x, gx, 1e-2, 38) < 2e-3);
    }
}

TEST_CASE("cross-entropy: loss and gradient, fast vs reference vs finite differences") {
    const int N = 6, V = 29;
    auto logits = randn(static_cast<size_t>(N) * V, 41, 3.0f);
    std::vector<int> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 7 + 3) % V;
    std::vector<float> g = logits, r = logits;
    const double loss = cross_entropy_backward(g.data(), targets.data(), N, V);
    const double ref = cross_entropy_backward_ref(r.data(), targets.data(), N, V);
    CHECK(loss == doctest::Approx(ref).epsilon(1e-6));
    CHECK(rel_err(g, r) < 1e-5);
    auto f = [&](const std::vector<float>& xv) {
        std::vector<float> c = xv;
        return cross_entropy_backward_ref(c.data(), targets.data(), N, V);
    };
    CHECK(fd_error(f, logits, r, 1e-2, 42) < 2e-3);
    // a target far below the maximum: finite loss, no underflow to inf
    std::vector<float> far(V, 0.0f);
    far[0] = 200.0f;
    const int t1 = 1;
    CHECK(cross_entropy_backward(far.data(), &t1, 1, V) == doctest::Approx(200.0).epsilon(1e-6));
}

TEST_CASE("AdamW step and gradient clipping: fast vs double reference") {
    const size_t n = 1000;
    auto p = randn(n, 51), g = randn(n, 52), m = randn(n, 53, 0.1f), v = randn(n, 54, 0.1f);
    for (auto& x : v) x = x * x;
    AdamWParams a;
    a.lr = 3e-3f;
    a.weight_decay = 0.1f;
    for (int64_t t : {1, 2, 50}) {
        std::vector<float> p1 = p, m1 = m, v1 = v, p2 = p, m2 = m, v2 = v;
        adamw_step(p1.data(), g.data(), m1.data(), v1.data(), n, a, t);
        adamw_step_ref(p2.data(), g.data(), m2.data(), v2.data(), n, a, t);
        CHECK(rel_err(p1, p2) < 1e-6);
        CHECK(rel_err(m1, m2) < 1e-6);
        CHECK(rel_err(v1, v2) < 1e-6);
    }
    const double norm = grad_norm(g.data(), n);
    std::vector<float> gc = g;
    const float f = clip_grad_norm(gc.data(), n, norm, 0.5f * static_cast<float>(norm));
    CHECK(f == doctest::Approx(0.5).epsilon(1e-5));
    CHECK(grad_norm(gc.data(), n) == doctest::Approx(0.5 * norm).epsilon(1e-5));
    CHECK(clip_grad_norm(gc.data(), n, norm, 10.0f * static_cast<float>(norm)) == 1.0f);
}

// Each CPU kernel against its plain reference on random data, with stated tolerances.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "converter/quantize.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_choice.h"
#include "kernels/cpu/thread_pool.h"
#include "kernel_test_util.h"
#include "runtime/error.h"

using namespace ember;
using namespace ember::kernels;

using ember::test::randn;
using ember::test::max_rel;
using ember::test::nmse;

TEST_CASE("half conversion round-trips every binary16 value and rounds to nearest even") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = half_to_float(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        REQUIRE(float_to_half(f) == h);
    }
    CHECK(float_to_half(1.0f + 1.0f / 2048) == float_to_half(1.0f));  // tie -> even
    CHECK(float_to_half(65520.0f) == 0x7c00);                          // rounds past 65504 -> inf
    CHECK(half_to_float(float_to_half(5.9604645e-08f)) == doctest::Approx(5.9604645e-08f));  // smallest subnormal
}

TEST_CASE("linear matches its reference for f32, f16 and int8 weights") {
    ThreadPool pool(2);
    for (int T : {1, 3, 17}) {
        for (int K : {64, 100, 384}) {
            for (int group : {0, 32, 64, 48}) {
                const int N = 37;
                auto x = randn(static_cast<size_t>(T) * K, 1 + T + K);
                auto w = randn(static_cast<size_t>(N) * K, 2 + K, 0.05f);
                auto bias = randn(N, 3);
                std::vector<int8_t> xq(linear_scratch_xq_bytes(T, K));
                std::vector<float> xs(linear_scratch_xs_bytes(T, K, group == 0 ? K : group) / sizeof(float));
                std::vector<float> xf_buf(2 * linear_scratch_xf_floats(K) + 16);
                float* xf = xf_buf.data() + ((64 - reinterpret_cast<uintptr_t>(xf_buf.data()) % 64) % 64) / sizeof(float);
                const LinearScratch scratch{xq.data(), xs.data(), xf, linear_scratch_xf_floats(K)};
                std::vector<float> y(static_cast<size_t>(T) * N), ref(y.size());

                WeightView v;
                v.rows = N;
                v.cols = K;
                v.type = WType::F32;
                v.data = w.data();
                linear(x.data(), T, v, bias.data(), y.data(), scratch, pool);
                linear_ref(x.data(), T, v, bias.data(), ref.data());
                CHECK(max_rel(y, ref) < 1e-5);

                auto h = convert::to_f16(w.data(), w.size());
                v.type = WType::F16;
                v.data = h.data();
                linear(x.data(), T, v, nullptr, y.data(), scratch, pool);
                linear_ref(x.data(), T, v, nullptr, ref.data());
                CHECK(max_rel(y, ref) < 1e-5);

                // int8: the reference uses the dequantized weights and unquantized x, so the
                // difference is the 8-bit activation rounding: NMSE below 1e-4.
                auto q = convert::quantize_int8(w.data(), N, K, group);
                v.type = WType::I8;
                v.data = q.q.data();
                v.scales = q.scales.data();
                v.group_size = q.group_size;
                linear(x.data(), T, v, bias.data(), y.data(), scratch, pool);
                linear_ref(x.data(), T, v, bias.data(), ref.data());
                CHECK(nmse(y, ref) < 1e-4);
            }
        }
    }
}

TEST_CASE("int8 quantizer: all-zero groups, short last group, exact on representable values") {
    // Row of 10 with groups of 4: [0,0,0,0 | 127,-64,1,0 | 2,-2]
    std::vector<float> w = {0, 0, 0, 0, 127, -64, 1, 0, 2, -2};
    auto q = convert::quantize_int8(w.data(), 1, 10, 4);
    REQUIRE(q.scales.size() == 3);
    CHECK(q.scales[0] == 0.0f);
    CHECK(q.scales[1] == doctest::Approx(1.0f));
    CHECK(q.scales[2] == doctest::Approx(2.0f / 127));
    for (int i = 0; i < 4; ++i) CHECK(q.q[i] == 0);
    CHECK(q.q[4] == 127);
    CHECK(q.q[5] == -64);
    CHECK(q.q[8] == 127);
    CHECK(q.q[9] == -127);
    // group 0 and a group larger than the row both mean one group per row
    CHECK(convert::quantize_int8(w.data(), 2, 5, 0).group_size == 5);
    CHECK(convert::quantize_int8(w.data(), 2, 5, 64).group_size == 5);
    std::vector<float> bad = {1.0f, NAN};
    CHECK_THROWS_AS(convert::quantize_int8(bad.data(), 1, 2, 0), Error);
}

TEST_CASE("layernorm matches its reference, with and without bias, and on +-300 rows") {
    const int T = 5, C = 96;
    auto x = randn(T * C, 11, 3.0f);
    auto w = randn(C, 12);
    auto b = randn(C, 13);
    std::vector<float> y(T * C), ref(T * C);
    layernorm(x.data(), T, C, w.data(), b.data(), 1e-5f, y.data());
    layernorm_ref(x.data(), T, C, w.data(), b.data(), 1e-5f, ref.data());
    CHECK(max_rel(y, ref) < 1e-5);
    layernorm(x.data(), T, C, w.data(), nullptr, 1e-5f, y.data());
    layernorm_ref(x.data(), T, C, w.data(), nullptr, 1e-5f, ref.data());
    CHECK(max_rel(y, ref) < 1e-5);
    // Large equal magnitudes: a one-pass variance would cancel; outputs are +1/-1.
    std::vector<float> alt(C), ones(C, 1.0f), out(C);
    for (int c = 0; c < C; ++c) alt[c] = c % 2 ? -300.0f : 300.0f;
    layernorm(alt.data(), 1, C, ones.data(), nullptr, 1e-5f, out.data());
    for (int c = 0; c < C; ++c) CHECK(out[c] == doctest::Approx(c % 2 ? -1.0 : 1.0).epsilon(1e-6));
}

TEST_CASE("activations match their double references") {
    auto x = randn(1000, 21, 3.0f);
    for (auto kind : {ActivationKind::ReLU, ActivationKind::GeluErf, ActivationKind::GeluTanh}) {
        auto a = x, r = x;
        activation(kind, a.data(), a.size());
        activation_ref(kind, r.data(), r.size());
        CHECK(max_rel(a, r) < 1e-6);
    }
    // Values from PyTorch: F.gelu(torch.tensor([1.0, -0.5])) and approximate='tanh'.
    float v[2] = {1.0f, -0.5f};
    activation(ActivationKind::GeluErf, v, 2);
    CHECK(v[0] == doctest::Approx(0.8413447).epsilon(1e-6));
    CHECK(v[1] == doctest::Approx(-0.1542687).epsilon(1e-6));
    float u[1] = {1.0f};
    activation(ActivationKind::GeluTanh, u, 1);
    CHECK(u[0] == doctest::Approx(0.8411920).epsilon(1e-6));
}

TEST_CASE("layernorm and the activations, forward and backward, split across threads give each row's single-thread result, bit for bit") {
    // A pool whose measuring windows never close, so every dispatch splits, and one thread.
    ThreadPool split(2), one(1);
    split.set_window(1 << 30, INT64_MAX);
    const int C = 64, T = 3 * ThreadPool::row_grain(C) + 5;  // four tasks, the last short
    const auto x = randn(static_cast<size_t>(T) * C, 31, 2.0f), dy = randn(x.size(), 32);
    const auto w = randn(C, 33), b = randn(C, 34);
    std::vector<float> y2(x.size()), y1(x.size()), flat(x.size());
    layernorm(x.data(), T, C, w.data(), b.data(), 1e-5f, y2.data(), split);
    layernorm(x.data(), T, C, w.data(), b.data(), 1e-5f, y1.data(), one);
    layernorm(x.data(), T, C, w.data(), b.data(), 1e-5f, flat.data());
    CHECK(y2 == flat);
    CHECK(y1 == flat);
    std::vector<float> dx2(x.size(), 0.5f), dx1(x.size(), 0.5f);
    layernorm_backward(x.data(), T, C, w.data(), 1e-5f, dy.data(), dx2.data(), split);
    layernorm_backward(x.data(), T, C, w.data(), 1e-5f, dy.data(), dx1.data());
    CHECK(dx2 == dx1);
    // F = 100: not a multiple of any vector width, so each row ends in the scalar tail, as a
    // decode step's row does.
    const int F = 100, R = 2 * ThreadPool::row_grain(F) + 7;
    const auto h = randn(static_cast<size_t>(R) * F, 35, 3.0f), dh = randn(h.size(), 36);
    for (auto kind : {ActivationKind::ReLU, ActivationKind::GeluErf, ActivationKind::GeluTanh}) {
        auto a2 = h, rows = h;
        activation(kind, a2.data(), R, F, split);
        for (int r = 0; r < R; ++r) activation(kind, rows.data() + static_cast<size_t>(r) * F, F);
        CHECK(a2 == rows);
        std::vector<float> g2(h.size()), g1(h.size());
        activation_backward(kind, h.data(), dh.data(), g2.data(), R, F, split);
        activation_backward(kind, h.data(), dh.data(), g1.data(), h.size());
        CHECK(g2 == g1);
    }
    CHECK(split.solo_dispatches() == 0);
    CHECK(split.dispatches() > 0);
}

TEST_CASE("attention matches its reference for prefill spans and ring decode") {
    ThreadPool pool(2);
    const int H = 4, hs = 16, C = H * hs, S = 24;
    auto k = randn(S * C, 31);
    auto v = randn(S * C, 32);
    std::vector<float> scores(2 * S);
    struct Case {
        int T, n_keys0;
    };
    for (Case cs : {Case{8, 1}, Case{1, 9}, Case{5, 20}, Case{1, S}}) {
        auto q = randn(static_cast<size_t>(cs.T) * 3 * C, 33 + cs.T);
        AttentionShape s;
        s.T = cs.T;
        s.n_head = H;
        s.head_size = hs;
        s.n_keys0 = cs.n_keys0;
        s.ldq = 3 * C;
        s.scale = 1.0f / std::sqrt(static_cast<float>(hs));
        std::vector<float> out(static_cast<size_t>(cs.T) * C), ref(out.size());
        attention(q.data(), k.data(), v.data(), s, out.data(), scores.data(), S, pool);
        attention_ref(q.data(), k.data(), v.data(), s, ref.data());
        CHECK(max_rel(out, ref) < 1e-5);
    }
    // A query with no visible key gives 0, not NaN.
    AttentionShape s;
    s.T = 1;
    s.n_head = H;
    s.head_size = hs;
    s.n_keys0 = 0;
    s.ldq = C;
    s.scale = 1.0f;
    auto q = randn(C, 40);
    std::vector<float> out(C, 7.0f);
    attention(q.data(), k.data(), v.data(), s, out.data(), scores.data(), S, pool);
    for (float o : out) CHECK(o == 0.0f);
}

TEST_CASE("thread pool runs every task exactly once, on valid thread ids, over many dispatches") {
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        CHECK(pool.size() == threads);
        std::vector<std::atomic<int>> hits(1000);
        for (int round = 0; round < 200; ++round) {
            const int n = 1 + (round * 37) % 1000;
            for (int i = 0; i < n; ++i) hits[i].store(0);
            std::atomic<int> bad_thread{0};
            pool.run(n, [&](int task, int thread) {
                hits[task].fetch_add(1);
                if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
            });
            int wrong = 0;
            for (int i = 0; i < n; ++i) wrong += hits[i].load() != 1;
            REQUIRE(wrong == 0);
            REQUIRE(bad_thread.load() == 0);
        }
    }
    // More tasks than one dispatch's ticket holds run in rounds.
    ThreadPool pool(2);
    std::atomic<long> sum{0};
    const int n = ThreadPool::kMaxTasks + 5;
    pool.run(n, [&](int task, int) { sum.fetch_add(task); });
    CHECK(sum.load() == static_cast<long>(n) * (n - 1) / 2);
}

TEST_CASE("thread pool that cannot start a worker (ulimit -v) stops the ones started and throws, naming the thread") {
#ifdef EMBER_EMULATOR
    MESSAGE("SKIPPED under " EMBER_EMULATOR ": RLIMIT_AS limits the emulator, not the program");
    return;
#endif
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("skipped under AddressSanitizer: its allocator dies, not the thread's start, when the address space runs out");
    return;
#endif
    // In a child: address space for a few stacks beyond what the process maps now, then a
    // pool of 1000 threads. It used to destroy its condition variable under the workers
    // already started (blocked for good: the alarm kills the child) or abort.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::alarm(30);
        std::ifstream status("/proc/self/status");
        long long vm_kib = -1;
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("VmSize:", 0) == 0) vm_kib = std::atoll(line.c_str() + 7);
        }
        if (vm_kib <= 0) _exit(10);
        const rlim_t limit = static_cast<rlim_t>(vm_kib + 48 * 1024) * 1024;
        struct rlimit rl{limit, limit};
        if (::setrlimit(RLIMIT_AS, &rl) != 0) _exit(11);
        try {
            ThreadPool pool(1000);
            _exit(12);  // every thread started: the limit did not bite
        } catch (const std::system_error& e) {
            const std::string what = e.what();
            if (what.find("cannot start thread ") == std::string::npos || what.find(" of 1000") == std::string::npos) _exit(13);
        }
        ThreadPool after(2);  // the process goes on
        std::atomic<int> sum{0};
        after.run(2, [&](int task, int) { sum += task + 1; });
        _exit(sum.load() == 3 ? 0 : 14);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CAPTURE(status);
    REQUIRE(WIFEXITED(status));  // not killed by the alarm (a hang) or SIGABRT
    if (WEXITSTATUS(status) == 12) {
        MESSAGE("skipped: 1000 threads fit in 48 MiB more address space here (small stacks)");
        return;
    }
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("thread pool parallel_for covers 0 to n - 1 once, in ranges that are multiples of the grain but the last") {
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<std::atomic<int>> hits(700);
        for (int round = 0; round < 120; ++round) {
            const int n = 1 + (round * 53) % 700;
            const int grain = 1 + round % 7;
            for (int i = 0; i < n; ++i) hits[i].store(0);
            std::atomic<int> bad{0}, ranges{0};
            pool.parallel_for(n, grain, [&](int begin, int end, int thread) {
                ranges.fetch_add(1);
                if (begin >= end || begin % grain != 0 || (end != n && end % grain != 0)) bad.fetch_add(1);
                if (thread < 0 || thread >= threads) bad.fetch_add(1);
                for (int i = begin; i < end; ++i) hits[i].fetch_add(1);
            });
            int wrong = 0;
            for (int i = 0; i < n; ++i) wrong += hits[i].load() != 1;
            REQUIRE(wrong == 0);
            REQUIRE(bad.load() == 0);
            REQUIRE(ranges.load() <= threads * ThreadPool::kPiecesPerThread);
        }
    }
}

namespace {
// Idle clocks for the thread pool's retry rule: one that counts a whole idle core (every
// back-off ends in a retry), one that never moves (no CPU was ever idle: no retry).
double always_idle() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double never_idle() { return 0.0; }
}  // namespace

TEST_CASE("thread pool runs on the caller alone while its worker is slower than none, then measures again") {
    using std::chrono::milliseconds;
    ThreadPool pool(2);
    pool.set_idle_clock(&always_idle);  // this test is about the measuring, not the idle check
    // A worker that sleeps in every task: what a worker descheduled by another process costs.
    // The caller's tasks take 20 us each, so that the worker claims one in every dispatch (a
    // dispatch the caller runs alone is not measured).
    std::vector<std::atomic<int>> hits(8);
    auto dispatch = [&] {
        for (auto& h : hits) h.store(0);
        pool.run(8, [&](int task, int thread) {
            if (thread != 0) {
                std::this_thread::sleep_for(milliseconds(1));
            } else {
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                while (std::chrono::steady_clock::now() < until) {
                }
            }
            hits[task].fetch_add(1);
        });
        int wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        return wrong;
    };
    CHECK(pool.solo_dispatches() == 0);
    int wrong = 0;
    // A window needs kWindow measured dispatches and kWindowNs of them; on a busy machine (ctest
    // -j) the worker misses some dispatches, so the bound is generous: about 3 s at most.
    for (int i = 0; i < 2000 && pool.solo_dispatches() == 0; ++i) wrong += dispatch();
    CHECK(wrong == 0);
    REQUIRE(pool.solo_dispatches() == 1);  // one window measured slower: the next dispatch ran alone
    // No idle CPU while these run, so that a back-off that ends among them (the machine busy
    // with other tests) is extended rather than retried: all 10 stay on the caller.
    pool.set_idle_clock(&never_idle);
    for (int i = 0; i < 10; ++i) wrong += dispatch();
    CHECK(wrong == 0);
    CHECK(pool.solo_dispatches() == 11);
    // After the back-off (20 ms, or 40 if one was extended) the workers are measured again: the
    // next dispatch is not solo.
    pool.set_idle_clock(&always_idle);
    std::this_thread::sleep_for(milliseconds(2 * ThreadPool::kMinBackoffNs / 1'000'000 + 5));
    wrong += dispatch();
    CHECK(wrong == 0);
    CHECK(pool.solo_dispatches() == 11);
    // parallel_for while backing off: the caller gets the whole range in one call.
    for (int i = 0; i < 2000 && pool.solo_dispatches() == 11; ++i) wrong += dispatch();
    REQUIRE(pool.solo_dispatches() == 12);
    pool.set_idle_clock(&never_idle);
    const long dispatches = pool.dispatches();
    std::atomic<int> calls{0};
    pool.parallel_for(100, 4, [&](int begin, int end, int thread) {
        calls.fetch_add(1);
        CHECK(begin == 0);
        CHECK(end == 100);
        CHECK(thread == 0);
    });
    CHECK(calls.load() == 1);
    CHECK(pool.dispatches() == dispatches + 1);
    CHECK(pool.solo_dispatches() == 13);
}

TEST_CASE("thread pool counts the dispatches its worker had no part in: dispatching that costs more than the tasks sends it to the caller alone") {
    ThreadPool pool(2);
    pool.set_idle_clock(&never_idle);  // no retry within this test
    pool.set_window(8, 0);
    // Tasks of a few nanoseconds, a millisecond apart: the worker has gone to sleep (it spins
    // about half a millisecond) and the caller runs both tasks before it wakes. Each dispatch
    // paid for publishing and waking and gained nothing, which is what a worker too far away
    // to claim a task in time costs (on some VMs a cache line takes microseconds between
    // vCPUs). A pool that measured only the dispatches its worker took part in never went solo.
    std::atomic<int> ran{0};
    for (int i = 0; i < 200 && pool.solo_dispatches() == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        pool.run(2, [&](int, int) { ran.fetch_add(1); });
    }
    CHECK(pool.solo_dispatches() == 1);
    CHECK(ran.load() == 2 * static_cast<int>(pool.dispatches()));
}

TEST_CASE("ThreadChoice: probes alone against the pool, keeps the faster, and probes less often while the same one wins clearly") {
    ThreadChoice c;
    // One probe: a pool step to wake the workers (not counted), then alone and pool in turn.
    auto probe = [&c](int64_t alone_ns, int64_t pool_ns) {
        REQUIRE(c.steps_to_probe() == 0);
        CHECK_FALSE(c.alone_next());
        c.record(1'000'000);  // the warm-up step: its time does not count
        for (int i = 0; i < ThreadChoice::kPairs; ++i) {
            CHECK(c.alone_next());
            c.record(alone_ns);
            CHECK_FALSE(c.alone_next());
            c.record(pool_ns);
        }
    };
    // Between probes, every step takes the choice; after steps_to_probe() of them, a probe.
    auto steps_between = [&c](bool alone) {
        const int64_t n = c.steps_to_probe();
        for (int64_t i = 0; i < n; ++i) {
            REQUIRE(c.alone_next() == alone);
            c.record(1000);
        }
        return n;
    };
    CHECK(c.steps_to_probe() == 0);  // the session's first decode step starts a probe
    probe(1000, 2000);               // alone twice as fast: alone, next probe after 4 * kMinPeriod
    CHECK(c.alone());
    CHECK(c.probes() == 1);
    CHECK(steps_between(true) == 4 * ThreadChoice::kMinPeriod);
    probe(1000, 2000);               // the same winner, clearly: 4x as long
    CHECK(steps_between(true) == 16 * ThreadChoice::kMinPeriod);
    probe(1000, 2000);
    CHECK(steps_between(true) == ThreadChoice::kMaxPeriod);
    probe(1000, 2000);
    CHECK(steps_between(true) == ThreadChoice::kMaxPeriod);  // at most kMaxPeriod
    probe(3000, 1000);               // the pool wins clearly now: back to 4 * kMinPeriod
    CHECK_FALSE(c.alone());
    CHECK(steps_between(false) == 4 * ThreadChoice::kMinPeriod);
    probe(1100, 1000);               // within kClear: the faster (the pool), and a probe soon
    CHECK_FALSE(c.alone());
    CHECK(steps_between(false) == ThreadChoice::kMinPeriod);
    probe(1000, 1100);               // within kClear the other way: alone, soon again
    CHECK(c.alone());
    CHECK(steps_between(true) == ThreadChoice::kMinPeriod);
    CHECK(c.probes() == 7);
}

TEST_CASE("thread pool retries its workers after a back-off only if the CPUs were idle during it") {
    using std::chrono::milliseconds;
    ThreadPool pool(2);
    pool.set_idle_clock(&never_idle);
    std::atomic<int> ran{0};
    // A worker that sleeps in every task, as in the test above, until the pool goes solo.
    auto dispatch = [&] {
        pool.run(8, [&](int, int thread) {
            if (thread != 0) {
                std::this_thread::sleep_for(milliseconds(1));
            } else {
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                while (std::chrono::steady_clock::now() < until) {
                }
            }
            ran.fetch_add(1);
        });
    };
    for (int i = 0; i < 2000 && pool.solo_dispatches() == 0; ++i) dispatch();
    REQUIRE(pool.solo_dispatches() == 1);
    // The back-off passes with no idle CPU time: the next dispatch stays on the caller and the
    // back-off starts again (doubled), with no retry.
    std::this_thread::sleep_for(milliseconds(ThreadPool::kMinBackoffNs / 1'000'000 + 5));
    dispatch();
    CHECK(pool.skipped_retries() == 1);
    CHECK(pool.solo_dispatches() == 2);
    // Still no idle time: back-offs go on being extended (40, 80, ... 640 ms), but after
    // kMaxSkippedRetries of them in a row the workers are tried anyway (about 3 s).
    long solo = pool.solo_dispatches();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(10));
        dispatch();
        if (pool.solo_dispatches() == solo) break;  // this one was not solo: a retry
        solo = pool.solo_dispatches();
    }
    CHECK(pool.solo_dispatches() == solo);
    CHECK(pool.skipped_retries() == ThreadPool::kMaxSkippedRetries);
    CHECK(ran.load() == 8 * (static_cast<int>(pool.dispatches())));
}

TEST_CASE("thread pool idle clock: /proc/stat's idle time of this process's CPUs, in seconds, never decreasing") {
    const auto t0 = std::chrono::steady_clock::now();
    const double a = ThreadPool::proc_stat_idle_seconds();
    if (a < 0.0) {
        // Some containers renumber /proc/stat's CPUs or fake its counters: the pool then retries
        // after every back-off (thread_pool.h), and there is nothing here to check.
        MESSAGE("skipped: /proc/stat does not describe this process's CPUs (a container?)");
        return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double b = ThreadPool::proc_stat_idle_seconds();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(b >= a);
    // No more idle time than every CPU this process may use idle all along, plus two clock
    // ticks (10 ms at USER_HZ 100) each for the readings' rounding.
    const double cpus = ThreadPool::default_threads();
    CHECK(b - a <= cpus * (elapsed + 0.02));
}

TEST_CASE("parse_cache_size: sysfs's and a person's sizes, nothing else") {
    struct Case {
        const char* s;
        bool ok;
        size_t bytes;
    };
    for (const Case& c : {Case{"32768K", true, size_t{32} << 20}, Case{"32M", true, size_t{32} << 20}, Case{"32m", true, size_t{32} << 20},
                          Case{"1G", true, size_t{1} << 30}, Case{"512k", true, 512 * 1024}, Case{"4096", true, 4096}, Case{"0", true, 0},
                          Case{"", false, 0}, Case{"M", false, 0}, Case{"32x", false, 0}, Case{"32MiB", false, 0}, Case{" 32M", false, 0},
                          Case{"-1", false, 0}, Case{"+32M", false, 0}, Case{"0x20M", false, 0}, Case{"3.5M", false, 0},
                          Case{"281474976710656", true, size_t{1} << 48}, Case{"281474976710657", false, 0}, Case{"262145G", false, 0},
                          Case{"99999999999999999999999", false, 0}}) {
        CAPTURE(c.s);
        size_t got = 12345;
        CHECK(parse_cache_size(c.s, &got) == c.ok);
        CHECK(got == (c.ok ? c.bytes : size_t{12345}));  // untouched when refused
    }
    CHECK_FALSE(parse_cache_size(nullptr, nullptr));
}

TEST_CASE("last_level_cache_bytes: EMBER_LLC_BYTES where it is a size, sysfs where it is not") {
    const char* before = std::getenv("EMBER_LLC_BYTES");
    const std::string saved = before ? before : "";
    unsetenv("EMBER_LLC_BYTES");
    const size_t sysfs = last_level_cache_bytes();
    CHECK(std::string(last_level_cache_source()) == (sysfs ? "sysfs" : "unknown"));
    setenv("EMBER_LLC_BYTES", "3M", 1);
    CHECK(last_level_cache_bytes() == size_t{3} << 20);
    CHECK(std::string(last_level_cache_source()) == "EMBER_LLC_BYTES");
    setenv("EMBER_LLC_BYTES", "0", 1);  // unknown, whatever sysfs says
    CHECK(last_level_cache_bytes() == 0);
    setenv("EMBER_LLC_BYTES", "32 M", 1);  // not a size: ignored (the programs warn, cli/option_checks.h)
    CHECK(last_level_cache_bytes() == sysfs);
    if (before) {
        setenv("EMBER_LLC_BYTES", saved.c_str(), 1);
    } else {
        unsetenv("EMBER_LLC_BYTES");
    }
}

TEST_CASE("last_level_cache_bytes reads sysfs: at least the L1 data cache where sysfs describes one") {
    if (std::getenv("EMBER_LLC_BYTES")) {
        MESSAGE("skipped: EMBER_LLC_BYTES is set");
        return;
    }
    // cpu0's first cache index is its L1 data cache on x86-64 and on the aarch64 kernels that
    // describe caches at all; a parse that fails returns 0, below it.
    std::ifstream size_file("/sys/devices/system/cpu/cpu0/cache/index0/size");
    std::string size;
    if (!(size_file >> size)) {
        MESSAGE("no sysfs cache description here: last_level_cache_bytes() is ", last_level_cache_bytes());
        CHECK(last_level_cache_bytes() == 0);
        return;
    }
    const size_t l1 = std::stoull(size) * (size.back() == 'K' ? 1024u : size.back() == 'M' ? 1024u * 1024u : 1u);
    CHECK(l1 > 0);
    CHECK(last_level_cache_bytes() >= l1);
}

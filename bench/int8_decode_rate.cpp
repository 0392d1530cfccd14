// How fast linear()'s int8 decode kernels (T = 1, one thread) read their weights, against a plain
// stream read of the same bytes in the same run (the peer): is decode bound by the kernel's
// arithmetic or by the memory it reads from? Each set runs twice: as the runtime hands over a
// model larger than the last-level cache, and with the cache_resident hint it sets for one that
// fits (kernels/cpu/weights.h; on AVX2 the 8-row kernel). Weights of the lecture's full configuration's fc
// shape (W [1536, 384], groups of 64), in working sets that fit L1 (64 rows), L2 (1024 rows,
// 384 KiB), L3 (20 matrices, 11.3 MiB, about a decode's weights) and DRAM (400 matrices,
// 225 MiB, larger than any L3 here). For each: the median and best of 15 passes in GB/s.
// Built against the kernels library:
//   g++ -O3 -march=native -std=c++17 -I. bench/int8_decode_rate.cpp build/kernels/libember_kernels.a -pthread \
//       -o bench/out/int8_decode_rate && bench/out/int8_decode_rate
// (bench/decode_kernel.sh does both.) The kernel timed is cpu_level()'s: see `ember bench`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/linear.h"

namespace {

using namespace ember::kernels;
using Clock = std::chrono::steady_clock;

constexpr int kK = 384, kGroup = 64, kPasses = 15;

typedef int32_t v8i __attribute__((vector_size(32)));

// Sums every byte-quad of [p, p + n) as int32 lanes: the loads are the work.
int32_t stream_sum(const int8_t* p, size_t n) {
    v8i a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (size_t i = 0; i + 128 <= n; i += 128) {
        v8i x0, x1, x2, x3;
        std::memcpy(&x0, p + i, 32), std::memcpy(&x1, p + i + 32, 32);
        std::memcpy(&x2, p + i + 64, 32), std::memcpy(&x3, p + i + 96, 32);
        a0 += x0, a1 += x1, a2 += x2, a3 += x3;
    }
    const v8i a = (a0 + a1) + (a2 + a3);
    int32_t s = 0;
    for (int l = 0; l < 8; ++l) s += a[l];
    return s;
}

struct Rate {
    double median, best;
};

template <typename F>
Rate time_passes(double bytes_per_call, F&& call) {
    const int calls = static_cast<int>(std::max(20.0, 256e6 / bytes_per_call));  // >= 256 MB per pass
    std::vector<double> gbs;
    for (int p = 0; p < kPasses; ++p) {
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) call();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        gbs.push_back(bytes_per_call * calls / s / 1e9);
    }
    std::sort(gbs.begin(), gbs.end());
    return {gbs[kPasses / 2], gbs.back()};
}

}  // namespace

int main() {
    std::mt19937 rng(7);
    ThreadPool pool(1);
    std::vector<float> x(kK), y(1536);
    for (float& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    std::vector<int8_t> xq(linear_scratch_xq_bytes(1, kK));
    std::vector<float> xs(linear_scratch_xs_bytes(1, kK, kGroup) / sizeof(float));
    const LinearScratch scratch{xq.data(), xs.data()};
    std::printf("int8 decode kernel (%s, 1 thread) against a stream read of the same bytes; W [rows, %d], groups of %d\n",
                linear_kernel_name(WType::I8), kK, kGroup);
    std::printf("%-26s %10s %10s %10s %10s %10s %10s\n", "working set", "kernel", "(best)", "hint on", "(best)", "stream",
                "(best)");
    struct Set {
        const char* name;
        int rows, mats;
    };
    for (const Set& set : {Set{"L1: 64 rows, 24 KiB", 64, 1}, Set{"L2: 1024 rows, 384 KiB", 1024, 1},
                           Set{"L3: 20 x 1536 rows, 11 MiB", 1536, 20}, Set{"DRAM: 400 x 1536 rows, 225 MiB", 1536, 400}}) {
        const size_t bytes = static_cast<size_t>(set.rows) * kK;
        std::vector<int8_t> w(bytes * set.mats);
        std::vector<float> scales(static_cast<size_t>(set.rows) * set.mats * (kK / kGroup));
        for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        for (float& s : scales) s = 1e-3f * static_cast<float>(1 + rng() % 100);
        std::vector<WeightView> views(set.mats);
        for (int m = 0; m < set.mats; ++m) {
            WeightView& v = views[m];
            v.type = WType::I8;
            v.rows = set.rows;
            v.cols = kK;
            v.group_size = kGroup;
            v.data = w.data() + bytes * m;
            v.scales = scales.data() + static_cast<size_t>(set.rows) * (kK / kGroup) * m;
        }
        const double total = static_cast<double>(bytes) * set.mats;
        auto run_all = [&] {
            for (const WeightView& v : views) linear(x.data(), 1, v, nullptr, y.data(), scratch, pool);
        };
        const Rate off = time_passes(total, run_all);
        for (WeightView& v : views) v.cache_resident = true;
        const Rate on = time_passes(total, run_all);
        volatile int32_t sink = 0;
        const Rate stream = time_passes(total, [&] { sink = sink + stream_sum(w.data(), w.size()); });
        std::printf("%-26s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", set.name, off.median, off.best, on.median, on.best,
                    stream.median, stream.best);
    }
    return 0;
}

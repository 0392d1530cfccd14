// Memory read bandwidth of this machine: threads stream-sum disjoint parts of a buffer
// (default 1 GiB: DRAM; a model-sized buffer measures the caches a decode reads from), best
// of 5 passes. Each pass sweeps the buffer enough times to read at least 256 MiB, all threads
// started together at a barrier and timed from there, so thread start-up (tens of microseconds,
// as long as one sweep of a 12 MiB buffer) is not counted. Prints one JSON line per thread
// count. Built and run by bench/gpt2.sh, targets.sh and vs_llama.sh:
//   g++ -O3 -march=native -pthread bench/membw.cpp -o bench/out/membw && bench/out/membw [MiB]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Eight vectors of 8 floats (GCC/Clang vector extensions: AVX on x86, two NEON registers per
// vector on aarch64) as independent accumulators, so the adds never wait on each other: the
// loads are the work, and the sum keeps the compiler from dropping them.
typedef float v8 __attribute__((vector_size(32)));

v8 load(const float* p) {
    v8 x;
    std::memcpy(&x, p, sizeof x);
    return x;
}

float stream_sum(const float* p, size_t n) {
    v8 a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 += load(p + i), a1 += load(p + i + 8), a2 += load(p + i + 16), a3 += load(p + i + 24);
        a4 += load(p + i + 32), a5 += load(p + i + 40), a6 += load(p + i + 48), a7 += load(p + i + 56);
    }
    const v8 a = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    float s = 0.0f;
    for (int l = 0; l < 8; ++l) s += a[l];
    for (; i < n; ++i) s += p[i];
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
    if (mib == 0) {
        std::fprintf(stderr, "usage: membw [MiB >= 1]\n");
        return 2;
    }
    const size_t n = mib * (size_t{1} << 20) / sizeof(float);
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023) * 1e-3f;
    const int sweeps = static_cast<int>(std::max<size_t>(1, 256 / mib));
    const unsigned max_threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned threads = 1; threads <= max_threads; threads *= 2) {
        double best = 0.0;
        volatile float sink = 0.0f;
        for (int pass = 0; pass < 5; ++pass) {
            std::vector<float> sums(threads);
            std::atomic<unsigned> ready{0};
            std::atomic<bool> go{false};
            std::vector<double> took(threads);
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) {
                pool.emplace_back([&, t] {
                    const size_t b = n * t / threads, e = n * (t + 1) / threads;
                    ready.fetch_add(1);
                    while (!go.load(std::memory_order_acquire)) {
                    }
                    const auto t0 = std::chrono::steady_clock::now();
                    float s = 0.0f;
                    for (int r = 0; r < sweeps; ++r) s += stream_sum(buf.data() + b, e - b);
                    sums[t] = s;
                    took[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                });
            }
            while (ready.load() < threads) {
            }
            go.store(true, std::memory_order_release);
            for (auto& th : pool) th.join();
            for (float x : sums) sink = sink + x;
            const double s = *std::max_element(took.begin(), took.end());  // the pass ends with its slowest thread
            best = std::max(best, static_cast<double>(n * sizeof(float)) * sweeps / s / 1e9);
        }
        std::printf("{\"threads\":%u,\"read_GB_s\":%.2f,\"buffer_MiB\":%zu,\"sweeps\":%d}\n", threads, best, mib, sweeps);
    }
    return 0;
}

// Memory read bandwidth of this machine: threads stream-sum disjoint parts of a buffer far
// larger than the caches (default 1 GiB), best of 5 passes. Prints one JSON line per thread
// count. Built and run by bench/gpt2.sh:
//   g++ -O2 -march=native -pthread bench/membw.cpp -o bench/out/membw && bench/out/membw [MiB]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// Sum of n floats with 8 independent accumulators (the loads are the work; the sum keeps
// the compiler from dropping them).
float stream_sum(const float* p, size_t n) {
    float acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
    }
    for (; i < n; ++i) acc[0] += p[i];
    float s = 0.0f;
    for (float a : acc) s += a;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
    const size_t n = mib * (size_t{1} << 20) / sizeof(float);
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023) * 1e-3f;
    const unsigned max_threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned threads = 1; threads <= max_threads; threads *= 2) {
        double best = 0.0;
        volatile float sink = 0.0f;
        for (int pass = 0; pass < 5; ++pass) {
            std::vector<float> sums(threads);
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) {
                pool.emplace_back([&, t] {
                    const size_t b = n * t / threads, e = n * (t + 1) / threads;
                    sums[t] = stream_sum(buf.data() + b, e - b);
                });
            }
            for (auto& th : pool) th.join();
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            for (float x : sums) sink = sink + x;
            best = std::max(best, static_cast<double>(n * sizeof(float)) / s / 1e9);
        }
        std::printf("{\"threads\":%u,\"read_GB_s\":%.2f,\"buffer_MiB\":%zu}\n", threads, best, mib);
    }
    return 0;
}

// The time a cache line takes from one CPU to another and back: two threads pinned to CPUs A
// and B hand a counter back and forth through one atomic (release store, acquire spin).
// A thread pool's dispatch costs a few such trips (publish, claim, done), so this says how much
// a worker on B costs the caller on A per dispatch: about 0.1 to 0.2 us between the cores of
// one chip; on a VM it can be 1 to 4 us, minute by minute, as the host places the vCPUs.
//   bench/out/roundtrip [A B] [trips]   (default CPUs 0 and 1, 200000 trips)
// Prints one JSON line: {"cpu_a":A,"cpu_b":B,"trips":N,"roundtrip_ns":X}.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    const int a = argc > 2 ? std::atoi(argv[1]) : 0;
    const int b = argc > 2 ? std::atoi(argv[2]) : 1;
    const long trips = argc > 3 ? std::atol(argv[3]) : 200000;
    if (a < 0 || b < 0 || a >= CPU_SETSIZE || b >= CPU_SETSIZE || trips < 1) {
        std::fprintf(stderr, "usage: roundtrip [CPU_A CPU_B] [TRIPS >= 1]\n");
        return 1;
    }
    if (!pin(a)) {
        std::fprintf(stderr, "roundtrip: cannot run on CPU %d\n", a);
        return 1;
    }
    alignas(64) static std::atomic<long> line{0};
    bool pinned_b = true;
    std::thread other([&] {
        pinned_b = pin(b);
        for (long i = 0; i < trips; ++i) {
            while (line.load(std::memory_order_acquire) != 2 * i + 1) {
            }
            line.store(2 * i + 2, std::memory_order_release);
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < trips; ++i) {
        line.store(2 * i + 1, std::memory_order_release);
        while (line.load(std::memory_order_acquire) != 2 * i + 2) {
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    other.join();
    if (!pinned_b) {
        std::fprintf(stderr, "roundtrip: cannot run on CPU %d\n", b);
        return 1;
    }
    std::printf("{\"cpu_a\":%d,\"cpu_b\":%d,\"trips\":%ld,\"roundtrip_ns\":%.0f}\n", a, b, trips, s / trips * 1e9);
    return 0;
}

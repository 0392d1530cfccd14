#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EMBER_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define EMBER_CPU_RELAX() asm volatile("yield")
#else
#define EMBER_CPU_RELAX() ((void)0)
#endif

namespace ember::kernels {

namespace {

constexpr int kSpinRounds = 200000;  // about a millisecond of polling before a worker sleeps
constexpr uint64_t kField = (1u << 20) - 1;

uint32_t gen_of(uint64_t t) { return static_cast<uint32_t>(t >> 40); }
int count_of(uint64_t t) { return static_cast<int>((t >> 20) & kField); }
int next_of(uint64_t t) { return static_cast<int>(t & kField); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    workers_.reserve(n_threads - 1);
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
    // The cores this process may run on (taskset, cgroups' cpusets), not all of the machine's.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

// Claims and runs tasks of `generation` until none is left or another generation began.
void ThreadPool::drain(uint32_t generation, int thread) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    for (;;) {
        if (gen_of(t) != generation || next_of(t) >= count_of(t)) return;
        if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
        // Claimed: the dispatcher of `generation` waits for this task, so fn_ and ctx_ hold.
        fn_(ctx_, next_of(t), thread);
        done_tasks_.fetch_add(1, std::memory_order_release);
        t = ticket_.load(std::memory_order_acquire);
    }
}

void ThreadPool::dispatch(int n_tasks, TaskFn fn, void* ctx) {
    fn_ = fn;
    ctx_ = ctx;
    generation_ = (generation_ + 1) & 0xffffffu;
    done_tasks_.store(0, std::memory_order_relaxed);
    // seq_cst publish, paired with the sleepers_ check below and the workers' wait predicate.
    ticket_.store((static_cast<uint64_t>(generation_) << 40) | (static_cast<uint64_t>(n_tasks) << 20));
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
    drain(generation_, 0);
    while (done_tasks_.load(std::memory_order_acquire) < n_tasks) EMBER_CPU_RELAX();
}

void ThreadPool::work_loop(int thread) {
    uint32_t seen = 0;
    for (;;) {
        int spins = 0;
        uint64_t t;
        // Wait for a generation with tasks left.
        while (gen_of(t = ticket_.load(std::memory_order_acquire)) == seen || next_of(t) >= count_of(t)) {
            if (stop_.load(std::memory_order_relaxed)) return;
            if (++spins < kSpinRounds) {
                EMBER_CPU_RELAX();
                continue;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] {
                const uint64_t u = ticket_.load();
                return stop_.load() || (gen_of(u) != seen && next_of(u) < count_of(u));
            });
            sleepers_.fetch_sub(1);
            spins = 0;
        }
        seen = gen_of(t);
        drain(seen, thread);
    }
}

}  // namespace ember::kernels

#include "kernels/cpu/thread_pool.h"

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
constexpr int kSpinRounds = 200000;  // ~tens of microseconds before a worker sleeps
}

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    workers_.reserve(n_threads - 1);
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::drain(int thread) {
    for (;;) {
        const int i = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (i >= n_tasks_) return;
        fn_(ctx_, i, thread);
        done_tasks_.fetch_add(1, std::memory_order_release);
    }
}

void ThreadPool::dispatch(int n_tasks, TaskFn fn, void* ctx) {
    fn_ = fn;
    ctx_ = ctx;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    done_tasks_.store(0, std::memory_order_relaxed);
    finished_workers_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1);  // seq_cst: pairs with the sleepers_ check below
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
    drain(0);
    const int n_workers = static_cast<int>(workers_.size());
    while (done_tasks_.load(std::memory_order_acquire) < n_tasks ||
           finished_workers_.load(std::memory_order_acquire) < n_workers) {
        EMBER_CPU_RELAX();
    }
}

void ThreadPool::work_loop(int thread) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        uint64_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (++spins < kSpinRounds) {
                EMBER_CPU_RELAX();
                continue;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
            sleepers_.fetch_sub(1);
            spins = 0;
        }
        seen = g;
        if (stop_.load()) return;
        drain(thread);
        finished_workers_.fetch_add(1, std::memory_order_release);
    }
}

}  // namespace ember::kernels

// A fixed pool of worker threads for the CPU kernels: created once (at session start),
// it runs `fn(task, thread)` for task in [0, n_tasks) across the workers and the calling
// thread (thread in [0, size()), 0 = the caller), and returns when all are done.
// Dispatch allocates nothing, so it is safe per token. Idle workers spin briefly, then
// sleep on a condition variable.
//
// Tasks are claimed from one atomic ticket that packs (dispatch generation, task count,
// next task): a worker that wakes late finds another generation in the ticket and claims
// nothing, so the caller never waits for a worker that has no task (an oversubscribed
// machine cannot stall a dispatch on a descheduled idle worker).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ember::kernels {

class ThreadPool {
public:
    // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Most tasks one dispatch may hold.
    static constexpr int kMaxTasks = (1 << 20) - 1;

    // Runs f(task, thread) for every task in [0, n_tasks); f is any callable (int, int).
    // A thread runs one task at a time, so per-thread scratch indexed by `thread` is safe.
    template <typename F>
    void run(int n_tasks, F&& f) {
        if (n_tasks <= 0) return;
        if (workers_.empty() || n_tasks == 1) {
            for (int i = 0; i < n_tasks; ++i) f(i, 0);
            return;
        }
        // Rounds of at most kMaxTasks (the ticket's task field).
        for (int base = 0; base < n_tasks; base += kMaxTasks) {
            struct Shifted {
                std::remove_reference_t<F>* f;
                int base;
                void operator()(int i, int thread) const { (*f)(base + i, thread); }
            } shifted{&f, base};
            const int n = n_tasks - base < kMaxTasks ? n_tasks - base : kMaxTasks;
            dispatch(n, [](void* ctx, int i, int thread) { (*static_cast<Shifted*>(ctx))(i, thread); }, &shifted);
        }
    }

    // Splits [0, n) into at most size() contiguous ranges whose lengths are multiples of
    // `grain` (but the last) and runs f(begin, end, thread) on each: one claim per thread
    // (each contended atomic costs ~100 ns, too much per row for small per-token ops; more
    // ranges per thread measured slower in decode here).
    template <typename F>
    void parallel_for(int n, int grain, F&& f) {
        if (n <= 0) return;
        if (grain < 1) grain = 1;
        const int units = (n + grain - 1) / grain;
        const int chunks = units < size() ? units : size();
        const int per = (units + chunks - 1) / chunks * grain;
        run(chunks, [&](int c, int thread) {
            const int begin = c * per;
            const int end = begin + per < n ? begin + per : n;
            if (begin < end) f(begin, end, thread);
        });
    }

    // The number of threads to use when the caller asks for 0: the cores this process may run
    // on (sched_getaffinity: taskset, a cgroup cpuset), else std::thread::hardware_concurrency.
    static int default_threads();

private:
    using TaskFn = void (*)(void*, int, int);
    void dispatch(int n_tasks, TaskFn fn, void* ctx);
    void work_loop(int thread);
    void drain(uint32_t generation, int thread);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    // generation (24 bits) << 40 | n_tasks (20 bits) << 20 | next task (20 bits)
    std::atomic<uint64_t> ticket_{0};
    std::atomic<int> done_tasks_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stop_{false};
    uint32_t generation_ = 0;  // written by the dispatching thread only
    TaskFn fn_ = nullptr;      // valid while a task of the current generation is claimed
    void* ctx_ = nullptr;
};

}  // namespace ember::kernels

// A fixed pool of worker threads for the CPU kernels: created once (at session start),
// it runs `fn(task, thread)` for task in [0, n_tasks) across the workers and the calling
// thread (thread in [0, size()), 0 = the caller), and returns when all are done. Dispatch allocates nothing, so it is safe per token.
// Idle workers spin briefly, then sleep on a condition variable. Every worker takes part in
// every dispatch, so none can still be inside one when the next begins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
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

    // Runs f(task, thread) for every task in [0, n_tasks); f is any callable (int, int).
    // A thread runs one task at a time, so per-thread scratch indexed by `thread` is safe.
    template <typename F>
    void run(int n_tasks, F&& f) {
        if (n_tasks <= 0) return;
        if (workers_.empty() || n_tasks == 1) {
            for (int i = 0; i < n_tasks; ++i) f(i, 0);
            return;
        }
        using Fn = std::remove_reference_t<F>;
        dispatch(n_tasks, [](void* ctx, int i, int thread) { (*static_cast<Fn*>(ctx))(i, thread); },
                 const_cast<void*>(static_cast<const void*>(&f)));
    }

    // The number of threads to use when the caller asks for 0 (= all cores).
    static int default_threads();

private:
    using TaskFn = void (*)(void*, int, int);
    void dispatch(int n_tasks, TaskFn fn, void* ctx);
    void work_loop(int thread);
    void drain(int thread);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> next_task_{0};
    std::atomic<int> done_tasks_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<int> finished_workers_{0};  // workers done with the current generation
    std::atomic<bool> stop_{false};
    TaskFn fn_ = nullptr;
    void* ctx_ = nullptr;
    int n_tasks_ = 0;
};

}  // namespace ember::kernels

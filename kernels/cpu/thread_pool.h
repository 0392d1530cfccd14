// A fixed pool of worker threads for the CPU kernels: created once (at session start),
// it runs `fn(task, thread)` for task in [0, n_tasks) across the workers and the calling
// thread (thread in [0, size()), 0 = the caller), and returns when all are done.
// Dispatch allocates nothing, so it is safe per token. Idle workers spin for about half a
// millisecond, then sleep on a condition variable.
//
// Tasks are claimed from one atomic ticket that packs (dispatch generation, task count,
// next task): a worker that wakes late finds another generation in the ticket and claims
// nothing, so the caller never waits for a worker that has no task (an oversubscribed
// machine cannot stall a dispatch on a descheduled idle worker).
//
// A worker descheduled while it runs a task still stalls the caller until the OS runs it
// again (milliseconds when another process holds the core), and where the cores are far
// apart (a VM whose vCPUs exchange a cache line in 1 to 4 us, as this project's 2-vCPU EPYC
// at times) publishing, claiming and waiting can cost more than the tasks. So the caller
// times each dispatch: the time it took, all of it, against the time the caller alone would
// have taken at the rate it ran its own tasks (their run time, claims excluded, * n_tasks /
// its tasks). A dispatch the caller ran all of counts too (the workers cost it the publishing
// and gave nothing); one the workers ran all of gives no rate and is not counted. When a
// window (kWindow dispatches and kWindowNs at least, below) took longer than the
// caller alone would have, the pool runs every task on the caller
// (workers sleep) for a back-off of 20 ms, doubled on each failed or skipped retry up to
// 640 ms, then tries the workers again, but only if the CPUs it may run on were idle, during
// the back-off, for at least half a core per worker (the idle clock below: /proc/stat); else it
// stays on the caller for another back-off without trying, since a retry beside a busy core
// costs a stall. After kMaxSkippedRetries skips in a row it retries anyway, so that an idle
// clock that never moves cannot keep the workers asleep for good.
// On a quiet machine the windows pass and nothing changes.
// The estimate takes the caller's rate beside the workers for its rate alone; where the
// threads share the memory bandwidth (decode of a model larger than the caches) the caller
// alone runs faster than that, so the pool may keep workers that gain little or nothing.
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
    // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started. A worker
    // that cannot be started (no memory for its stack, the process limit) throws
    // std::system_error naming it, after the ones started are stopped.
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

    // Ranges per thread parallel_for makes. One: each claim is a contended atomic (~100 ns),
    // and 4 per thread measured 8% slower in 2-thread decode of the lecture's full config
    // (3350-3380 against 3620-3730 tok/s); a late worker's range is still claimed by the
    // caller (one ticket), and a descheduled one is handled by the measuring above.
    static constexpr int kPiecesPerThread = 1;

    // Splits [0, n) into at most kPiecesPerThread * size() contiguous ranges whose lengths are
    // multiples of `grain` (but the last), claimed one by one, and runs f(begin, end, thread)
    // on each.
    template <typename F>
    void parallel_for(int n, int grain, F&& f) {
        if (n <= 0) return;
        if (grain < 1) grain = 1;
        if (!workers_.empty() && n > grain) {
            // On the caller alone (backing off), one range, as a pool of one thread would run it.
            if (solo_now()) {
                ++dispatches_;
                f(0, n, 0);
                return;
            }
        }
        const int units = (n + grain - 1) / grain;
        const int most = size() * kPiecesPerThread;
        const int chunks = units < most ? units : most;
        const int per = (units + chunks - 1) / chunks * grain;
        run(chunks, [&](int c, int thread) {
            const int begin = c * per;
            const int end = begin + per < n ? begin + per : n;
            if (begin < end) f(begin, end, thread);
        });
    }

    // Rows per task for a row-wise op (LayerNorm, an activation) over rows of `row_values`
    // values: enough that a task's ~kMinTaskValues values outweigh its dispatch (microseconds
    // across cores), so a decode step's single row and short prompts stay on the caller.
    static constexpr size_t kMinTaskValues = 16384;
    static int row_grain(size_t row_values) {
        return row_values >= kMinTaskValues ? 1 : static_cast<int>(kMinTaskValues / (row_values ? row_values : 1));
    }

    // While set, every dispatch runs on the caller alone, counted as solo (the caller measured
    // its steps faster alone: ThreadChoice, thread_choice.h); the pool's own windows pause.
    void set_caller_only(bool on) { caller_only_ = on; }

    // Dispatches since construction that ran on the caller alone because the workers were
    // measured slower than no workers (see the top of this file, and set_caller_only); for
    // tests and benchmarks.
    long solo_dispatches() const { return solo_dispatches_; }
    // Dispatches since construction that had more than one task (the ones the workers may take).
    long dispatches() const { return dispatches_; }

    // A measuring window: at least kWindow measured dispatches, and at least kWindowNs of
    // their time, longer than a scheduler's slice (a few ms), so that one stall of a worker
    // (an interrupt, the hypervisor) weighs against the gain of the dispatches around it; and
    // the back-off bounds in nanoseconds.
    static constexpr int kWindow = 32;
    static constexpr int64_t kWindowNs = 16'000'000;
    // Tests: a shorter window (at least `dispatches` measured dispatches and `ns` of them).
    void set_window(int dispatches, int64_t ns) {
        window_dispatches_ = dispatches;
        window_ns_ = ns;
    }
    static constexpr int64_t kMinBackoffNs = 20'000'000;
    static constexpr int64_t kMaxBackoffNs = 640'000'000;

    // Idle CPU time in seconds since some fixed point, summed over the CPUs this process may
    // run on; negative where unknown (then every back-off ends in a retry). The default reads
    // /proc/stat (idle + iowait, in USER_HZ ticks); tests set their own.
    using IdleClock = double (*)();
    // -1 unless /proc/stat has a line for every CPU of the affinity mask, under the same
    // numbers (not so in some containers, whose /proc/stat renumbers the CPUs from 0), and
    // their counters are not all zero (sandboxes that fake the file). The kernel formats the
    // whole file on the first read, interrupt counts included: tens of microseconds here, more
    // on hosts with many CPUs; it is read once per back-off (20 ms at the shortest).
    static double proc_stat_idle_seconds();
    void set_idle_clock(IdleClock clock) { idle_clock_ = clock; }
    // A back-off ends in a retry when the idle time over it was at least this share of a core
    // per worker.
    static constexpr double kRetryIdleShare = 0.5;
    static constexpr int kMaxSkippedRetries = 8;
    // Back-offs extended without a retry (the CPUs were busy); for tests and benchmarks.
    long skipped_retries() const { return skipped_retries_; }

    // The number of threads to use when the caller asks for 0: the cores this process may run
    // on (sched_getaffinity: taskset, a cgroup cpuset), else std::thread::hardware_concurrency.
    static int default_threads();

private:
    using TaskFn = void (*)(void*, int, int);
    void dispatch(int n_tasks, TaskFn fn, void* ctx);
    void work_loop(int thread);
    // Stops and joins every worker started (the destructor, and a constructor that failed).
    void stop_workers();
    // task_ns (the caller's): adds the time its tasks ran, claiming excluded.
    int drain(uint32_t generation, int thread, int64_t* task_ns = nullptr);
    void run_solo(int n_tasks, TaskFn fn, void* ctx);
    // Whether this dispatch runs on the caller alone (a back-off; counted as solo), ending or
    // extending the back-off when it is over (the idle check).
    bool solo_now();
    void judge_window();

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
    // The caller's measurements (dispatching thread only).
    int64_t window_took_ns_ = 0;   // sum over the window of each dispatch's time
    int64_t window_alone_ns_ = 0;  // sum of the caller-alone estimates
    int window_n_ = 0;
    int window_dispatches_ = kWindow;
    int64_t window_ns_ = kWindowNs;
    int64_t solo_until_ns_ = 0;  // > 0: run on the caller alone until this steady_clock time
    int64_t backoff_ns_ = kMinBackoffNs;
    IdleClock idle_clock_ = &ThreadPool::proc_stat_idle_seconds;
    double solo_idle0_ = -1.0;  // the idle clock when the back-off began
    int64_t solo_t0_ns_ = 0;
    long skipped_retries_ = 0;
    int skips_in_a_row_ = 0;
    long solo_dispatches_ = 0;
    long dispatches_ = 0;
    bool caller_only_ = false;
};

}  // namespace ember::kernels

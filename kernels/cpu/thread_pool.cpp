#include "kernels/cpu/thread_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <chrono>
#include <string>
#include <system_error>

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

constexpr int64_t kSpinNs = 500'000;  // polling before a worker sleeps
constexpr int kSpinsPerClock = 64;     // pauses between two reads of the clock
constexpr uint64_t kField = (1u << 20) - 1;

uint32_t gen_of(uint64_t t) { return static_cast<uint32_t>(t >> 40); }
int count_of(uint64_t t) { return static_cast<int>((t >> 20) & kField); }
int next_of(uint64_t t) { return static_cast<int>(t & kField); }

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    workers_.reserve(n_threads - 1);
    try {
        for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
    } catch (const std::system_error& e) {
        // Out of memory for a stack, or of processes (ulimit -v, -u): the workers already
        // started wait on wake_, which must not be destroyed under them (that blocked for good).
        stop_workers();
        throw std::system_error(e.code(), "cannot start thread " + std::to_string(workers_.size() + 2) + " of " +
                                              std::to_string(n_threads) + " (each takes a stack; fewer threads may fit)");
    } catch (...) {  // std::bad_alloc of a thread's state: the same cleanup
        stop_workers();
        throw;
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
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

// Claims and runs tasks of `generation` until none is left or another generation began;
// returns how many this thread ran (counted once into done_tasks_: one contended add).
int ThreadPool::drain(uint32_t generation, int thread, int64_t* task_ns) {
    int ran = 0;
    uint64_t t = ticket_.load(std::memory_order_acquire);
    for (;;) {
        if (gen_of(t) != generation || next_of(t) >= count_of(t)) break;
        if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
        // Claimed: the dispatcher of `generation` waits for this task, so fn_ and ctx_ hold.
        if (task_ns) {
            const int64_t t0 = now_ns();
            fn_(ctx_, next_of(t), thread);
            *task_ns += now_ns() - t0;
        } else {
            fn_(ctx_, next_of(t), thread);
        }
        ++ran;
        t = ticket_.load(std::memory_order_acquire);
    }
    if (ran > 0) done_tasks_.fetch_add(ran, std::memory_order_release);
    return ran;
}

void ThreadPool::run_solo(int n_tasks, TaskFn fn, void* ctx) {
    for (int i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
}

bool ThreadPool::solo_now() {
    if (caller_only_) {
        ++solo_dispatches_;
        return true;
    }
    if (solo_until_ns_ == 0) return false;
    const int64_t now = now_ns();
    if (now >= solo_until_ns_) {
        // The back-off is over. Were the CPUs idle enough during it for a worker to run?
        const double idle = idle_clock_();
        const double wanted = kRetryIdleShare * static_cast<double>(workers_.size()) * static_cast<double>(now - solo_t0_ns_) * 1e-9;
        if (solo_idle0_ < 0.0 || idle < 0.0 || idle - solo_idle0_ >= wanted || skips_in_a_row_ >= kMaxSkippedRetries) {
            solo_until_ns_ = 0;  // yes (or too many skips in a row): measure the workers again
            skips_in_a_row_ = 0;
            return false;
        }
        ++skipped_retries_;  // no: another back-off on the caller, no retry
        ++skips_in_a_row_;
        solo_t0_ns_ = now;
        solo_idle0_ = idle;
        solo_until_ns_ = now + backoff_ns_;
        backoff_ns_ = backoff_ns_ * 2 < kMaxBackoffNs ? backoff_ns_ * 2 : kMaxBackoffNs;
    }
    ++solo_dispatches_;
    return true;
}

// After a window of measured dispatches: if they took longer than the caller alone would have,
// run on the caller alone for the back-off (doubled for the next failure), else reset it.
void ThreadPool::judge_window() {
    if (window_took_ns_ > window_alone_ns_) {
        solo_t0_ns_ = now_ns();
        solo_idle0_ = idle_clock_();
        solo_until_ns_ = solo_t0_ns_ + backoff_ns_;
        backoff_ns_ = backoff_ns_ * 2 < kMaxBackoffNs ? backoff_ns_ * 2 : kMaxBackoffNs;
    } else {
        backoff_ns_ = kMinBackoffNs;
    }
    window_took_ns_ = window_alone_ns_ = 0;
    window_n_ = 0;
}

void ThreadPool::dispatch(int n_tasks, TaskFn fn, void* ctx) {
    ++dispatches_;
    if (solo_now()) return run_solo(n_tasks, fn, ctx);
    const int64_t t0 = now_ns();
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
    int64_t own_ns = 0;
    const int own = drain(generation_, 0, &own_ns);
    while (done_tasks_.load(std::memory_order_acquire) < n_tasks) EMBER_CPU_RELAX();
    const int64_t t1 = now_ns();
    // The workers ran it all: no rate of the caller's to compare with. Else the caller alone
    // would have taken its tasks' time * n_tasks / own, without the publishing, waking,
    // claiming and waiting that the dispatch took. A dispatch the caller ran all of (a worker
    // still waking, or too far away to claim a task in time) counts too: it paid for the
    // workers and got nothing from them.
    if (own == 0) return;
    window_took_ns_ += t1 - t0;
    window_alone_ns_ += own_ns * n_tasks / own;
    if (++window_n_ >= window_dispatches_ && window_took_ns_ >= window_ns_) judge_window();
}

double ThreadPool::proc_stat_idle_seconds() {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return -1.0;
    const long hz = sysconf(_SC_CLK_TCK);
    const int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || hz <= 0) {
        if (fd >= 0) close(fd);
        return -1.0;
    }
    // The per-CPU lines ("cpuN user nice system idle iowait ...") come first; read them in
    // pieces into a fixed buffer (no allocation: this runs in decode, once per back-off).
    char buf[4096];
    size_t have = 0;
    bool eof = false;
    long long ticks = 0, all_ticks = 0;
    int cpus_seen = 0, cpus_mine = 0;
    for (;;) {
        char* nl = static_cast<char*>(memchr(buf, '\n', have));
        if (!nl) {
            if (eof || have == sizeof buf) break;  // the end, or a line longer than the buffer
            const ssize_t got = read(fd, buf + have, sizeof buf - have);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                close(fd);
                return -1.0;
            }
            if (got == 0) {
                eof = true;
            } else {
                have += static_cast<size_t>(got);
            }
            continue;
        }
        *nl = '\0';
        int cpu = -1;
        unsigned long long user, nice, system, idle, iowait;
        if (buf[0] == 'c' && buf[1] == 'p' && buf[2] == 'u' && buf[3] >= '0' && buf[3] <= '9' &&
            sscanf(buf + 3, "%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle, &iowait) == 6) {
            ++cpus_seen;
            if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &mine)) {
                ++cpus_mine;
                ticks += static_cast<long long>(idle + iowait);
                all_ticks += static_cast<long long>(user + nice + system + idle + iowait);
            }
        } else if (cpus_seen > 0) {
            break;  // past the CPU lines
        }
        const size_t used = static_cast<size_t>(nl - buf) + 1;
        memmove(buf, nl + 1, have - used);
        have -= used;
    }
    close(fd);
    if (cpus_mine == 0 || cpus_mine != CPU_COUNT(&mine) || all_ticks == 0) return -1.0;
    return static_cast<double>(ticks) / static_cast<double>(hz);
}

void ThreadPool::work_loop(int thread) {
    uint32_t seen = 0;
    for (;;) {
        int spins = 0;
        int64_t spin_end = 0;
        uint64_t t;
        // Wait for a generation with tasks left.
        while (gen_of(t = ticket_.load(std::memory_order_acquire)) == seen || next_of(t) >= count_of(t)) {
            if (stop_.load(std::memory_order_relaxed)) return;
            if (++spins % kSpinsPerClock != 0) {
                EMBER_CPU_RELAX();
                continue;
            }
            if (spin_end == 0) spin_end = now_ns() + kSpinNs;
            if (now_ns() < spin_end) continue;
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);
            wake_.wait(lock, [&] {
                const uint64_t u = ticket_.load();
                return stop_.load() || (gen_of(u) != seen && next_of(u) < count_of(u));
            });
            sleepers_.fetch_sub(1);
            spins = 0;
            spin_end = 0;
        }
        seen = gen_of(t);
        drain(seen, thread);
    }
}

}  // namespace ember::kernels

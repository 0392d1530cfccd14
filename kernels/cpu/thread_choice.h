// Chooses, step by step, whether a decode step runs on the thread pool or on the calling
// thread alone, by timing both: every so often a probe runs decode steps alternately alone
// and on the pool (after one pool step that wakes the workers, not counted), and the faster
// of the two sums is used until the next probe. The next probe comes after kMinPeriod steps
// when the two were within kClear of each other; when one was clearly faster, after
// 4 * kMinPeriod steps, and 4x the last period (up to kMaxPeriod) each time the same one wins
// clearly again. The first probe is the session's first decode step. So where the workers gain
// (most machines, most models) they are kept, with a probe's few steps alone every few
// thousand; where they cost more than they give (a small model whose steps are a few
// microseconds, on cores that exchange a cache line in microseconds, as some VMs' vCPUs do;
// ThreadPool's own estimate can miss it, since cache misses on data the other core wrote
// slow the caller's own tasks too) the caller runs alone.
// Pure bookkeeping: the caller times the steps and tells the pool (ThreadPool::set_caller_only).
#pragma once

#include <cstdint>

namespace ember::kernels {

class ThreadChoice {
public:
    static constexpr int kPairs = 4;               // (alone, pool) steps measured per probe
    static constexpr int64_t kMinPeriod = 64;      // steps between probes, at the least
    static constexpr int64_t kMaxPeriod = 4096;    // and at the most
    static constexpr double kClear = 1.25;         // a winner this much faster: probe less often

    // Whether the next step runs on the caller alone.
    bool alone_next() const;
    // The step just run took `ns` nanoseconds (steady clock); call once after each step.
    void record(int64_t ns);

    // For tests and benchmarks: the choice between probes, probes finished, and steps until the next.
    bool alone() const { return alone_; }
    long probes() const { return probes_; }
    int64_t steps_to_probe() const { return probe_step_ < 0 ? until_probe_ : 0; }

private:
    // -1: between probes. 0: the probe's first step (pool, not counted); then odd steps alone,
    // even ones on the pool, up to 2 * kPairs.
    int probe_step_ = 0;
    int64_t until_probe_ = 0;
    int64_t period_ = kMinPeriod;
    int64_t alone_ns_ = 0, pool_ns_ = 0;
    bool alone_ = false;
    long probes_ = 0;
};

}  // namespace ember::kernels

#include "kernels/cpu/thread_choice.h"

#include <algorithm>

namespace ember::kernels {

bool ThreadChoice::alone_next() const {
    if (probe_step_ < 0) return alone_;
    return probe_step_ % 2 == 1;
}

void ThreadChoice::record(int64_t ns) {
    if (probe_step_ < 0) {
        if (--until_probe_ <= 0) {
            probe_step_ = 0;
            alone_ns_ = pool_ns_ = 0;
        }
        return;
    }
    if (probe_step_ > 0) (probe_step_ % 2 == 1 ? alone_ns_ : pool_ns_) += ns;
    if (++probe_step_ <= 2 * kPairs) return;
    // The probe is over: the faster of the two, and when to look again.
    const bool alone = alone_ns_ < pool_ns_;
    const double slow = static_cast<double>(std::max(alone_ns_, pool_ns_));
    const double fast = static_cast<double>(std::max<int64_t>(1, std::min(alone_ns_, pool_ns_)));
    const bool clear = slow >= kClear * fast;
    if (!clear) {
        period_ = kMinPeriod;
    } else if (probes_ > 0 && alone == alone_) {
        period_ = std::min(period_ * 4, kMaxPeriod);
    } else {
        period_ = 4 * kMinPeriod;
    }
    alone_ = alone;
    ++probes_;
    probe_step_ = -1;
    until_probe_ = period_;
}

}  // namespace ember::kernels

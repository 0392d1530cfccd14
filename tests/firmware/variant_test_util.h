// The CPU levels a variant test runs (tests/firmware/test_linear_variants.cpp,
// test_kernel_variants.cpp): every level of this build's architecture the CPU has; each one it
// lacks is reported with a doctest MESSAGE and left out.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace ember::test {

inline std::vector<kernels::CpuLevel> levels_to_test() {
    using namespace ember::kernels;
    CpuFeatures all;
    all.avx2 = all.avx_vnni = all.avx512_vnni = all.neon = all.dotprod = all.i8mm = true;
    const CpuFeatures cpu = detect_cpu_features();
    std::vector<CpuLevel> out;
    for (CpuLevel l : kCpuLevels) {
        if (!cpu_level_supported(l, all)) continue;  // another architecture's level
        if (cpu_level_supported(l, cpu)) {
            out.push_back(l);
        } else {
            MESSAGE("skipped: this CPU lacks the " << std::string(cpu_level_name(l)) << " kernels");
        }
    }
    return out;
}

}  // namespace ember::test

// Which SIMD kernels this CPU can run, detected once at run time, so that one portable build
// (-DEMBER_NATIVE=OFF) picks the fast paths where the CPU has them.
//
// Levels, lowest first: x86-64 plain < avx2 (AVX2 + FMA + F16C) < avxvnni (AVX-VNNI, 256-bit)
// < avx512 (AVX-512 F/BW/VL + VNNI); aarch64 plain < neon < dotprod (SDOT) < i8mm (SMMLA,
// FEAT_I8MM, with dotprod). A level implies
// the ones below it on its architecture (avx512 does not need AVX-VNNI: it has its own
// 256-bit form). The environment variable EMBER_CPU_KERNELS=plain|avx2|avxvnni|avx512|neon|dotprod|i8mm
// caps the level (for tests and benchmarks); a name this build does not know, or one of the
// other architecture, means plain.
#pragma once

#include <cstddef>

namespace ember::kernels {

struct CpuFeatures {
    bool avx2 = false;         // x86-64: AVX2, FMA and F16C, with the OS saving YMM state
    bool avx_vnni = false;     // x86-64: AVX-VNNI (vpdpbusd on YMM, VEX encoded) and avx2
    bool avx512_vnni = false;  // x86-64: AVX-512 F, BW, VL and VNNI, and avx2
    bool neon = false;         // aarch64: Advanced SIMD (always)
    bool dotprod = false;      // aarch64: SDOT/UDOT (HWCAP_ASIMDDP)
    bool i8mm = false;         // aarch64: SMMLA/UMMLA (HWCAP2_I8MM)
};

enum class CpuLevel { Plain, Avx2, AvxVnni, Avx512, Neon, Dotprod, I8mm };

// CPUID (x86-64) or getauxval (aarch64) now; all false on other architectures.
CpuFeatures detect_cpu_features();

// Whether this build has the level's kernels and `f` can run them.
bool cpu_level_supported(CpuLevel level, const CpuFeatures& f);

// The highest supported level that is not above `cap` on this architecture (plain if none).
CpuLevel cpu_level_clamp(CpuLevel cap, const CpuFeatures& f);

// "plain", "avx2", "avxvnni", "avx512", "neon", "dotprod", "i8mm".
const char* cpu_level_name(CpuLevel level);

// Parses a level name as cpu_level_name() writes it; false for any other string.
bool parse_cpu_level(const char* name, CpuLevel* out);

// Every level, lowest first (for tests that run each one).
constexpr CpuLevel kCpuLevels[] = {CpuLevel::Plain, CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512,
                                   CpuLevel::Neon, CpuLevel::Dotprod, CpuLevel::I8mm};

// The level the kernels use: detect_cpu_features() capped by EMBER_CPU_KERNELS (unset: no
// cap; an unknown name: plain). Computed once, on first call; thread-safe.
CpuLevel cpu_level();

// Bytes of this CPU's last-level cache, 0 where unknown: for the int8 decode hint of weights.h.
// EMBER_LLC_BYTES where it is set to a size (parse_cache_size: "32M"; "0" means unknown), else
// Linux's sysfs for cpu0 (the highest data or unified level of
// /sys/devices/system/cpu/cpu0/cache/index*). Some VMs have no cpu0/cache in sysfs and hide
// CPUID's cache leaves (glibc's sysconf then reads the whole socket's L3: 508 MiB in a 2-vCPU
// EPYC VM with 32 MiB per core cluster); there the variable says it.
size_t last_level_cache_bytes();

// Where last_level_cache_bytes() took its size: "EMBER_LLC_BYTES", "sysfs" or "unknown".
const char* last_level_cache_source();

// A cache size as sysfs writes one and a person would type it: decimal digits, then nothing
// (bytes) or one of K, M, G (or k, m, g: KiB, MiB, GiB). False for anything else, and for a
// size past 2^48 bytes.
bool parse_cache_size(const char* s, size_t* out);

}  // namespace ember::kernels

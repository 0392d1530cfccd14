#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define EMBER_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define EMBER_ARM64 1
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

namespace ember::kernels {

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#ifdef EMBER_X86
    __builtin_cpu_init();
    // F16C (CPUID.1:ECX bit 29) and AVX-VNNI (CPUID.(EAX=7, ECX=1):EAX bit 4) straight from
    // CPUID: clang 14's __builtin_cpu_supports knows neither. Both use the YMM state, whose
    // OS support the "avx2" check covers.
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    const bool leaf7_1 = __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0;
    f.avx_vnni = f.avx2 && leaf7_1 && (a & (1u << 4)) != 0;
    f.avx512_vnni = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#elif defined(EMBER_ARM64)
    f.neon = true;
    f.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    f.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
    return f;
}

bool cpu_level_supported(CpuLevel level, const CpuFeatures& f) {
    switch (level) {
        case CpuLevel::Plain: return true;
#ifdef EMBER_X86
        case CpuLevel::Avx2: return f.avx2;
        case CpuLevel::AvxVnni: return f.avx_vnni;
        case CpuLevel::Avx512: return f.avx512_vnni;
#endif
#ifdef EMBER_ARM64
        case CpuLevel::Neon: return f.neon;
        case CpuLevel::Dotprod: return f.dotprod;
        case CpuLevel::I8mm: return f.dotprod && f.i8mm;
#endif
        default: return false;
    }
}

CpuLevel cpu_level_clamp(CpuLevel cap, const CpuFeatures& f) {
    // Levels of one architecture are contiguous in the enum, lowest first.
    const bool x86 = cap == CpuLevel::Avx2 || cap == CpuLevel::AvxVnni || cap == CpuLevel::Avx512;
    const bool arm = cap == CpuLevel::Neon || cap == CpuLevel::Dotprod || cap == CpuLevel::I8mm;
    const CpuLevel lowest = x86 ? CpuLevel::Avx2 : CpuLevel::Neon;
    if (!x86 && !arm) return CpuLevel::Plain;
    for (int l = static_cast<int>(cap); l >= static_cast<int>(lowest); --l) {
        if (cpu_level_supported(static_cast<CpuLevel>(l), f)) return static_cast<CpuLevel>(l);
    }
    return CpuLevel::Plain;
}

const char* cpu_level_name(CpuLevel level) {
    switch (level) {
        case CpuLevel::Plain: return "plain";
        case CpuLevel::Avx2: return "avx2";
        case CpuLevel::AvxVnni: return "avxvnni";
        case CpuLevel::Avx512: return "avx512";
        case CpuLevel::Neon: return "neon";
        case CpuLevel::Dotprod: return "dotprod";
        case CpuLevel::I8mm: return "i8mm";
    }
    return "plain";
}

bool parse_cpu_level(const char* name, CpuLevel* out) {
    for (CpuLevel l : kCpuLevels) {
        if (std::strcmp(name, cpu_level_name(l)) == 0) {
            *out = l;
            return true;
        }
    }
    return false;
}

namespace {

CpuLevel choose_level() {
    const CpuFeatures f = detect_cpu_features();
#ifdef EMBER_X86
    CpuLevel cap = CpuLevel::Avx512;
#elif defined(EMBER_ARM64)
    CpuLevel cap = CpuLevel::I8mm;
#else
    CpuLevel cap = CpuLevel::Plain;
#endif
    const char* env = std::getenv("EMBER_CPU_KERNELS");
    if (env != nullptr && *env != '\0' && !parse_cpu_level(env, &cap)) cap = CpuLevel::Plain;
    return cpu_level_clamp(cap, f);
}

}  // namespace

CpuLevel cpu_level() {
    static const CpuLevel level = choose_level();
    return level;
}

bool parse_cache_size(const char* s, size_t* out) {
    if (s == nullptr || *s < '0' || *s > '9') return false;
    unsigned long long n = 0;
    for (; *s >= '0' && *s <= '9'; ++s) {
        n = n * 10 + static_cast<unsigned>(*s - '0');
        if (n > (1ull << 48)) return false;
    }
    unsigned shift = 0;
    if (*s == 'K' || *s == 'k') shift = 10, ++s;
    else if (*s == 'M' || *s == 'm') shift = 20, ++s;
    else if (*s == 'G' || *s == 'g') shift = 30, ++s;
    if (*s != '\0' || n > (1ull << 48) >> shift) return false;
    *out = static_cast<size_t>(n << shift);
    return true;
}

namespace {

// The sysfs size above, 0 where unknown.
size_t sysfs_last_level_cache_bytes() {
    // sysfs, as the kernel describes cpu0's caches: the highest data or unified level's size
    // ("32768K"). Not glibc's sysconf(_SC_LEVEL3_CACHE_SIZE), which read 256 MiB in a 2-vCPU
    // EPYC VM whose kernel (and lscpu) give 32 MiB.
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; ++i) {
        const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
        std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
        int level = 0;
        std::string type, size;
        if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
        if (type == "Instruction" || level <= best_level) continue;
        size_t n = 0;
        if (!parse_cache_size(size.c_str(), &n)) continue;
        best = n;
        best_level = level;
    }
    return best;
}

bool env_cache_bytes(size_t* out) {
    const char* env = std::getenv("EMBER_LLC_BYTES");
    return env != nullptr && parse_cache_size(env, out);
}

}  // namespace

size_t last_level_cache_bytes() {
    size_t n = 0;
    return env_cache_bytes(&n) ? n : sysfs_last_level_cache_bytes();
}

const char* last_level_cache_source() {
    size_t n = 0;
    if (env_cache_bytes(&n)) return "EMBER_LLC_BYTES";
    return sysfs_last_level_cache_bytes() != 0 ? "sysfs" : "unknown";
}

}  // namespace ember::kernels

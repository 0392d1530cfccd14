// Option values refused on the command line before any work, the same way in ember and
// ember-console: an empty file name (a script's unset variable) is never taken as "none",
// and numbers go through runtime/gen_options.h's parsers, as generate's sampling options and
// the console's do ("--lr: '1e-400' is outside a float's range", "--seed: '' is not an
// integer >= 0"), not through CLI11's conversions, which took "" as 0 and clamped overflow.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kernels/cpu/cpu_features.h"
#include "runtime/gen_options.h"
#include "runtime/utf8.h"

namespace ember::cli {

// A check for a path option: "" is refused with "needs a file name" (CLI11 prefixes the
// option: "--resume: needs a file name").
inline CLI::Validator file_name_check() {
    return CLI::Validator([](std::string& v) { return v.empty() ? std::string("needs a file name") : std::string(); }, "FILE");
}

namespace detail {

// The name messages use, from CLI11's "-s,--long" list: the first long name, else the first.
inline std::string option_label(const std::string& names) {
    std::string first;
    std::stringstream in(names);
    for (std::string n; std::getline(in, n, ',');) {
        if (n.rfind("--", 0) == 0) return n;
        if (first.empty()) first = n;
    }
    return first;
}

// An option whose one value goes through parse(text, label, parsed) -> "" or the reason (the
// reason printed as it is, as generate's sampling options print theirs); v is written only
// when the text is good, and keeps its value, shown in the help, otherwise. Given more than
// once, the last value counts.
template <class T, class Parse>
CLI::Option* add_parsed_option(CLI::App* app, const std::string& names, T& v, const std::string& type, const std::string& help, Parse parse) {
    const std::string label = option_label(names);
    CLI::Option* o = app->add_option(
        names,
        [&v, label, parse](const CLI::results_t& values) {
            T parsed{};
            const std::string bad = parse(values.back(), label, parsed);
            if (!bad.empty()) throw CLI::ValidationError(bad);
            v = parsed;
            return true;
        },
        help);
    std::ostringstream def;
    def << v;
    // Given twice, the last one holds, as with generate's sampling options.
    o->type_name(type)->expected(1)->default_str(def.str())->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    return o;
}

}  // namespace detail

// A float option parsed by parse_float: finite, within a float's range, decimal.
inline CLI::Option* add_float_option(CLI::App* app, const std::string& names, float& v, const std::string& help) {
    return detail::add_parsed_option(app, names, v, "FLOAT", help, parse_float);
}

// A uint64 option parsed by parse_u64: digits only, 0 .. 2^64-1 (no sign, no clamping).
inline CLI::Option* add_u64_option(CLI::App* app, const std::string& names, uint64_t& v, const std::string& help) {
    return detail::add_parsed_option(app, names, v, "UINT", help, parse_u64);
}

// An integer option in [lo, hi] parsed by parse_int: decimal only, so "010" is 10 and "0x10"
// is refused (CLI11's own conversion read them as 8 and 16), "--steps needs a value" for "".
// Given twice, the last counts (finetune's numbers, as generate's sampling options).
template <class Int>
CLI::Option* add_int_option(CLI::App* app, const std::string& names, Int& v, long long lo, long long hi, const std::string& help) {
    const std::string type = "INT in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]";
    return detail::add_parsed_option(app, names, v, type, help, [lo, hi](const std::string& s, const std::string& what, Int& out) {
        long long parsed = 0;
        std::string bad = parse_int(s, what, lo, hi, parsed);
        out = static_cast<Int>(parsed);
        return bad;
    });
}

// add_int_option for an option that may be given once: twice is refused ("--threads given 2
// times: give it once"), as CLI11's single-value options are.
template <class Int>
CLI::Option* add_int_option_once(CLI::App* app, const std::string& names, Int& v, long long lo, long long hi, const std::string& help) {
    return add_int_option(app, names, v, lo, hi, help)->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// Warnings on stderr ("PROGRAM: warning: ...") for the kernels' environment variables: when
// EMBER_CPU_KERNELS names no kernel level (the kernels then fall back to plain,
// kernels/cpu/cpu_features.h, up to 10x slower, which a typo such as "AVX2" would otherwise
// leave unsaid), and when EMBER_LLC_BYTES is set to no size (it is then ignored; empty, as unset).
inline void warn_bad_kernel_env(const char* program) {
    const char* env = std::getenv("EMBER_CPU_KERNELS");
    kernels::CpuLevel level;
    if (env != nullptr && *env != '\0' && !kernels::parse_cpu_level(env, &level)) {
        std::string names;
        for (kernels::CpuLevel l : kernels::kCpuLevels) names += std::string(names.empty() ? "" : ", ") + kernels::cpu_level_name(l);
        std::fprintf(stderr, "%s: warning: EMBER_CPU_KERNELS='%s' is not a kernel level (%s, in lower case): the plain kernels run\n",
                     program, printable(env, 40).c_str(), names.c_str());
    }
    const char* llc = std::getenv("EMBER_LLC_BYTES");
    size_t bytes = 0;
    if (llc != nullptr && *llc != '\0' && !kernels::parse_cache_size(llc, &bytes)) {
        std::fprintf(stderr,
                     "%s: warning: EMBER_LLC_BYTES='%s' is not a cache size (digits, then K, M or G: 32M): ignored, the size is "
                     "sysfs's where it gives one\n",
                     program, printable(llc, 40).c_str());
    }
}

}  // namespace ember::cli

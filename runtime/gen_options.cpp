#include "runtime/gen_options.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runtime/utf8.h"

namespace ember {

namespace {

// The option's first name, which messages use: "-n", "--temperature".
std::string first_name(GenOption id) {
    for (const GenOptionSpec& s : kGenOptions) {
        if (s.id == id) return gen_option_names(s).front();
    }
    return "?";
}

std::string with_dashes_as(std::string_view s, char from, char to) {
    std::string r(s);
    for (char& c : r) c = c == from ? to : c;
    return r;
}

}  // namespace

std::string parse_int(std::string_view w, const std::string& what, long long lo, long long hi, long long& v) {
    const std::string s(w);
    if (s.empty()) return what + " needs a value";
    char* end = nullptr;
    errno = 0;
    v = std::strtoll(s.c_str(), &end, 10);
    const bool integer = *end == '\0' && (std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && s.size() > 1 && std::isdigit(static_cast<unsigned char>(s[1]))));
    // Digits past long long's range are an integer out of range, not "not an integer".
    if (integer && errno == ERANGE) return what + " " + printable(s, 40) + " not in " + std::to_string(lo) + ".." + std::to_string(hi);
    if (errno != 0 || !integer) return what + ": '" + printable(s, 40) + "' is not an integer";
    if (v < lo || v > hi) return what + " " + s + " not in " + std::to_string(lo) + ".." + std::to_string(hi);
    return "";
}

std::string parse_u64(std::string_view w, const std::string& what, uint64_t& v) {
    const std::string s(w);
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return what + ": '" + printable(s, 40) + "' is not an integer >= 0";
    char* end = nullptr;
    errno = 0;
    v = std::strtoull(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return what + ": '" + printable(s, 40) + "' is not an integer in 0..2^64-1";
    return "";
}

std::string parse_float(std::string_view w, const std::string& what, float& v) {
    const std::string s(w);
    // Decimal only: strtof would also read hex floats (0x10 = 16, 0x1p3 = 8).
    if (s.find_first_of("xXpP") != std::string::npos) return what + ": '" + printable(s, 40) + "' is not a decimal number";
    char* end = nullptr;
    errno = 0;
    v = std::strtof(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && errno == ERANGE) return what + ": '" + printable(s, 40) + "' is outside a float's range (1.2e-38 to 3.4e38 in size, or 0)";
    if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v)) return what + ": '" + printable(s, 40) + "' is not a finite number";
    return "";
}

void GenOverrides::apply(SamplerOptions& s, int& n_out) const {
    if (n) n_out = *n;
    if (temperature) s.temperature = *temperature;
    if (top_k) s.top_k = *top_k;
    if (top_p) s.top_p = *top_p;
    if (seed) s.seed = *seed;
    if (repeat_penalty) s.repeat_penalty = *repeat_penalty;
    if (repeat_last_n) s.repeat_last_n = *repeat_last_n;
}

std::vector<std::string> gen_option_names(const GenOptionSpec& spec) {
    std::vector<std::string> names;
    const std::string_view all(spec.names);
    for (size_t b = 0; b <= all.size();) {
        const size_t e = std::min(all.find(',', b), all.size());
        names.emplace_back(all.substr(b, e - b));
        b = e + 1;
    }
    return names;
}

std::vector<std::string> all_gen_option_names() {
    std::vector<std::string> all;
    for (const GenOptionSpec& s : kGenOptions) {
        for (std::string& n : gen_option_names(s)) all.push_back(std::move(n));
    }
    return all;
}

const GenOptionSpec* find_gen_option(std::string_view name) {
    for (const GenOptionSpec& s : kGenOptions) {
        for (const std::string& n : gen_option_names(s)) {
            if (n == name) return &s;
        }
    }
    return nullptr;
}

const GenOptionSpec* find_gen_set_key(std::string_view key) {
    const std::string k = with_dashes_as(key, '_', '-');
    for (const GenOptionSpec& s : kGenOptions) {
        if (k == s.set_key) return &s;
        for (const std::string& n : gen_option_names(s)) {
            if (n.rfind("--", 0) == 0 && k == n.substr(2)) return &s;
        }
    }
    return nullptr;
}

std::string parse_gen_option(GenOption id, std::string_view value, GenOverrides& o) {
    const std::string what = first_name(id);
    long long i = 0;
    float f = 0.0f;
    uint64_t u = 0;
    std::string bad;
    switch (id) {
    case GenOption::Tokens:
        if ((bad = parse_int(value, what, 0, kMaxGenTokens, i)).empty()) o.n = static_cast<int>(i);
        return bad;
    case GenOption::Temperature:
        if (!(bad = parse_float(value, what, f)).empty()) return bad;
        if (f < 0 || f > 100) return what + " " + std::string(value) + " not in 0..100 (0 = greedy)";
        o.temperature = f;
        return "";
    case GenOption::TopK:
        if ((bad = parse_int(value, what, 0, 1000000, i)).empty()) o.top_k = static_cast<int>(i);
        return bad;
    case GenOption::TopP:
        if (!(bad = parse_float(value, what, f)).empty()) return bad;
        if (!(f > 0 && f <= 1)) return what + " " + std::string(value) + " not in (0, 1]";
        o.top_p = f;
        return "";
    case GenOption::Seed:
        if ((bad = parse_u64(value, what, u)).empty()) o.seed = u;
        return bad;
    case GenOption::RepeatPenalty:
        if (!(bad = parse_float(value, what, f)).empty()) return bad;
        if (!(f > 0)) return what + " " + std::string(value) + " must be > 0 (1 = off)";
        o.repeat_penalty = f;
        return "";
    case GenOption::RepeatLastN:
        if ((bad = parse_int(value, what, -1, kMaxGenTokens, i)).empty()) o.repeat_last_n = static_cast<int>(i);
        return bad;
    case GenOption::Stop: {
        if (value.empty()) return what + " needs a non-empty string";
        // Matched against whole characters of the output: a string that is not UTF-8 never matches.
        size_t pos = 0;
        uint32_t cp = 0;
        while (pos < value.size()) {
            const size_t at = pos;
            if (!utf8_next(value, pos, cp)) return what + " '" + printable(value, 40) + "': invalid UTF-8 at byte " + std::to_string(at) + " (it could never match)";
        }
        if (o.stops.size() >= kMaxStopStrings) return what + ": at most " + std::to_string(kMaxStopStrings) + " stop strings";
        o.stops.emplace_back(value);
        return "";
    }
    }
    return what + ": not an option";
}

bool unescape_text(std::string_view s, std::string& out, std::string& why) {
    out.clear();
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') {
            out += s[i];
            continue;
        }
        if (i + 1 == s.size()) {
            why = "ends with a lone backslash (write \\\\)";
            return false;
        }
        const char c = s[++i];
        if (c == 'n') out += '\n';
        else if (c == 't') out += '\t';
        else if (c == 's') out += ' ';  // a space a console word cannot hold (a prompt's first, one in --stop)
        else if (c == '\\') out += '\\';
        else {
            why = "unknown escape \\" + printable(std::string_view(&c, 1)) + " at byte " + std::to_string(i - 1) + " (\\n, \\t, \\s, \\\\)";
            return false;
        }
    }
    return true;
}

}  // namespace ember

// The options of one generation, as `ember generate` (cli/main.cpp, CLI11) and the console's
// `gen` and `set` (firmware/console_parser.cpp) take them: one table, which both parsers are
// built from, so that their names, ranges and messages cannot drift apart.
//
//   -n, --tokens N              new tokens, 0 .. 2^30                    set n
//   --temperature, --temp T     0 .. 100, 0 = greedy                     set temperature
//   --top-k K                   0 .. 1000000, 0 = off                    set top-k
//   --top-p P                   (0, 1], 1 = off                          set top-p
//   --seed S                    0 .. 2^64-1                              set seed
//   --repeat-penalty R          finite, > 0, 1 = off (llama.cpp's)       set repeat-penalty
//   --repeat-last-n N           -1 .. 2^30: 0 = off, -1 = block_size     set repeat-last-n
//   --stop STR                  non-empty, repeatable                    set stop
// A `set` key is the option's name without its dashes, or its first long name's; `_` stands
// for `-` (top_k = top-k).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"

namespace ember {

constexpr int kMaxGenTokens = 1 << 30;

enum class GenOption { Tokens, Temperature, TopK, TopP, Seed, RepeatPenalty, RepeatLastN, Stop };

struct GenOptionSpec {
    GenOption id;
    const char* names;    // CLI11's form: "-n,--tokens", "--temperature,--temp"
    const char* set_key;  // the console's `set` key
    const char* value;    // the value's name in help: "N", "T"
    const char* help;
};

inline constexpr std::array<GenOptionSpec, 8> kGenOptions{{
    {GenOption::Tokens, "-n,--tokens", "n", "N", "new tokens (default 200)"},
    {GenOption::Temperature, "--temperature,--temp", "temperature", "T", "softmax temperature, 0..100 (0 = greedy; default 1)"},
    {GenOption::TopK, "--top-k", "top-k", "K", "keep the k most likely (0 = off, the default)"},
    {GenOption::TopP, "--top-p", "top-p", "P", "nucleus mass, (0, 1] (1 = off, the default)"},
    {GenOption::Seed, "--seed", "seed", "S", "sampling seed (the same seed gives the same text; default 1337)"},
    {GenOption::RepeatPenalty, "--repeat-penalty", "repeat-penalty", "R",
     "divide a positive logit by R, multiply a negative one, for each distinct token among the last N (1 = off, the default)"},
    {GenOption::RepeatLastN, "--repeat-last-n", "repeat-last-n", "N",
     "tokens the repetition penalty looks back at, the prompt's included (0 = off, -1 = block_size; default 64)"},
    {GenOption::Stop, "--stop", "stop", "STR", "end when the generated text holds STR, which is not printed (repeatable)"},
}};

// What a command line or a console line gives; unset = the default (or the console's setting).
struct GenOverrides {
    std::optional<int> n;
    std::optional<float> temperature;
    std::optional<int> top_k;
    std::optional<float> top_p;
    std::optional<uint64_t> seed;
    std::optional<float> repeat_penalty;
    std::optional<int> repeat_last_n;
    std::vector<std::string> stops;  // in the order given

    // Sets what is given into s and n (stops aside).
    void apply(SamplerOptions& s, int& n) const;
};

// The names of an option: {"-n", "--tokens"}.
std::vector<std::string> gen_option_names(const GenOptionSpec& spec);
// Every name of every option, for suggestions.
std::vector<std::string> all_gen_option_names();
// The option called `name` ("--temp"), or null.
const GenOptionSpec* find_gen_option(std::string_view name);
// The option a console `set` key names ("top_k", "top-k", "temp"), or null.
const GenOptionSpec* find_gen_set_key(std::string_view key);

// Stop strings one run takes (each costs a search per token), on the command line and the console.
constexpr size_t kMaxStopStrings = 16;

// Checks `value` for the option and stores it in o (a stop string is appended as given: it
// must be valid UTF-8, and at most kMaxStopStrings of them).
// Returns "" or the reason, one line naming the option by its first name ("-n", "--top-k").
std::string parse_gen_option(GenOption id, std::string_view value, GenOverrides& o);

// The number parsers of the options (ember's and the console's): "" or the reason, one line
// naming `what` ("--top-k: 'x' is not an integer"); v is written only when the text is good.
// parse_int: a decimal integer in [lo, hi]. parse_u64: 0..2^64-1. parse_float: a finite,
// decimal float (strtof; hex floats refused), a value outside a float's range said as such.
std::string parse_int(std::string_view w, const std::string& what, long long lo, long long hi, long long& v);
std::string parse_u64(std::string_view w, const std::string& what, uint64_t& v);
std::string parse_float(std::string_view w, const std::string& what, float& v);

// `\n`, `\t`, `\s` (a space) and `\\` in s as their characters (the console's text, `ember generate -e`).
// Returns false with `why` (naming the unknown escape and its byte) on another escape or a
// lone backslash at the end.
bool unescape_text(std::string_view s, std::string& out, std::string& why);

}  // namespace ember

// The console's line parser: one line of text -> a command, or the reason it is refused.
// A pure function over untrusted bytes (a fuzz target drives it): every number is range
// checked, the line must be UTF-8 without control characters (tab aside).
//
//   help | info | models | flash
//   gen [OPTION VALUE]... [--skip-unknown] [-- | -p | --prompt] TEXT
//        OPTION: ember generate's sampling options (runtime/gen_options.h: -n, --tokens,
//        --temperature, --temp, --top-k, --top-p, --seed, --repeat-penalty, --repeat-last-n,
//        --stop STR, repeatable); TEXT: the rest of the line, with \n, \t and \\ escapes (as
//        is a --stop STR); TEXT may be empty: start from the tokenizer's start id
//   set KEY VALUE   KEY: a gen option's set key (n, temperature, top-k, top-p, seed,
//        repeat-penalty, repeat-last-n, stop: adds one, `stop off` clears them; `_` for `-`
//        and the long names work too) | context | echo
//   load NAME
//   eval [--split val|all] [--skip-unknown] FILE
//   finetune [--steps N] [--lr LR] [--rank R] [--alpha A] [--batch B] [--seq T] [--seed S]
//            [--eval-every K] [--name NAME] [--resume NAME] [--skip-unknown] FILE
//   adapter NAME | adapter off
//   attn [--layer L] [--head H] [--top K] [--] TEXT   (TEXT as gen's, not empty)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/finetune_options.h"
#include "runtime/gen_options.h"

namespace ember::fw {

enum class CommandKind { Empty, Help, Gen, Set, Info, Models, Load, Eval, Flash, Finetune, Adapter, Attn };

// `finetune`'s options, as `ember finetune` takes them. Unset = the run's default (or, with
// resume, the adapter's own setting; giving one then is refused by the console).
struct FinetuneRequest {
    FinetuneOverrides options;          // ranges in runtime/finetune_options.h
    std::string name;                   // adapter written to DIR/NAME.emba (empty: resume's, else the model's)
    std::string resume;                 // DIR/NAME.emba to go on from
    bool skip_unknown = false;
};

// Settings a `gen` overrides for one run, or `set` changes for good. Unset = unchanged.
struct SettingsDelta {
    GenOverrides gen;                    // ranges in runtime/gen_options.h; stops unescaped
    bool clear_stops = false;            // set stop off
    std::optional<std::string> context;  // exact | shift | ring
    std::optional<bool> echo;
};

// `attn`'s options, as `ember attn` takes them.
struct AttnRequest {
    int layer = 0;   // 0 .. 2^16
    int head = -1;   // 0 .. 2^16; -1 = every head
    int top = 3;     // 1 .. 2^16
};

struct Command {
    CommandKind kind = CommandKind::Empty;
    SettingsDelta settings;  // gen, set
    std::string text;        // gen: the prompt, unescaped
    bool skip_unknown = false;  // gen, eval --skip-unknown: drop (and count) characters outside the vocabulary
    std::string name;        // load, adapter; help: the command asked about (empty: all)
    std::string file;        // eval
    bool eval_all = false;   // eval --split all
    FinetuneRequest finetune;  // finetune (file: the text)
    // adapter: name is the adapter (DIR/NAME.emba), or empty with adapter_off
    bool adapter_off = false;
    AttnRequest attn;  // attn (text: the prompt, unescaped)
};

struct ParseResult {
    bool ok = false;
    Command cmd;
    std::string error;  // when !ok: one line, without the "ERR " prefix
};

ParseResult parse_command(std::string_view line);

// The help text: each command, its synopsis and what it does.
const char* console_help();
// COMMAND's lines of console_help() (its entry and the lines indented under it); all of it
// for an empty COMMAND; empty for a name that is no command.
std::string console_help(std::string_view command);

}  // namespace ember::fw

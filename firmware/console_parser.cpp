#include "firmware/console_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "firmware/flash.h"
#include "runtime/suggest.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

struct Bad {
    std::string why;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Splits off the next word at pos (skipping spaces); empty when none is left.
std::string_view next_word(std::string_view s, size_t& pos) {
    while (pos < s.size() && is_space(s[pos])) ++pos;
    const size_t b = pos;
    while (pos < s.size() && !is_space(s[pos])) ++pos;
    return s.substr(b, pos - b);
}

// A FILE argument: the next word, or a path in double quotes that may hold spaces; inside the
// quotes a backslash before a quote or a backslash stands for that character. Unquoted, a
// word is taken as it is.
std::string next_path(std::string_view s, size_t& pos, const char* what) {
    while (pos < s.size() && is_space(s[pos])) ++pos;
    if (pos >= s.size() || s[pos] != '"') return std::string(next_word(s, pos));
    std::string out;
    for (++pos; pos < s.size(); ++pos) {
        if (s[pos] == '"') {
            ++pos;
            if (pos < s.size() && !is_space(s[pos])) throw Bad{std::string(what) + ": FILE: a space must follow its closing quote"};
            if (out.empty()) throw Bad{std::string(what) + ": FILE: \"\" is no file name"};
            return out;
        }
        if (s[pos] == '\\' && pos + 1 < s.size() && (s[pos + 1] == '"' || s[pos + 1] == '\\')) ++pos;
        out += s[pos];
    }
    throw Bad{std::string(what) + ": FILE: its closing quote is missing"};
}

std::string rest_of(std::string_view s, size_t pos) {
    while (pos < s.size() && is_space(s[pos])) ++pos;
    return std::string(s.substr(pos));
}

// runtime/gen_options.h's parsers, a refusal thrown as Bad.
long long parse_int(std::string_view w, const char* what, long long lo, long long hi) {
    long long v = 0;
    if (std::string bad = ember::parse_int(w, what, lo, hi, v); !bad.empty()) throw Bad{bad};
    return v;
}

std::string unescape(std::string_view s, const char* what) {
    std::string out, why;
    if (!unescape_text(s, out, why)) throw Bad{std::string(what) + ": " + why};
    return out;
}

// The next option of a command whose options come before a TEXT (gen, attn): the option word,
// or "" where the text starts: at a word not starting with '-' (left unread), or after one of
// `text_marks` ("--", and gen's -p/--prompt), which is consumed.
std::string_view next_option(std::string_view line, size_t& pos, std::initializer_list<std::string_view> text_marks) {
    size_t p = pos;
    const std::string_view opt = next_word(line, p);
    if (opt.empty() || opt[0] != '-') return {};
    pos = p;
    for (std::string_view mark : text_marks)
        if (opt == mark) return {};
    return opt;
}

// The value after option `opt` of command `cmd`; refused when the line ends.
std::string_view option_value(std::string_view line, size_t& pos, const char* cmd, std::string_view opt) {
    const std::string_view value = next_word(line, pos);
    if (value.empty()) throw Bad{std::string(cmd) + ": option " + std::string(opt) + " needs a value"};
    return value;
}

// The console's old short names (before gen took ember generate's options): gen -t, -k and
// set t, k, p. "" for any other name.
std::string old_short_name(std::string_view name) {
    if (name == "-t" || name == "t") return "temperature";
    if (name == "-k" || name == "k") return "top-k";
    if (name == "p") return "top-p";
    return "";
}

const std::vector<std::string>& command_names() {
    static const std::vector<std::string> names{"gen", "set", "info", "models", "load", "eval", "finetune", "adapter", "flash", "attn", "help"};
    return names;
}

// The set keys, for messages and suggestions.
std::vector<std::string> setting_names() {
    std::vector<std::string> keys;
    for (const GenOptionSpec& s : kGenOptions) keys.emplace_back(s.set_key);
    keys.emplace_back("context");
    keys.emplace_back("echo");
    return keys;
}

// A gen option and its value (escapes undone in a --stop string) into d.
void apply_gen_option(const GenOptionSpec& spec, std::string_view value, SettingsDelta& d) {
    const std::string v = spec.id == GenOption::Stop ? unescape(value, "--stop") : std::string(value);
    const std::string bad = parse_gen_option(spec.id, v, d.gen);
    if (!bad.empty()) throw Bad{bad};
}

// `set KEY VALUE` into d.
void apply_setting(const std::string& key, std::string_view value, SettingsDelta& d) {
    if (const GenOptionSpec* spec = find_gen_set_key(key)) {
        if (spec->id == GenOption::Stop && value == "off") d.clear_stops = true;
        else apply_gen_option(*spec, value, d);
    } else if (key == "context") {
        if (value != "exact" && value != "shift" && value != "ring") throw Bad{"context '" + printable(value, 40) + "': exact | shift | ring"};
        d.context = std::string(value);
    } else if (key == "echo") {
        if (value != "on" && value != "off") throw Bad{"echo '" + printable(value, 40) + "': on | off"};
        d.echo = value == "on";
    } else if (const std::string now = old_short_name(key); !now.empty()) {
        throw Bad{"setting '" + key + "' is gone: set " + now + " VALUE (the names of ember generate's options)"};
    } else {
        std::string keys;
        for (const std::string& k : setting_names()) keys += (keys.empty() ? "" : ", ") + k;
        throw Bad{"unknown setting '" + printable(key, 40) + "'" + did_you_mean(key, setting_names()) + " (" + keys + ")"};
    }
}

// after_file: the command ends with a FILE, so a word after it is an option given too late or
// the rest of a path with spaces, which the message says.
void expect_end(std::string_view s, size_t pos, const char* cmd, bool after_file = false) {
    const std::string_view extra = next_word(s, pos);
    if (extra.empty()) return;
    const std::string hint = !after_file         ? ""
                             : extra[0] == '-'   ? " (options go before FILE)"
                                                 : " (a FILE with spaces goes in double quotes: \"my notes.txt\")";
    throw Bad{std::string(cmd) + ": unexpected argument '" + printable(extra, 40) + "'" + hint};
}

// One function per command: the words after the command's name, from pos, into c (its kind
// set); Bad with the reason otherwise.

// help, or help COMMAND: that command's lines.
void parse_help(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Help;
    const std::string topic(next_word(line, pos));
    if (!topic.empty()) {
        const std::vector<std::string>& names = command_names();
        if (std::find(names.begin(), names.end(), topic) == names.end())
            throw Bad{"help: no command '" + printable(topic, 40) + "'" + did_you_mean(topic, names) + " (help lists them)"};
        c.name = topic;
    }
    expect_end(line, pos, "help");
}

// gen [OPTION VALUE]... [--skip-unknown] [-- | -p | --prompt] TEXT
void parse_gen(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Gen;
    for (std::string_view opt; !(opt = next_option(line, pos, {"--", "-p", "--prompt"})).empty();) {
        if (opt == "--skip-unknown") {
            c.skip_unknown = true;
            continue;
        }
        const GenOptionSpec* spec = find_gen_option(opt);
        if (!spec) {
            if (const std::string now = old_short_name(opt); !now.empty())
                throw Bad{"gen: " + std::string(opt) + " is gone: write --" + now + " (gen takes ember generate's option names; see help gen)"};
            std::vector<std::string> names = all_gen_option_names();
            names.insert(names.end(), {"--skip-unknown", "--prompt"});
            throw Bad{"gen: unknown option '" + printable(opt, 40) + "'" + did_you_mean(opt, names) +
                      " (see help; -- or -p before a text that starts with '-')"};
        }
        apply_gen_option(*spec, option_value(line, pos, "gen", opt), c.settings);
    }
    c.text = unescape(rest_of(line, pos), "text");
}

// set KEY VALUE
void parse_set(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Set;
    const std::string key(next_word(line, pos));
    const std::string_view value = next_word(line, pos);
    if (key.empty() || value.empty()) throw Bad{"set: usage: set KEY VALUE (see help)"};
    expect_end(line, pos, "set");
    apply_setting(key, value, c.settings);
}

// load NAME
void parse_load(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Load;
    c.name = std::string(next_word(line, pos));
    if (c.name.empty()) throw Bad{"load: usage: load NAME (see models)"};
    expect_end(line, pos, "load");
    if (const std::string bad = check_model_name(c.name); !bad.empty()) throw Bad{"load: " + bad};
}

// eval [--split val|all] [--skip-unknown] FILE
void parse_eval(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Eval;
    for (std::string_view opt; !(opt = next_option(line, pos, {"--"})).empty();) {
        if (opt == "--skip-unknown") {
            c.skip_unknown = true;
        } else if (opt == "--split") {
            const std::string_view split = option_value(line, pos, "eval", opt);
            if (split != "val" && split != "all") throw Bad{"eval: --split '" + printable(split, 40) + "': val | all"};
            c.eval_all = split == "all";
        } else {
            throw Bad{"eval: unknown option '" + printable(opt, 40) + "'" + did_you_mean(opt, {"--split", "--skip-unknown"}) +
                      " (usage: eval [--split val|all] [--skip-unknown] FILE)"};
        }
    }
    c.file = next_path(line, pos, "eval");
    if (c.file.empty()) throw Bad{"eval: usage: eval [--split val|all] [--skip-unknown] FILE"};
    expect_end(line, pos, "eval", true);
}

// finetune [options] FILE
void parse_finetune(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Finetune;
    FinetuneRequest& f = c.finetune;
    for (;;) {
        size_t p = pos;
        const std::string_view opt = next_word(line, p);
        if (opt.empty() || opt[0] != '-') break;  // the file
        pos = p;
        if (opt == "--") break;
        if (opt == "--skip-unknown") {
            f.skip_unknown = true;
            continue;
        }
        const FinetuneOptionSpec* spec = find_finetune_option(opt);
        if (!spec && opt != "--name" && opt != "--resume") {
            std::vector<std::string> names = finetune_option_names();
            names.insert(names.end(), {"--name", "--resume", "--skip-unknown"});
            std::string list;
            for (const std::string& n : names) list += (list.empty() ? "" : " ") + n;
            throw Bad{"finetune: unknown option '" + printable(opt, 40) + "'" + did_you_mean(opt, names) + " (" + list + ")"};
        }
        const std::string_view v = next_word(line, pos);
        if (v.empty()) throw Bad{"finetune: option " + std::string(opt) + " needs a value"};
        if (spec) {
            if (const std::string bad = parse_finetune_option(spec->id, v, f.options); !bad.empty()) throw Bad{"finetune: " + bad};
        } else {
            if (const std::string bad = check_model_name(std::string(v)); !bad.empty()) throw Bad{"finetune: " + std::string(opt) + ": " + bad};
            (opt == "--name" ? f.name : f.resume) = std::string(v);
        }
    }
    c.file = next_path(line, pos, "finetune");
    if (c.file.empty()) throw Bad{"finetune: usage: finetune [options] FILE (see help)"};
    expect_end(line, pos, "finetune", true);
}

// adapter NAME | adapter off
void parse_adapter(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Adapter;
    c.name = std::string(next_word(line, pos));
    if (c.name.empty()) throw Bad{"adapter: usage: adapter NAME | adapter off"};
    expect_end(line, pos, "adapter");
    if (c.name == "off") {
        c.adapter_off = true;
        c.name.clear();
    } else if (const std::string bad = check_model_name(c.name); !bad.empty()) {
        throw Bad{"adapter: " + bad};
    }
}

// attn [--layer L] [--head H] [--top K] [--] TEXT
void parse_attn(std::string_view line, size_t& pos, Command& c) {
    c.kind = CommandKind::Attn;
    bool seen[3] = {false, false, false};  // --layer, --head, --top: once each, as `ember attn` takes them
    for (std::string_view opt; !(opt = next_option(line, pos, {"--"})).empty();) {
        if (opt != "--layer" && opt != "--head" && opt != "--top")
            throw Bad{"attn: unknown option '" + printable(opt, 40) + "'" + did_you_mean(opt, {"--layer", "--head", "--top"}) +
                      " (--layer --head --top; -- before a text that starts with '-')"};
        const int which = opt == "--layer" ? 0 : opt == "--head" ? 1 : 2;
        if (seen[which]) throw Bad{"attn: " + std::string(opt) + " given 2 times: give it once"};
        seen[which] = true;
        const std::string_view v = option_value(line, pos, "attn", opt);
        // The ranges of `ember attn` (cli/attn_cmd.cpp).
        const int x = static_cast<int>(parse_int(v, std::string(opt).c_str(), which == 2 ? 1 : 0, which == 2 ? 1 << 20 : 1 << 16));
        (which == 0 ? c.attn.layer : which == 1 ? c.attn.head : c.attn.top) = x;
    }
    c.text = unescape(rest_of(line, pos), "attn");
    if (c.text.empty()) throw Bad{"attn: usage: attn [--layer L] [--head H] [--top K] [--] TEXT"};
}

// The line itself: UTF-8, no control characters but tab.
void check_line(std::string_view line) {
    size_t at = 0;
    uint32_t cp = 0;
    while (at < line.size()) {
        const size_t here = at;
        if (!utf8_next(line, at, cp)) throw Bad{"line is not valid UTF-8 (byte " + std::to_string(here) + ")"};
        if ((cp < 0x20 && cp != '\t') || cp == 0x7f) throw Bad{"control character " + describe_code_point(cp) + " at byte " + std::to_string(here)};
    }
}

Command parse(std::string_view line) {
    check_line(line);
    Command c;
    size_t pos = 0;
    const std::string word(next_word(line, pos));
    if (word.empty()) return c;
    if (word == "info" || word == "models" || word == "flash") {
        expect_end(line, pos, word.c_str());
        c.kind = word == "info" ? CommandKind::Info : word == "models" ? CommandKind::Models : CommandKind::Flash;
        return c;
    }
    static constexpr struct {
        const char* word;
        void (*parse)(std::string_view, size_t&, Command&);
    } kParsers[] = {{"help", parse_help}, {"gen", parse_gen}, {"set", parse_set}, {"load", parse_load}, {"eval", parse_eval},
                    {"finetune", parse_finetune}, {"adapter", parse_adapter}, {"attn", parse_attn}};
    for (const auto& p : kParsers) {
        if (word == p.word) {
            p.parse(line, pos, c);
            return c;
        }
    }
    throw Bad{"unknown command '" + printable(word, 40) + "'" + did_you_mean(word, command_names()) + " (try help)"};
}

}  // namespace

ParseResult parse_command(std::string_view line) {
    ParseResult r;
    try {
        r.cmd = parse(line);
        r.ok = true;
    } catch (const Bad& b) {
        r.error = b.why;
    }
    return r;
}

const char* console_help() {
    return "commands:\n"
           "  gen [-n N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--repeat-penalty R] [--repeat-last-n N]\n"
           "      [--stop STR]... [--skip-unknown] [-- | -p] TEXT   generate after TEXT (\\n \\t \\s \\\\ escapes); Ctrl-C stops\n"
           "      (ember generate's options, --temp for --temperature, --tokens for -n; a --stop STR is not printed)\n"
           "  set KEY VALUE      defaults for gen: n, temperature, top-k, top-p, seed, repeat-penalty, repeat-last-n,\n"
           "                     stop (adds one; stop off clears), context (exact|shift|ring), echo (on|off)\n"
           "  info               the loaded model and the settings\n"
           "  models             the models installed\n"
           "  load NAME          load NAME.ember\n"
           "  eval [--split val|all] [--skip-unknown] FILE   mean cross-entropy (nats/token) on a text file\n"
           "  finetune [--steps N] [--lr LR] [--rank R] [--alpha A] [--batch B] [--seq T] [--seed S] [--eval-every K]\n"
           "           [--weight-decay W] [--clip C] [--name NAME] [--resume NAME] [--skip-unknown] FILE\n"
           "                     LoRA on FILE, adapter to NAME.emba; Ctrl-C stops (saved)\n"
           "  adapter NAME|off   gen and eval with NAME.emba (unmerged), or without\n"
           "  attn [--layer L] [--head H] [--top K] [--] TEXT   each query's strongest keys in a layer's heads (from 0) for TEXT\n"
           "  flash              binary receive mode, driven by `ember flash` on the host\n"
           "  help [COMMAND]     this text, or COMMAND's lines of it\n";
}

std::string console_help(std::string_view command) {
    const std::string_view all = console_help();
    if (command.empty()) return std::string(all);
    // An entry: a line "  NAME ..." (two spaces, then its name) and the deeper-indented lines after it.
    std::string out;
    bool in_entry = false;
    for (size_t at = 0; at < all.size();) {
        size_t end = all.find('\n', at);
        end = end == std::string_view::npos ? all.size() : end + 1;
        const std::string_view ln = all.substr(at, end - at);
        at = end;
        if (ln.size() > 2 && ln[0] == ' ' && ln[1] == ' ' && ln[2] != ' ') {
            const std::string_view rest = ln.substr(2);
            in_entry = rest.substr(0, command.size()) == command &&
                       (rest.size() == command.size() || rest[command.size()] == ' ' || rest[command.size()] == '\n');
        } else if (ln.empty() || ln[0] != ' ') {
            in_entry = false;
        }
        if (in_entry) out += ln;
    }
    return out;
}

}  // namespace ember::fw

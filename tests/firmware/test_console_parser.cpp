// The console's line parser: good commands, and one reason for every bad one.
#include <doctest/doctest.h>

#include <algorithm>

#include "firmware/console_parser.h"

using namespace ember;
using namespace ember::fw;

namespace {
std::string error_of(const std::string& line) {
    const ParseResult r = parse_command(line);
    CHECK_FALSE(r.ok);
    return r.error;
}
}  // namespace

TEST_CASE("console parser: commands and gen options") {
    ParseResult r = parse_command("gen -n 50 --temperature 0.8 --top-k 10 --top-p 0.9 --seed 7 --repeat-penalty 1.3 --repeat-last-n -1 "
                                  "--stop \\n\\n --stop END ROMEO:  to be\\n");
    REQUIRE(r.ok);
    CHECK(r.cmd.kind == CommandKind::Gen);
    const GenOverrides& g = r.cmd.settings.gen;
    CHECK(*g.n == 50);
    CHECK(*g.temperature == doctest::Approx(0.8f));
    CHECK(*g.top_k == 10);
    CHECK(*g.top_p == doctest::Approx(0.9f));
    CHECK(*g.seed == 7);
    CHECK(*g.repeat_penalty == doctest::Approx(1.3f));
    CHECK(*g.repeat_last_n == -1);
    CHECK(g.stops == std::vector<std::string>{"\n\n", "END"});
    CHECK(r.cmd.text == "ROMEO:  to be\n");
    r = parse_command("gen --tokens 5 --temp 0 --skip-unknown --prompt -x y");
    REQUIRE(r.ok);
    CHECK(*r.cmd.settings.gen.n == 5);
    CHECK(*r.cmd.settings.gen.temperature == 0.0f);
    CHECK(r.cmd.skip_unknown);
    CHECK(r.cmd.text == "-x y");

    r = parse_command("gen");
    REQUIRE(r.ok);
    CHECK(r.cmd.text.empty());
    CHECK_FALSE(r.cmd.settings.gen.n.has_value());
    r = parse_command("gen -- -n is text");
    REQUIRE(r.ok);
    CHECK(r.cmd.text == "-n is text");
    // A text's leading blanks are not kept; \s is a space (a GPT-2 prompt " The"), in --stop too.
    r = parse_command("gen --    x");
    REQUIRE(r.ok);
    CHECK(r.cmd.text == "x");
    r = parse_command("gen --stop a\\sb -- \\sThe\\s\\s");
    REQUIRE(r.ok);
    CHECK(r.cmd.text == " The  ");
    CHECK(r.cmd.settings.gen.stops == std::vector<std::string>{"a b"});
    r = parse_command("gen --seed 18446744073709551615 a\\\\b\\tc");
    REQUIRE(r.ok);
    CHECK(*r.cmd.settings.gen.seed == 18446744073709551615ull);
    CHECK(r.cmd.text == "a\\b\tc");
    r = parse_command("  set top_p 1  ");
    REQUIRE(r.ok);
    CHECK(r.cmd.kind == CommandKind::Set);
    CHECK(*r.cmd.settings.gen.top_p == 1.0f);
    r = parse_command("set stop \\n\\n");
    REQUIRE(r.ok);
    CHECK(r.cmd.settings.gen.stops == std::vector<std::string>{"\n\n"});
    r = parse_command("set stop off");
    REQUIRE(r.ok);
    CHECK(r.cmd.settings.clear_stops);
    CHECK(r.cmd.settings.gen.stops.empty());
    r = parse_command("set repeat_penalty 1.1");
    REQUIRE(r.ok);
    CHECK(*r.cmd.settings.gen.repeat_penalty == doctest::Approx(1.1f));
    r = parse_command("set context ring");
    REQUIRE(r.ok);
    CHECK(*r.cmd.settings.context == "ring");
    r = parse_command("load shakespeare_char");
    REQUIRE(r.ok);
    CHECK(r.cmd.name == "shakespeare_char");
    r = parse_command("eval --split all /data/input.txt");
    REQUIRE(r.ok);
    CHECK(r.cmd.eval_all);
    CHECK_FALSE(r.cmd.skip_unknown);
    CHECK(r.cmd.file == "/data/input.txt");
    r = parse_command("eval --skip-unknown --split val /data/input.txt");
    REQUIRE(r.ok);
    CHECK(r.cmd.skip_unknown);
    CHECK_FALSE(r.cmd.eval_all);
    CHECK(r.cmd.file == "/data/input.txt");
    CHECK(error_of("eval --skip-unkown f").find("did you mean --skip-unknown?") != std::string::npos);
    CHECK(error_of("eval --split").find("eval: option --split needs a value") == 0);
    CHECK(parse_command("").cmd.kind == CommandKind::Empty);
    CHECK(parse_command("   ").cmd.kind == CommandKind::Empty);
    CHECK(parse_command("flash").cmd.kind == CommandKind::Flash);
    CHECK(parse_command("models").cmd.kind == CommandKind::Models);
    CHECK(parse_command("info").cmd.kind == CommandKind::Info);
    CHECK(parse_command("help").cmd.kind == CommandKind::Help);
    CHECK(parse_command("help").cmd.name.empty());
    CHECK(parse_command("help gen").cmd.name == "gen");
}

TEST_CASE("console: the old short names gen -t, -k and set t, k, p name their new spelling") {
    CHECK(error_of("gen -t 0.5 hi") == "gen: -t is gone: write --temperature (gen takes ember generate's option names; see help gen)");
    CHECK(error_of("gen -k 3 hi") == "gen: -k is gone: write --top-k (gen takes ember generate's option names; see help gen)");
    CHECK(error_of("set t 0.5") == "setting 't' is gone: set temperature VALUE (the names of ember generate's options)");
    CHECK(error_of("set k 3") == "setting 'k' is gone: set top-k VALUE (the names of ember generate's options)");
    CHECK(error_of("set p 0.9") == "setting 'p' is gone: set top-p VALUE (the names of ember generate's options)");
    // -p starts the prompt now: "-p 0.9 hi" generates after the text "0.9 hi".
    const ParseResult r = parse_command("gen -p 0.9 hi");
    REQUIRE(r.ok);
    CHECK(r.cmd.text == "0.9 hi");
}

TEST_CASE("console help COMMAND: that command's lines, and a refusal naming the nearest command") {
    CHECK(error_of("help gne") == "help: no command 'gne'; did you mean gen? (help lists them)");
    CHECK(error_of("help gen extra") == "help: unexpected argument 'extra'");
    // gen's entry is three lines: the synopsis, its continuation and the note on the options.
    const std::string gen = console_help("gen");
    CHECK(gen.rfind("  gen [-n N]", 0) == 0);
    CHECK(std::count(gen.begin(), gen.end(), '\n') == 3);
    CHECK(gen.find("--tokens for -n") != std::string::npos);
    CHECK(gen.find("  set ") == std::string::npos);
    // Every command has an entry of its own, which the whole text contains.
    const std::string all = console_help();
    for (const char* name : {"gen", "set", "info", "models", "load", "eval", "finetune", "adapter", "flash", "attn", "help"}) {
        const std::string one = console_help(name);
        CAPTURE(name);
        CHECK(one.rfind(std::string("  ") + name + " ", 0) == 0);
        CHECK(all.find(one) != std::string::npos);
    }
    CHECK(console_help("").rfind("commands:\n", 0) == 0);
    CHECK(console_help("nope").empty());
}

TEST_CASE("console parser: every bad line has a reason") {
    CHECK(error_of("frobnicate") == "unknown command 'frobnicate' (try help)");
    CHECK(error_of("gen -x 3 hi").find("gen: unknown option '-x'") == 0);
    CHECK(error_of("gen -n") == "gen: option -n needs a value");
    CHECK(error_of("gen -n abc hi") == "-n: 'abc' is not an integer");
    CHECK(error_of("gen --tokens -5 hi").find("-n -5 not in 0..") == 0);
    // Digits past long long's range: out of range, not "not an integer".
    CHECK(error_of("gen -n 99999999999999999999 hi").find("-n 99999999999999999999 not in 0..") == 0);
    CHECK(error_of("gen --temp nan hi") == "--temperature: 'nan' is not a finite number");
    CHECK(error_of("gen --temp 1e-45 hi") == "--temperature: '1e-45' is outside a float's range (1.2e-38 to 3.4e38 in size, or 0)");
    CHECK(error_of("gen --top-p 1e39 hi") == "--top-p: '1e39' is outside a float's range (1.2e-38 to 3.4e38 in size, or 0)");
    CHECK(error_of("gen --temperature -1 hi").find("--temperature -1 not in 0..100") == 0);
    CHECK(error_of("gen --top-p 0 hi") == "--top-p 0 not in (0, 1]");
    CHECK(error_of("gen --seed -1 hi").find("--seed: '-1' is not an integer >= 0") == 0);
    CHECK(error_of("gen --repeat-penalty 0 hi") == "--repeat-penalty 0 must be > 0 (1 = off)");
    CHECK(error_of("gen --repeat-last-n -2 hi").find("--repeat-last-n -2 not in -1..") == 0);
    CHECK(error_of("gen --stop \\q hi") == "--stop: unknown escape \\q at byte 0 (\\n, \\t, \\s, \\\\)");
    CHECK(error_of("gen -t 0.5 hi").find("gen: -t is gone: write --temperature") == 0);  // the CLI's names only
    CHECK(error_of("gen hi\\q") == "text: unknown escape \\q at byte 2 (\\n, \\t, \\s, \\\\)");
    CHECK(error_of("gen hi\\").find("lone backslash") != std::string::npos);
    CHECK(error_of("set") .find("set: usage") == 0);
    CHECK(error_of("set colour red").find("unknown setting 'colour' (n, temperature, top-k") == 0);
    CHECK(error_of("set top_k 5 6") == "set: unexpected argument '6'");
    CHECK(error_of("set context loop") == "context 'loop': exact | shift | ring");
    CHECK(error_of("load") == "load: usage: load NAME (see models)");
    CHECK(error_of("load ../../etc/passwd").find("load: model name") == 0);
    CHECK(error_of("load .hidden").find("starts with '.'") != std::string::npos);
    CHECK(error_of("load -x").find("load: model name '-x' starts with '-'") == 0);
    std::string stops;
    for (int i = 0; i < 17; ++i) stops += " --stop s" + std::to_string(i);
    CHECK(error_of("gen" + stops + " hi") == "--stop: at most 16 stop strings");  // as set stop's limit
    CHECK(error_of("info now") == "info: unexpected argument 'now'");
    CHECK(error_of("eval --split test f") == "eval: --split 'test': val | all");
    CHECK(error_of("eval").find("eval: usage") == 0);
    CHECK(error_of(std::string("gen \xff\xfe")).find("not valid UTF-8") != std::string::npos);
    CHECK(error_of(std::string("gen a\x1b[2Jb")).find("control character") == 0);
    CHECK(error_of(std::string("gen a\0b", 7)).find("control character") == 0);
}

TEST_CASE("console parser: arbitrary bytes never crash it and always give a verdict") {
    uint32_t x = 12345;
    for (int i = 0; i < 20000; ++i) {
        std::string line;
        const int n = static_cast<int>(x % 40);
        static const char* words[] = {"gen ", "set ", "-n ", "--stop ", "--seed ", "1", "0.5", "\\", "load ", "eval ", "--split ", "-- "};
        for (int k = 0; k < n; ++k) {
            x = x * 1103515245u + 12345u;
            if (x % 3 == 0) line += words[(x >> 8) % 12];
            else line += static_cast<char>(x >> 16);
        }
        const ParseResult r = parse_command(line);
        CHECK((r.ok || !r.error.empty()));
    }
}

TEST_CASE("console parser: finetune and adapter") {
    ParseResult r = parse_command("finetune --steps 20 --lr 0.01 --rank 4 --alpha 8 --batch 2 --seq 32 --seed 9 --eval-every 5 --name al-1 --skip-unknown /d/a.txt");
    REQUIRE(r.ok);
    CHECK(r.cmd.kind == CommandKind::Finetune);
    const FinetuneRequest& f = r.cmd.finetune;
    CHECK(*f.options.steps == 20);
    CHECK(*f.options.lr == doctest::Approx(0.01f));
    CHECK(*f.options.rank == 4);
    CHECK(*f.options.alpha == doctest::Approx(8.0f));
    CHECK(*f.options.batch == 2);
    CHECK(*f.options.seq == 32);
    CHECK(*f.options.seed == 9);
    CHECK(*f.options.eval_every == 5);
    CHECK_FALSE(f.options.weight_decay);
    CHECK_FALSE(f.options.clip);
    CHECK(f.name == "al-1");
    CHECK(f.skip_unknown);
    CHECK(f.options.settings_given());
    CHECK(r.cmd.file == "/d/a.txt");
    r = parse_command("finetune --weight-decay 0 --clip 0.5 a.txt");  // the CLI's two, which the console lacked
    REQUIRE(r.ok);
    CHECK(*r.cmd.finetune.options.weight_decay == 0.0f);
    CHECK(*r.cmd.finetune.options.clip == doctest::Approx(0.5f));
    CHECK(r.cmd.finetune.options.settings_given());
    r = parse_command("finetune --resume al-1 --steps 40 a.txt");
    REQUIRE(r.ok);
    CHECK(r.cmd.finetune.resume == "al-1");
    CHECK_FALSE(r.cmd.finetune.options.settings_given());
    r = parse_command("finetune -- -odd.txt");
    REQUIRE(r.ok);
    CHECK(r.cmd.file == "-odd.txt");
    // A FILE with spaces in double quotes (\" and \\ inside); it used to be cut at the space.
    r = parse_command("finetune --steps 2 \"/d/my notes.txt\"");
    REQUIRE(r.ok);
    CHECK(r.cmd.file == "/d/my notes.txt");
    r = parse_command("eval --skip-unknown \"/d/a \\\"b\\\" c\\\\d.txt\"");
    REQUIRE(r.ok);
    CHECK(r.cmd.file == "/d/a \"b\" c\\d.txt");
    CHECK(error_of("eval /d/my notes.txt") == "eval: unexpected argument 'notes.txt' (a FILE with spaces goes in double quotes: \"my notes.txt\")");
    CHECK(error_of("finetune a.txt --steps 2") == "finetune: unexpected argument '--steps' (options go before FILE)");
    CHECK(error_of("eval \"/d/a b.txt") == "eval: FILE: its closing quote is missing");
    CHECK(error_of("eval \"/d/a b.txt\"x") == "eval: FILE: a space must follow its closing quote");
    CHECK(error_of("eval \"\"") == "eval: FILE: \"\" is no file name");
    r = parse_command("adapter al-1");
    REQUIRE(r.ok);
    CHECK(r.cmd.kind == CommandKind::Adapter);
    CHECK(r.cmd.name == "al-1");
    r = parse_command("adapter off");
    REQUIRE(r.ok);
    CHECK(r.cmd.adapter_off);
    CHECK(r.cmd.name.empty());

    CHECK(error_of("finetune") == "finetune: usage: finetune [options] FILE (see help)");
    CHECK(error_of("finetune --batch 0 a.txt") == "finetune: --batch 0 not in 1..4096");
    CHECK(error_of("finetune --alpha -1 a.txt") == "finetune: --alpha -1 must be > 0");
    CHECK(error_of("finetune --lr nan a.txt") == "finetune: --lr: 'nan' is not a finite number");
    CHECK(error_of("finetune --weight-decay -1 a.txt") == "finetune: --weight-decay -1 must be >= 0");
    CHECK(error_of("finetune --seed") == "finetune: option --seed needs a value");
    CHECK(error_of("finetune --resume a/b x.txt").find("finetune: --resume: model name 'a/b' holds a '/'") == 0);
    CHECK(error_of("finetune -x a.txt").find("finetune: unknown option '-x'") == 0);
    CHECK(error_of("finetune a.txt b.txt") == "finetune: unexpected argument 'b.txt' (a FILE with spaces goes in double quotes: \"my notes.txt\")");
    CHECK(error_of("adapter") == "adapter: usage: adapter NAME | adapter off");
    CHECK(error_of("adapter a b") == "adapter: unexpected argument 'b'");
    CHECK(error_of("adapter .hidden").find("adapter: model name '.hidden' starts with '.'") == 0);
}

// The console over a pty pair (raw termios on the slave, as on a serial line): errors keep
// it running, gen streams the same text as the runtime's generate loop, Ctrl-C stops a
// generation, settings, models, load and eval.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <cstring>
#include <random>
#include <regex>
#include <thread>

#include "firmware/console.h"
#include "firmware/event_log.h"
#include "fw_test_util.h"
#include "runtime/eval.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_module.h"
#include "runtime/session.h"
#include "runtime/stop_strings.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"

using namespace ember;
using namespace ember::fw;
using namespace ember::fwtest;

namespace {

// A console on a pty slave in a thread; the test talks to the master.
class PtyConsole {
public:
    explicit PtyConsole(ConsoleOptions o) {
        REQUIRE(::openpty(&master_, &slave_, nullptr, nullptr, nullptr) == 0);
        configure_raw(slave_, 115200, false);
        th_ = std::thread([this, o] {
            Console c(slave_, slave_, o);
            c.run();
        });
        REQUIRE(wait_for("> ") != std::string::npos);
    }
    ~PtyConsole() {
        ::close(master_);  // the slave sees a hang-up
        th_.join();
        ::close(slave_);
    }
    void send(const std::string& s) { write_all(master_, s.data(), s.size()); }
    // Sends `bytes` while reading what the console writes (so neither side blocks on a full pty).
    void pump(const std::string& bytes) {
        const int flags = ::fcntl(master_, F_GETFL);
        ::fcntl(master_, F_SETFL, flags | O_NONBLOCK);
        size_t at = 0;
        while (at < bytes.size()) {
            pollfd p{master_, POLLIN | POLLOUT, 0};
            REQUIRE(::poll(&p, 1, 10000) > 0);
            char buf[8192];
            if (p.revents & POLLIN) {
                const ssize_t got = ::read(master_, buf, sizeof buf);
                if (got > 0) seen_.append(buf, static_cast<size_t>(got));
            }
            if (p.revents & POLLOUT) {
                const ssize_t w = ::write(master_, bytes.data() + at, std::min<size_t>(4096, bytes.size() - at));
                if (w > 0) at += static_cast<size_t>(w);
            }
        }
        ::fcntl(master_, F_SETFL, flags);
    }
    const std::string& seen() const { return seen_; }
    // Waits for pattern after the last match; returns its end or npos.
    size_t wait_for(const std::string& pattern, int timeout_ms = 10000) {
        const size_t k = expect(master_, seen_, pattern, mark_, timeout_ms);
        if (k != std::string::npos) mark_ = k;
        return k;
    }
    // Sends a command and returns what it printed up to and including its OK/ERR line.
    std::string command(const std::string& line) {
        const size_t from = mark_;
        send(line + "\n");
        const size_t k = expect(master_, seen_, "\n> ", from, 20000);
        REQUIRE(k != std::string::npos);
        mark_ = k;
        return seen_.substr(from, k - 3 - from + 1);
    }

private:
    int master_ = -1, slave_ = -1;
    std::thread th_;
    std::string seen_;
    size_t mark_ = 0;
};

std::string reference_generate(const std::string& path, const std::string& prompt, int n, uint64_t seed, float temperature) {
    auto m = Model::open(path);
    CharTokenizer tok(m->code_points());
    SessionOptions so;
    so.threads = 1;
    Session s(*m, so);
    SamplerOptions o;
    o.seed = seed;
    o.temperature = temperature;
    Sampler smp(o, m->config().vocab_size, s.sampler_probs(), s.sampler_ids());
    const auto ids = tok.encode(prompt, "prompt");
    s.append(ids.data(), static_cast<int>(ids.size()));
    std::string out = prompt;
    char b[4];
    for (int i = 0; i < n; ++i) {
        const int id = smp.sample(s.logits());
        out.append(b, static_cast<size_t>(tok.decode(id, b)));
        if (i + 1 < n) s.append(&id, 1);
    }
    return out;
}

// The runtime's generate loop with every sampling option (what ember generate runs).
std::string reference_generate_loop(const std::string& path, const std::string& prompt, int n, const SamplerOptions& o,
                                    const std::vector<std::string>& stops, GenerateResult* r = nullptr) {
    auto m = Model::open(path);
    SessionOptions so;
    so.threads = 1;
    Session s(*m, so);
    const auto tok = make_tokenizer(*m);
    const auto ids = tok->encode(prompt, "prompt");
    s.append(ids.data(), static_cast<int>(ids.size()));
    Utf8Stream stream(static_cast<size_t>(tok->max_token_bytes()));
    StopStrings st(stops, 64);
    std::string out = prompt;
    const GenerateResult g = s.generate(n, o, *tok, stream, [&](std::string_view t) { out += t; }, {}, stops.empty() ? nullptr : &st);
    if (r) *r = g;
    return out;
}

ConsoleOptions opts_for(const TempDir& dir) {
    ConsoleOptions o;
    o.models_dir = dir.path();
    o.threads = 1;
    return o;
}

}  // namespace

TEST_CASE("console: bad commands answer one ERR line and the console keeps running") {
    TempDir dir;
    PtyConsole c(opts_for(dir));
    const std::pair<std::string, std::string> bad[] = {
        {"frobnicate", "ERR unknown command 'frobnicate' (try help)\n"},
        {"gen hello", "ERR no model loaded: flash one (ember flash on the host) or load NAME\n"},
        {"gen -x 1 a", "ERR gen: unknown option '-x'"},
        {"set top_p 2", "ERR --top-p 2 not in (0, 1]\n"},
        {"gne", "ERR unknown command 'gne'; did you mean gen? (try help)\n"},
        {"load nothere", "ERR load nothere: no model file "},
        {"load ../x", "ERR load: model name '../x' holds a '/': a name, not a path (the models folder holds NAME.ember)"},
        {"load .x", "ERR load: model name '.x' starts with '.'"},
        {"eval /nonexistent/file.txt", "ERR no model loaded"},
        {std::string(2000, 'a'), "ERR line too long: more than 1024 bytes, refused (nothing was run)\n"},
        {"gen \xc3\x28", "ERR line is not valid UTF-8 (byte 4)\n"},
    };
    for (const auto& [line, want] : bad) {
        CAPTURE(line.substr(0, 40));
        const std::string out = c.command(line);
        CHECK(out.find(want) == 0);
        CHECK(std::count(out.begin(), out.end(), '\n') == 1);  // one line
    }
    CHECK(c.command("info").find("model: none loaded\n") == 0);
    const std::string help = c.command("help");
    CHECK(help.find("gen [-n N]") != std::string::npos);
    CHECK(help.find("OK help\n") != std::string::npos);
    const std::string help_set = c.command("help set");
    CHECK(help_set.rfind("  set KEY VALUE", 0) == 0);
    CHECK(help_set.find("gen [-n N]") == std::string::npos);
    CHECK(help_set.find("OK help set\n") != std::string::npos);
    // A Ctrl-C at the prompt drops the half-typed line.
    c.send("frob\x03");
    CHECK(c.wait_for("^C\n> ") != std::string::npos);
    CHECK(c.command("info").find("model: none loaded\n") == 0);
}

namespace {

// The real files, but DIR/current's temporary cannot be created: a read-only models folder.
class NoCurrentFs : public fw::PosixFs {
public:
    int open(const std::string& path, int flags, mode_t mode) override {
        if (path.find("/current.tmp-") != std::string::npos) {
            errno = EROFS;
            return -1;
        }
        return PosixFs::open(path, flags, mode);
    }
};

}  // namespace

TEST_CASE("console: a load whose DIR/current cannot be written says so, and the next start's model is still the old one") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    write_file(dir.file("tiny16.ember"), read_file(model_f16()));
    write_file(dir.file("current"), "tiny\n");
    ConsoleOptions o = opts_for(dir);
    o.fs = std::make_shared<NoCurrentFs>();
    PtyConsole c(o);
    const std::string out = c.command("load tiny16");
    CAPTURE(out);
    // It used to answer a plain OK, and the next start loaded tiny.
    CHECK(out.find("OK loaded tiny16: n_layer") == 0);
    CHECK(out.find("; warning: " + dir.file("current") + " not updated (cannot create " + dir.file("current.tmp-")) != std::string::npos);
    CHECK(out.find("Read-only file system): the next start loads the model it named before\n") != std::string::npos);
    CHECK(read_file(dir.file("current")) == "tiny\n");
    CHECK(c.command("info").find("model: tiny16 (") == 0);  // loaded all the same
}

TEST_CASE("console: a DIR/current written with CRLF or blanks around the name still names its model at start") {
    for (const char* text : {"tiny16\r\n", "tiny16 \t\n", "tiny16", " \ttiny16\n"}) {
        CAPTURE(text);
        TempDir dir;
        write_file(dir.file("tiny.ember"), read_file(model_int8()));
        write_file(dir.file("tiny16.ember"), read_file(model_f16()));
        write_file(dir.file("current"), text);  // "tiny16\r" was refused as a name with a control character
        PtyConsole c(opts_for(dir));
        CHECK(c.command("info").find("model: tiny16 (") == 0);
    }
}

TEST_CASE("console: load, gen streams the runtime's text for a seed, settings, models, eval") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    write_file(dir.file("tiny16.ember"), read_file(model_f16()));
    PtyConsole c(opts_for(dir));
    CHECK(c.command("load tiny").find("OK loaded tiny: n_layer") == 0);
    CHECK(read_file(dir.file("current")) == "tiny\n");
    const std::string prompt = "The quick brown";
    for (uint64_t seed : {1ull, 42ull}) {
        const std::string out = c.command("gen -n 60 --seed " + std::to_string(seed) + " --temperature 0.9 " + prompt);
        const std::string want = reference_generate(dir.file("tiny.ember"), prompt, 60, seed, 0.9f);
        CHECK(out.substr(0, want.size() + 1) == want + "\n");
        CHECK(out.find("OK gen 60 tokens in ") == want.size() + 1);
        CHECK_NOTHROW(utf8_decode(out, "console output"));  // whole characters only
    }
    // gen without options uses the settings; set changes them.
    CHECK(c.command("set seed 42").find("OK n 200, temperature 1, top-k 0, top-p 1, seed 42, repeat-penalty 1, repeat-last-n 64, stop none, context exact, echo off") == 0);
    CHECK(c.command("set temperature 0.9").find("OK ") == 0);
    CHECK(c.command("set n 60").find("OK n 60,") == 0);
    const std::string out = c.command("gen " + prompt);
    CHECK(out.find(reference_generate(dir.file("tiny.ember"), prompt, 60, 42, 0.9f) + "\n") == 0);
    CHECK(c.command("set context ring").find("context ring") != std::string::npos);
    CHECK(c.command("gen -n 300 a").find("OK gen 300 tokens") != std::string::npos);
    CHECK(c.command("gen -n 5 Q\xe2\x82\xac").find("ERR prompt: character") == 0);

    const std::string models = c.command("models");
    CHECK(models.find("* tiny  " + std::to_string(read_file(model_int8()).size()) + " bytes\n") == 0);
    CHECK(models.find("  tiny16  ") != std::string::npos);
    CHECK(models.find("OK 2 models\n") != std::string::npos);
    CHECK(c.command("info").find("model: tiny (") == 0);

    // eval: the runtime's loss on the fixture text.
    const std::string text = source_dir() + "/tests/fixtures/gptpy/eval.txt";
    const std::string ev = c.command("eval --split all " + text);
    REQUIRE(ev.find("OK loss ") == 0);
    auto m = Model::open(dir.file("tiny.ember"));
    CharTokenizer tok(m->code_points());
    const auto ids = tok.encode(read_file(text), "eval");
    SessionOptions so;
    so.threads = 1;
    so.all_logits = true;
    Session s(*m, so);
    const EvalResult r = evaluate(s, ids.data(), static_cast<int64_t>(ids.size()), m->config().block_size, m->config().vocab_size);
    char want[64];
    std::snprintf(want, sizeof want, "OK loss %.4f over %lld tokens\n", r.loss, static_cast<long long>(r.tokens));
    CHECK(ev == want);
    // --skip-unknown: a text with characters outside the vocabulary gives the loss of the text without them.
    write_file(dir.file("odd.txt"), "\xe2\x82\xac" + read_file(text) + "\xe2\x82\xac\xe2\x82\xac");
    CHECK(c.command("eval --split all " + dir.file("odd.txt")).find("ERR ") == 0);
    // Too short for the validation split: worded as `ember eval` words it (it said "too few
    // tokens to evaluate", naming no split).
    write_file(dir.file("short.txt"), "The quick ");
    CHECK(c.command("eval " + dir.file("short.txt")) == "ERR " + dir.file("short.txt") +
                                                          ": the validation split (last 10%) holds 1 token(s); eval needs at least 2 "
                                                          "(--split all scores the whole text)\n");
    const std::string skipped = c.command("eval --skip-unknown --split all " + dir.file("odd.txt"));
    CHECK(skipped == std::string(want).substr(0, std::string(want).size() - 1) + "; 3 characters outside the vocabulary skipped\n");

    // A bad model file is refused by load; the loaded one stays.
    write_file(dir.file("broken.ember"), read_file(model_int8()).substr(0, 1000));
    CHECK(c.command("load broken").find("ERR ") == 0);
    CHECK(c.command("info").find("model: tiny (") == 0);
}

TEST_CASE("console: a model file written over in place (cp, not flash) is unloaded at the next command, which gets one ERR line") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    PtyConsole c(opts_for(dir));
    REQUIRE(c.command("load tiny").find("OK loaded tiny: n_layer") == 0);
    REQUIRE(c.command("gen -n 5 a").find("OK gen 5 tokens") != std::string::npos);
    // Written over in place while loaded (the same file, truncated and rewritten): reading its
    // mapping past the new end would raise SIGBUS, so the console drops it before the next use.
    write_file(dir.file("tiny.ember"), read_file(model_f16()));
    const std::string refused = c.command("gen -n 5 a");
    CHECK(refused.find("ERR model tiny: its file was written over since it was loaded") == 0);
    CHECK(c.command("info").find("model: none") != std::string::npos);
    CHECK(c.command("gen -n 5 a").find("ERR no model loaded") == 0);
    // load verifies the new bytes and uses them.
    CHECK(c.command("load tiny").find("OK loaded tiny: n_layer") == 0);
    CHECK(c.command("gen -n 5 a").find("OK gen 5 tokens") != std::string::npos);
}

TEST_CASE("console: --backend: info names the backend, cuda without a GPU is one ERR line and nothing changes") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    {
        ConsoleOptions o = opts_for(dir);
        o.backend = BackendKind::Cpu;
        PtyConsole c(o);
        CHECK(c.command("load tiny").find("OK loaded tiny") == 0);
        auto m = Model::open(dir.file("tiny.ember"));
        const std::string want = "backend: cpu, threads 1, arena " + std::to_string(plan_memory(*m, 1, false).total) + " bytes\n";
        CHECK(c.command("info").find(want) != std::string::npos);
    }
    if (!cuda_available()) {  // here and in CI: no GPU
        ConsoleOptions o = opts_for(dir);
        o.backend = BackendKind::Cuda;
        PtyConsole c(o);
        const std::string out = c.command("load tiny");
        CAPTURE(out);
        CHECK(out.find("ERR ") == 0);
        CHECK((out.find("no CUDA device found") != std::string::npos || out.find("the CUDA backend module cannot be loaded") != std::string::npos));
        CHECK(std::count(out.begin(), out.end(), '\n') == 1);
        CHECK(c.command("info").find("model: none loaded\n") == 0);  // nothing was loaded
    }
}

TEST_CASE("console: a model to load at start that is missing is said once, as the typed load says it") {
    TempDir dir;
    ConsoleOptions o = opts_for(dir);
    o.load = "nothere";
    PtyConsole c(o);  // waits for the first prompt, which follows the start's ERR line
    CHECK(c.seen().find("ERR load nothere: no model file " + dir.file("nothere.ember") + "; see models") != std::string::npos);
    CHECK(c.seen().find("load: ") == std::string::npos);
    CHECK(c.command("load nothere").find("ERR load nothere: no model file " + dir.file("nothere.ember") + "; see models") == 0);
    // The file's name with its suffix: the name to give is said, where that model is there.
    CHECK(c.command("load nothere.ember").find("ERR load nothere.ember: no model file " + dir.file("nothere.ember.ember") + "; see models") == 0);
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    CHECK(c.command("load tiny.ember").find("ERR load tiny.ember: no model file " + dir.file("tiny.ember.ember") +
                                               "; give the name without .ember (load tiny); see models") == 0);
    // A link loop is said as one (it said "no model file").
    REQUIRE(::symlink("loopb.ember", dir.file("loopa.ember").c_str()) == 0);
    REQUIRE(::symlink("loopa.ember", dir.file("loopb.ember").c_str()) == 0);
    CHECK(c.command("load loopa").find("ERR load loopa: cannot read " + dir.file("loopa.ember") + ": " + std::strerror(ELOOP)) == 0);
    CHECK(c.command("info").find("model: none loaded") != std::string::npos);
}

TEST_CASE("console: Ctrl-C stops a generation, type-ahead is kept") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    ConsoleOptions o = opts_for(dir);
    o.load = "tiny";
    o.crlf = true;
    PtyConsole c(o);
    c.send("gen -n 1000000 The\n");
    REQUIRE(c.wait_for("The") != std::string::npos);
    ::usleep(100 * 1000);
    c.send("\x03");
    REQUIRE(c.wait_for("^C\r\nOK gen interrupted after ") != std::string::npos);
    REQUIRE(c.wait_for("\r\n> ") != std::string::npos);
    // Two commands in one write: both run, in order.
    c.send("gen -n 3 --seed 1 The\r\ninfo\r\n");
    CHECK(c.wait_for("OK gen 3 tokens") != std::string::npos);
    CHECK(c.wait_for("OK info\r\n") != std::string::npos);
}

TEST_CASE("console: echo shows whole characters, backspace removes one") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    ConsoleOptions o = opts_for(dir);
    o.load = "tiny";
    o.echo = true;
    PtyConsole c(o);
    c.send("gen -n 1 caf\xc3");
    ::usleep(50 * 1000);
    c.send("\xa9x\x7f\n");  // U+00E9 in two writes, then x and a backspace
    CHECK(c.wait_for("gen -n 1 caf\xc3\xa9x\b \b\n") != std::string::npos);
    CHECK(c.wait_for("caf\xc3\xa9") != std::string::npos);  // the prompt text, then a token
    CHECK(c.wait_for("OK gen 1 tokens") != std::string::npos);
}

TEST_CASE("console: arrow keys and other escape sequences edit the line, never an ERR, what is shown is what runs") {
    TempDir dir;
    ConsoleOptions o = opts_for(dir);
    o.echo = true;
    PtyConsole c(o);
    // "inf", Left, Right, an unknown key (Insert), F1, "o": the line is "info".
    c.send("inf\x1b[D\x1b[C\x1b[2~\x1bOPo\r");
    CHECK(c.wait_for("inf\bfo\nmodel: none loaded\n") != std::string::npos);
    CHECK(c.wait_for("OK info\n> ") != std::string::npos);
    // "xinfo", Home, Delete: shown "info", runs info.
    c.send("xinfo\x1b[H\x1b[3~\r");
    CHECK(c.wait_for("xinfo\b\b\b\b\binfo \b\b\b\b\b\nmodel: none loaded\n") != std::string::npos);
    CHECK(c.wait_for("OK info\n> ") != std::string::npos);
    // Up: the last line again.
    c.send("\x1b[A");
    CHECK(c.wait_for("info") != std::string::npos);
    c.send("\r");
    CHECK(c.wait_for("\nmodel: none loaded\n") != std::string::npos);
    CHECK(c.wait_for("OK info\n> ") != std::string::npos);
    // Ctrl-U and Ctrl-W are edits now, not control characters.
    c.send("frobnicate\x15help\x17info\r");
    CHECK(c.wait_for("OK info\n> ") != std::string::npos);
    CHECK(c.seen().find("ERR") == std::string::npos);
}

TEST_CASE("console: a bare Enter prints the banner line and the prompt again") {
    TempDir dir;
    PtyConsole c(opts_for(dir));
    c.send("\r");
    CHECK(c.wait_for("ember-console 0.1.0: models in " + dir.path() + "; type help\n> ") != std::string::npos);
    c.send("\r");  // (an LF right after the CR would be part of the same Enter)
    CHECK(c.wait_for("ember-console 0.1.0: models in " + dir.path() + "; type help\n> ") != std::string::npos);
}

TEST_CASE("console: flash typed by hand gives up within 3 s and points to ember flash") {
    TempDir dir;
    ConsoleOptions o = opts_for(dir);
    o.flash_idle_ms = 30000;  // the default: a transfer that stalls is waited for
    PtyConsole c(o);
    const int64_t t0 = now_ms();
    c.send("flash\r");
    REQUIRE(c.wait_for("ERR flash: no frame came in 3 s: flash takes a model from `ember flash MODEL.ember --port DEV` on the host", 6000) !=
            std::string::npos);
    const int64_t took = now_ms() - t0;
    CHECK(took >= 2900);
    CHECK(took < 3600);
    CHECK(c.wait_for("\n> ") != std::string::npos);
    CHECK(c.command("info").find("model: none loaded\n") == 0);  // the console is back
}

TEST_CASE("console: megabytes of garbage during a gen: the type-ahead stays bounded and the drop is reported") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    ConsoleOptions o = opts_for(dir);
    o.load = "tiny";
    o.log_file = dir.file("console.log");
    PtyConsole c(o);
    c.send("gen -n 1000000 The\n");
    const bool started = c.wait_for("The") != std::string::npos;
    CAPTURE(c.seen());
    REQUIRE(started);
    // 2 MiB of random bytes, none of them Ctrl-C, while the generation runs.
    std::mt19937 rng(7);
    std::string garbage(2u << 20, '\0');
    for (char& b : garbage) {
        b = static_cast<char>(rng() % 256);
        if (b == '\x03') b = 'x';
    }
    c.pump(garbage);
    c.send("\x03");
    REQUIRE(c.wait_for("^C\n", 20000) != std::string::npos);
    const size_t at = c.seen().rfind("type-ahead: ");
    REQUIRE(at != std::string::npos);
    const unsigned long long dropped = std::stoull(c.seen().substr(at + 12));
    CAPTURE(c.seen().substr(at, 100));
    CHECK(c.seen().find(" bytes dropped (at most " + std::to_string(kMaxTypeAhead) + " are kept while a command runs)\n", at) != std::string::npos);
    // Every byte was kept (at most kMaxTypeAhead), dropped, or read in the one read (4096 bytes at
    // most) that brought the Ctrl-C, which uses up what came before it.
    CHECK(dropped + kMaxTypeAhead + 4096 >= garbage.size());
    CHECK(dropped <= garbage.size());
    REQUIRE(c.wait_for("OK gen interrupted after ") != std::string::npos);
    REQUIRE(c.wait_for("\n> ") != std::string::npos);
    CHECK(c.command("info").find("model: tiny (") == 0);  // what was kept went with the Ctrl-C
    CHECK(read_file(dir.file("console.log")).find("ember-console: type-ahead: " + std::to_string(dropped) + " bytes dropped") != std::string::npos);
}

TEST_CASE("console: a line that the type-ahead limit cuts is dropped whole, never run as its first part") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    ConsoleOptions o = opts_for(dir);
    o.load = "tiny";
    PtyConsole c(o);
    c.send("gen -n 1500 The\n");
    REQUIRE(c.wait_for("The") != std::string::npos);
    // While it runs: blank lines up to 4079 bytes, then a line whose first 17 bytes fill the
    // 4096 kept: "set temperature 0" of "set temperature 0.5". It used to run as typed so.
    std::string fill;
    for (int i = 0; i < 4; ++i) fill += std::string(1000, ' ') + "\n";
    fill += std::string(74, ' ') + "\n";
    REQUIRE(fill.size() + 17 == kMaxTypeAhead);
    c.pump(fill + "set temperature 0.5\n");
    // The 3 bytes past the limit and the 17 kept of their line.
    CHECK(c.wait_for("type-ahead: 20 bytes dropped") != std::string::npos);
    REQUIRE(c.wait_for("OK gen 1500 tokens") != std::string::npos);
    c.send("info\n");
    REQUIRE(c.wait_for("OK info") != std::string::npos);
    CHECK(c.seen().find("settings: n 200, temperature 1,") != std::string::npos);
    CHECK(c.seen().find("temperature 0,") == std::string::npos);
    CHECK(c.seen().find("ERR") == std::string::npos);
}

TEST_CASE("console: at start, a save's temporary file whose process is gone is removed and logged, others are kept") {
    TempDir dir;
    const pid_t child = ::fork();  // a PID that is surely gone once waited for
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
    const std::vector<std::string> removed{"a.emba.tmp-" + dead, "m.ember.tmp-" + dead,
                                           "old.emba.tmp-" + std::to_string(::getpid())};  // before this boot: its PID is another's now
    const std::vector<std::string> kept{"b.emba.tmp-" + alive,  // its writer runs (this process)
                                        "notes.txt.tmp-" + dead, "c.emba.tmp-x" + dead, "d.emba.tmp-", "e.emba.tmp-0", "f.emba"};
    for (const auto& n : removed) write_file(dir.file(n), "half an adapter");
    for (const auto& n : kept) write_file(dir.file(n), "kept");
    const timeval long_ago[2] = {{1000000000, 0}, {1000000000, 0}};  // 2001, before any boot of this machine
    REQUIRE(::utimes(dir.file("old.emba.tmp-" + std::to_string(::getpid())).c_str(), long_ago) == 0);
    int journal[2];
    REQUIRE(::pipe(journal) == 0);
    {
        ConsoleOptions o = opts_for(dir);
        o.log_fd = journal[1];
        PtyConsole c(o);
        CHECK(c.command("help").find("load") != std::string::npos);
    }
    ::close(journal[1]);
    const std::string log = read_to_end(journal[0]);
    for (const auto& n : removed) {
        CAPTURE(n);
        CHECK_FALSE(exists(dir.file(n)));
        CHECK(log.find("removed " + n + ": a save that its process never finished") != std::string::npos);
    }
    for (const auto& n : kept) {
        CAPTURE(n);
        CHECK(exists(dir.file(n)));
    }
}

TEST_CASE("console: loads, refusals and errors are logged with an ISO 8601 UTC time, to --log (appended) and to stderr's fd") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    const std::string earlier = "2026-12-01T16:05:03.120Z ember-console: an earlier line\n";  // the log's own shape: appended to
    write_file(dir.file("console.log"), earlier);
    int journal[2];
    REQUIRE(::pipe(journal) == 0);
    {
        ConsoleOptions o = opts_for(dir);
        o.log_file = dir.file("console.log");
        o.log_fd = journal[1];
        o.flash_idle_ms = 500;
        PtyConsole c(o);
        CHECK(c.command("load tiny").find("OK loaded tiny") == 0);
        CHECK(c.command("frobnicate").find("ERR unknown command") == 0);
        CHECK(c.command("load nothere").find("ERR load nothere: no model file") == 0);
        CHECK(c.command("flash").find("ERR flash: no frame came in 0.5 s") != std::string::npos);
    }
    ::close(journal[1]);
    const std::string from_fd = read_to_end(journal[0]);
    const std::string log = read_file(dir.file("console.log"));
    REQUIRE(log.rfind(earlier, 0) == 0);        // appended
    CHECK(log.substr(earlier.size()) == from_fd);  // the same lines in both
    const std::regex stamp(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z ember-console: .+$)");
    std::vector<std::string> lines;
    for (size_t from = earlier.size(), k; (k = log.find('\n', from)) != std::string::npos; from = k + 1) lines.push_back(log.substr(from, k - from));
    REQUIRE(lines.size() >= 6);
    for (const auto& l : lines) {
        CAPTURE(l);
        CHECK(std::regex_match(l, stamp));
    }
    const auto logged = [&](const std::string& what) { return log.find("Z ember-console: " + what) != std::string::npos; };
    CHECK(logged("start: models in " + dir.path()));
    CHECK(logged("loaded tiny: n_layer"));
    CHECK(logged("ERR unknown command 'frobnicate' (try help) (for: frobnicate)"));
    CHECK(logged("ERR load nothere: no model file"));
    CHECK(logged("ERR flash: no frame came in 0.5 s"));
    CHECK(logged("the line closed: exiting"));
    // The year is this year's, in UTC.
    const time_t now = ::time(nullptr);
    tm t{};
    ::gmtime_r(&now, &t);
    CHECK(lines[0].substr(0, 4) == std::to_string(1900 + t.tm_year));
}

TEST_CASE("event log: a line the file took only part of (a full disk) stays apart, and the next starts on a line of its own, in that run and the next") {
    // The file limit (RLIMIT_FSIZE, as a full disk) cut a line short, and the next line was
    // written on after it: "...722Z em2026-12-07T15:56:11.556Z ember-console: start: ...".
    TempDir dir;
    const std::string path = dir.file("console.log");
    const auto file_size = [&] {
        struct stat st {};
        return ::stat(path.c_str(), &st) == 0 ? static_cast<rlim_t>(st.st_size) : rlim_t(0);
    };
    int err[2];
    REQUIRE(::pipe(err) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(err[0]);
        ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing
        rlimit room{};
        ::getrlimit(RLIMIT_FSIZE, &room);
        rlimit full = room;
        full.rlim_cur = 300;  // lines of 79 bytes: three whole, the fourth cut at 63
        if (::setrlimit(RLIMIT_FSIZE, &full) != 0) ::_exit(2);
        {
            ember::fw::EventLog log(err[1], path);
            for (int i = 0; i < 6; ++i) log.log("event " + std::to_string(i) + " " + std::string(30, 'x'));
            if (::setrlimit(RLIMIT_FSIZE, &room) != 0) ::_exit(3);
            log.log("after the full disk");
            full.rlim_cur = file_size() + 20;  // cut the next line again, and end this run there
            if (::setrlimit(RLIMIT_FSIZE, &full) != 0) ::_exit(4);
            log.log("cut at the end of the run " + std::string(30, 'y'));
        }
        ::_exit(0);
    }
    ::close(err[1]);
    const std::string notes = read_to_end(err[0]);
    ::close(err[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    CAPTURE(notes);
    // The reason, not "a short write".
    CHECK(notes.find("--log " + path + ": cannot write (" + std::strerror(EFBIG) + "): events go to stderr only") != std::string::npos);
    CHECK(notes.find("--log " + path + ": written again") != std::string::npos);
    { ember::fw::EventLog(-1, path).log("the next run"); }  // the file ends mid-line
    const std::string log = read_file(path);
    CAPTURE(log);
    REQUIRE(!log.empty());
    CHECK(log.back() == '\n');
    const std::regex stamp(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z ember-console: .+$)");
    std::vector<std::string> lines;
    for (size_t from = 0, k; (k = log.find('\n', from)) != std::string::npos; from = k + 1) lines.push_back(log.substr(from, k - from));
    REQUIRE(lines.size() == 7);  // three whole, one cut, after, one cut, the next run
    for (int i : {0, 1, 2, 4, 6}) {
        CAPTURE(lines[i]);
        CHECK(std::regex_match(lines[i], stamp));
    }
    CHECK(lines[3].size() == 300 - 3 * (lines[0].size() + 1));  // the part the file took, alone on its line
    CHECK(lines[3].find("ember-console: event 3 ") != std::string::npos);
    CHECK(lines[4].find("ember-console: after the full disk") != std::string::npos);
    CHECK(lines[5].size() == 20);  // the 20 bytes allowed (the line before ended whole)
    CHECK(lines[6].find("ember-console: the next run") != std::string::npos);
    for (const auto& l : lines) CHECK(l.find("ember-console:") == l.rfind("ember-console:"));  // never two lines in one
}

TEST_CASE("console: gen and set take --stop and --repeat-penalty, --skip-unknown, as the runtime's generate loop") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    PtyConsole c(opts_for(dir));
    REQUIRE(c.command("load tiny").find("OK loaded tiny") == 0);
    const std::string prompt = "The quick brown";
    SamplerOptions o;
    o.seed = 3;
    o.temperature = 0.9f;
    o.repeat_penalty = 1.5f;
    o.repeat_last_n = 16;
    // Without a stop string: the penalty changes the text, and equals the runtime's.
    const std::string with = reference_generate_loop(dir.file("tiny.ember"), prompt, 80, o, {});
    SamplerOptions plain = o;
    plain.repeat_penalty = 1.0f;
    CHECK(with != reference_generate_loop(dir.file("tiny.ember"), prompt, 80, plain, {}));
    std::string out = c.command("gen -n 80 --seed 3 --temp 0.9 --repeat-penalty 1.5 --repeat-last-n 16 " + prompt);
    CHECK(out.find(with + "\n") == 0);
    // A stop string taken from that text: the console prints what comes before it, and says which ended it.
    const std::string stop = with.substr(prompt.size() + 30, 3);
    GenerateResult r;
    const std::string cut = reference_generate_loop(dir.file("tiny.ember"), prompt, 80, o, {stop}, &r);
    REQUIRE(r.stop == 0);
    CHECK(cut.size() < with.size());
    CHECK(with.rfind(cut, 0) == 0);
    out = c.command("gen -n 80 --seed 3 --temp 0.9 --repeat-penalty 1.5 --repeat-last-n 16 --stop " + stop + " " + prompt);
    CHECK(out.find(cut + "\nOK gen " + std::to_string(r.tokens) + " tokens in ") == 0);
    CHECK(out.find("; stop string \"" + stop + "\"") != std::string::npos);
    // The same through set: the defaults of every gen, until set stop off.
    CHECK(c.command("set repeat-penalty 1.5").find("repeat-penalty 1.5") != std::string::npos);
    CHECK(c.command("set repeat_last_n 16").find("repeat-last-n 16") != std::string::npos);
    CHECK(c.command("set stop " + stop).find("stop \"" + stop + "\"") != std::string::npos);
    CHECK(c.command("gen -n 80 --seed 3 --temp 0.9 " + prompt).find(cut + "\nOK gen ") == 0);
    CHECK(c.command("set stop off").find("stop none") != std::string::npos);
    CHECK(c.command("gen -n 80 --seed 3 --temp 0.9 " + prompt).find(with + "\n") == 0);
    // --skip-unknown: the characters outside the vocabulary are dropped and counted.
    CHECK(c.command("gen -n 5 Q\xe2\x82\xac").find("ERR prompt: character") == 0);
    out = c.command("gen -n 80 --seed 3 --temp 0.9 --skip-unknown The quick\xe2\x82\xac brown");
    CHECK(out.find(with + "\n") == 0);
    CHECK(out.find("; 1 prompt characters outside the vocabulary skipped") != std::string::npos);
}

TEST_CASE("console: info on a crafted provenance sends no control byte to the terminal") {
    // The provenance lies in the index, outside the checksummed data section. ember info escaped
    // it; the console's info replaced only CR and LF, so ESC [2J (clear the screen), CSI
    // (U+009B), BEL and an invalid byte went to the serial terminal as they were.
    TempDir dir;
    std::string bytes = read_file(model_int8());
    const std::string name = "model.pt", evil = "\x1b[2J\xc2\x9b\xff\x07";
    const size_t at = bytes.find(name);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, name.size(), evil);
    write_file(dir.file("evil.ember"), bytes);
    PtyConsole c(opts_for(dir));
    REQUIRE(c.command("load evil").find("OK loaded evil") == 0);
    const std::string out = c.command("info");
    const size_t line = out.find("source: ");
    REQUIRE(line != std::string::npos);
    CHECK(out.find("source: \\x1b[2J\\xc2\\x9b\\xff\\x07 (sha256 ", line) == line);
    for (char ch : out) CHECK((ch == '\n' || ch == '\r' || static_cast<unsigned char>(ch) >= 0x20));
    CHECK(out.find("\xc2\x9b") == std::string::npos);
}

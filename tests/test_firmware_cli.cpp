// The serial console and flashing with the real programs, through ptys (no hardware):
// ember-console on one pty, `ember flash` on another, a relay between the two masters.
// Flash the default model, then `gen` with a seed gives the text `ember generate` gives.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <thread>
#include <vector>
#include <string>

#include "converter/convert.h"
#include "firmware/port_lock.h"
#include "firmware/fw_test_util.h"
#include "runtime/sha256.h"
#include "test_util.h"

using namespace ember;

namespace {

struct Run {
    int status = -1;
    std::string out, err;
};

Run run(const std::string& cmd, const test::TempDir& dir) {
    const std::string out = dir.file("stdout"), err = dir.file("stderr");
    const int rc = std::system((cmd + " >'" + out + "' 2>'" + err + "' </dev/null").c_str());
    Run r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
    r.out = test::read_file(out);
    r.err = test::read_file(err);
    return r;
}

struct Pty {
    int master = -1, slave = -1;
    std::string path;
    Pty() {
        char name[128];
        REQUIRE(::openpty(&master, &slave, name, nullptr, nullptr) == 0);
        path = name;
    }
    ~Pty() {
        if (master >= 0) ::close(master);
        if (slave >= 0) ::close(slave);
    }
};

// The UUCP lock file's contents for `pid`: 10 characters, right-aligned, and a newline.
std::string pid_line_of(long pid) {
    char b[16];
    std::snprintf(b, sizeof b, "%10ld\n", pid);
    return b;
}

}  // namespace

TEST_CASE("ember flash + ember-console over ptys: the default model, then gen equals ember generate") {
    test::TempDir dir;
    const std::string root = test::source_dir() + "/models/";
    convert::ConvertOptions co;
    co.checkpoint = root + "shakespeare_char.pt";
    co.vocab_text = root + "shakespeare_char.vocab.txt";
    co.out = dir.file("shakespeare_char.ember");
    convert::convert(co);
    const std::string dev_dir = dir.file("device");
    REQUIRE(::mkdir(dev_dir.c_str(), 0755) == 0);

    Pty device, host;
    const test::ProgramArgv argv(EMBER_CONSOLE, {"--port", device.path, "--models", dev_dir, "--flash-timeout", "2000"});
    const pid_t console = ::fork();
    REQUIRE(console >= 0);
    if (console == 0) {
        // Only the console's own line: a pty master left open here would hide the hang-up.
        ::close(device.master);
        ::close(host.master);
        ::close(host.slave);
        ::close(device.slave);
        argv.exec();
        _exit(127);
    }
    // (The test keeps device.slave open: with no slave open, reads of the master fail.)
    std::string seen;
    REQUIRE(fwtest::expect(device.master, seen, "> ") != std::string::npos);
    CHECK(seen.find("no model loaded") != std::string::npos);
    {
        fwtest::Relay relay(host.master, device.master, nullptr, nullptr);
        // --name with .ember installs NAME.ember (it used to install shakespeare_char.ember.ember).
        const std::string flash = test::program_cmd(EMBER_CLI) + " flash --port " + host.path + " '" + co.out +
                                  "' --timeout 500 --name shakespeare_char.ember";
        // A file the host cannot verify is not sent (exit 1); with --no-verify the device refuses it (exit 2).
        test::write_file(dir.file("notes.ember"), std::string(3000, 'n'));
        Run bad = run(test::program_cmd(EMBER_CLI) + " flash --port " + host.path + " '" + dir.file("notes.ember") + "' --timeout 500", dir);
        CHECK(bad.status == 1);
        CHECK(bad.err.find("ember: error: ") == 0);
        CHECK(bad.err.find("(not flashed; --no-verify sends it anyway)") != std::string::npos);
        CHECK(bad.err.find("notes.ember: not an .ember file (identifier is not \"EMBR\")") != std::string::npos);
        // A file shorter than the smallest header has its own message, from ember info too.
        test::write_file(dir.file("hello.ember"), "hello world\n");
        bad = run(test::program_cmd(EMBER_CLI) + " flash --port " + host.path + " '" + dir.file("hello.ember") + "' --timeout 500", dir);
        CHECK(bad.status == 1);
        CHECK(bad.err.find("hello.ember: 12 bytes is too short for an .ember file (not flashed; --no-verify sends it anyway)") !=
              std::string::npos);
        // A model with bytes appended: refused before the port is opened, as ember info refuses
        // it (the device would refuse it after the whole transfer).
        {
            std::string appended = test::read_file(co.out);
            appended += "a log line\n";
            test::write_file(dir.file("appended.ember"), appended);
        }
        bad = run(test::program_cmd(EMBER_CLI) + " flash --port /nonexistent/tty '" + dir.file("appended.ember") + "'", dir);
        CHECK(bad.status == 1);
        CHECK(bad.err == "ember: error: " + dir.file("appended.ember") +
                             ": 11 bytes follow the data section, which ends at byte " + std::to_string(test::read_file(co.out).size()) +
                             " (something was appended to the file) (not flashed; --no-verify sends it anyway)\n");
        // Over 2 GiB (sparse): refused by its size before it is read, checked or not.
        test::write_file(dir.file("huge.ember"), "");
        std::filesystem::resize_file(dir.file("huge.ember"), (uint64_t{1} << 31) + 1);
        for (const char* verify : {"", " --no-verify"}) {
            bad = run(test::program_cmd(EMBER_CLI) + " flash" + verify + " --port /nonexistent/tty '" + dir.file("huge.ember") + "'", dir);
            CHECK(bad.status == 1);
            CHECK(bad.err == "ember: error: " + dir.file("huge.ember") + ": 2147483649 bytes is more than the 2147483648 bytes a model to flash may have\n");
        }
        bad = run(test::program_cmd(EMBER_CLI) + " info '" + dir.file("hello.ember") + "'", dir);
        CHECK(bad.status == 1);
        CHECK(bad.err == "ember: error: " + dir.file("hello.ember") + ": 12 bytes is too short for an .ember file\n");
        bad = run(test::program_cmd(EMBER_CLI) + " flash --no-verify --port " + host.path + " '" + dir.file("notes.ember") + "' --timeout 500", dir);
        CAPTURE(bad.err);
        CHECK(bad.status == 2);
        CHECK(bad.err.find("ember: error: the device refused the file: not a valid .ember model") != std::string::npos);
        // An empty file is named, and a name that reads as an option is refused, before the port is opened.
        test::write_file(dir.file("empty.ember"), "");
        Run empty = run(test::program_cmd(EMBER_CLI) + " flash --no-verify --port /nonexistent/tty '" + dir.file("empty.ember") + "'", dir);
        CHECK(empty.status == 1);
        CHECK(empty.err.find("empty.ember: the file is empty (not flashed)") != std::string::npos);
        for (const std::string& folder : {dir.path(), dir.path() + "/"}) {  // "/" said: model name is empty
            const Run d = run(test::program_cmd(EMBER_CLI) + " flash --port /nonexistent/tty '" + folder + "'", dir);
            CHECK(d.status == 1);
            CHECK(d.err == "ember: error: " + folder + ": is a directory, not a file (give an .ember file)\n");
        }
        Run dash = run(test::program_cmd(EMBER_CLI) + " flash --port /nonexistent/tty --name - '" + co.out + "'", dir);
        CHECK(dash.status == 1);
        CHECK(dash.err.find("model name '-' starts with '-' (choose one with --name)") != std::string::npos);
        Run nodev = run(test::program_cmd(EMBER_CLI) + " flash --port /nonexistent/tty '" + co.out + "'", dir);
        CHECK(nodev.status == 1);
        CHECK(nodev.err.find("/nonexistent/tty: cannot open") != std::string::npos);

        const Run r = run(flash, dir);
        CAPTURE(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.out.find("as shakespeare_char.ember:") != std::string::npos);
        CHECK(r.out.find("device: installed shakespeare_char.ember") != std::string::npos);
        CHECK(r.err.find("100% [") != std::string::npos);
        // The same file again: nothing to send, said so (it printed "resuming at byte N of N", a bar
        // at 0 B/s and "N bytes sent").
        const Run again = run(flash, dir);
        CAPTURE(again.err);
        REQUIRE(again.status == 0);
        CHECK(again.out.find("as shakespeare_char.ember: nothing sent, the device held all ") != std::string::npos);
        CHECK(again.out.find("device: already installed shakespeare_char.ember") != std::string::npos);
        CHECK(again.err.find("resuming") == std::string::npos);
        CHECK(again.err.find("B/s") == std::string::npos);
        relay.stop();
    }
    CHECK(sha256_file(dev_dir + "/shakespeare_char.ember") == sha256_file(co.out));
    CHECK(fwtest::exists(dev_dir + "/notes.ember") == false);

    // The console loaded it: gen with a seed, straight on the device's line.
    seen.clear();
    // 300 tokens, past block_size 128 (130 under the emulator: each token past it recomputes the
    // whole window, which qemu makes minutes).
    const std::string n = test::kEmulatorSlowdown > 1 ? "130" : "300";
    const std::string cmd = "gen -n " + n + " --seed 7 ROMEO:\\n\n";
    fw::write_all(device.master, cmd.data(), cmd.size());
    const size_t end = fwtest::expect(device.master, seen, "\nOK gen " + n + " tokens", 0, 30000 * test::kEmulatorSlowdown);
    REQUIRE(end != std::string::npos);
    const size_t start = seen.find("ROMEO:\n");
    REQUIRE(start != std::string::npos);
    const std::string text = seen.substr(start, end - ("\nOK gen " + n + " tokens").size() - start);
    const Run ref = run(test::program_cmd(EMBER_CLI) + " generate -m '" + co.out + "' -p 'ROMEO:\n' -n " + n + " --seed 7", dir);
    REQUIRE(ref.status == 0);
    CHECK(text + "\n" == ref.out);

    ::close(device.master);  // hang-up: the console exits
    device.master = -1;
    int status = 0;
    REQUIRE(::waitpid(console, &status, 0) == console);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("ember-console: a --models folder that is not there is refused at start, naming it, with mkdir -p only where it helps") {
    test::TempDir dir;
    const std::string err = dir.file("err");
    test::write_file(dir.file("a-file"), "x");
    REQUIRE(::symlink(dir.file("gone").c_str(), dir.file("dangling").c_str()) == 0);
    struct Case {
        std::string models, says;
        bool mkdir_hint;
    };
    // mkdir -p fails with "File exists" on a file or on a link to nowhere: it used to be advised there.
    for (const Case& c : {Case{dir.file("no-such-folder"), "No such file or directory (create it first: mkdir -p " + dir.file("no-such-folder") + ")", true},
                          Case{dir.file("a-file"), "exists and is not a folder", false},
                          Case{dir.file("dangling"), "a symbolic link to nothing", false}}) {
        CAPTURE(c.models);
        const int rc = std::system((test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + c.models + "' </dev/null >/dev/null 2>'" + err + "'").c_str());
        REQUIRE(WIFEXITED(rc));
        CHECK(WEXITSTATUS(rc) == 1);
        const std::string msg = test::read_file(err);
        CAPTURE(msg);
        CHECK(msg == "ember-console: error: --models " + c.models + ": " + c.says + "\n");
        CHECK((msg.find("mkdir") != std::string::npos) == c.mkdir_hint);
    }
}

TEST_CASE("ember-console: models lists only the files load could open, and an unusable DIR/current is said in the log") {
    test::TempDir dir;
    const std::string models = dir.file("models");
    REQUIRE(::mkdir(models.c_str(), 0755) == 0);
    test::write_file(models + "/good.ember", test::read_file(test::source_dir() + "/models/shakespeare_char.ember"));
    REQUIRE(::symlink("good.ember", (models + "/link.ember").c_str()) == 0);         // a link to a model: listed
    REQUIRE(::symlink("/nonexistent", (models + "/dangling.ember").c_str()) == 0);  // these three used to be listed too
    REQUIRE(::mkdir((models + "/folder.ember").c_str(), 0755) == 0);
    REQUIRE(::mkfifo((models + "/fifo.ember").c_str(), 0644) == 0);
    test::write_file(models + "/current", "../etc\n");  // a name the console refuses: it used to be ignored without a word
    const Run r = run("(printf 'models\\n' | " + test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + models + "')", dir);
    CAPTURE(r.out);
    CAPTURE(r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("  good  ") != std::string::npos);
    CHECK(r.out.find("  link  ") != std::string::npos);
    CHECK(r.out.find("OK 2 models\n") != std::string::npos);
    CHECK(r.out.find("no model loaded") != std::string::npos);
    CHECK(r.err.find("ember-console: " + models + "/current ignored: model name '../etc' holds a '/': a name, not a path") != std::string::npos);
}

TEST_CASE("ember-console --stdio: input that ends without a newline runs its last line, as sh does") {
    test::TempDir dir;
    const std::string models = dir.file("models");
    REQUIRE(::mkdir(models.c_str(), 0755) == 0);
    // The last command used to be dropped without a word.
    const Run r = run("(printf 'set n 5\\ninfo' | " + test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + models + "')", dir);
    CAPTURE(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("OK n 5,") != std::string::npos);
    CHECK(r.out.find("settings: n 5,") != std::string::npos);
    CHECK(r.out.find("OK info\n") != std::string::npos);
}

TEST_CASE("ember-console: --version, a mistyped option named with the nearest, a bad --baud listing the standard rates, empty names refused") {
    test::TempDir dir;
    const std::string console = test::program_cmd(EMBER_CONSOLE) + " --models '" + dir.path() + "' ";
    const Run v = run(test::program_cmd(EMBER_CONSOLE) + " --version", dir);
    CHECK(v.status == 0);
    CHECK(v.out.find("ember-console 0.1.0 (ember 0.1.0, .ember format versions 1 and 2)\n") == 0);
    struct Case {
        std::string args, err;
    };
    for (const Case& c : {Case{"--prot /dev/ttyTHS0", "unknown option --prot; did you mean --port?"},
                          Case{"--stdio --kv-cahce f32", "unknown option --kv-cahce; did you mean --kv-cache?"},
                          Case{"--stdio --rtcts", "unknown option --rtcts; did you mean --rtscts?"},
                          Case{"--stdio stray", "unexpected argument 'stray'"},
                          Case{"--stdio --baud 12345", "--baud: not a standard rate (50, 75, 110, "},
                          Case{"--stdio --baud 12345", ", 115200, 230400, "},
                          // an empty name (a script's unset variable) used to mean no log, or the current model
                          Case{"--stdio --log ''", "--log: needs a file name"},
                          Case{"--stdio --load ''", "--load: needs a model name"},
                          Case{"--stdio --threads 999", "--threads 999 not in 0..256"},
                          Case{"--stdio --threads 1 --threads 2", "--threads given 2 times: give it once"},
                          // decimal only: 0x10 and 010 were read as 16 and 8
                          Case{"--stdio --flash-timeout 0x10", "--flash-timeout: '0x10' is not an integer"},
                          Case{"--stdio --threads 0257", "--threads 0257 not in 0..256"},
                          Case{"--stdio --baud 115200x", "--baud: '115200x' is not an integer"},
                          Case{"--stdio --baud 0", "--baud 0 not in 50..4000000"}}) {  // --help said [0 - 4000000]
        CAPTURE(c.args);
        const Run r = run(console + c.args, dir);
        CHECK(r.status == 1);
        CHECK(r.err.find("ember-console: error: ") == 0);
        CHECK(r.err.find(c.err) != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
    }
}

TEST_CASE("ember-console: --log naming a model, a text or a FIFO nobody reads is refused at start and the file is left as it was") {
    test::TempDir dir;
    const std::string model = dir.file("m.ember"), text = dir.file("notes.txt"), fifo = dir.file("log.fifo");
    test::write_file(model, test::read_file(test::fixture("gptpy/model.pt")));  // bytes that are not a log
    test::write_file(text, "my notes\n");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    const std::string model_bytes = test::read_file(model);
    for (const std::string& log : {model, text, fifo}) {
        CAPTURE(log);
        const Run r = run(test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + dir.path() + "' --log '" + log + "'", dir);
        CHECK(r.status == 1);
        CHECK(r.err.find("ember-console: error: --log " + log + ": ") == 0);
        CHECK(r.err.find(log == fifo ? "No such device or address" : "exists and is not an ember-console log") != std::string::npos);
    }
    CHECK(test::read_file(model) == model_bytes);
    CHECK(test::read_file(text) == "my notes\n");
    // Its own log, and an empty file, are appended to.
    const std::string own = dir.file("console.log");
    const Run first = run(test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + dir.path() + "' --log '" + own + "'", dir);
    CHECK(first.status == 0);
    const std::string before = test::read_file(own);
    REQUIRE(before.find(" ember-console: start: models in ") != std::string::npos);
    const Run second = run(test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + dir.path() + "' --log '" + own + "'", dir);
    CHECK(second.status == 0);
    const std::string after = test::read_file(own);
    CHECK(after.size() > before.size());
    CHECK(after.compare(0, before.size(), before) == 0);
    // A log that takes no lines (a full disk: /dev/full) is said once on stderr, not ignored
    // without a word as it was; the events still reach stderr.
    const Run full = run(test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + dir.path() + "' --log /dev/full", dir);
    CAPTURE(full.err);
    CHECK(full.status == 0);
    CHECK(full.err.find(" ember-console: --log /dev/full: cannot write (No space left on device): events go to stderr only") != std::string::npos);
    CHECK(full.err.find("--log /dev/full: cannot write") == full.err.rfind("--log /dev/full: cannot write"));  // once
    CHECK(full.err.find(" ember-console: the line closed: exiting") != std::string::npos);
}

TEST_CASE("ember-console: two consoles loading models in one folder never leave DIR/current empty or mixed") {
    // Both wrote DIR/current.tmp: one's rename could install the file the other had just
    // truncated ("") or was rewriting ("m\nnger_model_name\n"), and the next start loaded nothing.
    test::TempDir dir;
    const std::string models = dir.file("models");
    REQUIRE(::mkdir(models.c_str(), 0755) == 0);
    const Run conv = run(test::program_cmd(EMBER_CLI) + " convert '" + test::fixture("gptpy/model.pt") + "' --vocab-text '" +
                             test::fixture("gptpy/vocab.txt") + "' -o '" + dir.file("m.ember") + "'",
                         dir);
    REQUIRE(conv.status == 0);
    const std::string model = test::read_file(dir.file("m.ember"));
    const std::string a = "m", b = "longer_model_name";
    test::write_file(models + "/" + a + ".ember", model);
    test::write_file(models + "/" + b + ".ember", model);
    std::atomic<int> running{2};
    auto console = [&](const std::string& name) {
        std::string lines;
        for (int i = 0; i < 600; ++i) lines += "load " + name + "\n";
        test::write_file(dir.file(name + ".in"), lines);
        std::system((test::program_cmd(EMBER_CONSOLE) + " --stdio --threads 1 --models '" + models + "' <'" + dir.file(name + ".in") +
                     "' >/dev/null 2>&1")
                        .c_str());
        --running;
    };
    std::thread ta(console, a), tb(console, b);
    std::set<std::string> seen;
    while (running.load() > 0) {
        std::ifstream f(models + "/current", std::ios::binary);
        if (f) seen.insert(std::string(std::istreambuf_iterator<char>(f), {}));
    }
    ta.join();
    tb.join();
    CHECK(seen.size() >= 2);  // both consoles ran
    for (const std::string& s : seen) {
        CAPTURE(s);
        CHECK((s == a + "\n" || s == b + "\n"));
    }
    // A console killed between its write and its rename leaves current.tmp-PID; the next start removes it.
    test::write_file(models + "/current.tmp-999999999", "m\n");
    const Run r = run("(printf 'models\\n' | " + test::program_cmd(EMBER_CONSOLE) + " --stdio --models '" + models + "')", dir);
    CHECK(r.status == 0);
    struct stat st {};
    CHECK(::stat((models + "/current.tmp-999999999").c_str(), &st) != 0);
}

TEST_CASE("ember flash and ember-console killed by a signal remove their own UUCP lock file, and only their own") {
    // ember flash left /var/lock/LCK..NAME on Ctrl-C, SIGTERM and SIGHUP (it had no handler);
    // ember-console removed it on SIGTERM even when another program's PID was in it by then,
    // and left it on SIGUSR1 or SIGALRM.
#ifdef EMBER_EMULATOR
    MESSAGE("skipped under the emulator: the signal goes to qemu-user, not to the program's handler alone");
#else
    if (::access(fw::kUucpLockDir, W_OK) != 0) {
        MESSAGE("skipped: " << fw::kUucpLockDir << " is not writable here (the programs take no UUCP lock then)");
        return;
    }
    test::TempDir dir;
    test::write_file(dir.file("any.ember"), "not checked with --no-verify\n");
    // Starts the program, waits for its lock file, sends `sig` (after `meanwhile`), and returns
    // the signal that ended it (0 when it exited).
    const std::string err = dir.file("stderr");
    auto killed_by = [&](const test::ProgramArgv& argv, const std::string& lock, int sig, const std::function<void()>& meanwhile) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const int null = ::open("/dev/null", O_RDWR);
            const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(null, 0);
            ::dup2(null, 1);
            ::dup2(e, 2);
            argv.exec();
            _exit(127);
        }
        for (int i = 0; i < 300 && test::read_file(lock) != pid_line_of(pid); ++i) ::usleep(10000);
        CAPTURE(test::read_file(err));
        CHECK(test::read_file(lock) == pid_line_of(pid));
        meanwhile();
        ::kill(pid, sig);
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    };
    // A pty whose number has no lock file: a test running beside this one may still hold the
    // lock of a pty it closed, whose number the kernel then gives here. Those are kept open
    // until the end, so that each new one gets another number.
    std::vector<std::unique_ptr<Pty>> held;
    auto free_pty = [&]() -> Pty& {
        for (;;) {
            held.push_back(std::make_unique<Pty>());
            if (!fwtest::exists(fw::uucp_lock_path(held.back()->path, fw::kUucpLockDir))) return *held.back();
            REQUIRE(held.size() < 50);
        }
    };
    for (int sig : {SIGTERM, SIGHUP, SIGINT}) {
        CAPTURE(sig);
        Pty& host = free_pty();  // nothing answers: ember flash waits, holding the port
        const std::string lock = fw::uucp_lock_path(host.path, fw::kUucpLockDir);
        const test::ProgramArgv flash(EMBER_CLI, {"flash", "--no-verify", "--port", host.path, dir.file("any.ember"), "--timeout", "10000"});
        CHECK(killed_by(flash, lock, sig, [] {}) == sig);
        CHECK(!fwtest::exists(lock));
    }
    for (int sig : {SIGTERM, SIGUSR1, SIGALRM}) {
        CAPTURE(sig);
        Pty& device = free_pty();
        const std::string lock = fw::uucp_lock_path(device.path, fw::kUucpLockDir);
        const test::ProgramArgv console(EMBER_CONSOLE, {"--port", device.path, "--models", dir.path()});
        CHECK(killed_by(console, lock, sig, [] {}) == sig);
        CHECK(!fwtest::exists(lock));
    }
    // A lock file that another program's PID has replaced (ours having been taken for stale)
    // is left to it.
    Pty& device = free_pty();
    const std::string lock = fw::uucp_lock_path(device.path, fw::kUucpLockDir);
    const test::ProgramArgv console(EMBER_CONSOLE, {"--port", device.path, "--models", dir.path()});
    CHECK(killed_by(console, lock, SIGTERM, [&] {
              test::write_file(lock + ".new", pid_line_of(1));
              REQUIRE(::rename((lock + ".new").c_str(), lock.c_str()) == 0);
          }) == SIGTERM);
    CHECK(test::read_file(lock) == pid_line_of(1));
    ::unlink(lock.c_str());
#endif
}

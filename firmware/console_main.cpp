// ember-console: the device program. Owns a serial line (or stdin/stdout) and runs the
// console on it. Exit status: 0 when the line closes, 1 when it cannot start.
// With --stdio on a terminal, the terminal is put in raw mode (Ctrl-C arrives as the 0x03
// byte, as on a serial line) and its settings are restored at exit and on SIGTERM, SIGHUP,
// SIGINT and SIGQUIT (sent by kill; the keys no longer raise them).
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/help_format.h"
#include "cli/option_checks.h"
#include "firmware/console.h"
#include "firmware/port_lock.h"
#include "firmware/serial_port.h"
#include "runtime/model.h"
#include "runtime/error.h"
#include "runtime/suggest.h"
#include "runtime/utf8.h"

using namespace ember;

namespace {

// What a signal must undo: the terminal's settings, the port's UUCP lock file. A signal
// handler takes no argument, so this one piece of state is the program's own (written before
// the handlers are installed, then only read).
struct Undo {
    int fd = -1;
    termios settings{};
    char lock_file[512] = {};
};
Undo g_undo;

void restore_terminal() {
    if (g_undo.fd >= 0) ::tcsetattr(g_undo.fd, TCSANOW, &g_undo.settings);
}

void undo_and_die(int sig) {  // async-signal-safe: tcsetattr, remove_own_lock_file, signal, raise
    restore_terminal();
    // Only while it holds our PID: one taken over by another program since is theirs.
    if (g_undo.lock_file[0]) fw::remove_own_lock_file(g_undo.lock_file);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

// The signals whose default action ends the process, that a person or a script sends
// (SIGPIPE is ignored; SIGKILL cannot be caught: a lock left by it is stale for the next).
constexpr int kFatalSignals[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

const sigset_t& fatal_signal_set() {
    static const sigset_t set = [] {
        sigset_t s;
        sigemptyset(&s);
        for (int sig : kFatalSignals) sigaddset(&s, sig);
        return s;
    }();
    return set;
}

void on_fatal_signals() {
    struct sigaction sa{};
    sa.sa_handler = undo_and_die;
    sigemptyset(&sa.sa_mask);
    for (int sig : kFatalSignals) ::sigaction(sig, &sa, nullptr);
}

// Raw input on the terminal at fd (no echo, no line editing, no signal keys; the console
// edits and echoes), output processing kept (LF is written as CR LF). Throws ember::Error.
void make_raw(int fd) {
    termios t{};
    if (::tcgetattr(fd, &t) != 0) fail("stdin: tcgetattr: ", std::strerror(errno));
    g_undo.settings = t;
    g_undo.fd = fd;
    ::cfmakeraw(&t);
    t.c_oflag |= OPOST | ONLCR;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    on_fatal_signals();
    std::atexit(restore_terminal);
    if (::tcsetattr(fd, TCSAFLUSH, &t) != 0) fail("stdin: tcsetattr: ", std::strerror(errno));
}

// The command line's values.
struct Args {
    std::string port;
    int baud = 115200;
    bool rtscts = false, use_stdio = false;
    std::string backend = "auto", kv_cache = "f16";
    fw::ConsoleOptions o;
};

void add_options(CLI::App& app, Args& a) {
    fw::ConsoleOptions& o = a.o;
    auto* p = app.add_option("--port", a.port, "serial device, e.g. /dev/ttyTHS0 or /dev/ttyGS0");
    auto* s = app.add_flag("--stdio", a.use_stdio, "use stdin/stdout (tests, ssh)");
    p->excludes(s);
    cli::add_int_option_once(&app, "--baud", a.baud, 50, 4000000, "line rate (a standard rate up to 4000000)")->check(CLI::Validator(
        [](std::string& v) {
            long long rate = 0;
            if (!parse_int(v, "", 50, 4000000, rate).empty()) return std::string();  // add_int_option's own refusal
            return fw::is_standard_baud(static_cast<int>(rate)) ? std::string() : "not a standard rate (" + fw::standard_bauds() + ")";
        },
        "BAUD"));
    app.add_flag("--rtscts", a.rtscts, "RTS/CTS hardware flow control");
    app.add_option("--models", o.models_dir, "folder of NAME.ember files (flash installs there)")->capture_default_str()
        ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("needs a folder name") : std::string(); }, "DIR"));
    app.add_option("--load", o.load, "model to load at start (default: the last flashed or loaded)")
        ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("needs a model name") : std::string(); }, "NAME"));
    cli::add_int_option_once(&app, "--threads", o.threads, 0, 256, "0 = all cores");
    app.add_option("--backend", a.backend, "cpu, cuda or auto (CUDA when a GPU is present)")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    app.add_option("--kv-cache", a.kv_cache, "the CPU backend's KV cache: f16 or f32")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
    app.add_flag_callback("--no-mmap", [&o] { o.holding.mmap = false; },
                          "read models into anonymous memory (2 MiB aligned, huge pages advised) instead of mapping the files");
    app.add_flag("--mlock", o.holding.mlock, "lock the loaded model's memory (a failure, e.g. RLIMIT_MEMLOCK, is a warning)");
    app.add_flag("--echo", o.echo, "echo typed characters and edits (a person at a terminal; on by itself with --stdio on a terminal)");
    app.add_flag("--crlf", o.crlf, "end output lines with CR LF (serial terminals)");
    app.add_option("--log", o.log_file, "append the event log (loads, flashes, refusals, errors; ISO 8601 UTC times) to FILE; it goes to stderr too")
        ->check(cli::file_name_check());
    cli::add_int_option_once(&app, "--flash-timeout", o.flash_idle_ms, 100, 3600000, "ms without a frame before binary mode ends");
    app.set_version_flag("--version", "ember-console 0.1.0 (ember " EMBER_VERSION_STRING ", .ember format versions 1 and 2)");
    app.allow_extras();  // a mistyped option is named with the nearest one, before anything else
}

// The first word the options left over, as an error ("" when none): an unknown option with
// the nearest one, or a stray argument.
std::string unknown_argument(CLI::App& app) {
    const std::vector<std::string> rest = app.remaining();
    if (rest.empty()) return "";
    const std::string& w = rest.front();
    if (w.size() > 1 && w[0] == '-') {
        std::vector<std::string> names;
        for (const CLI::Option* opt : app.get_options()) {
            for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
        }
        return "unknown option " + printable(w, 60) + did_you_mean(w.substr(0, w.find('=')), names);
    }
    return "unexpected argument '" + printable(w, 60) + "' (options only: --port DEV or --stdio, ...)";
}

// Why `dir` cannot be the models folder ("" when it can): flash installs into it and
// `current` lives in it (the systemd unit's StateDirectory creates it), so it is refused at
// start rather than at the first flash.
std::string models_dir_problem(const std::string& dir) {
    struct stat st {};
    const int stat_rc = ::stat(dir.c_str(), &st);
    const int stat_errno = errno;
    if (stat_rc == 0 && S_ISDIR(st.st_mode)) return "";
    // mkdir -p helps only where nothing is there: not for a file, nor for a link to nowhere.
    struct stat lst {};
    const bool dangling = stat_rc != 0 && stat_errno == ENOENT && ::lstat(dir.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    const std::string shown = printable(dir, 200);
    return dangling         ? "a symbolic link to nothing"
           : stat_rc != 0   ? std::string(std::strerror(stat_errno)) + (stat_errno == ENOENT ? " (create it first: mkdir -p " + shown + ")" : "")
                            : "exists and is not a folder";
}

// Opens the line (the serial port, locked, or stdin/stdout, raw where a terminal) and runs
// the console on it until the line closes. Exit status as main's.
int run_console(Args& a) {
    fw::ConsoleOptions& o = a.o;
    o.backend = parse_backend(a.backend);
    kernels::parse_kv_dtype(a.kv_cache.c_str(), &o.kv_cache);  // one of the two: checked by the option
    // Test hook (documented in firmware/PROTOCOL.md): die just before installing a flashed file.
    const char* kill = std::getenv("EMBER_FLASH_TEST_KILL_BEFORE_RENAME");
    o.kill_before_rename = kill && std::string(kill) == "1";
    ::signal(SIGPIPE, SIG_IGN);  // a closed line is seen as a failed write
    ::signal(SIGXFSZ, SIG_IGN);  // a file past `ulimit -f` too (EFBIG), not a kill mid-flash
    try {
        std::unique_ptr<fw::SerialPort> sp;
        int in = 0, out = 1;
        // The event log goes to stderr (the journal under systemd), except where stderr is the
        // terminal the console itself is on: there the person sees every answer already.
        o.log_fd = a.use_stdio && ::isatty(2) ? -1 : 2;
        if (!a.use_stdio) {
            // The signals wait (blocked) from before the lock file is made until the handler
            // knows its path: one that came in between killed the process and left the lock.
            sigset_t before;
            ::pthread_sigmask(SIG_BLOCK, &fatal_signal_set(), &before);
            on_fatal_signals();
            try {
                sp = std::make_unique<fw::SerialPort>(a.port, a.baud, a.rtscts);  // locked: refused at once when in use
            } catch (...) {
                ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
                throw;
            }
            in = out = sp->fd();
            const std::string& lf = sp->lock_file();  // systemctl stop (SIGTERM) removes it too
            if (lf.size() < sizeof g_undo.lock_file) std::memcpy(g_undo.lock_file, lf.c_str(), lf.size() + 1);
            ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
        } else if (::isatty(0)) {
            make_raw(0);
            o.echo = true;  // the terminal no longer echoes: the console's editor does
            o.ctrl_d_ends = true;
        }
        fw::Console console(in, out, o);
        const int rc = console.run();
        restore_terminal();
        return rc;
    } catch (const Error& e) {
        restore_terminal();
        std::fprintf(stderr, "ember-console: error: %s\n", e.what());
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    ember::report_truncated_model_files();  // a model file truncated under its mapping: said, not only "Bus error"
    cli::warn_bad_kernel_env("ember-console");
    CLI::App app{"ember-console: the ember serial console (generate, load, eval, finetune, flash)"};
    app.formatter(std::make_shared<cli::HelpFormatter>());
    app.footer("Type help at the console's prompt for its commands. The host's side: ember --help (ember flash sends a model).");
    Args args;
    add_options(app, args);
    // --help and --version to an output that cannot be written (/dev/full) fail.
    auto written = [](int rc) {
        if (rc == 0 && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
            std::fprintf(stderr, "ember-console: error: cannot write the output: %s\n", std::strerror(errno));
            return 1;
        }
        return rc;
    };
    auto parse_error = [](const std::string& msg) {
        std::fprintf(stderr, "ember-console: error: %s (see ember-console --help)\n", cli::plain_parse_error(msg).c_str());
        return 1;
    };
    try {
        app.parse(argc, argv);
        if (const std::string bad = unknown_argument(app); !bad.empty()) return parse_error(bad);
    } catch (const CLI::CallForHelp& e) {
        return written(app.exit(e));
    } catch (const CLI::CallForVersion& e) {
        return written(app.exit(e));
    } catch (const CLI::ParseError& e) {
        if (const std::string bad = unknown_argument(app); !bad.empty()) return parse_error(bad);
        std::string msg = e.what();
        return parse_error(msg.substr(0, msg.find('\n')));
    }
    if (args.port.empty() && !args.use_stdio) {
        std::fprintf(stderr, "ember-console: error: give --port DEV or --stdio (see ember-console --help)\n");
        return 1;
    }
    if (const std::string why = models_dir_problem(args.o.models_dir); !why.empty()) {
        std::fprintf(stderr, "ember-console: error: --models %s: %s\n", printable(args.o.models_dir, 200).c_str(), why.c_str());
        return 1;
    }
    return run_console(args);
}

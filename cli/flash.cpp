// `ember flash`: sends a model to ember-console over a serial line (firmware/PROTOCOL.md).
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/signals.h"
#include "firmware/flash.h"
#include "firmware/port_lock.h"
#include "firmware/serial_port.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/utf8.h"

namespace ember::cli {

namespace {

std::string human_bytes(double b) {
    char s[32];
    if (b >= 1024.0 * 1024.0) std::snprintf(s, sizeof s, "%.1f MiB", b / (1024.0 * 1024.0));
    else if (b >= 1024.0) std::snprintf(s, sizeof s, "%.1f KiB", b / 1024.0);
    else std::snprintf(s, sizeof s, "%.0f B", b);
    return s;
}

// The progress bar on stderr: redrawn in place on a terminal (at most 10 times a second),
// otherwise one line per 10%.
class Progress {
public:
    Progress() : tty_(::isatty(2)), t0_(std::chrono::steady_clock::now()) {}
    void update(uint64_t acked, uint64_t total, uint64_t from) {
        const auto now = std::chrono::steady_clock::now();
        const double s = std::chrono::duration<double>(now - t0_).count();
        const bool end = acked == total;
        const int pct = total ? static_cast<int>(100.0 * acked / total) : 100;
        if (tty_ && !end && std::chrono::duration<double>(now - last_).count() < 0.1) return;
        if (!tty_ && !end && pct / 10 == last_pct_ / 10) return;
        last_ = now;
        last_pct_ = pct;
        const double rate = s > 0 ? (acked - from) / s : 0.0;
        char eta[32] = "--:--";
        if (rate > 0) {
            const long left = static_cast<long>((total - acked) / rate + 0.5);
            std::snprintf(eta, sizeof eta, "%ld:%02ld", left / 60, left % 60);
        }
        std::string bar(30, ' ');
        for (int i = 0; i < 30 * pct / 100; ++i) bar[i] = '#';
        std::fprintf(stderr, "%s%3d%% [%s] %s / %s  %s/s  %s left%s", tty_ ? "\r" : "", pct, bar.c_str(), human_bytes(acked).c_str(),
                     human_bytes(total).c_str(), human_bytes(rate).c_str(), eta, tty_ ? "\x1b[K" : "\n");
        drawn_ = true;
    }
    void finish() {
        if (tty_ && drawn_) std::fputc('\n', stderr);
        drawn_ = false;
    }

private:
    bool tty_;
    bool drawn_ = false;
    int last_pct_ = -100;
    std::chrono::steady_clock::time_point t0_, last_{};
};

// The port's UUCP lock file, for the signal handler below: a handler reaches nothing but
// static storage, so this one path is the command's own (written before the handler is
// installed, then only read).
char g_lock_file[4096];

// SIGINT, SIGTERM, SIGHUP (Ctrl-C, kill, a closed ssh session): the lock file goes with the
// process, as at a normal exit (it was left behind), then the signal's default action.
extern "C" void remove_lock_and_die(int sig) {
    if (g_lock_file[0]) fw::remove_own_lock_file(g_lock_file);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

}  // namespace

int cmd_flash(const FlashArgs& a) {
    // A folder first: its name (empty after a final '/') would be blamed otherwise.
    struct stat st {};
    if (::stat(a.model.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        fail(printable(a.model, 200), ": is a directory, not a file (give an .ember file)");
    // The name: --name, else the file's name without its folder; without .ember either way
    // (--name tiny.ember used to install tiny.ember.ember).
    std::string name = a.name.empty() ? a.model.substr(a.model.find_last_of('/') + 1) : a.name;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".ember") == 0) name.resize(name.size() - 6);
    if (const std::string bad = fw::check_model_name(name); !bad.empty()) fail(bad, " (choose one with --name)");
    // The bytes sent are the bytes verified, read once: the device verifies too, and checking
    // here saves sending a file it would refuse. Verified, they are read into memory as
    // --no-mmap reads a model (Model::open), and sent from there; a file written over after
    // the check is not what was checked (the path used to be opened a second time). Unverified,
    // they are read as they are.
    constexpr size_t kMaxBytes = size_t(1) << 31;
    std::unique_ptr<Model> verified;
    std::string unverified;
    std::string_view bytes;
    if (!a.no_verify) {
        // Over the limit: refused before it is read (fstat; read_text_file checks the same).
        if (::stat(a.model.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxBytes)
            fail(printable(a.model, 200), ": ", st.st_size, " bytes is more than the ", kMaxBytes, " bytes a model to flash may have");
        try {
            LoadOptions read;
            read.mmap = false;
            verified = Model::open(a.model, read);
        } catch (const Error& e) {
            fail(e.what(), " (not flashed; --no-verify sends it anyway)");
        }
        bytes = verified->file_bytes_view();
        if (bytes.size() > kMaxBytes) fail(printable(a.model, 200), ": ", bytes.size(), " bytes is more than the ", kMaxBytes, " bytes a model to flash may have");
    } else {
        unverified = read_text_file(a.model, kMaxBytes, "a model to flash");
        if (unverified.empty()) fail(printable(a.model, 200), ": the file is empty (not flashed)");
        bytes = unverified;
    }
    // The signals wait (blocked) from before the lock file is made until the handler knows its
    // path: one that came in between killed the process and left the lock.
    sigset_t ending, before;
    sigemptyset(&ending);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&ending, sig);
    ::pthread_sigmask(SIG_BLOCK, &ending, &before);
    const ScopedSignals signals(remove_lock_and_die);
    std::unique_ptr<fw::SerialPort> opened;
    try {
        opened = std::make_unique<fw::SerialPort>(a.port, a.baud, a.rtscts);
    } catch (...) {
        ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
        throw;
    }
    fw::SerialPort& port = *opened;
    const std::string& lock_file = port.lock_file();
    if (lock_file.size() < sizeof g_lock_file) std::memcpy(g_lock_file, lock_file.c_str(), lock_file.size() + 1);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    fw::SenderOptions o;
    // A whole frame takes 10 bits per byte on the line; wait twice that, plus a second.
    o.timeout_ms = a.timeout_ms > 0 ? a.timeout_ms : 1000 + static_cast<int>(2 * fw::kMaxFrame * 10 * 1000.0 / a.baud);
    o.retries = a.retries;
    Progress progress;
    bool resumed_said = false;
    const auto t0 = std::chrono::steady_clock::now();
    auto t_data = t0;  // when the device acknowledged the last byte (then it verifies and installs)
    o.progress = [&](uint64_t acked, uint64_t total, uint64_t from) {
        if (acked == total) t_data = std::chrono::steady_clock::now();
        if (from > 0 && from == total) return;  // the device holds every byte: no bar, said at the end
        if (from > 0 && !resumed_said) {
            progress.finish();
            std::fprintf(stderr, "resuming at byte %llu of %llu\n", static_cast<unsigned long long>(from), static_cast<unsigned long long>(total));
            resumed_said = true;
        }
        progress.update(acked, total, from);
    };
    try {
        const fw::SendResult r = fw::send_file(port.fd(), port.fd(), bytes, name, o);
        progress.finish();
        const auto t1 = std::chrono::steady_clock::now();
        if (t_data < t0 || t_data > t1) t_data = t1;
        const double sent = std::chrono::duration<double>(t_data - t0).count(), install = std::chrono::duration<double>(t1 - t_data).count();
        if (r.resumed_from == r.bytes) {
            // The offer found every byte on the device (the same file installed, or a transfer that
            // had ended before its check): nothing went over the line.
            std::printf("flashed %s as %s.ember: nothing sent, the device held all %llu bytes; checked by the device in %.1f s\n",
                        printable(a.model, 200).c_str(), name.c_str(), static_cast<unsigned long long>(r.bytes),
                        std::chrono::duration<double>(t1 - t0).count());
            std::printf("device: %s\n", r.message.c_str());
            return 0;
        }
        // The rate is the progress bar's: bytes sent this run over the time until the last was acknowledged.
        // A resumed run sent only the bytes past the device's (it said all of them).
        const std::string count = r.resumed_from > 0 ? std::to_string(r.bytes - r.resumed_from) + " of " + std::to_string(r.bytes)
                                                     : std::to_string(r.bytes);
        std::printf("flashed %s as %s.ember: %s bytes sent in %.1f s (%s/s), %llu retransmissions; verified and installed by the device in %.1f s\n",
                    printable(a.model, 200).c_str(), name.c_str(), count.c_str(), sent,
                    human_bytes(sent > 0 ? (r.bytes - r.resumed_from) / sent : 0).c_str(), static_cast<unsigned long long>(r.retransmissions),
                    install);
        std::printf("device: %s\n", r.message.c_str());
        return 0;
    } catch (const fw::FlashError& e) {
        progress.finish();
        std::fflush(stdout);
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        // 2: the device said no; 3: the link was lost, or the device answered outside the protocol.
        return e.kind == fw::FlashError::Refused ? 2 : 3;
    }
}

}  // namespace ember::cli

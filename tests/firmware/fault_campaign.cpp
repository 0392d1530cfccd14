// fault-campaign N SEED: N randomized trials of a whole flash between the host's sender
// (fw::send_file, as `ember flash` runs it) and the device's console (fw::Console, in a
// process of its own, started again after every death) through a relay that mutates the line.
// Each trial draws, from its seed, a mix of dropped, duplicated and flipped bytes, garbage
// bursts, stalls longer than the timeout, cuts (the host gives up; it runs again and resumes),
// kills (SIGKILL: the page cache survives) and power cuts (tests/firmware/journal_fs.h: what
// was never made durable is gone), at byte offsets of the line, at file operations of the
// device (while it writes, syncs, renames, writes DIR/current) or shortly after a device
// start (while it loads). Then the device starts on what the disk holds and the trial checks:
//   - DIR/default.ember is the old model or the new one, byte for byte, and the new one
//     whenever the host was told "installed";
//   - DIR/current names a model that opens;
//   - the console starts, loads it and generates;
//   - the host command run again installs the new model.
// Trial i's seed is SEED + i; `fault-campaign 1 S` replays the trial of seed S (the fault
// list is the same; the moments a timer picks depend on the machine's timing).
// Last line: "N trials: A new installed, B old kept, P power cuts, K kills, R resumes, 0 broken".
// Exit status 0 when no trial is broken, 1 when one is, 2 for bad arguments.
//   --jobs J   trials run at once (default 8: a trial mostly waits on timeouts)
//   --verbose  one line per trial
//   --keep     keep a broken trial's folder (its path is printed)
// The device process is this program again: fault-campaign --device FD DIR JOURNAL ... .
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "firmware/console.h"
#include "firmware/flash.h"
#include "firmware/serial_port.h"
#include "fw_test_util.h"
#include "journal_fs.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"

using namespace ember;
using namespace ember::fwtest;

namespace {

// Timing of a trial. The sender gives up after timeout * retries * (reoffers + 1) ms of silence
// (reoffers: 0..kReoffers, drawn per trial).
constexpr int kTimeoutMs = 50;
constexpr int kRetries = 4;
constexpr int kReoffers = 2;
constexpr int kDeviceIdleMs = 250;  // the device leaves binary mode after this long without a frame
constexpr int kHostRuns = 5;        // at most this many host runs in the faulty phase (each may resume)
constexpr int kBootMs = 5;          // a dead device starts again after this long
constexpr uint64_t kHostBytes = 66000;  // a clean flash of the new model sends about 62 KB
constexpr uint64_t kDeviceBytes = 1500;  // ... and the device answers with about 1 KB
constexpr int kMaxOp = 30;         // a clean flash is about 25 file operations

// ---------------------------------------------------------------- the plan of a trial

struct Fault {
    enum Kind { Drop, Dup, Flip, Garbage, Stall, Cut, KillAt, PowerAt, KillOp, PowerOp, BootKill } kind;
    int dir = 0;       // 0: host -> device, 1: device -> host (byte faults)
    uint64_t at = 0;   // byte offset in that direction; the op number for KillOp/PowerOp; the start for BootKill
    int len = 0;       // bytes (Drop, Dup, Garbage), the bit (Flip)
    int ms = 0;        // Stall, Cut, BootKill: milliseconds
    int us = 0;        // KillAt, PowerAt: microseconds after the byte passes
    std::string bytes; // Garbage
    std::string op;    // KillOp/PowerOp: before the at-th operation of this name; "": the at-th of all
    std::string op_spec() const { return op.empty() ? std::to_string(at) : op + "#" + std::to_string(at); }
    std::string text() const {
        const std::string where = std::string(dir ? "d" : "h") + "@" + std::to_string(at);
        switch (kind) {
            case Drop: return "drop(" + where + "," + std::to_string(len) + ")";
            case Dup: return "dup(" + where + "," + std::to_string(len) + ")";
            case Flip: return "flip(" + where + ",bit " + std::to_string(len) + ")";
            case Garbage: return "garbage(" + where + "," + std::to_string(len) + (bytes.rfind("EMBF", 0) == 0 ? ",magic" : "") + ")";
            case Stall: return "stall(" + where + "," + std::to_string(ms) + "ms)";
            case Cut: return "cut(" + where + "," + std::to_string(ms) + "ms)";
            case KillAt: return "kill(" + where + "+" + std::to_string(us) + "us)";
            case PowerAt: return "power(" + where + "+" + std::to_string(us) + "us)";
            case KillOp: return "kill(op " + op_spec() + ")";
            case PowerOp: return "power(op " + op_spec() + ")";
            case BootKill: return "kill(start " + std::to_string(at) + "+" + std::to_string(ms) + "ms)";
        }
        return "?";
    }
};

struct Plan {
    int host_runs = 1;  // host runs in the faulty phase: fewer leave more trials half done
    int reoffers = 0;   // offers again after a lost link, per run (SenderOptions::reoffers)
    std::vector<Fault> faults;
};

Plan make_plan(uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto uni = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
    Plan p;
    p.host_runs = static_cast<int>(uni(1, kHostRuns));
    p.reoffers = static_cast<int>(uni(0, kReoffers));
    std::vector<Fault>& plan = p.faults;
    const int line_faults = static_cast<int>(uni(0, 5));
    for (int i = 0; i < line_faults; ++i) {
        Fault f;
        f.kind = static_cast<Fault::Kind>(uni(Fault::Drop, Fault::Cut));
        f.dir = f.kind != Fault::Cut && uni(0, 4) == 0;
        f.at = uni(0, (f.dir ? kDeviceBytes : kHostBytes) - 1);
        if (f.kind == Fault::Drop) f.len = static_cast<int>(uni(1, 3));
        if (f.kind == Fault::Dup) f.len = static_cast<int>(uni(1, 16));
        if (f.kind == Fault::Flip) f.len = static_cast<int>(uni(0, 7));
        if (f.kind == Fault::Garbage) {
            f.len = static_cast<int>(uni(1, 300));
            for (int k = 0; k < f.len; ++k) f.bytes += static_cast<char>(uni(0, 255));
            if (f.len >= 8 && uni(0, 2) == 0) f.bytes.replace(0, 4, "EMBF");  // a false frame start
        }
        if (f.kind == Fault::Stall) f.ms = static_cast<int>(uni(kTimeoutMs * 3 / 2, kTimeoutMs * 7));  // some past the device's idle timeout
        if (f.kind == Fault::Cut) f.ms = static_cast<int>(uni(100, 1000));  // most outlast the sender's tries
        plan.push_back(f);
    }
    auto deaths = [&](bool power) {
        const uint64_t r = uni(0, 19);
        const int n = r < 10 ? 0 : r < 17 ? 1 : 2;
        for (int i = 0; i < n; ++i) {
            Fault f;
            const uint64_t how = uni(0, power ? 1 : 2);
            if (how == 0) {
                // Before the k-th file operation, or the m-th of a kind (while it syncs, renames ...).
                f.kind = power ? Fault::PowerOp : Fault::KillOp;
                // The operations that install a file come up more often.
                static const char* kOps[] = {"fsync", "fsync", "fsync", "rename", "rename", "fsync_dir", "fsync_dir", "close", "open", "pwrite", "unlink"};
                if (uni(0, 3) != 0) {
                    f.op = kOps[uni(0, 10)];
                    f.at = uni(0, 2) ? 1 : uni(2, 3);
                } else {
                    f.at = uni(1, kMaxOp);
                }
            } else if (how == 1) {
                f.kind = power ? Fault::PowerAt : Fault::KillAt;
                f.at = uni(0, kHostBytes - 1);
                f.us = static_cast<int>(uni(0, 1) ? uni(0, 2000) : uni(0, 30000));
            } else {
                f.kind = Fault::BootKill;
                f.at = uni(1, 2);
                f.ms = static_cast<int>(uni(0, 20));
            }
            plan.push_back(f);
        }
    };
    deaths(false);
    deaths(true);
    return p;
}

std::string plan_text(const Plan& p) {
    std::string s = std::to_string(p.host_runs) + " host runs, " + std::to_string(p.reoffers) + " reoffers;";
    for (const Fault& f : p.faults) s += " " + f.text();
    return s;
}

std::string csv_of_ops(const std::vector<Fault>& plan, Fault::Kind k) {
    std::string s;
    for (const Fault& f : plan)
        if (f.kind == k) s += (s.empty() ? "" : ",") + f.op_spec();
    return s.empty() ? "-" : s;
}

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------- the device process

// fault-campaign --device FD DIR JOURNAL OPS LOG KILL_OPS CUT_OPS: a console on FD whose
// file operations go through the journal; before the listed operations ("17": the 17th of
// all, "fsync#2": the second fsync, counted across the trial's device starts in the file
// OPS, one name a line) it notes "kill ..." or "power ..." in LOG and kills
// itself (the campaign, seeing the death, cuts the power for a "power" line).
int device_main(int argc, char** argv) {
    if (argc != 9) return 2;
    const int fd = std::atoi(argv[2]);
    const std::string dir = argv[3], journal = argv[4], ops = argv[5], log = argv[6];
    auto specs = [](const std::string& csv) {
        std::set<std::string> s;
        std::stringstream in(csv);
        for (std::string x; std::getline(in, x, ',');)
            if (x != "-") s.insert(x);
        return s;
    };
    const std::set<std::string> kill_ops = specs(argv[7]), cut_ops = specs(argv[8]);
    auto note = [&log](const std::string& line) {
        const int l = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (l >= 0) {
            const std::string s = line + "\n";
            if (::write(l, s.data(), s.size()) < 0) {
            }
            ::close(l);
        }
    };
    auto hook = [&](const char* op, const std::string& path) {
        size_t n = 1, m = 1;  // this operation is the n-th of all, the m-th of its name
        std::istringstream done(read_file(ops));
        for (std::string line; std::getline(done, line);) n += 1, m += line == op;
        const int c = ::open(ops.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        const std::string rec = std::string(op) + "\n";
        const bool wrote = c >= 0 && ::write(c, rec.data(), rec.size()) == static_cast<ssize_t>(rec.size());
        if (c >= 0) ::close(c);
        if (!wrote) fail(ops, ": cannot append");
        const std::string what = std::to_string(n) + " " + op + "#" + std::to_string(m) + " " + path;
        const auto hit = [&](const std::set<std::string>& s) { return s.count(std::to_string(n)) || s.count(op + std::string("#") + std::to_string(m)); };
        if (hit(kill_ops)) {
            note("kill " + what);
            ::raise(SIGKILL);
        }
        if (hit(cut_ops)) {  // the campaign sees the death, reads LOG and cuts the power
            note("power " + what);
            ::raise(SIGKILL);
        }
    };
    ::signal(SIGPIPE, SIG_IGN);
    fw::ConsoleOptions o;
    o.models_dir = dir;
    o.threads = 1;
    o.backend = BackendKind::Cpu;
    o.flash_idle_ms = kDeviceIdleMs;
    o.fs = std::make_shared<JournalFs>(dir, journal, hook);
    try {
        fw::Console c(fd, fd, o);
        c.run();
    } catch (const Error& e) {
        std::fprintf(stderr, "fault-campaign device: %s\n", e.what());
        return 1;
    }
    return 0;
}

// ---------------------------------------------------------------- one trial

std::string exit_text(int status) {
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
    return "status " + std::to_string(status);
}

// Waits for a device whose line was closed: it must exit with status 0 (a sanitizer's report
// or a crash on the way out is a finding). Returns "" or what happened.
std::string wait_exit(pid_t pid) {
    const int64_t deadline = fw::now_ms() + 20000;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) != pid) {
        if (fw::now_ms() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            return "did not exit within 20 s";
        }
        ::usleep(2000);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : "ended with " + exit_text(status);
}

struct Counts {
    int new_installed = 0, old_kept = 0, power_cuts = 0, kills = 0, resumes = 0, broken = 0;
};

struct Models {
    std::string old_bytes, new_bytes, old_sha, new_sha;
};

class Trial {
public:
    Trial(uint64_t seed, const Models& m, std::string exe) : seed_(seed), m_(m), exe_(std::move(exe)), runs_(make_plan(seed).host_runs), reoffers_(make_plan(seed).reoffers), plan_(make_plan(seed).faults) {}

    // Runs the trial; returns "" when every check holds, else what broke.
    std::string run(Counts& c);
    std::string folder() const { return tmp_.path(); }
    // The device's deaths at file operations: "kill|power N OP#M PATH" lines.
    std::string device_log() const { return exists(tmp_.file("events")) ? read_file(tmp_.file("events")) : ""; }
    void keep() { keep_ = true; }
    ~Trial() {
        if (keep_) std::system(("cp -a '" + tmp_.path() + "' '" + tmp_.path() + "-kept'").c_str());
    }

private:
    struct Timed {
        int64_t at_us;
        bool power;
    };
    std::string models() const { return tmp_.file("models"); }
    std::string journal() const { return tmp_.file("journal"); }
    pid_t start_device(int& line_fd, bool faults);
    void relay_loop();
    void supervise_loop();
    void read_device_log();
    std::string check_disk(bool told_installed, std::string& cur) const;
    void check_after_death(const std::string& how);
    void mutate(std::string& b, uint64_t before, int dir);
    std::string send(int fd, const fw::SenderOptions& o, bool& ok, int& resumes);

    uint64_t seed_;
    const Models& m_;
    std::string exe_;
    int runs_, reoffers_;
    std::vector<Fault> plan_;
    TempDir tmp_;
    bool keep_ = false;
    SocketPair host_;  // [0]: the host's end, [1]: the relay's
    std::mutex mu_;    // guards everything below
    int dev_fd_ = -1;  // the relay's end of the line to the running device, -1 while it is down
    pid_t pid_ = -1;
    int starts_ = 0;
    int64_t restart_at_us_ = 0;
    int64_t started_us_ = 0;
    bool faults_on_ = true;
    std::vector<Timed> timed_;
    int64_t stall_until_us_[2] = {0, 0};
    int64_t cut_until_us_ = 0;
    int kills_ = 0, cuts_ = 0;
    size_t log_seen_ = 0;           // bytes of the device's log already acted on
    std::atomic<bool> told_installed_{false};  // the host has seen RESULT 0
    std::string death_broken_;      // the first check that failed after a death
    std::string supervisor_error_;  // a failure of the campaign itself (not of the device)
    std::atomic<bool> stop_{false};
};

pid_t Trial::start_device(int& line_fd, bool faults) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) fail("socketpair: ", std::strerror(errno));
    const std::vector<std::string> args = {exe_, "--device", "3", models(), journal(), tmp_.file("ops"), tmp_.file("events"),
                                           faults ? csv_of_ops(plan_, Fault::KillOp) : "-", faults ? csv_of_ops(plan_, Fault::PowerOp) : "-"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) fail("fork: ", std::strerror(errno));
    if (pid == 0) {  // only async-signal-safe calls until exec
        if (sv[1] == 3) ::fcntl(3, F_SETFD, 0);
        else ::dup2(sv[1], 3);  // the new fd has no FD_CLOEXEC
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(sv[1]);
    line_fd = sv[0];
    return pid;
}

void Trial::mutate(std::string& b, uint64_t before, int dir) {
    const int64_t now = now_us();
    // Right to left, so that an edit does not move the positions still to come.
    std::vector<const Fault*> here;
    for (const Fault& f : plan_)
        if (f.kind <= Fault::PowerAt && f.dir == dir && f.at >= before && f.at < before + b.size()) here.push_back(&f);
    std::sort(here.begin(), here.end(), [](const Fault* x, const Fault* y) { return x->at > y->at; });
    for (const Fault* f : here) {
        const size_t k = static_cast<size_t>(f->at - before);
        switch (f->kind) {
            case Fault::Drop: b.erase(k, static_cast<size_t>(f->len)); break;
            case Fault::Dup: b.insert(k, b.substr(k, static_cast<size_t>(f->len))); break;
            case Fault::Flip: b[k] = static_cast<char>(b[k] ^ (1 << f->len)); break;
            case Fault::Garbage: b.insert(k, f->bytes); break;
            case Fault::Stall: stall_until_us_[dir] = std::max(stall_until_us_[dir], now + f->ms * 1000); break;
            case Fault::Cut: cut_until_us_ = std::max(cut_until_us_, now + f->ms * 1000); break;
            case Fault::KillAt: timed_.push_back({now + f->us, false}); break;
            case Fault::PowerAt: timed_.push_back({now + f->us, true}); break;
            default: break;
        }
    }
}

void Trial::relay_loop() {
    uint64_t sent[2] = {0, 0};
    std::deque<std::pair<int64_t, std::string>> queue[2];  // (deliver at, bytes), per direction
    int eof_start = -1;  // the start whose line reached its end: not polled again
    while (!stop_) {
        std::lock_guard<std::mutex> lock(mu_);
        const int dev = starts_ == eof_start ? -1 : dev_fd_;
        pollfd p[2] = {{host_.fd[1], POLLIN, 0}, {dev, POLLIN, 0}};
        ::poll(p, 2, 1);
        const int64_t now = now_us();
        for (int i = 0; i < 2; ++i) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[8192];
            const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
            if (n <= 0) {
                if (i == 1) eof_start = starts_;
                continue;
            }
            std::string bytes(buf, static_cast<size_t>(n));
            const uint64_t before = sent[i];
            sent[i] += bytes.size();
            if (faults_on_) mutate(bytes, before, i);
            if (now < cut_until_us_) continue;  // the line is cut: both ways
            const int64_t at = std::max(now, stall_until_us_[i]);
            queue[i].emplace_back(at, std::move(bytes));
        }
        for (int i = 0; i < 2; ++i) {
            while (!queue[i].empty() && queue[i].front().first <= now) {
                const std::string& b = queue[i].front().second;
                const int to = i == 0 ? dev_fd_ : host_.fd[1];
                try {
                    if (to >= 0) fw::write_all(to, b.data(), b.size());  // a dead device's line drops it
                } catch (const Error&) {
                }
                queue[i].pop_front();
            }
        }
    }
}

// The device's deaths by its own hand (at a file operation) are in its log; a "power" line
// means the power went at that moment: the disk keeps what was durable.
void Trial::read_device_log() {
    const std::string log = read_file(tmp_.file("events"));
    std::istringstream lines(log.substr(std::min(log_seen_, log.size())));
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("kill ", 0) == 0) ++kills_;
        if (line.rfind("power ", 0) == 0) {
            ++cuts_;
            JournalFs::power_cut(models(), journal());
        }
        check_after_death("the device's death at a file operation (" + line + ")");
    }
    log_seen_ = log.size();
}

void Trial::supervise_loop() {
    while (!stop_) try {
        {
            std::lock_guard<std::mutex> lock(mu_);
            const int64_t now = now_us();
            int status = 0;
            if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {  // it died (a kill or a power cut at a file operation)
                if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) && death_broken_.empty())
                    death_broken_ = "the device ended on its own (" + exit_text(status) + ") while its line was open";
                ::close(dev_fd_);
                dev_fd_ = -1;
                pid_ = -1;
                restart_at_us_ = now + kBootMs * 1000;
                read_device_log();
            }
            for (auto it = timed_.begin(); it != timed_.end();) {
                if (it->at_us > now || !faults_on_) {
                    ++it;
                    continue;
                }
                if (pid_ > 0) {
                    ::kill(pid_, SIGKILL);
                    ::waitpid(pid_, nullptr, 0);
                    ::close(dev_fd_);
                    dev_fd_ = -1;
                    pid_ = -1;
                    restart_at_us_ = now + kBootMs * 1000;
                    read_device_log();  // it may have died by its own hand just before
                    ++(it->power ? cuts_ : kills_);
                    if (it->power) JournalFs::power_cut(models(), journal());
                    check_after_death(it->power ? "a power cut" : "a kill");
                } else if (it->power) {  // the power goes while the device boots
                    JournalFs::power_cut(models(), journal());
                    ++cuts_;
                    check_after_death("a power cut while the device was down");
                }
                it = timed_.erase(it);
            }
            if (pid_ < 0 && faults_on_ && now >= restart_at_us_) {
                pid_ = start_device(dev_fd_, true);
                started_us_ = now;
                ++starts_;
                for (const Fault& f : plan_)
                    if (f.kind == Fault::BootKill && f.at == static_cast<uint64_t>(starts_)) timed_.push_back({now + f.ms * 1000, false});
            }
        }
        ::usleep(1000);
    } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        supervisor_error_ = std::string("the campaign's supervisor failed: ") + e.what();
        faults_on_ = false;
        return;
    }
}

// Runs the host's command once; returns "" or what broke. ok: the device said installed.
std::string Trial::send(int fd, const fw::SenderOptions& base, bool& ok, int& resumes) {
    fw::SenderOptions o = base;
    // A resume: an offer the device accepted at a new, non-zero offset (a repeat at the same
    // offset in one run counts once); an offer of the installed file ("already installed",
    // accepted at the end) is none.
    uint64_t last_from = 0;
    int here = 0;
    o.progress = [&](uint64_t, uint64_t, uint64_t from) {
        if (from > 0 && from != last_from) ++here;
        last_from = from;
    };
    try {
        const fw::SendResult r = fw::send_file(fd, fd, m_.new_bytes, "default", o);
        ok = true;
        if (r.message.rfind("already installed", 0) == 0 && r.resumed_from == r.bytes) --here;
        resumes += here;
        here = 0;
    } catch (const fw::FlashError& e) {
        resumes += here;
        if (e.kind == fw::FlashError::Refused) return std::string("the device refused the valid model: ") + e.what();
    } catch (const Error& e) {
        return std::string("the host failed: ") + e.what();
    }
    return "";
}

// What a device starting now would find: DIR/default.ember is the old or the new model (the
// new one once the host was told installed), DIR/current names a model that opens. Returns
// "" or what is wrong; `cur`: the name current holds.
std::string Trial::check_disk(bool told_installed, std::string& cur) const {
    const std::string installed = models() + "/default.ember";
    if (!exists(installed)) return "default.ember is gone";
    const std::string sha = sha256_file(installed);
    if (sha != m_.old_sha && sha != m_.new_sha) return "default.ember is neither the old nor the new model (sha256 " + sha + ")";
    if (told_installed && sha != m_.new_sha) return "the host was told installed, but the old model is back";
    cur = exists(models() + "/current") ? read_file(models() + "/current") : "";
    while (!cur.empty() && (cur.back() == '\n' || cur.back() == ' ')) cur.pop_back();
    if (!fw::check_model_name(cur).empty()) return "current does not name a model: '" + printable(cur, 100) + "'";
    try {
        Model::open(models() + "/" + cur + ".ember");
    } catch (const Error& e) {
        return "current names " + cur + ", which does not open: " + e.what();
    }
    return "";
}

// After a death of the device (and the power cut, if it was one): the disk it restarts on.
void Trial::check_after_death(const std::string& how) {
    std::string cur;
    const std::string why = check_disk(told_installed_, cur);
    if (!why.empty() && death_broken_.empty()) death_broken_ = "after " + how + ": " + why;
}

std::string Trial::run(Counts& c) {
    if (::mkdir(models().c_str(), 0755) != 0) fail(models(), ": mkdir: ", std::strerror(errno));
    write_file(models() + "/default.ember", m_.old_bytes);
    write_file(models() + "/current", "default\n");
    JournalFs::start(models(), journal());

    // The faulty phase: the host runs its command until it succeeds (or kHostRuns times).
    std::thread relay([this] { relay_loop(); });
    std::thread supervisor([this] { supervise_loop(); });
    fw::SenderOptions so;
    so.timeout_ms = kTimeoutMs;
    so.retries = kRetries;
    so.reoffers = reoffers_;
    bool told_installed = false;
    int resumes = 0;
    std::string broken;
    for (int run = 0; run < runs_ && !told_installed && broken.empty(); ++run) {
        broken = send(host_.fd[0], so, told_installed, resumes);
        told_installed_ = told_installed;
    }
    ::usleep(40 * 1000);  // kills and power cuts timed just after the verdict (while the console loads)
    {
        std::lock_guard<std::mutex> lock(mu_);
        faults_on_ = false;
    }
    stop_ = true;
    relay.join();
    supervisor.join();
    if (pid_ > 0) {  // the device still runs: it sees its line close and exits
        ::close(dev_fd_);
        const std::string why = wait_exit(pid_);
        // A planned death at a file operation may still come (closing the line closes the
        // partial file): then the device's log says so.
        const size_t seen = log_seen_;
        read_device_log();
        const bool own_hand = log_seen_ > seen && why == "ended with signal " + std::string(strsignal(SIGKILL));
        if (!why.empty() && !own_hand && death_broken_.empty()) death_broken_ = "the device, its line closed, " + why;
    }
    read_device_log();  // a death at a file operation in the last moments
    if (!supervisor_error_.empty()) return supervisor_error_;
    c.kills += kills_;
    c.power_cuts += cuts_;
    if (!broken.empty()) return broken;

    // The checks, on what the disk holds (they also ran after every death of the device).
    if (!death_broken_.empty()) return death_broken_;
    std::string cur;
    if (const std::string why = check_disk(told_installed, cur); !why.empty()) return why;
    const std::string installed = models() + "/default.ember";
    const std::string sha = sha256_file(installed);
    (sha == m_.new_sha ? c.new_installed : c.old_kept) += 1;

    // The device starts on that disk, loads current and generates; the host runs again.
    int line = -1;
    const pid_t dev = start_device(line, false);
    std::string out;
    std::string why;
    if (expect(line, out, "OK loaded " + cur) == std::string::npos) {
        why = "the console did not load " + cur + " at start: " + printable(out, 300);
    } else {
        const std::string cmd = "gen -n 5 --seed 3 The\n";
        fw::write_all(line, cmd.data(), cmd.size());
        if (expect(line, out, "OK gen 5 tokens") == std::string::npos) why = "the console did not generate: " + printable(out, 300);
    }
    if (why.empty()) {
        fw::SenderOptions clean;
        clean.timeout_ms = 3000;
        bool ok = false;
        why = send(line, clean, ok, resumes);
        if (why.empty() && !ok) why = "the host's command, run again on a clean line, did not install the model";
        if (why.empty() && sha256_file(installed) != m_.new_sha) why = "after the host's command ran again, default.ember is not the new model";
    }
    ::close(line);
    if (const std::string w = wait_exit(dev); !w.empty() && why.empty()) why = "the restarted device, its line closed, " + w;
    c.resumes += resumes;
    return why;
}

int usage() {
    std::fprintf(stderr, "usage: fault-campaign N SEED [--jobs J] [--verbose] [--keep]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--device") return device_main(argc, argv);
    if (argc < 3) return usage();
    int n = 0, jobs = 8;
    uint64_t seed = 0;
    bool verbose = false, keep = false;
    try {
        n = std::stoi(argv[1]);
        seed = std::stoull(argv[2]);
        for (int i = 3; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--verbose") verbose = true;
            else if (a == "--keep") keep = true;
            else if (a == "--jobs" && i + 1 < argc) jobs = std::stoi(argv[++i]);
            else return usage();
        }
    } catch (const std::exception&) {
        return usage();
    }
    if (n < 1 || jobs < 1) return usage();
    ::signal(SIGPIPE, SIG_IGN);
    char exe[4096];
    const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return usage();
    exe[len] = '\0';
    Models m;
    m.old_bytes = read_file(model_int8());
    m.new_bytes = read_file(model_f16());
    m.old_sha = sha256_hex(m.old_bytes.data(), m.old_bytes.size());
    m.new_sha = sha256_hex(m.new_bytes.data(), m.new_bytes.size());
    if (m.old_bytes.empty() || m.new_bytes.empty()) {
        std::fprintf(stderr, "fault-campaign: cannot read %s or %s\n", model_int8().c_str(), model_f16().c_str());
        return 2;
    }
    Counts total;
    std::mutex mu;
    std::atomic<int> next{0};
    auto worker = [&] {
        for (int i; (i = next++) < n;) {
            const uint64_t s = seed + static_cast<uint64_t>(i);
            Counts c;
            std::string broken, log;
            std::unique_ptr<Trial> t;
            const int64_t t0 = fw::now_ms();
            try {
                t = std::make_unique<Trial>(s, m, exe);
                broken = t->run(c);
                log = t->device_log();
            } catch (const std::exception& e) {
                broken = std::string("the trial failed to run: ") + e.what();
            }
            std::lock_guard<std::mutex> lock(mu);
            total.new_installed += c.new_installed;
            total.old_kept += c.old_kept;
            total.power_cuts += c.power_cuts;
            total.kills += c.kills;
            total.resumes += c.resumes;
            std::string faults = plan_text(make_plan(s));
            if (verbose && !log.empty()) {
                std::replace(log.begin(), log.end(), '\n', ';');
                faults += "; the device died at: " + log;
            }
            if (!broken.empty()) {
                ++total.broken;
                std::printf("BROKEN trial seed %llu: %s\n  faults: %s\n  replay: tests/firmware/fault-campaign 1 %llu --verbose\n",
                            static_cast<unsigned long long>(s), broken.c_str(), faults.c_str(), static_cast<unsigned long long>(s));
                if (keep && t) {
                    t->keep();
                    std::printf("  folder: %s-kept\n", t->folder().c_str());
                }
            } else if (verbose) {
                std::printf("trial seed %llu (%.2f s): %s; %d power cuts, %d kills, %d resumes; faults: %s\n", static_cast<unsigned long long>(s),
                            (fw::now_ms() - t0) / 1000.0, c.new_installed ? "new installed" : "old kept", c.power_cuts, c.kills, c.resumes, faults.c_str());
            }
            std::fflush(stdout);
        }
    };
    std::vector<std::thread> pool;
    for (int j = 0; j < std::min(jobs, n); ++j) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
    std::printf("%d trials: %d new installed, %d old kept, %d power cuts, %d kills, %d resumes, %d broken\n", n, total.new_installed,
                total.old_kept, total.power_cuts, total.kills, total.resumes, total.broken);
    return total.broken ? 1 : 0;
}

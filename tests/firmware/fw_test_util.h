// Helpers for the firmware tests: temporary folders, committed models, reading a line until
// a pattern shows up, and a relay that sits between two file descriptors and mutates bytes.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "firmware/serial_port.h"

namespace ember::fwtest {

inline std::string source_dir() { return EMBER_SOURCE_DIR; }
// Two small committed models (the gpt.py fixture in int8 and f16: different bytes).
inline std::string model_int8() { return source_dir() + "/tests/fuzz/seeds/ember/gptpy_int8.ember"; }
inline std::string model_f16() { return source_dir() + "/tests/fuzz/seeds/ember/gptpy_f16.ember"; }

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
inline bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
// Everything fd holds until its end (a pipe whose write end is closed), then closes fd.
inline std::string read_to_end(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/ember-fw-test-XXXXXX";
        const char* d = mkdtemp(tmpl);
        if (!d) throw std::runtime_error("mkdtemp failed");
        path_ = d;
    }
    ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// A connected pair of stream sockets: [0] and [1].
struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() {
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) throw std::runtime_error("socketpair failed");
    }
    ~SocketPair() { close_all(); }
    void close_all() {
        for (int& f : fd)
            if (f >= 0) ::close(f), f = -1;
    }
};

// Reads from fd into `seen` until it contains `pattern` after position `from`; returns the
// position just past the pattern, or npos after timeout_ms.
inline size_t expect(int fd, std::string& seen, const std::string& pattern, size_t from = 0, int timeout_ms = 10000) {
    const int64_t deadline = fw::now_ms() + timeout_ms;
    for (;;) {
        const size_t k = seen.find(pattern, from);
        if (k != std::string::npos) return k + pattern.size();
        const int64_t left = deadline - fw::now_ms();
        if (left <= 0) return std::string::npos;
        char buf[4096];
        const long got = fw::read_some(fd, buf, sizeof buf, static_cast<int>(left));
        if (got < 0) {  // no one at the other end (yet): a pty master whose slave is not open
            ::usleep(10000);
            continue;
        }
        seen.append(buf, static_cast<size_t>(got));
    }
}

// Copies bytes between `a` and `b` in a thread. Each chunk passes through a hook that may
// change it (drop, flip, insert bytes); `cut` drops everything in both directions.
class Relay {
public:
    // hook(bytes, bytes that went this way before): mutate `bytes` in place.
    using Hook = std::function<void(std::string& bytes, uint64_t before)>;
    Relay(int a, int b, Hook a_to_b, Hook b_to_a) : a_(a), b_(b), ab_(std::move(a_to_b)), ba_(std::move(b_to_a)) {
        th_ = std::thread([this] { loop(); });
    }
    ~Relay() { stop(); }
    void stop() {
        stop_ = true;
        if (th_.joinable()) th_.join();
    }
    std::atomic<bool> cut{false};

private:
    void loop() {
        uint64_t sent[2] = {0, 0};
        // After stop(), one last pass forwards what is already waiting (bounded): a host that
        // wrote its BYE and exited just before stop() must not lose it, or the device stays in
        // binary mode and eats the test's next command as line noise.
        int drain_rounds = 0;
        for (;;) {
            const bool stopping = stop_;
            if (stopping && ++drain_rounds > 64) break;
            pollfd p[2] = {{a_, POLLIN, 0}, {b_, POLLIN, 0}};
            if (::poll(p, 2, stopping ? 0 : 20) <= 0) {
                if (stopping) break;
                continue;
            }
            for (int i = 0; i < 2; ++i) {
                if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char buf[8192];
                const ssize_t n = ::read(i == 0 ? a_ : b_, buf, sizeof buf);
                if (n <= 0) {
                    ::usleep(5000);  // a closed or gone side: keep relaying the other way
                    continue;
                }
                std::string bytes(buf, static_cast<size_t>(n));
                const uint64_t before = sent[i];
                sent[i] += bytes.size();
                if (cut) continue;
                const Hook& h = i == 0 ? ab_ : ba_;
                if (h) h(bytes, before);
                try {
                    fw::write_all(i == 0 ? b_ : a_, bytes.data(), bytes.size());
                } catch (...) {
                }
            }
        }
    }
    int a_, b_;
    Hook ab_, ba_;
    std::atomic<bool> stop_{false};
    std::thread th_;
};

}  // namespace ember::fwtest

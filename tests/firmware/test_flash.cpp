// Flashing through a relay that injects faults between the host's sender and the device's
// console: a dropped byte, a flipped bit, 80 bytes of log text between frames, a cut link
// and a resume, a file that is not a valid .ember, the device killed before the rename.
// Each ends with the new model installed with the right SHA-256, or the old one installed
// and working; never a broken model.
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include "firmware/console.h"
#include "firmware/flash.h"
#include "fw_test_util.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/sha256.h"

using namespace ember;
using namespace ember::fw;
using namespace ember::fwtest;

namespace {

constexpr int kIdleMs = 400;  // the device leaves binary mode after this long without a frame

SenderOptions quick_sender() {
    SenderOptions o;
    o.timeout_ms = 150;
    o.retries = 4;
    o.reoffers = 1;
    return o;
}

ConsoleOptions device_options(const std::string& dir) {
    ConsoleOptions o;
    o.models_dir = dir;
    o.load = "default";
    o.threads = 1;
    o.flash_idle_ms = kIdleMs;
    return o;
}

// A console on the device end of a socket pair, in a thread.
class Device {
public:
    Device(int fd, ConsoleOptions o) : fd_(fd) {
        th_ = std::thread([fd, o] {
            Console c(fd, fd, o);
            c.run();
        });
    }
    ~Device() {
        ::shutdown(fd_, SHUT_RDWR);  // the console sees the line close
        th_.join();
    }

private:
    int fd_;
    std::thread th_;
};

// Files in dir whose name starts with ".flash-".
int part_files(const std::string& dir) {
    int n = 0;
    DIR* d = ::opendir(dir.c_str());
    while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(".flash-", 0) == 0;
    ::closedir(d);
    return n;
}

// The installed model opens (every check) and the console generates with it.
void check_working(const std::string& dir, int host_fd, const std::string& want_sha) {
    const std::string path = dir + "/default.ember";
    CHECK(sha256_file(path) == want_sha);
    CHECK_NOTHROW(Model::open(path));
    const std::string cmd = "gen -n 5 --seed 3 The\n";
    write_all(host_fd, cmd.data(), cmd.size());
    std::string seen;
    CHECK(expect(host_fd, seen, "OK gen 5 tokens") != std::string::npos);
}

struct Setup {
    TempDir dir;
    std::string old_bytes = read_file(model_int8());
    std::string new_bytes = read_file(model_f16());
    std::string old_sha = sha256_hex(old_bytes.data(), old_bytes.size());
    std::string new_sha = sha256_hex(new_bytes.data(), new_bytes.size());
    Setup() { write_file(dir.file("default.ember"), old_bytes); }
};

Frame frame_of(FrameType t, uint32_t seq, std::vector<uint8_t> p = {}) { return Frame{t, seq, std::move(p)}; }

// An OFFER's payload: size, SHA-256 (hex here), name.
std::vector<uint8_t> offer_payload(uint64_t size, const std::string& sha_hex, const std::string& name) {
    std::vector<uint8_t> p;
    put_u64(p, size);
    for (size_t i = 0; i + 1 < sha_hex.size(); i += 2) p.push_back(static_cast<uint8_t>(std::stoi(sha_hex.substr(i, 2), nullptr, 16)));
    p.push_back(static_cast<uint8_t>(name.size()));
    p.insert(p.end(), name.begin(), name.end());
    return p;
}

std::vector<uint8_t> u64_payload(uint64_t v, const std::string& text = "") {
    std::vector<uint8_t> p;
    put_u64(p, v);
    p.insert(p.end(), text.begin(), text.end());
    return p;
}

std::string text_of(const Frame& f, size_t from) { return f.payload.size() > from ? std::string(f.payload.begin() + from, f.payload.end()) : ""; }

// A disk with room for `room` bytes per file: a write past that fails with ENOSPC.
class FullDisk : public PosixFs {
public:
    explicit FullDisk(off_t room) : room_(room) {}
    ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) override {
        if (offset + static_cast<off_t>(n) > room_) {
            errno = ENOSPC;
            return -1;
        }
        return PosixFs::pwrite(fd, buf, n, offset);
    }

private:
    off_t room_;
};

// A device that is not ember-console: a thread that answers each frame from the host with
// what `answer` returns, and counts the frames it got by type.
class FakeDevice {
public:
    using Answer = std::function<std::vector<Frame>(const Frame&)>;
    FakeDevice(int fd, Answer answer) : fd_(fd), answer_(std::move(answer)) {
        th_ = std::thread([this] { loop(); });
    }
    ~FakeDevice() {
        stop_ = true;
        th_.join();
    }
    int count(FrameType t) const { return counts_[static_cast<int>(t)]; }
    // Waits up to 2 s for a frame of type t.
    bool saw(FrameType t) const {
        for (int i = 0; i < 200 && count(t) == 0; ++i) ::usleep(10000);
        return count(t) > 0;
    }

private:
    void loop() {
        FrameDecoder dec;
        Frame f;
        uint8_t buf[4096];
        while (!stop_) {
            const long got = read_some(fd_, buf, sizeof buf, 20);
            if (got < 0) break;
            dec.feed(buf, static_cast<size_t>(got));
            while (dec.next(f)) {
                ++counts_[static_cast<int>(f.type)];
                std::vector<uint8_t> wire;
                for (const Frame& a : answer_(f)) encode_frame(a, wire);
                if (!wire.empty()) write_all(fd_, wire.data(), wire.size());
            }
        }
    }
    int fd_;
    Answer answer_;
    std::atomic<int> counts_[16] = {};
    std::atomic<bool> stop_{false};
    std::thread th_;
};

// A host driven frame by frame, as a test script would: after the console's `flash` line,
// send() writes a frame, xchg() also waits (5 s) for the answer with its sequence number.
class RawHost {
public:
    explicit RawHost(int fd) : fd_(fd) { write_all(fd_, kEnterFlashMode, sizeof kEnterFlashMode - 1); }
    void send(const Frame& f) {
        const auto wire = encode_frame(f);
        write_all(fd_, wire.data(), wire.size());
    }
    Frame xchg(const Frame& f) {
        send(f);
        Frame a;
        const int64_t deadline = now_ms() + 5000;
        uint8_t buf[4096];
        while (now_ms() < deadline) {
            while (dec_.next(a))
                if (a.seq == f.seq) return a;
            const long got = read_some(fd_, buf, sizeof buf, 50);
            if (got > 0) dec_.feed(buf, static_cast<size_t>(got));
        }
        throw std::runtime_error("no answer to a frame");
    }
    // OFFER, DATA, DONE of `bytes` as NAME from seq 1 on; returns the RESULT.
    Frame install(const std::string& bytes, const std::string& name) {
        const std::string sha = sha256_hex(bytes.data(), bytes.size());
        xchg(frame_of(FrameType::Offer, seq++, offer_payload(bytes.size(), sha, name)));
        for (size_t off = 0; off < bytes.size(); off += kDataChunk) {
            std::vector<uint8_t> d = u64_payload(off);
            d.insert(d.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(bytes.size(), off + kDataChunk)));
            xchg(frame_of(FrameType::Data, seq++, d));
        }
        return xchg(frame_of(FrameType::Done, seq++));
    }
    uint32_t seq = 1;

private:
    int fd_;
    FrameDecoder dec_;
};

}  // namespace

TEST_CASE("flash: a clean transfer installs the file, reports progress, and the console loads it") {
    Setup s;
    SocketPair line;
    Device dev(line.fd[1], device_options(s.dir.path()));
    SenderOptions o = quick_sender();
    o.timeout_ms = 2000;  // a clean line: no retransmission even on a loaded machine
    uint64_t last = 0;
    int calls = 0;
    o.progress = [&](uint64_t acked, uint64_t total, uint64_t from) {
        CHECK(acked >= last);
        CHECK(total == s.new_bytes.size());
        CHECK(from == 0);
        last = acked;
        ++calls;
    };
    const SendResult r = send_file(line.fd[0], line.fd[0], s.new_bytes, "default", o);
    CHECK(r.sha256 == s.new_sha);
    CHECK(r.resumed_from == 0);
    CHECK(r.retransmissions == 0);
    CHECK(last == s.new_bytes.size());
    CHECK(calls >= static_cast<int>(s.new_bytes.size() / kDataChunk));
    CHECK(r.message.find("installed default.ember") == 0);
    CHECK(part_files(s.dir.path()) == 0);
    check_working(s.dir.path(), line.fd[0], s.new_sha);
    CHECK(read_file(s.dir.file("current")) == "default\n");

    // The same file again: already installed, nothing sent.
    o.progress = nullptr;
    const SendResult again = send_file(line.fd[0], line.fd[0], s.new_bytes, "default", o);
    CHECK(again.resumed_from == s.new_bytes.size());
    CHECK(again.message.find("already installed") == 0);
}

TEST_CASE("flash: a dropped byte, a flipped bit and log text on the line are recovered from") {
    for (int fault = 0; fault < 3; ++fault) {
        CAPTURE(fault);
        Setup s;
        SocketPair host, dev_line;
        Device dev(dev_line.fd[1], device_options(s.dir.path()));
        const uint64_t at = 10000;  // inside a DATA frame (the offer is well before)
        bool done_h = false, done_d = false;
        const std::string log = "[ 1234.567890] tegra-i2c 3160000.i2c: no acknowledge from address 0x50 .......\r\n";
        REQUIRE(log.size() == 80);
        Relay relay(
            host.fd[1], dev_line.fd[0],
            [&](std::string& b, uint64_t before) {
                if (done_h || before + b.size() <= at) return;
                done_h = true;
                const size_t k = at > before ? at - before : 0;
                if (fault == 0) b.erase(k, 1);
                if (fault == 1) b[k] = static_cast<char>(b[k] ^ 0x08);
                if (fault == 2) b.insert(0, log);  // between two frames
            },
            [&](std::string& b, uint64_t before) {
                if (fault == 2 && !done_d && before > 200) {
                    done_d = true;
                    b.insert(0, log);
                }
            });
        const SendResult r = send_file(host.fd[0], host.fd[0], s.new_bytes, "default", quick_sender());
        CHECK(done_h);
        CHECK(r.sha256 == s.new_sha);
        if (fault < 2) CHECK(r.retransmissions >= 1);
        check_working(s.dir.path(), host.fd[0], s.new_sha);
        CHECK(part_files(s.dir.path()) == 0);
        relay.stop();
    }
}

TEST_CASE("flash: a link cut mid-transfer fails cleanly, and the next run resumes at the acknowledged offset") {
    Setup s;
    SocketPair host, dev_line;
    Device dev(dev_line.fd[1], device_options(s.dir.path()));
    const uint64_t cut_at = 20000;
    Relay* rp = nullptr;
    bool cut_done = false;
    Relay relay(
        host.fd[1], dev_line.fd[0],
        [&](std::string& b, uint64_t before) {
            if (!cut_done && before + b.size() > cut_at && rp) rp->cut = cut_done = true;
        },
        nullptr);
    rp = &relay;
    uint64_t acked = 0;
    try {
        send_file(host.fd[0], host.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("the transfer should not succeed over a cut link");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::LinkLost);
        CHECK(std::string(e.what()).find("run the same command again to resume") != std::string::npos);
        acked = e.acked;
    }
    CHECK(acked > 0);
    CHECK(acked < s.new_bytes.size());
    CHECK(sha256_file(s.dir.file("default.ember")) == s.old_sha);  // the old model is untouched
    CHECK(part_files(s.dir.path()) == 1);
    // The device gives up on binary mode; the link comes back; the same command resumes.
    ::usleep((kIdleMs + 200) * 1000);
    relay.cut = false;
    const SendResult r = send_file(host.fd[0], host.fd[0], s.new_bytes, "default", quick_sender());
    // The device resumes at what it holds: at least what the host saw acknowledged (the ACK
    // of the last frame through may have been lost in the cut).
    CHECK(r.resumed_from >= acked);
    CHECK(r.resumed_from < s.new_bytes.size());
    CHECK(r.sha256 == s.new_sha);
    check_working(s.dir.path(), host.fd[0], s.new_sha);
    relay.stop();
}

TEST_CASE("flash: a line where no device answers says that nothing was sent, not how much the device holds") {
    Setup s;
    SocketPair host;  // nothing reads the other end
    try {
        send_file(host.fd[0], host.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("the transfer should not succeed with no device");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::LinkLost);
        CHECK(e.acked == 0);
        const std::string what = e.what();
        CHECK(what.find("to its offer: nothing was sent; is ember-console running on the other end of the line") != std::string::npos);
        CHECK(what.find("it holds") == std::string::npos);  // it used to say "it holds 0 of N bytes"
    }
}

TEST_CASE("flash: files that are not valid .ember models are refused and the old model stays") {
    Setup s;
    SocketPair line;
    Device dev(line.fd[1], device_options(s.dir.path()));
    std::string corrupt = s.new_bytes;
    corrupt[corrupt.size() - 10] ^= 0x01;  // a data byte: the checksum no longer holds
    const std::string text(5000, 'x');
    const std::pair<std::string, std::string> cases[] = {{text, "not a valid .ember model"},
                                                         {corrupt, "checksum"},
                                                         {s.new_bytes.substr(0, 3000), "not a valid .ember model"}};
    for (const auto& [bytes, why] : cases) {
        CAPTURE(why);
        try {
            send_file(line.fd[0], line.fd[0], bytes, "default", quick_sender());
            FAIL("refused file was accepted");
        } catch (const FlashError& e) {
            CHECK(e.kind == FlashError::Refused);
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
        CHECK(part_files(s.dir.path()) == 0);
        ::usleep(50 * 1000);
        check_working(s.dir.path(), line.fd[0], s.old_sha);
    }
    // A bad name is refused by the sender before anything is sent.
    CHECK_THROWS_AS(send_file(line.fd[0], line.fd[0], s.new_bytes, "../evil", quick_sender()), Error);
}

TEST_CASE("flash: a valid model whose session would not fit the device's memory is refused, the old model stays") {
    Setup s;
    SocketPair line;
    ConsoleOptions o = device_options(s.dir.path());
    o.flash_memory_limit = 1000;  // bytes: far below the fixture model's arena
    Device dev(line.fd[1], o);
    try {
        send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("a model that does not fit was installed");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::Refused);
        CAPTURE(e.what());
        CHECK(std::string(e.what()).find("the model does not fit this device, nothing installed: ") != std::string::npos);
        CHECK(std::string(e.what()).find(" of working memory (KV cache ") != std::string::npos);
        CHECK(std::string(e.what()).find("but the limit is 1000 bytes") != std::string::npos);
    }
    CHECK(part_files(s.dir.path()) == 0);
    ::usleep(50 * 1000);
    check_working(s.dir.path(), line.fd[0], s.old_sha);
}

TEST_CASE("flash: the device killed just before the rename leaves the old model, the next run completes") {
    Setup s;
    SocketPair link;
    const pid_t dev = ::fork();
    REQUIRE(dev >= 0);
    if (dev == 0) {
        ::close(link.fd[0]);
        ConsoleOptions o = device_options(s.dir.path());
        o.kill_before_rename = true;
        Console c(link.fd[1], link.fd[1], o);
        c.run();
        _exit(0);
    }
    ::close(link.fd[1]);
    link.fd[1] = -1;
    try {
        send_file(link.fd[0], link.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("the device died: the transfer cannot have succeeded");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::LinkLost);
        CHECK(e.acked == s.new_bytes.size());
    }
    int status = 0;
    REQUIRE(::waitpid(dev, &status, 0) == dev);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    // The old model is installed and whole; the verified new bytes wait in the partial file.
    CHECK(sha256_file(s.dir.file("default.ember")) == s.old_sha);
    CHECK_NOTHROW(Model::open(s.dir.file("default.ember")));
    CHECK(part_files(s.dir.path()) == 1);
    // The device restarts (no hook) and the host runs the same command: it resumes at the end.
    SocketPair line2;
    Device again(line2.fd[1], device_options(s.dir.path()));
    const SendResult r = send_file(line2.fd[0], line2.fd[0], s.new_bytes, "default", quick_sender());
    CHECK(r.resumed_from == s.new_bytes.size());
    CHECK(r.sha256 == s.new_sha);
    check_working(s.dir.path(), line2.fd[0], s.new_sha);
}

TEST_CASE("flash: a folder that will not sync after the rename: installed, with a warning, never refused") {
    Setup s;
    SocketPair line;
    ConsoleOptions o = device_options(s.dir.path());
    o.fail_dir_fsync = true;
    Device dev(line.fd[1], o);
    const SendResult r = send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
    CHECK(r.sha256 == s.new_sha);
    CHECK(r.message.find("installed default.ember") != std::string::npos);
    CHECK(r.message.find("warning: ") != std::string::npos);
    CHECK(r.message.find("fsync: Input/output error (test hook): the install may not survive a power cut") != std::string::npos);
    check_working(s.dir.path(), line.fd[0], s.new_sha);
}

TEST_CASE("flash: the device killed at a random moment after DONE: old or new model, never a broken one") {
    for (int delay_us : {0, 300, 1500, 6000}) {
        CAPTURE(delay_us);
        Setup s;
        SocketPair host, link;
        const pid_t dev = ::fork();
        REQUIRE(dev >= 0);
        if (dev == 0) {
            ::close(link.fd[0]);
            ::close(host.fd[0]);
            ::close(host.fd[1]);
            Console c(link.fd[1], link.fd[1], device_options(s.dir.path()));
            c.run();
            _exit(0);
        }
        ::close(link.fd[1]);
        link.fd[1] = -1;
        std::thread killer;
        Relay relay(
            host.fd[1], link.fd[0],
            [&](std::string& b, uint64_t) {
                // DONE: magic, then type 6. Kill the device while it verifies, syncs, renames.
                const size_t k = b.find("EMBF");
                if (k != std::string::npos && k + 4 < b.size() && b[k + 4] == 6 && !killer.joinable()) {
                    killer = std::thread([dev, delay_us] {
                        ::usleep(static_cast<useconds_t>(delay_us));
                        ::kill(dev, SIGKILL);
                    });
                }
            },
            nullptr);
        bool sent = false;
        try {
            send_file(host.fd[0], host.fd[0], s.new_bytes, "default", quick_sender());
            sent = true;  // the verdict got out before the kill
        } catch (const FlashError& e) {
            CHECK(e.kind == FlashError::LinkLost);
        }
        relay.stop();
        if (killer.joinable()) killer.join();
        ::waitpid(dev, nullptr, 0);
        const std::string sha = sha256_file(s.dir.file("default.ember"));
        CHECK((sha == s.old_sha || sha == s.new_sha));
        if (sent) CHECK(sha == s.new_sha);
        CHECK_NOTHROW(Model::open(s.dir.file("default.ember")));
        MESSAGE("killed ", delay_us, " us after DONE: ", sha == s.new_sha ? "new" : "old", " model installed");
    }
}

TEST_CASE("flash receiver: out-of-order, duplicate and malformed frames") {
    TempDir dir;
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    FlashReceiver rx(ro);
    std::vector<Frame> out;
    auto frame = [](FrameType t, uint32_t seq, std::vector<uint8_t> p) {
        Frame f;
        f.type = t;
        f.seq = seq;
        f.payload = std::move(p);
        return f;
    };
    auto data = [&](uint64_t off, size_t n) {
        std::vector<uint8_t> p;
        put_u64(p, off);
        p.resize(8 + n, 'a');
        return p;
    };
    auto held = [](const Frame& f) {
        PayloadReader r(f.payload);
        return r.u64("offset");
    };
    rx.handle(frame(FrameType::Data, 1, data(0, 10)), out);  // no offer yet
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Nak);
    out.clear();
    // DONE with no transfer: the NAK that makes a host offer again, as for DATA (it was
    // "incomplete: holds 0 of 0 bytes", which the host took for a device going back on itself).
    rx.handle(frame(FrameType::Done, 14, {}), out);
    REQUIRE(out.size() == 1);
    CHECK((out[0].type == FrameType::Nak && held(out[0]) == 0));
    CHECK(std::string(out[0].payload.begin() + 8, out[0].payload.end()) == std::string(kNakNoTransfer) + ": send an offer");
    out.clear();
    const std::string body(100, 'a');
    const std::string sha = sha256_hex(body.data(), body.size());
    std::vector<uint8_t> offer;
    put_u64(offer, body.size());
    for (size_t i = 0; i < 64; i += 2) offer.push_back(static_cast<uint8_t>(std::stoi(sha.substr(i, 2), nullptr, 16)));
    offer.push_back(4);
    for (char c : std::string("ab/c")) offer.push_back(static_cast<uint8_t>(c));
    rx.handle(frame(FrameType::Offer, 2, offer), out);  // bad name
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Result);
    CHECK(out[0].payload[0] == 1);
    out.clear();
    offer.back() = 'x';  // "ab/x" -> still bad; fix the name to "abcx"
    offer[offer.size() - 2] = 'c';
    // Bytes after the name (a name length too short for the name sent): a NAK that names them,
    // no transfer started. It was accepted as an offer of the name's first bytes.
    offer.push_back('!');
    rx.handle(frame(FrameType::Offer, 13, offer), out);
    REQUIRE(out.size() == 1);
    CHECK((out[0].type == FrameType::Nak && out[0].seq == 13));
    CHECK(std::string(out[0].payload.begin() + 8, out[0].payload.end()) == "payload holds 1 byte after the name (46 in all)");
    out.clear();
    offer.pop_back();
    rx.handle(frame(FrameType::Offer, 3, offer), out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Accept);
    CHECK(held(out[0]) == 0);
    out.clear();
    rx.handle(frame(FrameType::Data, 4, data(0, 60)), out);
    rx.handle(frame(FrameType::Data, 5, data(0, 60)), out);   // duplicate: acknowledged, not written twice
    rx.handle(frame(FrameType::Data, 6, data(70, 10)), out);  // a gap: NAK naming offset 60
    rx.handle(frame(FrameType::Data, 7, data(60, 50)), out);  // past the offered size
    rx.handle(frame(FrameType::Done, 8, {}), out);            // incomplete
    rx.handle(frame(FrameType::Data, 9, {1, 2, 3}), out);     // payload too short for an offset
    // An offset whose sum with the length wraps past 2^64: a NAK (it was acknowledged as a
    // duplicate of bytes already held).
    rx.handle(frame(FrameType::Data, 12, data(~uint64_t{0} - 4, 10)), out);
    REQUIRE(out.size() == 7);
    CHECK((out[6].type == FrameType::Nak && held(out[6]) == 60 && out[6].seq == 12));
    CHECK((out[0].type == FrameType::Ack && held(out[0]) == 60 && out[0].seq == 4));
    CHECK((out[1].type == FrameType::Ack && held(out[1]) == 60));
    CHECK((out[2].type == FrameType::Nak && held(out[2]) == 60));
    CHECK((out[3].type == FrameType::Nak && held(out[3]) == 60));
    CHECK((out[4].type == FrameType::Nak && held(out[4]) == 60));
    CHECK((out[5].type == FrameType::Nak && held(out[5]) == 60));
    out.clear();
    rx.handle(frame(FrameType::Data, 10, data(60, 40)), out);
    // DONE carries nothing: one with a payload is malformed (it was taken as DONE).
    rx.handle(frame(FrameType::Done, 15, {'x', 'y', 'z'}), out);
    REQUIRE(out.size() == 2);
    CHECK((out[1].type == FrameType::Nak && held(out[1]) == 100));
    CHECK(std::string(out[1].payload.begin() + 8, out[1].payload.end()) == "DONE holds 3 bytes; it carries none");
    out.pop_back();
    rx.handle(frame(FrameType::Done, 11, {}), out);  // complete, but not a model
    REQUIRE(out.size() == 2);
    CHECK(held(out[0]) == 100);
    CHECK(out[1].type == FrameType::Result);
    CHECK(out[1].payload[0] == 1);
    CHECK(std::string(out[1].payload.begin() + 1, out[1].payload.end()).find("not a valid .ember model") == 0);
    // After the verdict too, a DONE with a payload is malformed (it got the verdict again).
    out.clear();
    rx.handle(frame(FrameType::Done, 16, {'x'}), out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Nak);
    CHECK(std::string(out[0].payload.begin() + 8, out[0].payload.end()) == "DONE holds 1 byte; it carries none");
    CHECK_FALSE(exists(dir.file("abcx.ember")));
    CHECK(part_files(dir.path()) == 0);
}

TEST_CASE("flash: a disk that fills up during the transfer: refused with the reason, the partial file removed, the old model stays") {
    // The failed write used to be answered with a NAK: the host resent the chunk until it gave
    // up as a lost link (exit 3, "run again to resume", which failed the same way), the console
    // said only that no frame came for 3000 ms, and the partial file kept the disk full.
    Setup s;
    SocketPair line;
    ConsoleOptions o = device_options(s.dir.path());
    o.fs = std::make_shared<FullDisk>(20000);
    Device dev(line.fd[1], o);
    try {
        send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("a file that does not fit the disk was installed");
    } catch (const FlashError& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(e.kind == FlashError::Refused);
        CHECK(what.find("the device refused the file: " + s.dir.path() + "/.flash-" + s.new_sha + ".part: write: No space left on device at byte 16384 of " +
                        std::to_string(s.new_bytes.size()) + ": partial file removed, nothing installed") == 0);
    }
    std::string seen;
    CHECK(expect(line.fd[0], seen, "ERR flash: " + s.dir.path() + "/.flash-" + s.new_sha + ".part: write: No space left on device") != std::string::npos);
    CHECK(part_files(s.dir.path()) == 0);
    check_working(s.dir.path(), line.fd[0], s.old_sha);
}

TEST_CASE("flash receiver: an offer for a name whose NAME.ember is a folder is refused before any byte is sent") {
    // It was refused only at the install's rename, after the whole file had crossed the line.
    TempDir dir;
    std::filesystem::create_directory(dir.file("taken.ember"));
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    FlashReceiver rx(ro);
    std::vector<Frame> out;
    rx.handle(frame_of(FrameType::Offer, 1, offer_payload(1000, std::string(64, 'a'), "taken")), out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Result);
    CHECK(out[0].payload[0] == 1);
    CHECK(text_of(out[0], 1) == dir.file("taken.ember") + " is a folder, which an installed model cannot replace: remove it, or flash under another --name");
    CHECK(part_files(dir.path()) == 0);
    CHECK(std::filesystem::is_directory(dir.file("taken.ember")));
}

TEST_CASE("flash receiver: an offer larger than the free space of the models folder is refused before any byte is sent") {
    // It used to be accepted: the transfer filled the disk, then failed.
    TempDir dir;
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    ro.max_file_bytes = UINT64_MAX;
    FlashReceiver rx(ro);
    std::vector<Frame> out;
    const uint64_t huge = uint64_t(1) << 62;
    rx.handle(frame_of(FrameType::Offer, 1, offer_payload(huge, std::string(64, 'a'), "big")), out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Result);
    CHECK(out[0].payload[0] == 1);
    const std::string why = text_of(out[0], 1);
    CAPTURE(why);
    CHECK(why.find("offered file of " + std::to_string(huge) + " bytes does not fit in " + dir.path() + ": " + std::to_string(huge) + " bytes are still to come and ") == 0);
    CHECK(why.find(" are free") != std::string::npos);
    CHECK(part_files(dir.path()) == 0);
}

TEST_CASE("flash: a device that refuses every try of a frame (NAK): refused with its reason, and BYE sent") {
    // It used to be a lost link (exit 3, "run again to resume", which could not help), and the
    // host left without BYE.
    Setup s;
    SocketPair line;
    FakeDevice dev(line.fd[1], [](const Frame& f) -> std::vector<Frame> {
        if (f.type == FrameType::Offer) return {frame_of(FrameType::Accept, f.seq, [] { auto p = u64_payload(0); put_u16(p, kDataChunk); return p; }())};
        if (f.type == FrameType::Data) return {frame_of(FrameType::Nak, f.seq, u64_payload(0, "sd card: write: Input/output error"))};
        return {};
    });
    try {
        send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("no byte was taken, yet the transfer succeeded");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::Refused);
        CHECK(std::string(e.what()) == "the device refused 5 frames in a row: sd card: write: Input/output error");
    }
    CHECK(dev.saw(FrameType::Bye));
}

TEST_CASE("flash: a device whose receiver lost the transfer (NAK: no transfer in progress) is offered the file again and resumes") {
    // A receiver that left binary mode on its idle timeout, or a device that restarted, gets
    // the host's next DATA in a new `flash` session: it NAKs "no transfer in progress". The host
    // used to count those as a refusal (exit 2) after --retries + 1 of them.
    Setup s;
    SocketPair line;
    std::atomic<int> offers{0};
    std::atomic<uint64_t> held{0};
    std::atomic<bool> receiving{false};
    FakeDevice dev(line.fd[1], [&](const Frame& f) -> std::vector<Frame> {
        if (f.type == FrameType::Offer) {
            ++offers;
            receiving = true;
            auto p = u64_payload(held);
            put_u16(p, kDataChunk);
            return {frame_of(FrameType::Accept, f.seq, p)};
        }
        if (f.type == FrameType::Data || f.type == FrameType::Done) {
            // The first offer's receiver goes away after 2 chunks.
            if (!receiving || (offers == 1 && held >= 2 * kDataChunk)) {
                receiving = false;
                return {frame_of(FrameType::Nak, f.seq, u64_payload(0, std::string(kNakNoTransfer) + ": send an offer"))};
            }
            if (f.type == FrameType::Done) return {frame_of(FrameType::Result, f.seq, [] { std::vector<uint8_t> p{0}; for (char c : std::string("installed")) p.push_back(static_cast<uint8_t>(c)); return p; }())};
            PayloadReader r(f.payload);
            const uint64_t off = r.u64("offset");
            if (off == held) held = held + r.remaining();
            return {frame_of(FrameType::Ack, f.seq, u64_payload(held))};
        }
        return {};
    });
    const SendResult r = send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
    CHECK(r.acked == s.new_bytes.size());
    CHECK(offers == 2);
    CHECK(r.resumed_from == 2 * kDataChunk);
    CHECK(held == s.new_bytes.size());

    // A receiver that drops every transfer: a lost link after the new offers (exit 3, run again
    // to resume), not a refusal.
    SocketPair line2;
    FakeDevice never(line2.fd[1], [](const Frame& f) -> std::vector<Frame> {
        if (f.type == FrameType::Offer) return {frame_of(FrameType::Accept, f.seq, [] { auto p = u64_payload(0); put_u16(p, kDataChunk); return p; }())};
        if (f.type == FrameType::Data) return {frame_of(FrameType::Nak, f.seq, u64_payload(0, std::string(kNakNoTransfer) + ": send an offer"))};
        return {};
    });
    try {
        send_file(line2.fd[0], line2.fd[0], s.new_bytes, "default", quick_sender());
        FAIL("no byte was taken, yet the transfer succeeded");
    } catch (const FlashError& e) {
        CHECK(e.kind == FlashError::LinkLost);
        CHECK(std::string(e.what()) == "the device dropped the transfer (no transfer in progress) after each of 2 offers; it holds 0 of " +
                                           std::to_string(s.new_bytes.size()) + " bytes: run the same command again to resume");
    }
    CHECK(never.count(FrameType::Offer) == 2);
}

TEST_CASE("flash: a device that answers outside the protocol: an error of its own kind (exit 3), and BYE sent") {
    // An ACK that took no byte used to reset the count of refused frames: the host resent
    // chunk 0 forever. An offset past the file's end, a short ACCEPT or an empty RESULT threw
    // ember::Error (exit 1, kept for bad input on the host) without BYE, and the device stayed
    // in binary mode until its timeout.
    Setup s;
    const uint64_t n = s.new_bytes.size();
    const std::string N = std::to_string(n);
    auto accept_at = [](uint32_t seq, uint64_t at) {
        std::vector<uint8_t> p = u64_payload(at);
        put_u16(p, kDataChunk);
        return frame_of(FrameType::Accept, seq, p);
    };
    // What the device answers to DATA (after ACCEPT 0); an old host resending forever meets
    // silence after 100 frames, and ends.
    auto on_data = [&](std::function<Frame(uint32_t)> answer) {
        return [=](const Frame& f) -> std::vector<Frame> {
            if (f.type == FrameType::Offer) return {accept_at(f.seq, 0)};
            if (f.type == FrameType::Data && f.seq <= 100) return {answer(f.seq)};
            return {};
        };
    };
    auto on_offer = [](Frame answer) {
        return [=](const Frame& f) -> std::vector<Frame> {
            Frame a = answer;
            a.seq = f.seq;
            if (f.type == FrameType::Offer) return {a};
            return {};
        };
    };
    const std::string tail = ": the device does not follow firmware/PROTOCOL.md; BYE sent";
    const std::pair<FakeDevice::Answer, std::string> cases[] = {
        {on_data([](uint32_t seq) { return frame_of(FrameType::Ack, seq, u64_payload(0)); }),
         "the device acknowledged 5 frames in a row without taking a byte (it says it holds 0 of " + N + " bytes)" + tail},
        {on_data([&](uint32_t seq) { return frame_of(FrameType::Ack, seq, u64_payload(n + 1)); }),
         "the device's ACK says it holds " + std::to_string(n + 1) + " bytes of a " + N + "-byte file" + tail},
        {on_data([](uint32_t seq) { return frame_of(FrameType::Result, seq); }), "the device's RESULT has no status byte" + tail},
        {on_offer(accept_at(0, n + 1)), "the device's ACCEPT says it holds " + std::to_string(n + 1) + " bytes of a " + N + "-byte file" + tail},
        {on_offer(frame_of(FrameType::Accept, 0, {1, 2, 3})),
         "the device's ACCEPT is malformed: payload too short for resume offset: needs 8 bytes at offset 0, holds 3" + tail},
        // A RESULT to the offer without a status byte (a refusal with an empty reason, exit 2),
        // or with success before any byte (a refusal too); an ACCEPT of 0-byte chunks (1-byte
        // DATA frames, one per byte of the file).
        {on_offer(frame_of(FrameType::Result, 0)), "the device's RESULT has no status byte" + tail},
        {on_offer(frame_of(FrameType::Result, 0, {0})), "the device's RESULT to the offer says success (status 0) before any byte was sent" + tail},
        {on_offer([] { auto p = u64_payload(0); put_u16(p, 0); return frame_of(FrameType::Accept, 0, p); }()),
         "the device's ACCEPT takes chunks of 0 bytes" + tail},
        // A RESULT of success to DATA, before DONE: it was taken as an install (exit 0) of a file
        // the device held 0 bytes of. An ACK with bytes after the bytes held.
        {on_data([](uint32_t seq) { return frame_of(FrameType::Result, seq, {0}); }),
         "the device's RESULT to DATA says success (status 0) when it holds 0 of " + N + " bytes and DONE was not sent" + tail},
        {on_data([](uint32_t seq) { auto p = u64_payload(1); p.push_back(9); return frame_of(FrameType::Ack, seq, p); }),
         "the device's ACK is malformed: payload holds 1 byte after the bytes held (9 in all)" + tail},
        // An ACCEPT with bytes after its chunk size: another layout, not one to read the front of.
        {on_offer([] { auto p = u64_payload(0); put_u16(p, kDataChunk); p.push_back(7); return frame_of(FrameType::Accept, 0, p); }()),
         "the device's ACCEPT is malformed: payload holds 1 byte after the chunk size (11 in all)" + tail},
        // An ACK that advances, then a NAK below it, and so on: the ACKs reset the count of
        // refusals, and the host sent for as long as the device answered.
        {[&](const Frame& f) -> std::vector<Frame> {
             if (f.type == FrameType::Offer) return {accept_at(f.seq, 0)};
             if (f.type != FrameType::Data || f.seq > 100) return {};
             PayloadReader r(f.payload);
             const uint64_t off = r.u64("offset");
             if (off == 0) return {frame_of(FrameType::Ack, f.seq, u64_payload(std::min<uint64_t>(n, kDataChunk)))};
             return {frame_of(FrameType::Nak, f.seq, u64_payload(0, "back"))};
         },
         "the device's NAK says it holds 0 bytes after it said " + std::to_string(std::min<uint64_t>(n, kDataChunk)) + tail},
    };
    for (const auto& [answer, want] : cases) {
        CAPTURE(want);
        SocketPair line;
        FakeDevice dev(line.fd[1], answer);
        try {
            send_file(line.fd[0], line.fd[0], s.new_bytes, "default", quick_sender());
            FAIL("a device outside the protocol took the file");
        } catch (const FlashError& e) {
            CHECK(e.kind == FlashError::BadAnswer);
            CHECK(std::string(e.what()) == want);
        } catch (const Error& e) {
            FAIL_CHECK("ember::Error (exit 1, bad input on the host): " << std::string(e.what()));
        }
        CHECK(dev.saw(FrameType::Bye));
        CHECK(dev.count(FrameType::Data) <= 5);
    }
}

TEST_CASE("flash: an install is kept when a later offer in the same session is refused, or the host aborts: the console loads it") {
    // The later offer (or ABORT) used to wipe the session's outcome: the console said only
    // "ERR flash: offered file is empty" (or "flash: the host aborted ...") and kept the old
    // model loaded, with the new file installed on disk.
    for (const bool abort : {false, true}) {
        CAPTURE(abort);
        Setup s;
        SocketPair line;
        Device dev(line.fd[1], device_options(s.dir.path()));
        RawHost host(line.fd[0]);
        const Frame r = host.install(s.new_bytes, "default");
        REQUIRE(r.type == FrameType::Result);
        REQUIRE(r.payload.at(0) == 0);
        std::string later;
        if (abort) {
            host.send(frame_of(FrameType::Abort, host.seq++, {'s', 't', 'o', 'p'}));
            later = "the host aborted: stop";
        } else {
            const Frame refused = host.xchg(frame_of(FrameType::Offer, host.seq++, offer_payload(0, std::string(64, '0'), "z")));
            CHECK((refused.type == FrameType::Result && refused.payload.at(0) == 1));
            host.send(frame_of(FrameType::Bye, host.seq++));
            later = "offered file is empty";
        }
        std::string seen;
        const size_t k = expect(line.fd[0], seen, "flash: installed default.ember (" + std::to_string(s.new_bytes.size()) + " bytes, sha256 " + s.new_sha + "); after that: " + later + "\n");
        CAPTURE(seen);
        CHECK(k != std::string::npos);
        CHECK(expect(line.fd[0], seen, "OK loaded default", k == std::string::npos ? 0 : k) != std::string::npos);
        CHECK(seen.find("ERR flash") == std::string::npos);
        const std::string info = "info\n";
        write_all(line.fd[0], info.data(), info.size());
        CHECK(expect(line.fd[0], seen, "model: default (" + s.dir.file("default.ember") + ", " + std::to_string(s.new_bytes.size()) + " bytes)") != std::string::npos);
        CHECK(read_file(s.dir.file("current")) == "default\n");
    }
}

TEST_CASE("flash receiver: bytes that do not hash to the offer's SHA-256 are refused, the partial file removed, and the message says a new run starts over") {
    // A partial file corrupted on the device between sessions resumes and fails once; the
    // refusal did not say that the next run sends from the start (it does).
    TempDir dir;
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    FlashReceiver rx(ro);
    std::vector<Frame> out;
    const std::string offered(100, 'a'), sent(100, 'b');
    const std::string sha = sha256_hex(offered.data(), offered.size());
    rx.handle(frame_of(FrameType::Offer, 1, offer_payload(offered.size(), sha, "m")), out);
    rx.handle(frame_of(FrameType::Data, 2, u64_payload(0, sent)), out);
    rx.handle(frame_of(FrameType::Done, 3), out);
    REQUIRE(out.size() == 3);
    CHECK((out[2].type == FrameType::Result && out[2].payload.at(0) == 1));
    CHECK(std::string(out[2].payload.begin() + 1, out[2].payload.end()) ==
          "SHA-256 mismatch: the received file hashes to " + sha256_hex(sent.data(), sent.size()) + ", the offer said " + sha +
              " (the partial file is removed: a new run sends the file from its start)");
    CHECK(part_files(dir.path()) == 0);
    CHECK(!exists(dir.file("m.ember")));
}

TEST_CASE("flash: every install of one session is reported, in order, and the last is loaded") {
    // A second install hid the first (the console said only "flash: installed two.ember"), and
    // an offer of the same file again said only "already installed", hiding the fresh install.
    for (const bool same : {false, true}) {
        CAPTURE(same);
        Setup s;
        SocketPair line;
        Device dev(line.fd[1], device_options(s.dir.path()));
        RawHost host(line.fd[0]);
        const std::string second = same ? "default" : "second";
        REQUIRE(host.install(s.new_bytes, "default").payload.at(0) == 0);
        REQUIRE(host.install(s.new_bytes, second).payload.at(0) == 0);
        host.send(frame_of(FrameType::Bye, host.seq++));
        const std::string facts = " (" + std::to_string(s.new_bytes.size()) + " bytes, sha256 " + s.new_sha + ")";
        std::string seen;
        const size_t k = expect(line.fd[0], seen, "flash: installed default.ember" + facts + "; then " + (same ? "already " : "") +
                                                      "installed " + second + ".ember" + facts + "\n");
        CAPTURE(seen);
        CHECK(k != std::string::npos);
        CHECK(expect(line.fd[0], seen, "OK loaded " + second, k == std::string::npos ? 0 : k) != std::string::npos);
        CHECK(read_file(s.dir.file("current")) == second + "\n");
    }
}

TEST_CASE("flash receiver: BYE before a transfer is complete says how far it got, not \"before any offer\"") {
    // Every session that ended without a verdict used to say "the host ended the session
    // before any offer", after offers and data too.
    TempDir dir;
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    const std::string body(100, 'a');
    const std::string sha = sha256_hex(body.data(), body.size());
    std::vector<uint8_t> all_data = u64_payload(0, body);
    auto frames = [](std::initializer_list<Frame> fs) {
        std::vector<uint8_t> wire;
        for (const Frame& f : fs) encode_frame(f, wire);
        return std::string(wire.begin(), wire.end());
    };
    const std::pair<std::string, std::string> cases[] = {
        // The offer says 10 bytes more than are sent; DONE gets a NAK (incomplete).
        {frames({frame_of(FrameType::Offer, 1, offer_payload(110, sha, "m")), frame_of(FrameType::Data, 2, all_data), frame_of(FrameType::Done, 3),
                 frame_of(FrameType::Bye, 4)}),
         "the host ended the session before the transfer of m.ember was complete (it holds 100 of 110 bytes; a new offer resumes)"},
        // Two offers interleaved: the second one's transfer is the one that ends.
        {frames({frame_of(FrameType::Offer, 1, offer_payload(100, sha, "m")), frame_of(FrameType::Data, 2, u64_payload(0, body.substr(0, 40))),
                 frame_of(FrameType::Offer, 3, offer_payload(200, std::string(64, 'b'), "b")), frame_of(FrameType::Bye, 4)}),
         "the host ended the session before the transfer of b.ember was complete (it holds 0 of 200 bytes; a new offer resumes)"},
        {frames({frame_of(FrameType::Bye, 1)}), "the host ended the session before any offer"},
    };
    for (const auto& [wire, want] : cases) {
        SocketPair line;
        const FlashOutcome o = run_receiver(line.fd[0], line.fd[0], ro, wire);
        CHECK(o.message == want);
        CHECK_FALSE(o.installed);
    }
}

TEST_CASE("flash receiver: two consoles on one models folder: an offer leaves the other's transfer in progress alone") {
    // An offer removed every other DIR/.flash-*.part as abandoned, the one a second
    // ember-console (another port, the same --models folder) was writing too: that transfer's
    // bytes went to an unlinked file and its DONE failed ("...part: cannot open").
    TempDir dir;
    ReceiverOptions ro;
    ro.models_dir = dir.path();
    FlashReceiver a(ro), b(ro);
    std::vector<Frame> out;
    const std::string body_a(100, 'a'), body_b(100, 'b');
    const std::string sha_a = sha256_hex(body_a.data(), body_a.size()), sha_b = sha256_hex(body_b.data(), body_b.size());
    a.handle(frame_of(FrameType::Offer, 1, offer_payload(100, sha_a, "ma")), out);
    a.handle(frame_of(FrameType::Data, 2, u64_payload(0, body_a.substr(0, 60))), out);
    REQUIRE(out.size() == 2);
    CHECK(out[1].type == FrameType::Ack);
    out.clear();
    b.handle(frame_of(FrameType::Offer, 1, offer_payload(100, sha_b, "mb")), out);  // the other console's offer
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Accept);
    out.clear();
    CHECK(part_files(dir.path()) == 2);
    a.handle(frame_of(FrameType::Data, 3, u64_payload(60, body_a.substr(60))), out);
    a.handle(frame_of(FrameType::Done, 4), out);
    REQUIRE(out.size() == 2);
    CHECK(out[1].type == FrameType::Result);
    const std::string why = text_of(out[1], 1);
    CAPTURE(why);
    CHECK(why.find("not a valid .ember model") == 0);  // the file was whole, with its SHA-256: only then opened as a model
    out.clear();
    // The same file offered to both at once: the second is refused while the first writes it.
    FlashReceiver c(ro);
    c.handle(frame_of(FrameType::Offer, 1, offer_payload(100, sha_b, "mb")), out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == FrameType::Result);
    CHECK(out[0].payload[0] == 1);
    CHECK(text_of(out[0], 1).find("is being received by another ember-console") != std::string::npos);
}

#include "firmware/flash.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "firmware/serial_port.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/cpu_backend.h"
#include "runtime/session.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

Frame make(FrameType t, uint32_t seq, std::vector<uint8_t> payload = {}) { return Frame{t, seq, std::move(payload)}; }

std::vector<uint8_t> u64_and_text(uint64_t v, const std::string& text) {
    std::vector<uint8_t> p;
    put_u64(p, v);
    const std::string t = text.substr(0, 1024);
    p.insert(p.end(), t.begin(), t.end());
    return p;
}

void fsync_dir(DeviceFs& fs, const std::string& dir) {
    if (fs.fsync_dir(dir) != 0) fail(printable(dir, 200), ": fsync of the folder: ", std::strerror(errno));
}

void sync_file(DeviceFs& fs, const std::string& path) {
    const int fd = fs.open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) fail(printable(path, 200), ": cannot open to sync it: ", std::strerror(errno));
    const int r = fs.fsync(fd);
    const int saved = errno;
    fs.close(fd);
    if (r != 0) fail(printable(path, 200), ": fsync: ", std::strerror(saved));
}

// Removes DIR/.flash-*.part files other than `keep` (older, abandoned transfers). A part file
// that a receiver holds open (its flock, taken in on_offer) is another ember-console's transfer
// in progress on the same models folder: it stays (it used to be removed, and that transfer's
// bytes went to an unlinked file).
void remove_stale_parts(DeviceFs& fs, const std::string& dir, const std::string& keep) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.rfind(".flash-", 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".part") == 0 && dir + "/" + n != keep) {
            const std::string path = dir + "/" + n;
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
            if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
                ::close(fd);
                continue;  // being received
            }
            fs.unlink(path);
            if (fd >= 0) ::close(fd);
        }
    }
    ::closedir(d);
}

}  // namespace

std::string check_model_name(const std::string& name) {
    if (name.empty()) return "model name is empty";
    if (name.size() > kMaxModelName) return "model name longer than 64 bytes";
    // A path ("../x", "sub/x") first: it is the '/' that makes it one, whatever it starts with.
    if (name.find('/') != std::string::npos) return "model name '" + printable(name) + "' holds a '/': a name, not a path (the models folder holds NAME.ember)";
    if (name[0] == '.') return "model name '" + printable(name) + "' starts with '.'";
    // "-x" would read as an option: on the console's line (load -x) and in a shell (rm -x.ember).
    if (name[0] == '-') return "model name '" + printable(name) + "' starts with '-'";
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) return "model name '" + printable(name) + "' has a character outside [A-Za-z0-9._-]";
    }
    return "";
}

// ---------------------------------------------------------------- receiver

FlashReceiver::FlashReceiver(ReceiverOptions opts) : opts_(std::move(opts)) {
    if (!opts_.fs) fail("flash receiver for ", printable(opts_.models_dir, 200), ": no file operations given (ReceiverOptions::fs is null)");
}

FlashReceiver::~FlashReceiver() { close_part(); }

void FlashReceiver::close_part() {
    if (part_fd_ >= 0) opts_.fs->close(part_fd_);
    part_fd_ = -1;
}

void FlashReceiver::finish(uint8_t status, const std::string& message) {
    result_.clear();
    result_.push_back(status);
    const std::string m = message.substr(0, 2000);
    result_.insert(result_.end(), m.begin(), m.end());
    completed_ = true;
    outcome_.message = message;
}

FlashOutcome FlashReceiver::outcome() const {
    FlashOutcome o = outcome_;
    if (installs_.empty()) return o;
    // Every install of the session is said, in order: a second one used to hide the first,
    // and an offer of the same file again ("already installed") the fresh install before it.
    std::string all;
    for (const std::string& m : installs_) all += (all.empty() ? "" : "; then ") + m;
    if (o.installed) {
        o.message = all;  // the last offer installed: its message is the list's last
        return o;
    }
    // An offer or ABORT after an install used to make the console forget the install: it
    // reported the later failure and kept the old model loaded, the new one on disk.
    o.installed = true;
    o.name = installed_name_;
    o.message = all + (o.message.empty() ? "" : "; after that: " + o.message);
    return o;
}

void FlashReceiver::end(const std::string& why) {
    if (!completed_) outcome_.message = why;
}

bool FlashReceiver::handle(const Frame& in, std::vector<Frame>& out) {
    try {
        switch (in.type) {
            case FrameType::Offer: on_offer(in, out); break;
            case FrameType::Data: on_data(in, out); break;
            case FrameType::Done: on_done(in, out); break;
            case FrameType::Bye:
                // Without a verdict, say how far the transfer got (it used to say "before any
                // offer" whenever no verdict had been sent, after offers and data too).
                if (!completed_)
                    outcome_.message = !offered_ ? "the host ended the session before any offer"
                                                 : "the host ended the session before the transfer of " + name_ + ".ember was complete (it holds " +
                                                       std::to_string(received_) + " of " + std::to_string(size_) + " bytes; a new offer resumes)";
                return true;
            case FrameType::Abort:
                close_part();
                outcome_.installed = false;  // the last word is the ABORT (an install before it stays: outcome())
                outcome_.message = "the host aborted: " + printable(std::string(in.payload.begin(), in.payload.end()), 200);
                return true;
            default: break;  // device -> host types: ignored
        }
    } catch (const Error& e) {
        // A malformed payload (CRC-valid but wrong: a buggy or hostile host) or an I/O error.
        out.push_back(make(FrameType::Nak, in.seq, u64_and_text(received_, e.what())));
    }
    return false;
}

void FlashReceiver::on_offer(const Frame& in, std::vector<Frame>& out) {
    PayloadReader r(in.payload);
    const uint64_t size = r.u64("size");
    const std::string raw_sha = r.bytes(32, "sha256");
    const std::string sha = hex_lower(raw_sha.data(), raw_sha.size());
    const uint8_t name_len = r.u8("name length");
    const std::string name = r.bytes(name_len, "name");
    r.expect_end("name");
    if (offered_ && sha == sha_hex_ && size == size_ && name == name_ && !completed_) {
        // A repeated offer (our ACCEPT was lost, or the host reconnected): same transfer.
        std::vector<uint8_t> p;
        put_u64(p, received_);
        put_u16(p, kDataChunk);
        out.push_back(make(FrameType::Accept, in.seq, p));
        return;
    }
    close_part();
    offered_ = false;
    completed_ = false;
    already_installed_ = false;
    outcome_ = FlashOutcome{};
    outcome_.name = name;
    auto refuse = [&](const std::string& why) {
        finish(1, why);
        out.push_back(make(FrameType::Result, in.seq, result_));
    };
    if (const std::string bad = check_model_name(name); !bad.empty()) return refuse(bad);
    if (size == 0) return refuse("offered file is empty");
    if (size > opts_.max_file_bytes) return refuse("offered file of " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(opts_.max_file_bytes));
    size_ = size;
    sha_hex_ = sha;
    name_ = name;
    received_ = 0;
    const std::string installed = opts_.models_dir + "/" + name + ".ember";
    struct stat st{};
    // A folder (or a FIFO, a device) where the file goes: the install's rename would fail after
    // the whole transfer (minutes on a serial line); refused now.
    if (::stat(installed.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        return refuse(printable(installed, 200) + (S_ISDIR(st.st_mode) ? " is a folder" : " is not a regular file") +
                      ", which an installed model cannot replace: remove it, or flash under another --name");
    }
    if (::stat(installed.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == size && sha256_file(installed) == sha) {
        already_installed_ = true;  // nothing to send; DONE answers at once
        received_ = size;
        part_path_.clear();
    } else {
        part_path_ = opts_.models_dir + "/.flash-" + sha + ".part";
        remove_stale_parts(*opts_.fs, opts_.models_dir, part_path_);
        part_fd_ = opts_.fs->open(part_path_, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (part_fd_ < 0) return refuse(part_path_ + ": cannot create: " + std::strerror(errno));
        // Held until the file is installed or refused: another console's offers leave it alone.
        if (::flock(part_fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
            close_part();
            return refuse(printable(part_path_, 200) + " is being received by another ember-console on this models folder: offer it again when that transfer ends");
        }
        if (::fstat(part_fd_, &st) != 0) return refuse(part_path_ + ": fstat: " + std::strerror(errno));
        if (static_cast<uint64_t>(st.st_size) > size) {
            if (opts_.fs->ftruncate(part_fd_, 0) != 0) return refuse(part_path_ + ": ftruncate: " + std::strerror(errno));
            st.st_size = 0;
        }
        received_ = static_cast<uint64_t>(st.st_size);
        // A file that cannot fit is refused before a byte is sent; its partial file goes, so
        // that a nearly full device is not left fuller (it used to fill the disk, then NAK).
        struct statvfs fs{};
        if (::statvfs(opts_.models_dir.c_str(), &fs) == 0 && size - received_ > uint64_t(fs.f_bavail) * fs.f_frsize) {
            const uint64_t free_bytes = uint64_t(fs.f_bavail) * fs.f_frsize;
            close_part();
            opts_.fs->unlink(part_path_);
            return refuse("offered file of " + std::to_string(size) + " bytes does not fit in " + printable(opts_.models_dir, 200) + ": " +
                          std::to_string(size - received_) + " bytes are still to come and " + std::to_string(free_bytes) +
                          " are free");
        }
    }
    offered_ = true;
    std::vector<uint8_t> p;
    put_u64(p, received_);
    put_u16(p, kDataChunk);
    out.push_back(make(FrameType::Accept, in.seq, p));
}

void FlashReceiver::on_data(const Frame& in, std::vector<Frame>& out) {
    if (!offered_ || completed_) {
        out.push_back(make(FrameType::Nak, in.seq, u64_and_text(received_, std::string(kNakNoTransfer) + ": send an offer")));
        return;
    }
    PayloadReader r(in.payload);
    const uint64_t offset = r.u64("offset");
    const size_t n = r.remaining();
    if (n == 0 || n > kDataChunk) fail("data frame holds ", n, " bytes (1..", kDataChunk, ")");
    if (offset == received_ && !already_installed_) {
        if (n > size_ - received_) fail("data past the offered size ", size_);
        const std::string bytes = r.rest();
        size_t done = 0;
        while (done < n) {
            const ssize_t w = opts_.fs->pwrite(part_fd_, bytes.data() + done, n - done, static_cast<off_t>(received_ + done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                // A full or failing disk: a refusal with the reason, and the partial file goes
                // (a NAK here used to make the host resend until it gave up as a lost link,
                // and the partial file kept the disk full).
                const std::string why = part_path_ + ": write: " + (w < 0 ? std::strerror(errno) : "wrote nothing");
                close_part();
                opts_.fs->unlink(part_path_);
                offered_ = false;
                finish(1, why + " at byte " + std::to_string(received_ + done) + " of " + std::to_string(size_) + ": partial file removed, nothing installed");
                out.push_back(make(FrameType::Result, in.seq, result_));
                return;
            }
            done += static_cast<size_t>(w);
        }
        received_ += n;
    } else if (offset > received_ || n > received_ - offset) {  // not wholly held: no sum that wraps
        out.push_back(make(FrameType::Nak, in.seq, u64_and_text(received_, "expected offset " + std::to_string(received_))));
        return;
    }
    // In order, or a duplicate of bytes already held: acknowledge what we hold.
    std::vector<uint8_t> p;
    put_u64(p, received_);
    out.push_back(make(FrameType::Ack, in.seq, p));
}

void FlashReceiver::on_done(const Frame& in, std::vector<Frame>& out) {
    if (!in.payload.empty()) fail("DONE holds ", in.payload.size(), in.payload.size() == 1 ? " byte" : " bytes", "; it carries none");
    if (completed_) {
        out.push_back(make(FrameType::Result, in.seq, result_));
        return;
    }
    if (!offered_) {
        // As DATA without a transfer: the host offers again (it said "incomplete: holds 0 of 0
        // bytes", which a host takes for a device that went back on what it held).
        out.push_back(make(FrameType::Nak, in.seq, u64_and_text(received_, std::string(kNakNoTransfer) + ": send an offer")));
        return;
    }
    if (received_ != size_) {
        out.push_back(make(FrameType::Nak, in.seq, u64_and_text(received_, "incomplete: holds " + std::to_string(received_) + " of " + std::to_string(size_) + " bytes")));
        return;
    }
    const std::string target = opts_.models_dir + "/" + name_ + ".ember";
    if (already_installed_) {
        // In place is not yet durable: a device killed between the rename and the folder's
        // fsync finds the file there after a restart, but a power cut would still undo the
        // rename. Sync the file and the folder before saying it is installed.
        std::string warning;
        try {
            sync_file(*opts_.fs, target);
            fsync_dir(*opts_.fs, opts_.models_dir);
        } catch (const Error& e) {
            warning = std::string("; warning: ") + e.what() + ": the install may not survive a power cut";
        }
        finish(0, "already installed " + name_ + ".ember (" + std::to_string(size_) + " bytes, sha256 " + sha_hex_ + ")" + warning);
        outcome_.installed = true;
        installed_name_ = name_;
        installs_.push_back(outcome_.message);
        out.push_back(make(FrameType::Result, in.seq, result_));
        return;
    }
    auto reject = [&](const std::string& why) {
        close_part();
        opts_.fs->unlink(part_path_);
        offered_ = false;
        finish(1, why);
        out.push_back(make(FrameType::Result, in.seq, result_));
    };
    if (opts_.fs->fsync(part_fd_) != 0) return reject(part_path_ + ": fsync: " + std::strerror(errno));
    // part_fd_ (and its flock) stays open until the rename: another console's offer must not
    // remove the file between its checks and its install.
    const std::string got = sha256_file(part_path_);
    if (got != sha_hex_)
        return reject("SHA-256 mismatch: the received file hashes to " + got + ", the offer said " + sha_hex_ +
                      " (the partial file is removed: a new run sends the file from its start)");
    try {
        auto model = Model::open(part_path_);
        // A valid file whose sessions this device cannot hold would replace a model that runs.
        try {
            check_plan_fits(plan_memory(*model, 1, false), *model, opts_.memory_limit);
        } catch (const Error& e) {
            return reject(std::string("the model does not fit this device, nothing installed: ") + e.what());
        }
    } catch (const Error& e) {
        return reject(std::string("not a valid .ember model, nothing installed: ") + e.what());
    }
    if (opts_.kill_before_rename) ::raise(SIGKILL);
    if (opts_.fs->rename(part_path_, target) != 0) return reject(target + ": rename: " + std::strerror(errno));
    close_part();
    // Installed from here on: a folder that will not sync is a warning with the install,
    // never a refusal (it used to NAK a model that was in place, then refuse the repeated DONE).
    outcome_.installed = true;
    std::string warning;
    try {
        if (opts_.fail_dir_fsync) fail(printable(opts_.models_dir, 200), ": fsync: Input/output error (test hook)");
        fsync_dir(*opts_.fs, opts_.models_dir);
    } catch (const Error& e) {
        warning = std::string("; warning: ") + e.what() + ": the install may not survive a power cut";
    }
    finish(0, "installed " + name_ + ".ember (" + std::to_string(size_) + " bytes, sha256 " + sha_hex_ + ")" + warning);
    installed_name_ = name_;
    installs_.push_back(outcome_.message);
    out.push_back(make(FrameType::Result, in.seq, result_));
}

FlashOutcome run_receiver(int in_fd, int out_fd, const ReceiverOptions& opts, const std::string& pending) {
    FlashReceiver rx(opts);
    FrameDecoder dec;
    dec.feed(reinterpret_cast<const uint8_t*>(pending.data()), pending.size());
    int64_t last = now_ms();
    bool got_frame = false;
    uint8_t buf[4096];
    Frame f;
    std::vector<Frame> answers;
    std::vector<uint8_t> wire;
    for (;;) {
        while (dec.next(f)) {
            last = now_ms();
            got_frame = true;
            answers.clear();
            const bool over = rx.handle(f, answers);
            wire.clear();
            for (const Frame& a : answers) encode_frame(a, wire);
            if (!wire.empty()) write_all(out_fd, wire.data(), wire.size());
            if (over) {
                FlashOutcome o = rx.outcome();
                o.got_frame = true;
                o.leftover = dec.take_rest();
                return o;
            }
        }
        // After a verdict the host only has BYE left to send: do not wait long for it.
        // No frame yet: a person typed `flash`, or a host is about to send its offer.
        const int idle = rx.completed()                                  ? std::min(opts.idle_timeout_ms, 3000)
                         : !got_frame && opts.first_frame_timeout_ms > 0 ? opts.first_frame_timeout_ms
                                                                         : opts.idle_timeout_ms;
        const int64_t left = last + idle - now_ms();
        if (left <= 0) {
            rx.end("no frame from the host for " + std::to_string(idle) + " ms: left binary mode (a new offer resumes)");
            FlashOutcome o = rx.outcome();
            o.got_frame = got_frame;
            return o;
        }
        const long got = read_some(in_fd, buf, sizeof buf, static_cast<int>(std::min<int64_t>(left, 200)));
        if (got < 0) {
            rx.end("the line closed during the transfer (a new offer resumes)");
            FlashOutcome o = rx.outcome();
            o.got_frame = got_frame;
            return o;
        }
        if (got > 0) dec.feed(buf, static_cast<size_t>(got));
    }
}

// ---------------------------------------------------------------- sender

namespace {

class Link {
public:
    Link(int in_fd, int out_fd, const SenderOptions& o) : in_(in_fd), out_(out_fd), o_(o) {}

    // Sends `f` (preceded by `prefix`) and waits for an answer to it (same seq) of one of the
    // accepted types; sends again on timeout. Returns false when every try timed out.
    bool exchange(const Frame& f, std::initializer_list<FrameType> accept, Frame& answer, const std::string& prefix = "") {
        std::vector<uint8_t> wire(prefix.begin(), prefix.end());
        encode_frame(f, wire);
        for (int attempt = 0; attempt < o_.retries; ++attempt) {
            if (attempt > 0) ++retransmissions;
            const int64_t deadline = now_ms() + o_.timeout_ms;
            try {
                write_all(out_, wire.data(), wire.size());
            } catch (const Error&) {
                // The line is gone (EIO, EPIPE): this try fails; the device may come back.
                ::usleep(static_cast<useconds_t>(o_.timeout_ms) * 1000);
                continue;
            }
            for (;;) {
                while (dec_.next(answer)) {
                    if (answer.seq != f.seq) continue;  // a late answer to an earlier frame
                    for (FrameType t : accept)
                        if (answer.type == t) return true;
                }
                const int64_t left = deadline - now_ms();
                if (left <= 0) break;
                uint8_t buf[4096];
                const long got = read_some(in_, buf, sizeof buf, static_cast<int>(left));
                if (got < 0) {
                    // The line is gone (a pty whose other end closed); wait out the timeout
                    // so that a device coming back can still answer the next try.
                    ::usleep(static_cast<useconds_t>(std::min<int64_t>(left, 50)) * 1000);
                    continue;
                }
                if (got > 0) dec_.feed(buf, static_cast<size_t>(got));
            }
        }
        return false;
    }
    void send(const Frame& f) {  // no answer expected; a failed write is not an error
        const auto wire = encode_frame(f);
        try {
            write_all(out_, wire.data(), wire.size());
        } catch (const Error&) {
        }
    }
    uint64_t retransmissions = 0;

private:
    int in_, out_;
    const SenderOptions& o_;
    FrameDecoder dec_;
};

std::string text_of(const std::vector<uint8_t>& p, size_t from) {
    return from >= p.size() ? std::string() : printable(std::string(p.begin() + static_cast<std::ptrdiff_t>(from), p.end()), 1000);
}

// The host's side of one send_file over `link`: offers, each followed by DATA from the
// device's resume offset, DONE, and the verdict. A refusal (RESULT 1, or NAKs past --retries)
// throws FlashError::Refused; an answer outside the protocol throws FlashError::BadAnswer
// after a BYE, which sends the device back to its console (it used to be ember::Error, exit 1,
// with no BYE: the device stayed in binary mode until its timeout).
class Sender {
public:
    // How an offer ended, when it did not throw.
    enum class Ended {
        Installed,  // RESULT 0 after DONE: `res` holds the device's message
        NoAnswer,   // a frame got no answer in --retries tries
        Dropped,    // a NAK kNakNoTransfer: the device lost the transfer (restarted, timed out)
    };

    Sender(Link& link, std::string_view bytes, const SenderOptions& opts) : link_(link), bytes_(bytes), opts_(opts) {}

    // One OFFER (payload `offer`, preceded on the line by `enter`) and, once accepted, the
    // transfer from the offset the device holds.
    Ended offer(const std::vector<uint8_t>& offer, const std::string& enter, SendResult& res) {
        Frame ans;
        if (!link_.exchange(make(FrameType::Offer, seq_++, offer), {FrameType::Accept, FrameType::Result}, ans, enter)) return Ended::NoAnswer;
        if (ans.type == FrameType::Result) {
            // A refusal carries status 1 and its reason; nothing is installed before DATA.
            if (ans.payload.empty()) throw misbehaves("the device's RESULT has no status byte");
            if (ans.payload[0] == 0) throw misbehaves("the device's RESULT to the offer says success (status 0) before any byte was sent");
            link_.send(make(FrameType::Bye, seq_++));
            throw FlashError(FlashError::Refused, "the device refused the offer: " + text_of(ans.payload, 1), acked_);
        }
        answered_ = true;
        uint64_t offset = 0;
        uint16_t dev_chunk = 0;
        try {
            PayloadReader r(ans.payload);
            offset = r.u64("resume offset");
            dev_chunk = r.u16("chunk");
            r.expect_end("chunk size");
        } catch (const Error& e) {
            throw misbehaves(std::string("the device's ACCEPT is malformed: ") + e.what());
        }
        check_held(ans, offset);
        if (dev_chunk == 0) throw misbehaves("the device's ACCEPT takes chunks of 0 bytes");
        res.resumed_from = offset;
        acked_ = offset;
        if (opts_.progress) opts_.progress(acked_, bytes_.size(), res.resumed_from);
        return send_from(offset, std::min<size_t>(opts_.chunk, dev_chunk), res);
    }

    bool answered() const { return answered_; }  // the device accepted an offer: it holds acked()
    uint64_t acked() const { return acked_; }

private:
    // DATA from `offset` in chunks of `chunk` bytes, then DONE, each answer checked.
    Ended send_from(uint64_t offset, size_t chunk, SendResult& res) {
        const uint64_t size = bytes_.size();
        int naks = 0;  // answers in a row that took no byte: NAKs, and ACKs that do not advance
        Frame ans;
        for (;;) {
            if (offset < size) {
                const size_t n = std::min<size_t>(chunk, size - offset);
                std::vector<uint8_t> d;
                put_u64(d, offset);
                d.insert(d.end(), bytes_.begin() + static_cast<std::ptrdiff_t>(offset), bytes_.begin() + static_cast<std::ptrdiff_t>(offset + n));
                if (!link_.exchange(make(FrameType::Data, seq_++, d), {FrameType::Ack, FrameType::Nak, FrameType::Result}, ans)) return Ended::NoAnswer;
            } else if (!link_.exchange(make(FrameType::Done, seq_++), {FrameType::Result, FrameType::Nak}, ans)) {
                return Ended::NoAnswer;
            }
            if (ans.type == FrameType::Result) return verdict(ans, res, offset >= size);
            const uint64_t held = held_of(ans);
            check_held(ans, held);
            // A device holds more with each answer of a transfer; one that restarted says
            // kNakNoTransfer. Less than it said before: answers that went back and forth
            // (an ACK that advanced, then a NAK below it) kept the host sending for good.
            const bool no_transfer = ans.type == FrameType::Nak && text_of(ans.payload, 8).rfind(kNakNoTransfer, 0) == 0;
            if (!no_transfer && held < acked_)
                throw misbehaves(std::string("the device's ") + frame_type_name(ans.type) + " says it holds " + std::to_string(held) +
                                 " bytes after it said " + std::to_string(acked_));
            if (ans.type == FrameType::Ack && held <= offset) {
                // An ACK always holds the frame's bytes: one that does not used to reset the
                // count, and the host resent the same chunk forever.
                ++link_.retransmissions;
                if (++naks > opts_.retries)
                    throw misbehaves("the device acknowledged " + std::to_string(naks) + " frames in a row without taking a byte (it says it holds " +
                                     std::to_string(held) + " of " + std::to_string(size) + " bytes)");
            } else if (no_transfer) {
                // The device holds no transfer: offer again (it resumes from its partial file).
                // Counting these as NAKs used to end a flash that a restarted or timed-out
                // receiver could have resumed as a refusal (exit 2).
                ++link_.retransmissions;
                return Ended::Dropped;
            } else if (ans.type == FrameType::Nak) {
                ++link_.retransmissions;
                if (++naks > opts_.retries) {
                    // The device answers, so the link is up: it refuses, with its reason
                    // (this used to be a lost link, exit 3, that no second run could fix).
                    link_.send(make(FrameType::Bye, seq_++));
                    throw FlashError(FlashError::Refused, "the device refused " + std::to_string(naks) + " frames in a row: " + text_of(ans.payload, 8), acked_);
                }
            } else {
                naks = 0;
            }
            offset = held;
            acked_ = held;
            if (opts_.progress) opts_.progress(acked_, size, res.resumed_from);
        }
    }

    // The RESULT to DATA or DONE (after_done): installed (BYE sent, res filled), or a refusal
    // (throws). Success answers DONE only: to DATA it was taken as an install of a file the
    // device did not have whole.
    Ended verdict(const Frame& ans, SendResult& res, bool after_done) {
        if (ans.payload.empty()) throw misbehaves("the device's RESULT has no status byte");
        if (ans.payload[0] == 0 && !after_done)
            throw misbehaves("the device's RESULT to DATA says success (status 0) when it holds " + std::to_string(acked_) + " of " +
                             std::to_string(bytes_.size()) + " bytes and DONE was not sent");
        if (ans.payload[0] != 0) {
            link_.send(make(FrameType::Bye, seq_++));
            throw FlashError(FlashError::Refused, "the device refused the file: " + text_of(ans.payload, 1), acked_);
        }
        res.acked = bytes_.size();
        res.message = text_of(ans.payload, 1);
        link_.send(make(FrameType::Bye, seq_++));
        return Ended::Installed;
    }

    // An answer outside the protocol: the device is not ember-console, or broken.
    FlashError misbehaves(const std::string& what) {
        link_.send(make(FrameType::Bye, seq_++));
        return FlashError(FlashError::BadAnswer, what + ": the device does not follow firmware/PROTOCOL.md; BYE sent", acked_);
    }

    // The u64 "bytes held" of an ACK (all of it) or at the start of a NAK (its reason after).
    uint64_t held_of(const Frame& f) {
        try {
            PayloadReader r(f.payload);
            const uint64_t held = r.u64("offset");
            if (f.type == FrameType::Ack) r.expect_end("bytes held");
            return held;
        } catch (const Error& e) {
            throw misbehaves(std::string("the device's ") + frame_type_name(f.type) + " is malformed: " + e.what());
        }
    }

    void check_held(const Frame& f, uint64_t held) {
        if (held > bytes_.size())
            throw misbehaves(std::string("the device's ") + frame_type_name(f.type) + " says it holds " + std::to_string(held) + " bytes of a " +
                             std::to_string(bytes_.size()) + "-byte file");
    }

    Link& link_;
    std::string_view bytes_;
    const SenderOptions& opts_;
    uint32_t seq_ = 1;
    uint64_t acked_ = 0;
    bool answered_ = false;
};

}  // namespace

SendResult send_file(int in_fd, int out_fd, std::string_view bytes, const std::string& name, const SenderOptions& opts) {
    if (const std::string bad = check_model_name(name); !bad.empty()) fail(bad);
    if (bytes.empty()) fail("the file is empty");
    if (opts.chunk == 0 || opts.chunk > kDataChunk) fail("chunk ", opts.chunk, " not in 1..", kDataChunk);
    if (opts.timeout_ms <= 0 || opts.retries <= 0) fail("timeout ", opts.timeout_ms, " ms and retries ", opts.retries, " must both be > 0");
    SendResult res;
    res.bytes = bytes.size();
    const std::string sha_raw = sha256_raw(bytes.data(), bytes.size());
    res.sha256 = hex_lower(sha_raw.data(), sha_raw.size());
    std::vector<uint8_t> offer;
    put_u64(offer, bytes.size());
    offer.insert(offer.end(), sha_raw.begin(), sha_raw.end());
    offer.push_back(static_cast<uint8_t>(name.size()));
    offer.insert(offer.end(), name.begin(), name.end());
    Link link(in_fd, out_fd, opts);
    Sender sender(link, bytes, opts);
    const std::string enter = opts.enter_flash_mode ? kEnterFlashMode : "";
    bool dropped = false;  // the last offer ended in a NAK kNakNoTransfer
    for (int i = 0; i <= opts.reoffers; ++i) {
        const Sender::Ended ended = sender.offer(offer, enter, res);
        res.retransmissions = link.retransmissions;
        if (ended == Sender::Ended::Installed) return res;
        dropped = ended == Sender::Ended::Dropped;
    }
    const uint64_t acked = sender.acked();
    const std::string tries = "no answer from the device after " + std::to_string(opts.retries) + " tries of " + std::to_string(opts.timeout_ms) + " ms";
    if (!sender.answered()) {
        throw FlashError(FlashError::LinkLost,
                         tries + " to its offer: nothing was sent; is ember-console running on the other end of the line, at the same baud rate?",
                         acked);
    }
    const std::string holds = "it holds " + std::to_string(acked) + " of " + std::to_string(bytes.size()) + " bytes: run the same command again to resume";
    if (dropped) throw FlashError(FlashError::LinkLost, std::string("the device dropped the transfer (") + kNakNoTransfer + ") after each of " + std::to_string(opts.reoffers + 1) + " offers; " + holds, acked);
    throw FlashError(FlashError::LinkLost, tries + "; " + holds, acked);
}

}  // namespace ember::fw

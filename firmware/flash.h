// Flashing a model over a serial line (firmware/PROTOCOL.md): the device's receiver and the
// host's sender, each a state machine over frames, run over any pair of file descriptors
// (a serial port, a pty, a socket), so tests drive them without hardware.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "firmware/device_fs.h"
#include "firmware/frame.h"
#include "runtime/error.h"

namespace ember::fw {

constexpr uint16_t kDataChunk = 4096;  // bytes of file per DATA frame (at most)
constexpr size_t kMaxModelName = 64;
// The line the host sends first: Ctrl-C ends whatever the console was doing, then the
// console command that switches it to binary mode. Harmless garbage once in binary mode.
constexpr char kEnterFlashMode[] = "\x03\r\nflash\r\n";
// The start of the reason of a NAK for a frame that reached a receiver holding no transfer
// (it left binary mode on its idle timeout, or the device restarted, and a new `flash` session
// got the host's DATA or DONE): the host offers again, which resumes from the partial file.
constexpr char kNakNoTransfer[] = "no transfer in progress";

// A model name: 1..64 of [A-Za-z0-9._-], not starting with '.' or '-' (a '-' would read as an
// option on the console's line and in a shell). The installed file is
// DIR/NAME.ember. Returns an empty string when good, else the reason.
std::string check_model_name(const std::string& name);

struct ReceiverOptions {
    std::string models_dir;             // where NAME.ember is installed
    int idle_timeout_ms = 30000;        // leave binary mode after this long without a valid frame
    int first_frame_timeout_ms = 0;     // until the first valid frame: leave after this long (0: idle_timeout_ms)
    uint64_t max_file_bytes = uint64_t(1) << 31;  // offers above are refused
    uint64_t memory_limit = 0;          // a model whose session needs more is refused; 0 = MemAvailable
    // Test hook (EMBER_FLASH_TEST_KILL_BEFORE_RENAME=1 in ember-console): SIGKILL the process
    // after the file is verified and synced, just before the rename that installs it.
    bool kill_before_rename = false;
    // Test hook: the folder's fsync after the rename fails (as on a failing disk).
    bool fail_dir_fsync = false;
    // Every change to models_dir goes through this (tests put a journaling disk here).
    std::shared_ptr<DeviceFs> fs = std::make_shared<PosixFs>();
};

struct FlashOutcome {
    bool installed = false;  // a new NAME.ember is in place (verified, synced, renamed)
    bool got_frame = false;  // a valid frame arrived (false: no host was talking)
    std::string name;        // NAME of the last offer
    std::string message;     // what happened, one line
    std::string leftover;    // bytes read after the host's BYE (the console's next input)
};

// The device side. handle() takes one frame from the host and appends the answers; the
// partial file DIR/.flash-<sha256>.part survives a cut link, so a new offer of the same
// file resumes where the bytes received end. Verification before install: size, SHA-256,
// then Model::open (FlatBuffers verifier, checksum, semantic checks); then fsync, rename
// into DIR/NAME.ember, fsync of DIR. Until the rename the old model stays installed.
class FlashReceiver {
public:
    explicit FlashReceiver(ReceiverOptions opts);
    ~FlashReceiver();
    FlashReceiver(const FlashReceiver&) = delete;
    FlashReceiver& operator=(const FlashReceiver&) = delete;

    // Returns true when the session is over (BYE or ABORT from the host).
    bool handle(const Frame& in, std::vector<Frame>& out);
    // The session's outcome. An install in it stays installed whatever came after it (a
    // refused offer, an ABORT, a timeout): `installed` and `name` say it, the message says both.
    FlashOutcome outcome() const;
    // The session ends without BYE (timeout, closed line): `why` is the message unless the
    // current offer has its verdict.
    void end(const std::string& why);
    bool completed() const { return completed_; }  // a RESULT has been sent for the current offer

private:
    void on_offer(const Frame& in, std::vector<Frame>& out);
    void on_data(const Frame& in, std::vector<Frame>& out);
    void on_done(const Frame& in, std::vector<Frame>& out);
    void finish(uint8_t status, const std::string& message);
    void close_part();

    ReceiverOptions opts_;
    bool offered_ = false;
    bool completed_ = false;
    bool already_installed_ = false;
    uint64_t size_ = 0;
    uint64_t received_ = 0;
    std::string sha_hex_;
    std::string name_;
    std::string part_path_;
    int part_fd_ = -1;
    std::vector<uint8_t> result_;  // the RESULT payload, resent for a repeated DONE
    FlashOutcome outcome_;         // of the current offer
    std::string installed_name_;        // the session's last install, if any
    std::vector<std::string> installs_;  // every install's message this session, in order
};

// Runs a FlashReceiver over in_fd/out_fd until BYE, ABORT, idle timeout or a closed line.
// `pending`: bytes already read from the line (the console's buffer after "flash").
FlashOutcome run_receiver(int in_fd, int out_fd, const ReceiverOptions& opts, const std::string& pending);

struct SenderOptions {
    int timeout_ms = 1000;   // wait for an answer before sending a frame again
    int retries = 8;         // sends of one frame before the link counts as lost
    int reoffers = 1;        // after a lost link, offers again (resume) this many times
    uint16_t chunk = kDataChunk;
    bool enter_flash_mode = true;  // send kEnterFlashMode before each offer
    // Called after each acknowledged chunk: bytes acknowledged, total, and the offset the
    // transfer resumed from (0 for a fresh one).
    std::function<void(uint64_t acked, uint64_t total, uint64_t resumed_from)> progress;
};

struct SendResult {
    uint64_t bytes = 0;          // file size
    uint64_t resumed_from = 0;   // the offset the (last) offer resumed at
    uint64_t acked = 0;          // bytes the device acknowledged
    uint64_t retransmissions = 0;
    std::string sha256;
    std::string message;         // the device's RESULT message
};

// Failures of a transfer, with what the CLI needs to pick an exit status.
class FlashError : public Error {
public:
    // BadAnswer: the device answered outside the protocol (not ember-console, or broken).
    enum Kind { Refused, LinkLost, BadAnswer };
    FlashError(Kind k, const std::string& what, uint64_t acked) : Error(what), kind(k), acked(acked) {}
    Kind kind;
    uint64_t acked;  // bytes the device holds (a new run resumes there)
};

// The host side: offers `bytes` (the file's contents) as NAME, sends it, waits for the
// device's verdict, then sends BYE. Throws FlashError (Refused: the device's RESULT said no,
// or it refused every try of a frame with a NAK; LinkLost: no answer after the retries;
// BadAnswer: an answer outside the protocol, after which BYE is sent) or ember::Error (bad
// arguments).
SendResult send_file(int in_fd, int out_fd, std::string_view bytes, const std::string& name, const SenderOptions& opts);

}  // namespace ember::fw

// The flashing protocol's frames (firmware/PROTOCOL.md), shared by the device (ember-console)
// and the host (ember flash).
//
//   offset  size  field
//   0       4     magic "EMBF"
//   4       1     type (FrameType)
//   5       1     reserved, 0
//   6       2     length of the payload, u16 little-endian, <= kMaxPayload
//   8       4     sequence number, u32 little-endian
//   12      4     header CRC32 (zlib crc32 of bytes 0..11)
//   16      len   payload
//   16+len  4     frame CRC32 (zlib crc32 of bytes 0..16+len-1: header and payload)
//
// Frames arrive over a line that may drop, flip or insert bytes. The decoder is a pure class
// over bytes: it skips anything that is not a frame (log text, a torn frame) by searching
// for the next magic, and only returns frames whose length is in bounds and whose two CRCs
// hold. It is the fuzz target's entry point (untrusted bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::fw {

constexpr uint8_t kFrameMagic[4] = {'E', 'M', 'B', 'F'};
constexpr size_t kFrameHeader = 16;
constexpr size_t kFrameTrailer = 4;
constexpr size_t kMaxPayload = 4096 + 16;  // a data chunk of 4096 bytes plus its offset, with room
constexpr size_t kMaxFrame = kFrameHeader + kMaxPayload + kFrameTrailer;

enum class FrameType : uint8_t {
    Offer = 1,   // host -> device: u64 size, 32 bytes SHA-256, u8 name length, name
    Accept = 2,  // device -> host: u64 resume offset, u16 largest data chunk
    Data = 3,    // host -> device: u64 offset, bytes
    Ack = 4,     // device -> host: u64 bytes received (the next offset expected)
    Nak = 5,     // device -> host: u64 next offset expected, UTF-8 reason
    Done = 6,    // host -> device: every byte sent; verify and install
    Result = 7,  // device -> host: u8 status (0 = installed), UTF-8 message
    Abort = 8,   // either way: UTF-8 reason; the transfer ends (the partial file is kept for a resume)
    Bye = 9,     // host -> device: leave binary mode, back to the console
};
const char* frame_type_name(FrameType t);
bool is_known_frame_type(uint8_t t);

struct Frame {
    FrameType type = FrameType::Abort;
    uint32_t seq = 0;
    std::vector<uint8_t> payload;  // [length] <= kMaxPayload
};

// Appends the encoded frame to out. Throws ember::Error when the payload exceeds kMaxPayload.
void encode_frame(const Frame& f, std::vector<uint8_t>& out);
std::vector<uint8_t> encode_frame(const Frame& f);

// Streaming decoder. feed() appends bytes; next() returns complete, valid frames one at a
// time. Memory is bounded by the caller's loop: next() returns false only when what stays
// buffered is the start of one frame (at most kMaxFrame bytes), so a caller that calls next()
// until false after each feed holds at most kMaxFrame + n bytes.
class FrameDecoder {
public:
    FrameDecoder();
    // Appends n bytes (any n).
    void feed(const uint8_t* data, size_t n);
    // The next valid frame into f; false when the buffered bytes hold none yet.
    bool next(Frame& f);

    // Counters for diagnostics and tests.
    uint64_t skipped_bytes() const { return skipped_; }   // bytes that were not part of a valid frame
    uint64_t bad_frames() const { return bad_frames_; }  // frames refused by a length or CRC check
    size_t buffered() const { return buf_.size() - start_; }
    // Hands back the bytes buffered and not yet decoded (what followed the last frame).
    std::string take_rest();

private:
    void drop(size_t n);  // discard n bytes from the front as garbage
    void compact();

    std::vector<uint8_t> buf_;
    size_t start_ = 0;
    uint64_t skipped_ = 0;
    uint64_t bad_frames_ = 0;
};

// Little-endian helpers for payloads. The readers bounds-check against the payload and
// throw ember::Error naming the field.
void put_u16(std::vector<uint8_t>& out, uint16_t v);
void put_u32(std::vector<uint8_t>& out, uint32_t v);
void put_u64(std::vector<uint8_t>& out, uint64_t v);

class PayloadReader {
public:
    explicit PayloadReader(const std::vector<uint8_t>& p) : p_(p) {}
    uint8_t u8(const char* field);
    uint16_t u16(const char* field);
    uint64_t u64(const char* field);
    std::string bytes(size_t n, const char* field);
    std::string rest();  // the remaining bytes
    size_t remaining() const { return p_.size() - pos_; }
    // Throws Error when bytes follow `last`, the layout's last field: a fixed layout with more
    // in it is a different (or broken) sender, not one to read the front of.
    void expect_end(const char* last);

private:
    void need(size_t n, const char* field);
    const std::vector<uint8_t>& p_;
    size_t pos_ = 0;
};

}  // namespace ember::fw

#include "firmware/frame.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "runtime/error.h"

namespace ember::fw {

namespace {

uint32_t crc32_of(const uint8_t* p, size_t n) {
    return static_cast<uint32_t>(crc32(0L, p, static_cast<uInt>(n)));
}

uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

const char* frame_type_name(FrameType t) {
    switch (t) {
        case FrameType::Offer: return "OFFER";
        case FrameType::Accept: return "ACCEPT";
        case FrameType::Data: return "DATA";
        case FrameType::Ack: return "ACK";
        case FrameType::Nak: return "NAK";
        case FrameType::Done: return "DONE";
        case FrameType::Result: return "RESULT";
        case FrameType::Abort: return "ABORT";
        case FrameType::Bye: return "BYE";
    }
    return "?";
}

bool is_known_frame_type(uint8_t t) { return t >= 1 && t <= 9; }

void put_u16(std::vector<uint8_t>& out, uint16_t v) {
    out.push_back(static_cast<uint8_t>(v));
    out.push_back(static_cast<uint8_t>(v >> 8));
}
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void encode_frame(const Frame& f, std::vector<uint8_t>& out) {
    if (f.payload.size() > kMaxPayload) fail("frame ", frame_type_name(f.type), ": payload of ", f.payload.size(), " bytes exceeds ", kMaxPayload);
    const size_t at = out.size();
    out.insert(out.end(), kFrameMagic, kFrameMagic + 4);
    out.push_back(static_cast<uint8_t>(f.type));
    out.push_back(0);
    put_u16(out, static_cast<uint16_t>(f.payload.size()));
    put_u32(out, f.seq);
    put_u32(out, crc32_of(out.data() + at, 12));
    out.insert(out.end(), f.payload.begin(), f.payload.end());
    put_u32(out, crc32_of(out.data() + at, kFrameHeader + f.payload.size()));
}

std::vector<uint8_t> encode_frame(const Frame& f) {
    std::vector<uint8_t> out;
    encode_frame(f, out);
    return out;
}

FrameDecoder::FrameDecoder() { buf_.reserve(2 * kMaxFrame); }

void FrameDecoder::feed(const uint8_t* data, size_t n) {
    compact();
    buf_.insert(buf_.end(), data, data + n);
}

void FrameDecoder::compact() {
    if (start_ == 0) return;
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
}

void FrameDecoder::drop(size_t n) {
    start_ += n;
    skipped_ += n;
}

bool FrameDecoder::next(Frame& f) {
    for (;;) {
        const uint8_t* b = buf_.data() + start_;
        const size_t avail = buf_.size() - start_;
        // Resynchronise on the magic: skip bytes up to the first position where it starts
        // (or where a prefix of it ends the buffer).
        size_t p = 0;
        for (; p < avail; ++p) {
            const size_t k = std::min<size_t>(4, avail - p);
            if (std::memcmp(b + p, kFrameMagic, k) == 0) break;
        }
        if (p > 0) {
            drop(p);
            continue;
        }
        if (avail < kFrameHeader) return false;
        const uint16_t len = get_u16(b + 6);
        if (get_u32(b + 12) != crc32_of(b, 12) || b[5] != 0 || !is_known_frame_type(b[4]) || len > kMaxPayload) {
            ++bad_frames_;
            drop(1);
            continue;
        }
        const size_t total = kFrameHeader + len + kFrameTrailer;
        if (avail < total) return false;
        if (get_u32(b + kFrameHeader + len) != crc32_of(b, kFrameHeader + len)) {
            ++bad_frames_;
            drop(1);
            continue;
        }
        f.type = static_cast<FrameType>(b[4]);
        f.seq = get_u32(b + 8);
        f.payload.assign(b + kFrameHeader, b + kFrameHeader + len);
        start_ += total;
        return true;
    }
}

std::string FrameDecoder::take_rest() {
    std::string rest(reinterpret_cast<const char*>(buf_.data() + start_), buf_.size() - start_);
    buf_.clear();
    start_ = 0;
    return rest;
}

void PayloadReader::need(size_t n, const char* field) {
    if (p_.size() - pos_ < n) fail("payload too short for ", field, ": needs ", n, " bytes at offset ", pos_, ", holds ", p_.size());
}
uint8_t PayloadReader::u8(const char* field) {
    need(1, field);
    return p_[pos_++];
}
uint16_t PayloadReader::u16(const char* field) {
    need(2, field);
    const uint16_t v = get_u16(p_.data() + pos_);
    pos_ += 2;
    return v;
}
uint64_t PayloadReader::u64(const char* field) {
    need(8, field);
    const uint64_t v = get_u32(p_.data() + pos_) | (static_cast<uint64_t>(get_u32(p_.data() + pos_ + 4)) << 32);
    pos_ += 8;
    return v;
}
std::string PayloadReader::bytes(size_t n, const char* field) {
    need(n, field);
    std::string s(reinterpret_cast<const char*>(p_.data() + pos_), n);
    pos_ += n;
    return s;
}
std::string PayloadReader::rest() { return bytes(remaining(), "rest"); }
void PayloadReader::expect_end(const char* last) {
    if (remaining() != 0) fail("payload holds ", remaining(), remaining() == 1 ? " byte" : " bytes", " after the ", last, " (", p_.size(), " in all)");
}

}  // namespace ember::fw

// The frame codec: round trips, resynchronisation after garbage, and refusal of frames whose
// length or CRCs do not hold.
#include <doctest/doctest.h>

#include <zlib.h>

#include <random>

#include "firmware/frame.h"
#include "runtime/error.h"

using namespace ember::fw;

namespace {

Frame sample_frame(FrameType t, uint32_t seq, size_t n, uint8_t fill) {
    Frame f;
    f.type = t;
    f.seq = seq;
    for (size_t i = 0; i < n; ++i) f.payload.push_back(static_cast<uint8_t>(fill + i * 7));
    return f;
}

std::vector<Frame> decode_all(const std::vector<uint8_t>& wire, FrameDecoder& d, size_t piece = 1) {
    std::vector<Frame> out;
    Frame f;
    for (size_t i = 0; i < wire.size(); i += piece) {
        d.feed(wire.data() + i, std::min(piece, wire.size() - i));
        while (d.next(f)) out.push_back(f);
    }
    return out;
}

bool same(const Frame& a, const Frame& b) { return a.type == b.type && a.seq == b.seq && a.payload == b.payload; }

}  // namespace

TEST_CASE("frames: encode then decode gives them back, fed whole or byte by byte") {
    const Frame frames[] = {sample_frame(FrameType::Offer, 1, 41, 3), sample_frame(FrameType::Data, 0xdeadbeef, kMaxPayload, 9),
                            sample_frame(FrameType::Bye, 7, 0, 0)};
    std::vector<uint8_t> wire;
    for (const Frame& f : frames) encode_frame(f, wire);
    CHECK(wire.size() == 3 * (kFrameHeader + kFrameTrailer) + 41 + kMaxPayload);
    for (size_t piece : {size_t(1), size_t(5), size_t(100000)}) {
        FrameDecoder d;
        const auto got = decode_all(wire, d, piece);
        REQUIRE(got.size() == 3);
        for (int i = 0; i < 3; ++i) CHECK(same(got[i], frames[i]));
        CHECK(d.skipped_bytes() == 0);
        CHECK(d.buffered() == 0);
    }
}

TEST_CASE("frames: garbage before, between and after frames is skipped (resync on the magic)") {
    const Frame a = sample_frame(FrameType::Data, 5, 100, 1), b = sample_frame(FrameType::Ack, 6, 8, 2);
    std::vector<uint8_t> wire;
    const std::string log = "[  12.345678] usb 1-2: new high-speed USB device number 3 using tegra-xusb EMB EMBF\n";
    wire.insert(wire.end(), log.begin(), log.end());
    encode_frame(a, wire);
    wire.insert(wire.end(), log.begin(), log.begin() + 80);
    encode_frame(b, wire);
    wire.insert(wire.end(), {'E', 'M', 'B'});
    FrameDecoder d;
    const auto got = decode_all(wire, d, 7);
    REQUIRE(got.size() == 2);
    CHECK(same(got[0], a));
    CHECK(same(got[1], b));
    CHECK(d.skipped_bytes() == log.size() + 80);
    CHECK(d.buffered() == 3);  // a possible magic prefix is kept
}

TEST_CASE("frames: a flipped bit or a dropped byte loses that frame only") {
    const Frame a = sample_frame(FrameType::Data, 1, 300, 1), b = sample_frame(FrameType::Data, 2, 300, 5);
    for (size_t pos : {size_t(2), size_t(6), size_t(9), size_t(13), size_t(40), size_t(kFrameHeader + 300 + 2)}) {
        for (int kind = 0; kind < 2; ++kind) {
            std::vector<uint8_t> wire = encode_frame(a);
            if (kind == 0) wire[pos] ^= 0x10;
            else wire.erase(wire.begin() + static_cast<std::ptrdiff_t>(pos));
            encode_frame(b, wire);
            FrameDecoder d;
            const auto got = decode_all(wire, d, 64);
            CAPTURE(pos);
            CAPTURE(kind);
            REQUIRE(got.size() == 1);
            CHECK(same(got[0], b));
        }
    }
}

TEST_CASE("frames: a header claiming more than the largest payload is refused at once") {
    std::vector<uint8_t> wire = encode_frame(sample_frame(FrameType::Data, 1, 10, 1));
    // Rewrite the length to kMaxPayload + 1 and fix the header CRC, as a hostile sender could.
    wire[6] = static_cast<uint8_t>((kMaxPayload + 1) & 0xff);
    wire[7] = static_cast<uint8_t>((kMaxPayload + 1) >> 8);
    const uint32_t crc = static_cast<uint32_t>(crc32(0L, wire.data(), 12));
    for (int i = 0; i < 4; ++i) wire[12 + i] = static_cast<uint8_t>(crc >> (8 * i));
    // The header is consistent, but the decoder must not wait for kMaxPayload + 1 bytes.
    Frame f;
    FrameDecoder d;
    d.feed(wire.data(), wire.size());
    CHECK_FALSE(d.next(f));
    CHECK(d.buffered() < kFrameHeader);
    CHECK(d.bad_frames() == 1);
    CHECK_THROWS_WITH_AS(encode_frame(sample_frame(FrameType::Data, 1, kMaxPayload + 1, 0)), doctest::Contains("exceeds"), ember::Error);
}

TEST_CASE("frames: random bytes never yield a frame, and memory stays bounded") {
    std::mt19937 rng(42);
    FrameDecoder d;
    Frame f;
    int frames = 0;
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> chunk(1 + rng() % 300);
        for (auto& c : chunk) c = static_cast<uint8_t>(rng());
        if (i % 50 == 0) chunk.insert(chunk.end(), kFrameMagic, kFrameMagic + 4);
        d.feed(chunk.data(), chunk.size());
        while (d.next(f)) ++frames;
        CHECK(d.buffered() < kMaxFrame);
    }
    CHECK(frames == 0);
}

TEST_CASE("frames: payload reader bounds-checks every field") {
    std::vector<uint8_t> p;
    put_u64(p, 0x0102030405060708ull);
    put_u16(p, 4096);
    PayloadReader r(p);
    CHECK(r.u64("offset") == 0x0102030405060708ull);
    CHECK(r.u16("chunk") == 4096);
    CHECK_THROWS_WITH_AS(r.u8("status"), doctest::Contains("payload too short for status"), ember::Error);
    CHECK_THROWS_AS(r.bytes(1, "name"), ember::Error);
}

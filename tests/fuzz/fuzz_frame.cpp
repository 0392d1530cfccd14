// libFuzzer: the flashing protocol's frame decoder on arbitrary line bytes (untrusted: what
// arrives on a serial line). Fed in pieces; every frame it returns must encode back to bytes
// that decode to the same frame, and it never buffers a whole frame's worth.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "firmware/frame.h"
#include "runtime/error.h"

using namespace ember::fw;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const size_t piece = 1 + data[0] % 64;
    FrameDecoder d;
    Frame f;
    for (size_t i = 1; i < size; i += piece) {
        d.feed(data + i, std::min(piece, size - i));
        while (d.next(f)) {
            const std::vector<uint8_t> wire = encode_frame(f);
            FrameDecoder again;
            Frame g;
            again.feed(wire.data(), wire.size());
            if (!again.next(g) || g.type != f.type || g.seq != f.seq || g.payload != f.payload) __builtin_trap();
            PayloadReader r(f.payload);
            try {
                (void)r.u64("offset");
                (void)r.u16("chunk");
                (void)r.bytes(r.remaining(), "rest");
            } catch (const ember::Error&) {
            }
        }
        if (d.buffered() >= kMaxFrame) __builtin_trap();
    }
    return 0;
}

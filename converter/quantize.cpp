#include "converter/quantize.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/half.h"
#include "runtime/error.h"

namespace ember::convert {

Int8Weights quantize_int8(const float* w, int rows, int cols, int group_size) {
    if (group_size < 0) fail("int8 group size ", group_size, " must be >= 0 (0 = a whole row)");
    if (rows <= 0 || cols <= 0) fail("int8 quantization of an empty [", rows, ", ", cols, "] tensor");
    Int8Weights out;
    out.group_size = (group_size == 0 || group_size > cols) ? cols : group_size;
    const int g = out.group_size;
    const int gpr = (cols + g - 1) / g;
    out.q.resize(static_cast<size_t>(rows) * cols);
    out.scales.resize(static_cast<size_t>(rows) * gpr);
    for (int r = 0; r < rows; ++r) {
        const float* row = w + static_cast<size_t>(r) * cols;
        int8_t* qrow = out.q.data() + static_cast<size_t>(r) * cols;
        for (int gi = 0; gi < gpr; ++gi) {
            const int begin = gi * g;
            const int end = std::min(cols, begin + g);
            float amax = 0.0f;
            for (int c = begin; c < end; ++c) {
                if (!std::isfinite(row[c])) fail("weight [", r, ", ", c, "] is ", row[c], " (not finite)");
                amax = std::max(amax, std::fabs(row[c]));
            }
            const float scale = amax / 127.0f;
            out.scales[static_cast<size_t>(r) * gpr + gi] = scale;
            for (int c = begin; c < end; ++c) {
                const float v = scale > 0.0f ? std::nearbyint(row[c] / scale) : 0.0f;
                qrow[c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
            }
        }
    }
    return out;
}

std::vector<uint16_t> to_f16(const float* w, size_t n) {
    std::vector<uint16_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = kernels::float_to_half(w[i]);
    return out;
}

void QuantErrorSum::add(const float* w, const float* restored, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(w[i]) - restored[i];
        max_abs = std::max(max_abs, std::fabs(d));
        num += d * d;
        den += static_cast<double>(w[i]) * w[i];
    }
}

QuantError QuantErrorSum::result() const {
    QuantError e;
    e.max_abs = max_abs;
    e.rel_rms = den > 0.0 ? std::sqrt(num / den) : 0.0;
    return e;
}

QuantError quant_error(const float* w, const float* restored, size_t n) {
    QuantErrorSum s;
    s.add(w, restored, n);
    return s.result();
}

}  // namespace ember::convert

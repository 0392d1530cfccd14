#include "kernels/cpu/weights.h"

#include "kernels/cpu/half.h"

namespace ember::kernels {

const char* wtype_name(WType t) { return t == WType::F32 ? "f32" : t == WType::F16 ? "f16" : "int8"; }

void dequantize_row(const WeightView& w, int row, float* out) {
    const size_t base = static_cast<size_t>(row) * w.cols;
    switch (w.type) {
    case WType::F32: {
        const float* src = static_cast<const float*>(w.data) + base;
        for (int j = 0; j < w.cols; ++j) out[j] = src[j];
        break;
    }
    case WType::F16: {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + base;
        for (int j = 0; j < w.cols; ++j) out[j] = half_to_float(src[j]);
        break;
    }
    case WType::I8: {
        const int8_t* src = static_cast<const int8_t*>(w.data) + base;
        const float* s = w.scales + static_cast<size_t>(row) * w.groups_per_row();
        for (int j0 = 0, g = 0; j0 < w.cols; j0 += w.group_size, ++g) {  // group by group: no division per element
            const int j1 = j0 + w.group_size < w.cols ? j0 + w.group_size : w.cols;
            for (int j = j0; j < j1; ++j) out[j] = static_cast<float>(src[j]) * s[g];
        }
        break;
    }
    }
}

}  // namespace ember::kernels

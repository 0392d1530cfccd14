// Weight quantizers of the converter.
//   int8: symmetric per group of `group_size` consecutive elements of a row (the last group
//         of a row may be shorter; groups never cross rows): scale = absmax / 127,
//         q = round_half_even(w / scale) in [-127, 127]; an all-zero group gets scale 0, q 0.
//   f16:  IEEE binary16, round to nearest even (torch.Tensor.half()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::convert {

struct Int8Weights {
    std::vector<int8_t> q;       // [rows, cols]
    std::vector<float> scales;   // [rows, ceil(cols / group_size)]
    int group_size = 0;          // effective: 1..cols
};

// w [rows, cols]. group_size 0 means one group per row; a group larger than the row is
// clamped to the row. Throws ember::Error on a negative group size or a non-finite weight.
Int8Weights quantize_int8(const float* w, int rows, int cols, int group_size);

std::vector<uint16_t> to_f16(const float* w, size_t n);

// How far a stored tensor is from its f32 source.
struct QuantError {
    double max_abs = 0.0;   // max |w - w'|
    double rel_rms = 0.0;   // ||w - w'||_2 / ||w||_2 (0 when w is all zero)
};
QuantError quant_error(const float* w, const float* restored, size_t n);

// quant_error over a tensor taken in consecutive pieces (add them in order): the same sums in
// the same order, so the same result, without the whole restored tensor at once.
struct QuantErrorSum {
    double max_abs = 0.0, num = 0.0, den = 0.0;
    void add(const float* w, const float* restored, size_t n);
    QuantError result() const;
};

}  // namespace ember::convert

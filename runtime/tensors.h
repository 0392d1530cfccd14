// The canonical tensors of a model, written once: the loader's expected names, shapes and
// views (runtime/model.cpp), the converter's mapping targets (converter/arch.cpp) and the
// merge (converter/merge.cpp) read this table instead of spelling the list out; an upload to
// a device walks the views with for_each_weight.
//
// File order, which is also the order of every walk below (letters as in runtime/model.h):
//   wte [V, C], wpe [S, C],
//   for N = 0 .. L-1: h.N.ln_1.weight [C], h.N.ln_1.bias [C], h.N.qkv.weight [3C, C],
//     h.N.qkv.bias [3C], h.N.proj.weight [C, C], h.N.proj.bias [C], h.N.ln_2.weight [C],
//     h.N.ln_2.bias [C], h.N.fc.weight [F, C], h.N.fc.bias [F], h.N.fc2.weight [C, F],
//     h.N.fc2.bias [C],
//   ln_f.weight [C], ln_f.bias [C], lm_head.weight [V, C], lm_head.bias [V].
// 2-D tensors are weight matrices (f32, f16 or int8 with per-group scales) viewed by a
// kernels::WeightView; 1-D tensors are f32, viewed by a const float*. Every bias is optional
// (absent: a null pointer, "no bias"). lm_head.weight is required unless config.tied_lm_head;
// when tied the file does not hold it and ModelWeights::lm_head is a copy of the wte view.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace ember {

// One dimension of a canonical shape: None (no second dimension), V vocab_size, S block_size,
// C n_embd, C3 3 x n_embd, F ffn_hidden.
enum class Dim { None, V, S, C, C3, F };
int64_t dim_size(Dim d, const ModelConfig& c);  // None: 0

// Required; Optional (a bias); Untied: required unless config.tied_lm_head, absent when tied.
enum class Need { Required, Optional, Untied };

// One row of the table. A per-layer tensor is named "h.N." + suffix; a global one, suffix.
// Exactly one of the four field pointers is set: the ModelWeights (global) or LayerWeights
// (per layer) field that views the tensor, a WeightView for 2-D, a float pointer for 1-D.
struct TensorSpec {
    const char* suffix;
    bool per_layer;
    Dim rows;  // 1-D: the length
    Dim cols;  // 1-D: Dim::None
    Need need;
    kernels::WeightView ModelWeights::*model_mat;
    const float* ModelWeights::*model_vec;
    kernels::WeightView LayerWeights::*layer_mat;
    const float* LayerWeights::*layer_vec;

    bool vector() const { return cols == Dim::None; }
};

namespace tensor_table {
constexpr TensorSpec global_mat(const char* s, Dim r, Dim c, Need n, kernels::WeightView ModelWeights::*f) {
    return {s, false, r, c, n, f, nullptr, nullptr, nullptr};
}
constexpr TensorSpec global_vec(const char* s, Dim r, Need n, const float* ModelWeights::*f) {
    return {s, false, r, Dim::None, n, nullptr, f, nullptr, nullptr};
}
constexpr TensorSpec layer_mat(const char* s, Dim r, Dim c, kernels::WeightView LayerWeights::*f) {
    return {s, true, r, c, Need::Required, nullptr, nullptr, f, nullptr};
}
constexpr TensorSpec layer_vec(const char* s, Dim r, Need n, const float* LayerWeights::*f) {
    return {s, true, r, Dim::None, n, nullptr, nullptr, nullptr, f};
}
}  // namespace tensor_table

// The table, in file order; the per-layer rows form one run, repeated for every layer.
inline constexpr TensorSpec kTensorTable[] = {
    tensor_table::global_mat("wte", Dim::V, Dim::C, Need::Required, &ModelWeights::wte),
    tensor_table::global_mat("wpe", Dim::S, Dim::C, Need::Required, &ModelWeights::wpe),
    tensor_table::layer_vec("ln_1.weight", Dim::C, Need::Required, &LayerWeights::ln_1_w),
    tensor_table::layer_vec("ln_1.bias", Dim::C, Need::Optional, &LayerWeights::ln_1_b),
    tensor_table::layer_mat("qkv.weight", Dim::C3, Dim::C, &LayerWeights::qkv),
    tensor_table::layer_vec("qkv.bias", Dim::C3, Need::Optional, &LayerWeights::qkv_b),
    tensor_table::layer_mat("proj.weight", Dim::C, Dim::C, &LayerWeights::proj),
    tensor_table::layer_vec("proj.bias", Dim::C, Need::Optional, &LayerWeights::proj_b),
    tensor_table::layer_vec("ln_2.weight", Dim::C, Need::Required, &LayerWeights::ln_2_w),
    tensor_table::layer_vec("ln_2.bias", Dim::C, Need::Optional, &LayerWeights::ln_2_b),
    tensor_table::layer_mat("fc.weight", Dim::F, Dim::C, &LayerWeights::fc),
    tensor_table::layer_vec("fc.bias", Dim::F, Need::Optional, &LayerWeights::fc_b),
    tensor_table::layer_mat("fc2.weight", Dim::C, Dim::F, &LayerWeights::fc2),
    tensor_table::layer_vec("fc2.bias", Dim::C, Need::Optional, &LayerWeights::fc2_b),
    tensor_table::global_vec("ln_f.weight", Dim::C, Need::Required, &ModelWeights::ln_f_w),
    tensor_table::global_vec("ln_f.bias", Dim::C, Need::Optional, &ModelWeights::ln_f_b),
    tensor_table::global_mat("lm_head.weight", Dim::V, Dim::C, Need::Untied, &ModelWeights::lm_head),
    tensor_table::global_vec("lm_head.bias", Dim::V, Need::Optional, &ModelWeights::lm_head_b),
};

// One canonical tensor of a given configuration.
struct CanonicalEntry {
    std::string name;            // "wte", "h.3.qkv.weight"
    std::vector<int64_t> shape;  // [rows, cols] or [n]
    bool required = true;        // false: an optional bias
    int layer = -1;              // N of h.N.*; -1 for a global tensor
    const TensorSpec* spec = nullptr;  // its row of kTensorTable

    bool vector() const { return shape.size() == 1; }
};

// Every tensor a file of configuration c may hold, in file order: n_layer x 12 per-layer
// entries plus 6 global ones, less lm_head.weight when c.tied_lm_head. Optional biases are
// listed (required == false); a file may leave any of them out.
std::vector<CanonicalEntry> canonical_tensors(const ModelConfig& c);

// A tensor's view inside a ModelWeights: mat for a 2-D tensor, vec for a 1-D one (the other
// is null). ConstWeightSlot is the read-only form.
struct WeightSlot {
    kernels::WeightView* mat = nullptr;
    const float** vec = nullptr;
};
struct ConstWeightSlot {
    const kernels::WeightView* mat = nullptr;
    const float* const* vec = nullptr;
};

// Calls fn(entry, slot) once for every entry of canonical_tensors(c), in that order (file
// order: wte, wpe, layer 0's twelve, layer 1's, ..., ln_f, lm_head). An absent bias is
// visited too: its *slot.vec is nullptr. A tied lm_head is not visited (the file holds no
// such tensor): w.lm_head stays whatever it was, and a walk that rewrites views (the loader,
// an upload) sets lm_head = wte afterwards. Throws ember::Error when w.layers.size() is not
// c.n_layer.
void for_each_weight(const ModelWeights& w, const ModelConfig& c,
                     const std::function<void(const CanonicalEntry&, ConstWeightSlot)>& fn);
void for_each_weight(ModelWeights& w, const ModelConfig& c, const std::function<void(const CanonicalEntry&, WeightSlot)>& fn);

}  // namespace ember

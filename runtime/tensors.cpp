#include "runtime/tensors.h"

#include "runtime/error.h"

namespace ember {

int64_t dim_size(Dim d, const ModelConfig& c) {
    switch (d) {
    case Dim::None: return 0;
    case Dim::V: return c.vocab_size;
    case Dim::S: return c.block_size;
    case Dim::C: return c.n_embd;
    case Dim::C3: return 3 * static_cast<int64_t>(c.n_embd);
    case Dim::F: return c.ffn_hidden;
    }
    return 0;
}

std::vector<CanonicalEntry> canonical_tensors(const ModelConfig& c) {
    std::vector<CanonicalEntry> out;
    auto add = [&](const TensorSpec& s, int layer) {
        if (s.need == Need::Untied && c.tied_lm_head) return;
        CanonicalEntry e;
        e.name = layer < 0 ? std::string(s.suffix) : layer_tensor_name(layer, s.suffix);
        e.shape = {dim_size(s.rows, c)};
        if (!s.vector()) e.shape.push_back(dim_size(s.cols, c));
        e.required = s.need != Need::Optional;
        e.layer = layer;
        e.spec = &s;
        out.push_back(std::move(e));
    };
    const size_t n = sizeof kTensorTable / sizeof kTensorTable[0];
    for (size_t i = 0; i < n;) {
        if (!kTensorTable[i].per_layer) {
            add(kTensorTable[i++], -1);
            continue;
        }
        size_t end = i;  // the run of per-layer rows [i, end), once per layer
        while (end < n && kTensorTable[end].per_layer) ++end;
        for (int l = 0; l < c.n_layer; ++l) {
            for (size_t j = i; j < end; ++j) add(kTensorTable[j], l);
        }
        i = end;
    }
    return out;
}

namespace {

// The field of w (ModelWeights or const ModelWeights) that views entry e.
template <class Weights, class Slot>
Slot slot_of(Weights& w, const CanonicalEntry& e) {
    const TensorSpec& s = *e.spec;
    Slot slot;
    if (s.per_layer) {
        auto& l = w.layers[static_cast<size_t>(e.layer)];
        if (s.layer_mat) slot.mat = &(l.*s.layer_mat);
        if (s.layer_vec) slot.vec = &(l.*s.layer_vec);
    } else {
        if (s.model_mat) slot.mat = &(w.*s.model_mat);
        if (s.model_vec) slot.vec = &(w.*s.model_vec);
    }
    return slot;
}

void check_layers(const ModelWeights& w, const ModelConfig& c) {
    if (w.layers.size() != static_cast<size_t>(c.n_layer)) {
        fail("for_each_weight: the weights hold ", w.layers.size(), " layers but config.n_layer is ", c.n_layer);
    }
}

}  // namespace

void for_each_weight(const ModelWeights& w, const ModelConfig& c,
                     const std::function<void(const CanonicalEntry&, ConstWeightSlot)>& fn) {
    check_layers(w, c);
    for (const CanonicalEntry& e : canonical_tensors(c)) fn(e, slot_of<const ModelWeights, ConstWeightSlot>(w, e));
}

void for_each_weight(ModelWeights& w, const ModelConfig& c, const std::function<void(const CanonicalEntry&, WeightSlot)>& fn) {
    check_layers(w, c);
    for (const CanonicalEntry& e : canonical_tensors(c)) fn(e, slot_of<ModelWeights, WeightSlot>(w, e));
}

}  // namespace ember

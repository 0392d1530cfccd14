#include "converter/merge.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "kernels/cpu/weights.h"
#include "runtime/error.h"
#include "runtime/sha256.h"
#include "runtime/tensors.h"
#include "runtime/utf8.h"

namespace ember::convert {

namespace {

std::string file_name(const std::string& p) {
    const size_t s = p.find_last_of('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

std::vector<float> dequantize(const kernels::WeightView& w) {
    std::vector<float> out(static_cast<size_t>(w.rows) * w.cols);
    for (int r = 0; r < w.rows; ++r) kernels::dequantize_row(w, r, out.data() + static_cast<size_t>(r) * w.cols);
    return out;
}

}  // namespace

WriteReport merge_adapter(const Model& model, const LoraAdapter& adapter, const std::string& adapter_path,
                          const std::string& out_path, void (*on_temp_file)(const char* path)) {
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    if (adapter.base_checksum() != model.checksum()) fail("the adapter was made for another model than ", model.path());
    // every tensor of the file by its canonical name (runtime/tensors.h)
    std::map<std::string, kernels::WeightView> mats;
    std::map<std::string, const float*> vecs;
    for_each_weight(w, c, [&](const CanonicalEntry& e, ConstWeightSlot slot) {
        if (slot.mat) mats[e.name] = *slot.mat;
        if (slot.vec) vecs[e.name] = *slot.vec;
    });
    // the adapted weights by name
    std::map<std::string, std::pair<int, LoraTarget>> adapted;
    for (int l = 0; l < c.n_layer; ++l) {
        adapted[layer_tensor_name(l, "qkv.weight")] = {l, LoraTarget::Qkv};
        adapted[layer_tensor_name(l, "proj.weight")] = {l, LoraTarget::Proj};
        adapted[layer_tensor_name(l, "fc.weight")] = {l, LoraTarget::Fc};
        adapted[layer_tensor_name(l, "fc2.weight")] = {l, LoraTarget::Fc2};
    }

    CanonicalModel cm;
    cm.config = c;
    WriteOptions wo;
    wo.group_size = 0;
    wo.on_temp_file = on_temp_file;
    bool whole_rows = true;
    std::optional<WeightDType> dtype;
    for (const TensorInfo& t : model.tensors()) {
        CanonicalTensor ct;
        ct.name = t.name;
        ct.shape.assign(t.shape.begin(), t.shape.end());
        ct.source = t.name;
        if (t.shape.size() == 2) {
            const kernels::WeightView& v = mats.at(t.name);
            ct.values = dequantize(v);
            if (!dtype) dtype = t.dtype;
            // the converter's --group-size, clamped to each row: the largest stored group
            wo.group_size = std::max(wo.group_size, static_cast<int>(t.group_size));
            if (t.dtype != *dtype) {
                fail(printable(t.name), ": mixed weight dtypes (", kernels::wtype_name(*dtype), ", ", kernels::wtype_name(t.dtype),
                     ") cannot be merged into one");
            }
            if (t.dtype == WeightDType::I8 && static_cast<int>(t.group_size) != v.cols) whole_rows = false;
            auto it = adapted.find(t.name);
            if (it != adapted.end()) {
                const int l = it->second.first;
                const LoraTarget tt = it->second.second;
                const int r = adapter.rank(), K = adapter.in_features(tt), N = adapter.out_features(tt);
                const float* A = adapter.A(l, tt);
                const float* B = adapter.B(l, tt);
                const double s = adapter.scale();
                for (int n = 0; n < N; ++n) {
                    for (int k = 0; k < K; ++k) {
                        double acc = 0.0;
                        for (int i = 0; i < r; ++i) acc += static_cast<double>(B[static_cast<size_t>(n) * r + i]) * A[static_cast<size_t>(i) * K + k];
                        ct.values[static_cast<size_t>(n) * K + k] += static_cast<float>(s * acc);
                    }
                }
            }
        } else {
            const float* p = vecs.at(t.name);
            ct.values.assign(p, p + t.shape[0]);
        }
        cm.tensors.push_back(std::move(ct));
    }
    wo.dtype = dtype.value_or(WeightDType::F32);
    if (wo.dtype == WeightDType::I8 && whole_rows) wo.group_size = 0;
    ProvenanceInfo prov;
    prov.source_file = file_name(model.path()) + " + LoRA " + file_name(adapter_path);
    prov.source_sha256 = sha256_file(model.path());
    prov.vocab_source = file_name(model.path());
    TokenizerSpec tok;  // the base's own: a char vocabulary or GPT-2's BPE tables
    if (const BpeData* bpe = model.bpe()) {
        tok.bpe = *bpe;
    } else {
        tok.code_points = model.code_points();
    }
    return write_ember(cm, tok, prov, wo, out_path);  // checked by Model::open before the rename
}

}  // namespace ember::convert

// LoRA adapters for a model (Hu et al. 2021): on every block's qkv, proj, fc and fc2, a pair
// A [r, in] and B [out, r] in f32, and the adapted layer y = W x + b + (alpha / r) B (A x).
// The base weights stay as stored (f32, f16 or int8); adapters are never merged here.
//
// An adapter file (schema/adapter.fbs, identifier "EMBA") holds the values, rank, alpha,
// the base model's identity (XXH64 of its data section) and, when saved by a training run,
// the AdamW moments and data position needed to resume exactly. Files are written
// atomically (OUT.tmp-PID, fsync, rename) and verified completely on load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace ember {

enum class LoraTarget { Qkv = 0, Proj = 1, Fc = 2, Fc2 = 3 };
constexpr int kLoraTargets = 4;
const char* lora_target_name(LoraTarget t);

// Most sequences per training step: `ember finetune --batch`, the console's `finetune`, and a
// training state read from an adapter file are held to 1..kMaxTrainBatch.
constexpr int kMaxTrainBatch = 4096;

// Training state saved beside the values (see schema/adapter.fbs TrainState).
struct LoraTrainState {
    bool present = false;     // false: the file holds no optimizer state
    uint64_t step = 0;        // batches consumed
    uint64_t adam_step = 0;   // AdamW steps taken
    uint64_t seed = 0;
    int batch = 0;
    int seq = 0;
    float lr = 0.0f, weight_decay = 0.0f, beta1 = 0.0f, beta2 = 0.0f, eps = 0.0f, clip = 0.0f;
    uint64_t text_xxh64 = 0;
};

class LoraAdapter {
public:
    // Zero adapters for `model`: rank in [1, n_embd], alpha finite and > 0 (else ember::Error).
    LoraAdapter(const Model& model, int rank, float alpha);

    // PEFT's initialization: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a = sqrt(5)),
    // B = 0, so the adapted model starts equal to the base. Deterministic in `seed`.
    void init(uint64_t seed);

    // Loads and verifies `path` against `model`: identifier, FlatBuffers verifier, format
    // version, base identity, shapes, finite values. Throws ember::Error naming the file.
    static std::unique_ptr<LoraAdapter> load(const std::string& path, const Model& model);

    // Writes the adapter (with the training state and moments when train.present) atomically.
    // Throws ember::Error (also where non_finite_part() names a part); on error `path` is untouched.
    void save(const std::string& path) const;

    // The first part holding a NaN or an infinity: "weights", "AdamW first moment" or
    // "AdamW second moment"; nullptr when every value is finite.
    const char* non_finite_part() const;

    int rank() const { return rank_; }
    float alpha() const { return alpha_; }
    float scale() const { return alpha_ / static_cast<float>(rank_); }
    uint64_t base_checksum() const { return base_checksum_; }
    int n_layer() const { return n_layer_; }

    // Shape of target t's base weight W [out, in].
    int in_features(LoraTarget t) const;
    int out_features(LoraTarget t) const;

    // Values an adapter of `rank` holds for config c: rank x sum over layers and targets of (in + out).
    static size_t param_count(const ModelConfig& c, int rank);

    // Offsets into the flat vector of every value (layout in schema/adapter.fbs).
    size_t offset_a(int layer, LoraTarget t) const { return offsets_[layer * kLoraTargets + static_cast<int>(t)]; }
    size_t offset_b(int layer, LoraTarget t) const { return offset_a(layer, t) + static_cast<size_t>(rank_) * in_features(t); }
    size_t size() const { return params_.size(); }

    float* params() { return params_.data(); }
    const float* params() const { return params_.data(); }
    const float* A(int layer, LoraTarget t) const { return params_.data() + offset_a(layer, t); }  // [r, in]
    const float* B(int layer, LoraTarget t) const { return params_.data() + offset_b(layer, t); }  // [out, r]

    // Training state and AdamW moments [size()] (empty when absent); the trainer owns their use.
    LoraTrainState train;
    std::vector<float> adam_m, adam_v;

private:
    int rank_ = 0;
    float alpha_ = 0.0f;
    uint64_t base_checksum_ = 0;
    int n_layer_ = 0, n_embd_ = 0, ffn_hidden_ = 0;
    std::vector<size_t> offsets_;  // [L * 4] offset of each A
    std::vector<float> params_;
};

}  // namespace ember

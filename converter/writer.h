// Writing a canonical model as an .ember file (schema/ember.fbs): 2-D weights in the chosen
// dtype (f32, f16, or int8 groups), 1-D tensors (biases, LayerNorm) always f32, each tensor's
// bytes at a 64-byte aligned offset of the data section, XXH64 over the data section.
// One tensor at a time: each is placed from its shape, then read (CanonicalTensor::read for a
// lazily read checkpoint), checked, converted, written at its offset and hashed (streaming
// XXH64), and freed; the index, holding the hash, is written last at the file's start. Memory:
// the largest tensor as f32 plus its stored form, not the model.
// The file appears atomically: written to OUT.tmp-PID, synced, opened with Model::open (every
// check the runtime makes; its pages dropped as they are checked, LoadOptions::drop_checked_pages),
// and only then renamed; on any error the temporary is removed and OUT, and a model already
// there, is untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "converter/arch.h"
#include "converter/quantize.h"
#include "kernels/cpu/weights.h"

namespace ember::convert {

// The stored weights' dtype: the kernels' one enum (kernels/cpu/weights.h; its names:
// kernels::wtype_name).
using WeightDType = kernels::WType;
// --dtype's value: "f32" | "f16" | "int8". Throws ember::Error naming the choices.
WeightDType parse_dtype(const std::string& s);

struct WriteOptions {
    WeightDType dtype = WeightDType::I8;
    int group_size = 64;  // int8: elements per scale along a row; 0 = a whole row
    bool verify = true;   // refuse a file Model::open refuses; false only for tests that need one
    // Told the temporary file's path (OUT.tmp-PID) before it is created, and nullptr once it
    // is renamed into place or removed: `ember convert` keeps it for its SIGINT/SIGTERM handler.
    // Calls nest (the scale check tells its probe file around the writer's): nullptr forgets the latest.
    void (*on_temp_file)(const char* path) = nullptr;
};

struct ProvenanceInfo {
    std::string source_file;
    std::string source_sha256;
    std::string vocab_source;
};

struct TensorReport {
    std::string name;
    std::vector<int64_t> shape;
    WeightDType dtype = WeightDType::F32;  // as stored
    std::string source_dtype; // as in the checkpoint
    int group_size = 0;
    uint64_t bytes = 0;
    QuantError error;         // stored vs f32 source
};

struct WriteReport {
    std::vector<TensorReport> tensors;
    uint64_t file_bytes = 0;
};

// The tokenizer a file carries: a char vocabulary (code_points, one per row of wte), or a
// byte-level BPE (bpe.size() > 0; at most vocab_size tokens, rows past them are padding).
struct TokenizerSpec {
    std::vector<uint32_t> code_points;
    BpeData bpe;
};

// Writes format_version 1 for a char model of the gptpy / nanogpt architectures, else 2
// (schema/ember.fbs). Throws ember::Error (a BPE that fails verify_bpe included).
WriteReport write_ember(const CanonicalModel& model, const TokenizerSpec& tokenizer, const ProvenanceInfo& provenance,
                        const WriteOptions& opts, const std::string& out_path);

// code_points: the char vocabulary, one per id (size must equal config.vocab_size).
WriteReport write_ember(const CanonicalModel& model, const std::vector<uint32_t>& code_points,
                        const ProvenanceInfo& provenance, const WriteOptions& opts, const std::string& out_path);

}  // namespace ember::convert

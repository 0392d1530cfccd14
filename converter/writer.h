// Writing a canonical model as an .ember file (schema/ember.fbs): 2-D weights in the chosen
// dtype (f32, f16, or int8 groups), 1-D tensors (biases, LayerNorm) always f32, each tensor's
// bytes at a 64-byte aligned offset of the data section, XXH64 over the data section.
// The file appears atomically: written to OUT.tmp-PID, synced, renamed; on any error the
// temporary is removed and OUT is untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "converter/arch.h"
#include "converter/quantize.h"

namespace ember::convert {

enum class WeightDType { F32, F16, Int8 };
WeightDType parse_dtype(const std::string& s);  // f32 | f16 | int8
const char* dtype_name(WeightDType d);

struct WriteOptions {
    WeightDType dtype = WeightDType::Int8;
    int group_size = 64;  // int8: elements per scale along a row; 0 = a whole row
};

struct ProvenanceInfo {
    std::string source_file;
    std::string source_sha256;
    std::string vocab_source;
};

struct TensorReport {
    std::string name;
    std::vector<int64_t> shape;
    std::string dtype;        // as stored
    std::string source_dtype; // as in the checkpoint
    int group_size = 0;
    uint64_t bytes = 0;
    QuantError error;         // stored vs f32 source
};

struct WriteReport {
    std::vector<TensorReport> tensors;
    uint64_t file_bytes = 0;
};

// code_points: the char vocabulary, one per id (size must equal config.vocab_size).
// Throws ember::Error.
WriteReport write_ember(const CanonicalModel& model, const std::vector<uint32_t>& code_points,
                        const ProvenanceInfo& provenance, const WriteOptions& opts, const std::string& out_path);

}  // namespace ember::convert

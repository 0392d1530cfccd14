// Reading PyTorch checkpoints without Python.
//
// Formats: a torch.save zip archive (torch >= 1.6; `archive/data.pkl` + `archive/data/N`
// storages, any top-level folder name), holding either a state_dict (the lecture's gpt.py)
// or nanoGPT's ckpt dict {"model": state_dict, "model_args": {...}, ...}; torch's legacy
// format (torch < 1.6, or _use_new_zipfile_serialization=False: pickles and storages in one
// stream, read whole into memory, at most 16 GiB); and .safetensors.
// The pickle inside is read by a restricted unpickler that executes nothing and accepts
// only the globals a checkpoint needs (see unpickler.h); any other global is refused by name.
//
// Errors: ember::Error whose message names the file and what is wrong (truncated archive,
// missing storage, foreign global, tensor bytes past the storage's end, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ember::convert {

enum class SourceDType { F32, F16, BF16 };

const char* source_dtype_name(SourceDType d);

// One tensor as the checkpoint holds it, converted to contiguous row-major f32.
// Storage offset and strides are honoured; tensors that share a storage (nanoGPT's tied
// wte / lm_head) each get their own copy of the same values.
// Reads a tensor's product(shape) f32 values, row-major, from its file when called (again on
// each call). Throws ember::Error naming the file and the tensor.
using ValueReader = std::function<std::vector<float>()>;

struct SourceTensor {
    std::vector<int64_t> shape;   // e.g. [vocab_size, n_embd]; [] for a 0-d tensor
    std::vector<float> values;    // product(shape) values, row-major; empty while `read` is set
    SourceDType dtype = SourceDType::F32;  // dtype in the checkpoint
    std::string storage_key;      // which storage it came from ("" for safetensors)
    ValueReader read;             // a lazily read checkpoint's tensor: gives the values; else empty
};

// s's values: s.values, or s.read() for a lazily read tensor.
std::vector<float> values_of(const SourceTensor& s);

struct Checkpoint {
    // The model's tensors by their key in the checkpoint, prefixes as found
    // (nanoGPT's "model" dict when present, else the top-level state_dict).
    std::map<std::string, SourceTensor> tensors;
    // nanoGPT's model_args (ints, floats, bools, strings, None) when present, as JSON text
    // ("" when the checkpoint has none).
    std::string model_args_json;
    // Keys of GPT-2's attention mask buffers (`attn.bias`, `attn.masked_bias`) held as bool or
    // uint8, which are skipped unread (they carry no weights).
    std::vector<std::string> skipped;
};

// Whether key names one of GPT-2's attention mask buffers (`...attn.bias`, `...attn.masked_bias`).
bool is_attention_mask_key(const std::string& key);

// Reads a checkpoint, choosing the format by content: zip magic "PK\x03\x04", a safetensors
// header, or a pickle's protocol opcode (0x80, version <= 5) for the legacy format. Throws
// ember::Error.
//
// lazy: the header (and the pickle) are read and every shape, dtype and offset is checked as
// when reading eagerly, but each tensor's values are left in the file: SourceTensor::read reads
// them (a safetensors tensor's bytes, a torch zip's storage entry) when called. The converter
// reads this way so that it holds one tensor at a time. A legacy (pre-zip) torch file is read
// eagerly either way.
Checkpoint read_checkpoint(const std::string& path, bool lazy = false);

// nanoGPT's meta.pkl: {"vocab_size": V, "itos": {id: char}, "stoi": {char: id}}.
// Returns the code point of each id 0..V-1. Throws ember::Error when an id is missing,
// an entry is not exactly one code point, or vocab_size disagrees.
std::vector<uint32_t> read_meta_pkl(const std::string& path);

}  // namespace ember::convert

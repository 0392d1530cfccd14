// .safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the tensor bytes. dtypes F32, F16 and BF16 are read (to f32); `__metadata__` is ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "converter/checkpoint.h"

namespace ember::convert {

// Whether the first bytes of a file (`head`, `head_size` of them, at least 9 needed) look
// like a safetensors header: a plausible header length followed by '{'.
bool looks_like_safetensors(const uint8_t* head, size_t head_size);

// Reads every tensor; the header and every offset are checked against the file. lazy: each
// tensor's bytes are left in the file until its SourceTensor::read reads them (read_checkpoint).
// Throws ember::Error naming the file and the tensor.
Checkpoint read_safetensors(const std::string& path, bool lazy = false);

}  // namespace ember::convert

// `ember finetune --merge`: LoRA adapters folded into a new model file.
// For qkv, proj, fc and fc2 of every layer, W' = W + (alpha / r) B A (W dequantized to f32),
// then every 2-D weight is requantized to the base's dtype (int8 with the base's group size)
// and written as a new .ember (atomically, then reopened with the runtime's verifier).
// Other tensors are copied; an int8 tensor the adapter does not touch requantizes to itself.
#pragma once

#include <string>

#include "converter/writer.h"
#include "runtime/adapter.h"
#include "runtime/model.h"

namespace ember::convert {

// adapter: loaded for `model`. Throws ember::Error; on error out_path is untouched.
// on_temp_file: as WriteOptions::on_temp_file (told OUT.tmp-PID, then nullptr), or nullptr.
WriteReport merge_adapter(const Model& model, const LoraAdapter& adapter, const std::string& adapter_path,
                          const std::string& out_path, void (*on_temp_file)(const char* path) = nullptr);

}  // namespace ember::convert

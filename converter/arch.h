// Mapping a checkpoint's tensors onto ember's canonical layout (DESIGN.md "Models"):
// wte [V, C], wpe [S, C], h.N.{ln_1, qkv [3C, C], proj [C, C], ln_2, fc [F, C], fc2 [C, F]},
// ln_f, lm_head [V, C] (absent when tied to wte). qkv rows are q | k | v, heads in order.
//
//   gpt.py (the lecture): token_embedding_table, position_embedding_table,
//     blocks.N.sa.heads.M.{query,key,value}.weight [hs, C] (no bias) stacked into qkv,
//     blocks.N.sa.proj, blocks.N.ffwd.net.{0,2}, blocks.N.ln{1,2}, ln_f, lm_head (+ bias);
//     ReLU; the `tril` buffers are dropped.
//   nanoGPT: transformer.{wte,wpe,ln_f}, transformer.h.N.{ln_1, attn.c_attn, attn.c_proj,
//     ln_2, mlp.c_fc, mlp.c_proj}, lm_head tied to wte; exact (erf) GELU; n_head from
//     model_args (the weights cannot reveal it); `attn.bias` / `attn.masked_bias` dropped.
// A prefix `_orig_mod.` or `module.` is stripped only when every key carries it.
// Errors (ember::Error) name the checkpoint and the key or shape at fault.
#pragma once

#include <string>
#include <vector>

#include "converter/checkpoint.h"
#include "runtime/model.h"

namespace ember::convert {

enum class ArchChoice { Auto, GptPy, NanoGPT };
ArchChoice parse_arch(const std::string& s);  // auto | gptpy | nanogpt

struct CanonicalTensor {
    std::string name;              // canonical name
    std::vector<int64_t> shape;    // [rows, cols] or [n]
    std::vector<float> values;     // row-major
    std::string source;            // checkpoint key(s) it came from
    SourceDType source_dtype = SourceDType::F32;
};

struct CanonicalModel {
    ModelConfig config;
    std::vector<CanonicalTensor> tensors;  // in file order
    std::string stripped_prefix;           // "" when none
    std::vector<std::string> dropped;      // buffers dropped (tril, attn.bias, ...)
};

// `what` names the checkpoint in messages. Consumes the checkpoint's tensors (moved out).
CanonicalModel to_canonical(Checkpoint&& ckpt, ArchChoice arch, const std::string& what);

}  // namespace ember::convert

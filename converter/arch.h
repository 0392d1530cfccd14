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
//   Hugging Face GPT-2 (hf-gpt2): [transformer.]{wte,wpe,ln_f}, [transformer.]h.N.{ln_1,
//     attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, lm_head. Conv1D weights are stored
//     [in, out] and are transposed because the source is GPT-2 (never by a shape test: the
//     square attn.c_proj would pass any); when only one of wte / lm_head is present the other
//     is the same tensor (tied); the configuration (n_head, activation_function: gelu_new =
//     tanh GELU, layer_norm_epsilon, ...) comes from the config.json beside the checkpoint.
// A prefix `_orig_mod.` or `module.` is stripped only when every key carries it.
// Errors (ember::Error) name the checkpoint and the key or shape at fault.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "converter/checkpoint.h"
#include "runtime/model.h"

namespace ember::convert {

enum class ArchChoice { Auto, GptPy, NanoGPT, HfGpt2 };
ArchChoice parse_arch(const std::string& s);  // auto | gptpy | nanogpt | hf-gpt2

// What the weights cannot tell, as `ember convert` is told it. n_head: 0 = from model_args,
// config.json or the gpt.py heads (given as well, it must agree with them); renames: literal
// substring replacements (OLD, NEW) applied in order to every key before mapping.
struct ArchOverrides {
    int n_head = 0;
    std::vector<std::pair<std::string, std::string>> renames;
};

// --rename OLD=NEW (OLD not empty). Throws ember::Error.
std::pair<std::string, std::string> parse_rename(const std::string& s);

struct CanonicalTensor {
    std::string name;              // canonical name
    std::vector<int64_t> shape;    // [rows, cols] or [n]
    std::vector<float> values;     // row-major; empty while `read` is set
    std::string source;            // checkpoint key(s) it came from
    SourceDType source_dtype = SourceDType::F32;
    ValueReader read;              // from a lazily read checkpoint: gives the values (stacked, transposed)
};

// t's values: t.values, or t.read() for a tensor of a lazily read checkpoint.
std::vector<float> values_of(const CanonicalTensor& t);

struct CanonicalModel {
    ModelConfig config;
    std::vector<CanonicalTensor> tensors;  // in file order
    std::string stripped_prefix;           // "" when none
    std::vector<std::string> dropped;      // buffers dropped (tril, attn.bias, ...)
    int renamed_keys = 0;                  // keys changed by ArchOverrides::renames
};

// `what` names the checkpoint in messages. Consumes the checkpoint's tensors (moved out). A lazy
// checkpoint's tensors stay unread (their readers are composed: gpt.py's heads stacked, Conv1D
// transposed), except wte and lm_head when both are present: they are read once to see whether
// they are tied.
// hf_config_json: the text of the Hugging Face config.json beside the checkpoint ("" when
// there is none); with ArchChoice::Auto, GPT-2 key names without nanoGPT's model_args and
// with a config.json are read as hf-gpt2.
CanonicalModel to_canonical(Checkpoint&& ckpt, ArchChoice arch, const std::string& what,
                            const std::string& hf_config_json = "", const ArchOverrides& over = {});

}  // namespace ember::convert

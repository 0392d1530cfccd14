// `ember convert`: checkpoint + vocabulary -> .ember, as a library call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "converter/arch.h"
#include "converter/writer.h"

namespace ember::convert {

// --attention-scale: Default keeps the architecture's (1/sqrt(head_size); Hugging Face's
// scale_attn_weights false gives 1), Head = 1/sqrt(head_size) (today's gpt.py), Embd =
// 1/sqrt(n_embd) (the early gpt.py, C**-0.5 with C = n_embd), Value = the given number,
// Auto = whichever of head and embd scores the training text better (gpt.py with --vocab-text).
enum class ScaleKind { Default, Head, Embd, Auto, Value };
struct AttentionScaleChoice {
    ScaleKind kind = ScaleKind::Default;
    float value = 0.0f;  // Value only: a normal f32 in (0, kMaxAttentionScale]
};
constexpr float kMaxAttentionScale = kMaxAttnScale;  // runtime/model.h
AttentionScaleChoice parse_attention_scale(const std::string& s);  // head | embd | auto | FLOAT; throws ember::Error
kernels::ActivationKind parse_activation(const std::string& s);    // relu | gelu | gelu-tanh; throws ember::Error

struct ConvertOptions {
    std::string checkpoint;   // .pt (zip) or .safetensors
    std::string out;          // .ember path
    std::string vocab_text;   // --vocab-text: sorted(set(text)) over code points
    std::string meta;         // --meta: nanoGPT meta.pkl
    std::vector<std::string> tokenizer;  // --tokenizer: GPT-2's encoder.json + vocab.bpe (or their folder)
    ArchChoice arch = ArchChoice::Auto;
    ArchOverrides overrides;              // --n-head, --rename
    AttentionScaleChoice attention_scale;  // --attention-scale
    std::optional<kernels::ActivationKind> activation;  // --activation: replaces the architecture's
    WriteOptions write;
};

struct ConvertResult {
    ModelConfig config;
    std::string stripped_prefix;
    std::vector<std::string> dropped;
    std::string vocab_source;
    int tokenizer_size = 0;   // tokens (BPE) or characters
    int bpe_merges = -1;      // -1: a char vocabulary
    std::string hf_config;    // the config.json read for hf-gpt2 ("" otherwise)
    int renamed_keys = 0;     // keys changed by --rename
    bool activation_given = false, scale_given = false;
    // The scale check of a gpt.py checkpoint converted with --vocab-text: mean loss (nats per
    // token) of the first kScaleCheckWindows windows of block_size of the text under each
    // scale; checked false when it did not run.
    bool scale_checked = false;
    double loss_head = 0.0, loss_embd = 0.0;
    int64_t scale_check_tokens = 0;
    std::string scale_note;   // the warning (the other scale fits better), auto's choice, or why it was not checked; "" when none
    WriteReport report;
};

// The vocabulary of a training text: its distinct code points, ascending (sorted(set(text))).
// Throws ember::Error on unreadable files or invalid UTF-8.
std::vector<uint32_t> vocab_from_text(const std::string& path);

// Reads, maps, quantizes, writes atomically, then reopens the result with the runtime's
// verifier (a file that would not load is removed). The vocabulary is exactly one of
// vocab_text, meta (char models) or tokenizer (GPT-2's BPE, at most wte's rows: the rest are
// padding). A Hugging Face GPT-2 checkpoint's config.json is read from the checkpoint's
// folder. Throws ember::Error.
//
// A gpt.py checkpoint converted with --vocab-text (its training text) is checked against the
// text: unless --attention-scale is head, embd or a number, the first kScaleCheckWindows windows
// are scored with the CPU backend under 1/sqrt(head_size) and 1/sqrt(n_embd) (f32 weights).
// When the other scale fits better by more than kScaleCheckMargin nats, scale_note warns and
// names --attention-scale; with Auto the better one is written and scale_note says which. A
// text of less than one window (block_size + 1 tokens) is not scored: scale_note says so, and
// Auto is refused.
constexpr int kScaleCheckWindows = 8;
constexpr double kScaleCheckMargin = 0.05;
ConvertResult convert(const ConvertOptions& opts);

// The summary `ember convert` prints: architecture, configuration, each tensor's dtype and
// quantization error.
std::string format_summary(const ConvertResult& r);

}  // namespace ember::convert

// `ember attn -m MODEL -p PROMPT [--layer L] [--head H] [--top K] [--json] [--png FILE]`: the
// softmax attention weights of one layer's heads for a prompt (runtime/attention_probe.h, the
// lecture's `wei`), as text (each query's strongest keys), JSON, or a heatmap (cli/attn_png.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/model.h"

namespace ember::cli {

struct AttnArgs {
    std::string model;
    std::string prompt;
    int layer = 0;       // 0-based
    int head = -1;       // 0-based; -1 = every head of the layer
    int top = 3;         // text: keys shown per query
    bool json = false;
    std::string png;     // heatmap file, or ""
    int threads = 0;     // 0 = all cores
    std::string adapter; // LoRA adapter file (unmerged), or ""
    LoadOptions load;    // --no-mmap, --mlock
};

// Registers the `attn` subcommand and its options (filled into a, which must outlive app).
CLI::App* add_attn_command(CLI::App& app, AttnArgs& a);

// Text (with --png too, unless --json) on stdout; --json: one JSON object on stdout:
//   with --head H: {"layer", "head", "ids" [T], "tokens" [T], "weights" [T][T]}
//   without:       {"layer", "ids", "tokens", "heads": [{"head", "weights"}, ...]} (every head)
// weights row t = query t, column j = key j, zeros above the diagonal. tokens: each token's
// text (bytes that are not UTF-8, part of a character in a BPE token, as U+FFFD).
// Throws ember::Error (the probe's refusals: a layer or head outside the model, a prompt
// longer than block_size, an empty prompt; a PNG that cannot be written).
int cmd_attn(const AttnArgs& a);

}  // namespace ember::cli

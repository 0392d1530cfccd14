// The `ember` subcommands. Each returns the process exit status; library errors
// (ember::Error) propagate to main, which prints them as one line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace ember::cli {

// SIGINT or SIGTERM while it runs removes the temporary OUT.tmp-PID, then kills the process
// with that signal (exit status 128 + signal in a shell).
int cmd_convert(convert::ConvertOptions opts);
// threads: the arena's plan (0 = all cores). json: one JSON object on stdout (the same facts as the
// text: file, checksum, config, tokenizer, tensors, memory); a checksum mismatch still exits 1.
int cmd_info(const std::string& model_path, int threads = 0, bool json = false);

struct GenerateArgs {
    std::string model;
    std::string prompt;       // -p: the text itself
    std::string prompt_file;  // -f: a file read byte for byte, "-" = stdin (excludes -p)
    bool escape = false;      // -e: \n, \t, \\ in -p and --stop as their characters
    bool skip_unknown = false;  // drop prompt characters outside a char model's vocabulary (counted on stderr)
    bool stats = false;       // --stats: prefill and decode tokens/s, time to first token, on stderr
    int n = 200;
    SamplerOptions sampler;
    std::vector<std::string> stops;  // --stop: generation ends at the first; not printed
    std::string context = "exact";
    int threads = 0;
    std::string backend = "auto";  // cpu | cuda | auto
    std::string kv_cache = "f16";  // the CPU backend's KV cache: f16 | f32
    std::string adapter;  // LoRA adapter file (unmerged), or ""
    LoadOptions load;     // --no-mmap, --mlock
};
int cmd_generate(const GenerateArgs& a);

struct EvalArgs {
    std::string model;
    std::string text;
    std::string split = "val";
    int threads = 0;
    std::string backend = "auto";
    std::string kv_cache = "f16";  // f16 | f32
    std::string adapter;  // LoRA adapter file (unmerged), or ""
    bool skip_unknown = false;  // drop (and count) characters outside a char model's vocabulary
    LoadOptions load;           // --no-mmap, --mlock
};
int cmd_eval(const EvalArgs& a);

struct BenchArgs {
    std::string model;
    int threads = 0;
    int runs = 5;
    int prompt = 0;  // -p: prefill tokens, 1..block_size (0 = block_size)
    int tokens = 0;  // -n: decode tokens, 1..block_size - 1 (0 = block_size - 1)
    bool json = false;
    std::string backend = "auto";
    std::string kv_cache = "f16";  // f16 | f32
    std::string prefill_logits = "all";  // CPU: all (forward_window, every row's logits) | last (the prompt path)
    LoadOptions load;  // --no-mmap, --mlock
};
int cmd_bench(const BenchArgs& a);

// `ember flash` (cli/flash.cpp). Exit status: 0 installed, 1 bad input (file, name, port),
// 2 the device refused the file, 3 the link was lost (running it again resumes).
struct FlashArgs {
    std::string port;
    int baud = 115200;
    bool rtscts = false;
    std::string model;
    std::string name;       // default: the file's name without .ember
    int timeout_ms = 0;     // 0: from the baud rate
    int retries = 8;
    bool no_verify = false;
};
int cmd_flash(const FlashArgs& a);

}  // namespace ember::cli

#include "cli/commands.h"
#include "cli/signals.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_module.h"
#include "runtime/session.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/finetune.h"
#include "runtime/gen_options.h"
#include "runtime/stop_strings.h"
#include "runtime/model.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"

namespace ember::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// min, median and max of `ember bench`'s runs (tokens/s); v is not empty.
struct RunStats {
    double min = 0, median = 0, max = 0;
};
RunStats run_stats(const std::vector<double>& v) {
    return {*std::min_element(v.begin(), v.end()), median(v), *std::max_element(v.begin(), v.end())};
}

// `ember bench`'s line on how the weights are held (--no-mmap, --mlock).
std::string weights_held(const Model& m, const LoadOptions& load) {
    std::string s = m.anonymous() ? "anonymous memory (--no-mmap)" : "mapped file";
    const long long huge = m.huge_page_bytes();
    char buf[128];
    if (huge >= 0) {
        std::snprintf(buf, sizeof buf, ", huge pages: %.1f of %.1f MiB (AnonHugePages)", huge / 1048576.0, m.held_bytes() / 1048576.0);
        s += buf;
    } else if (m.anonymous()) {
        s += ", huge pages: asked (MADV_HUGEPAGE), not measured";
    }
    if (load.mlock) s += m.locked() ? ", locked (--mlock)" : ", --mlock failed (see the warning)";
    return s;
}

}  // namespace


int cmd_convert(convert::ConvertOptions opts) {
    TempFileSignals signals;
    opts.write.on_temp_file = remember_temp;
    const convert::ConvertResult r = convert::convert(opts);
    std::printf("%s", convert::format_summary(r).c_str());
    if (!r.scale_note.empty()) {
        std::fflush(stdout);
        std::fprintf(stderr, "ember: %s\n", r.scale_note.c_str());
    }
    std::printf("wrote %s (%s)\n", opts.out.c_str(), kernels::wtype_name(opts.write.dtype));
    return 0;
}

namespace {

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// The shortest decimal that reads back as the same float (1e-05f prints as 1e-05, not
// 9.99999975e-06 as its double would).
double shortest(float v) {
    char buf[32];
    for (int digits = 6; digits < 9; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
        if (std::strtof(buf, nullptr) == v) return std::strtod(buf, nullptr);
    }
    return v;
}

// `ember info --json`: the facts `ember info` prints, as one object.
nlohmann::json info_json(const Model& model, const std::string& model_path, int threads, const MemoryPlan& gen, const MemoryPlan& ev) {
    const ModelConfig& c = model.config();
    nlohmann::json j;
    j["file"] = model_path;
    j["file_bytes"] = model.file_bytes();
    j["format_version"] = model.format_version();
    // xxh64: computed over the data section; stored: the one the file holds (they differ when not ok).
    j["checksum"] = {{"xxh64", hex64(model.checksum())}, {"stored", hex64(model.stored_checksum())}, {"ok", model.checksum_ok()}};
    j["architecture"] = arch_name(c.arch);
    j["activation"] = activation_name(c.activation);
    j["tied_lm_head"] = c.tied_lm_head;
    j["config"] = {{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"head_size", c.head_size()},
                   {"block_size", c.block_size}, {"vocab_size", c.vocab_size}, {"ffn_hidden", c.ffn_hidden}, {"ln_eps", shortest(c.ln_eps)}};
    j["attention_scale"] = attn_scale_text(c);
    if (const BpeData* bpe = model.bpe()) {
        j["tokenizer"] = {{"kind", "bpe"}, {"tokens", bpe->size()}, {"merges", bpe->merges.size()}, {"tokenizer_size", c.tokenizer_size}};
    } else {
        std::string chars;  // the vocabulary as UTF-8, in id order
        for (uint32_t cp : model.code_points()) {
            char buf[4];
            chars.append(buf, utf8_encode(cp, buf));
        }
        j["tokenizer"] = {{"kind", "char"}, {"tokens", model.code_points().size()}, {"characters", chars}};
    }
    j["source"] = model.provenance();
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : model.tensors()) {
        tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", kernels::wtype_name(t.dtype)}, {"group_size", t.group_size}, {"bytes", t.bytes}});
    }
    j["tensors"] = std::move(tensors);
    j["weight_bytes"] = model.weight_bytes();
    j["arena"] = {{"threads", threads}, {"generate_bytes", gen.total}, {"eval_bytes", ev.total}};
    return j;
}

}  // namespace

int cmd_info(const std::string& model_path, int threads_requested, bool json) {
    auto model = Model::open(model_path, /*require_checksum=*/false);
    const ModelConfig& c = model->config();
    if (json) {
        const int threads = resolve_threads(threads_requested);
        // dump's replace handler: a provenance or path that is not UTF-8 is printed with U+FFFD, not thrown on.
        std::printf("%s\n", info_json(*model, model_path, threads, plan_memory(*model, threads, false), plan_memory(*model, threads, true))
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                .c_str());
        if (!model->checksum_ok()) {
            std::fflush(stdout);
            std::fprintf(stderr, "ember: error: %s: %s\n", printable(model_path, 200).c_str(), model->checksum_mismatch().c_str());
            return 1;
        }
        return 0;
    }
    std::printf("file: %s (%zu bytes)\n", model_path.c_str(), model->file_bytes());
    std::printf("checksum: %s (xxh64 %016llx over the data section)\n", model->checksum_ok() ? "ok" : "MISMATCH: the file is corrupted",
                static_cast<unsigned long long>(model->checksum()));
    std::printf("architecture: %s, activation %s, lm_head %s\n", arch_name(c.arch), activation_name(c.activation),
                c.tied_lm_head ? "tied to wte" : "own weights");
    std::printf("config: n_layer %d, n_head %d, n_embd %d (head_size %d), block_size %d, vocab_size %d, ffn_hidden %d, ln_eps %g\n",
                c.n_layer, c.n_head, c.n_embd, c.head_size(), c.block_size, c.vocab_size, c.ffn_hidden, c.ln_eps);
    std::printf("attention scale: %s\n", attn_scale_text(c).c_str());
    if (const BpeData* bpe = model->bpe()) {
        std::printf("tokenizer: byte-level BPE (GPT-2), %d tokens, %zu merges", bpe->size(), bpe->merges.size());
        if (c.tokenizer_size < c.vocab_size) std::printf("; rows %d..%d of wte are padding, never sampled", c.tokenizer_size, c.vocab_size - 1);
        std::printf(" (format_version %u)\n", model->format_version());
    } else {
        std::printf("tokenizer: char, %zu code points\n", model->code_points().size());
        std::string chars;
        for (uint32_t cp : model->code_points()) {
            char buf[4];
            chars += cp == '\n' ? std::string("\\n") : cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) ? describe_code_point(cp) : std::string(buf, utf8_encode(cp, buf));
        }
        std::printf("characters: %s\n", chars.c_str());
    }
    std::printf("source: %s\n", displayable(model->provenance()).c_str());  // the file's bytes: no escape sequence reaches the terminal
    std::printf("%-22s %-14s %-5s %6s %10s\n", "tensor", "shape", "dtype", "group", "bytes");
    for (const auto& t : model->tensors()) {
        std::string shape = "[";
        for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
        shape += "]";
        std::printf("%-22s %-14s %-5s %6s %10llu\n", t.name.c_str(), shape.c_str(), kernels::wtype_name(t.dtype),
                    t.group_size ? std::to_string(t.group_size).c_str() : "-", static_cast<unsigned long long>(t.bytes));
    }
    const int threads = resolve_threads(threads_requested);
    const MemoryPlan gen = plan_memory(*model, threads, false);
    const MemoryPlan ev = plan_memory(*model, threads, true);
    std::printf("weights: %zu bytes; arena: %zu bytes to generate, %zu bytes to eval (%d thread%s)\n", model->weight_bytes(),
                gen.total, ev.total, threads, threads == 1 ? "" : "s");
    if (!model->checksum_ok()) {
        std::fflush(stdout);
        std::fprintf(stderr, "ember: error: %s: %s\n", printable(model_path, 200).c_str(), model->checksum_mismatch().c_str());
        return 1;
    }
    return 0;
}

namespace {

// --kv-cache (CLI11 has already checked it is f16 or f32).
KvDType parse_kv_cache(const std::string& name) {
    KvDType t = KvDType::F16;
    if (!kernels::parse_kv_dtype(name.c_str(), &t)) fail("--kv-cache ", name, ": expected f16 or f32");
    return t;
}

}  // namespace

namespace {

// All of standard input, as bytes (at most 1 GiB, as a prompt file).
std::string read_stdin() {
    std::string s;
    char buf[65536];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
        s.append(buf, got);
        if (s.size() > (size_t(1) << 30)) fail("standard input (-f -): more than 1 GiB");
    }
    if (std::ferror(stdin)) fail("standard input (-f -): read error: ", std::strerror(errno));
    return s;
}

// A text given by name (-f FILE, --text FILE): read_text_file reads regular files only, so a
// pipe or a device named (/dev/stdin, <(cmd)) is refused here pointing to `OPTION -`, which
// reads standard input (it said only "not a regular file").
std::string read_named_text(const std::string& path, const char* option) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        fail(printable(path, 200), ": not a regular file (a pipe, a device or a socket): ", option, " - reads standard input");
    }
    return read_text_file(path);
}

// -e: escapes in a value of `what` (-p, --stop), or a refusal naming it.
std::string unescaped(const std::string& s, const char* what) {
    std::string out, why;
    if (!unescape_text(s, out, why)) fail(what, " (-e): ", why);
    return out;
}

// The prompt of -p (with -e, unescaped) or of -f FILE (byte for byte; - = stdin).
std::string prompt_text(const GenerateArgs& a) {
    if (!a.prompt_file.empty()) return a.prompt_file == "-" ? read_stdin() : read_named_text(a.prompt_file, "-f");
    return a.escape ? unescaped(a.prompt, "-p") : a.prompt;
}

// --stats, one line on stderr: the prompt's prefill, the time to the first token sampled (the
// prefill and the first sample), and decode: the tokens after the first, from the first to the last.
// The prefill's rate counts the rows run through the model (rows_run): a prompt longer than
// block_size runs only its last block_size under exact, so its length would overstate it.
// What was not measured is `none`, not a time: no first token with -n 0, no decode with -n 0
// or 1 (they read "0.00 ms" and "0.0 tokens/s", like measurements).
void print_stats(int prompt_tokens, int64_t rows_run, double prefill_s, const GenerateResult& r) {
    auto rate = [](int64_t tokens, double s) { return s > 0 && tokens > 0 ? static_cast<double>(tokens) / s : 0.0; };
    const int decoded = std::max(0, r.tokens - 1);
    const double decode_s = r.seconds - r.first_token_s;
    char ran[96] = "", first[64] = "none (no token sampled)", decode[96] = "none (no token after the first)";
    if (rows_run != prompt_tokens) std::snprintf(ran, sizeof ran, " (%lld rows run through the model)", static_cast<long long>(rows_run));
    if (r.tokens > 0) std::snprintf(first, sizeof first, "%.2f ms", 1e3 * (prefill_s + r.first_token_s));
    if (decoded > 0) std::snprintf(decode, sizeof decode, "%d tokens in %.2f ms (%.1f tokens/s)", decoded, 1e3 * decode_s, rate(decoded, decode_s));
    std::fprintf(stderr, "stats: prefill %d tokens%s in %.2f ms (%.1f tokens/s); time to first token %s; decode %s\n", prompt_tokens, ran,
                 1e3 * prefill_s, rate(rows_run, prefill_s), first, decode);
}

}  // namespace

int cmd_generate(const GenerateArgs& a) {
    a.sampler.validate();
    const ContextPolicy policy = parse_context_policy(a.context);
    const BackendKind backend = parse_backend(a.backend);
    const std::string prompt = prompt_text(a);
    std::vector<std::string> stop_list;
    for (const std::string& s : a.stops) stop_list.push_back(a.escape ? unescaped(s, "--stop") : s);
    auto model = Model::open(a.model, a.load);
    const auto tok = make_tokenizer(*model);
    int64_t skipped = 0;
    std::vector<int> ids{tok->start_id()};
    // A prompt read with -f is named by its file (its errors said "prompt: ... at byte N").
    const std::string what = a.prompt_file.empty() ? "prompt" : a.prompt_file == "-" ? "standard input (-f -)" : printable(a.prompt_file, 200);
    if (!prompt.empty()) ids = a.skip_unknown ? encode_training_text(*model, prompt, what, true, &skipped) : tok->encode(prompt, what);
    // A prompt whose every character --skip-unknown dropped is refused by encode_training_text,
    // before the note on skipped characters: one line on stderr.
    if (skipped > 0) std::fprintf(stderr, "ember: %lld prompt characters outside the vocabulary skipped (--skip-unknown)\n", static_cast<long long>(skipped));
    SessionOptions so;
    so.threads = a.threads;
    so.policy = policy;
    so.kv_cache = parse_kv_cache(a.kv_cache);
    const auto adapter = a.adapter.empty() ? nullptr : LoraAdapter::load(a.adapter, *model);
    so.adapter = adapter.get();
    auto session = make_session(*model, so, backend);
    if (!prompt.empty()) {
        const std::string shown = skipped > 0 ? tok->decode(ids) : prompt;  // the text the model reads
        std::fwrite(shown.data(), 1, shown.size(), stdout);
        std::fflush(stdout);
    }
    const auto t0 = std::chrono::steady_clock::now();
    session->append(ids);
    const double prefill_s = seconds_since(t0);
    const int64_t prefill_rows = session->rows_run();
    // A BPE token may end inside a UTF-8 character: the stream holds such bytes back and
    // prints the character whole, so the output equals the decode of the whole sequence.
    Utf8Stream stream(static_cast<size_t>(tok->max_token_bytes()));
    // Text that may begin a stop string is held back until decided (runtime/stop_strings.h).
    std::unique_ptr<StopStrings> stops;
    if (!stop_list.empty()) stops = std::make_unique<StopStrings>(stop_list, 3 * static_cast<size_t>(tok->max_token_bytes() + 4));
    const GenerateResult r = session->generate(a.n, a.sampler, *tok, stream, [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        // A full disk (>/dev/full) ends the run now, not after -n tokens written nowhere.
        if (std::fflush(stdout) != 0) fail("cannot write the output: ", std::strerror(errno));
    }, {}, stops.get());
    std::fputc('\n', stdout);
    if (a.stats) {
        std::fflush(stdout);
        print_stats(static_cast<int>(ids.size()), prefill_rows, prefill_s, r);
    }
    return 0;
}

int cmd_eval(const EvalArgs& a) {
    const BackendKind backend = parse_backend(a.backend);
    auto model = Model::open(a.model, a.load);
    int64_t skipped = 0;
    // --text - reads standard input, as generate -f - does.
    const bool from_stdin = a.text == "-";
    const std::string text = from_stdin ? read_stdin() : read_named_text(a.text, "--text");
    const std::string what = from_stdin ? "standard input (--text -)" : printable(a.text, 200);
    // Every character outside the vocabulary is named, with its count, and --skip-unknown offered.
    const std::vector<int> ids = encode_training_text(*model, text, what, a.skip_unknown, &skipped);
    // On stderr, as generate's note: stdout holds the one result line that scripts read.
    if (skipped > 0) std::fprintf(stderr, "ember: %lld characters outside the vocabulary skipped (--skip-unknown)\n", static_cast<long long>(skipped));
    const int64_t start = a.split == "val" ? val_split_start(static_cast<int64_t>(ids.size())) : 0;
    if (ids.size() - start < 2) {
        fail(what, ": the ", a.split == "val" ? "validation split (last 10%)" : "text", " holds ",
             ids.size() - start, " token(s); eval needs at least 2", a.split == "val" ? " (--split all scores the whole text)" : "");
    }
    SessionOptions so;
    so.threads = a.threads;
    so.all_logits = true;
    so.kv_cache = parse_kv_cache(a.kv_cache);
    const auto adapter = a.adapter.empty() ? nullptr : LoraAdapter::load(a.adapter, *model);
    so.adapter = adapter.get();
    auto session = make_session(*model, so, backend);
    const ModelConfig& c = model->config();
    const EvalResult r = evaluate(*session, ids.data() + start, static_cast<int64_t>(ids.size()) - start, c.block_size, c.vocab_size,
                                  c.tokenizer_size);
    eval_loss_check(r);
    std::printf("loss %.4f over %lld tokens\n", r.loss, static_cast<long long>(r.tokens));
    return 0;
}

namespace {

// What `ember bench` measured, for its text and its JSON.
struct BenchFigures {
    int n_prefill = 0, steps = 0;                           // tokens per prefill run, per decode run
    RunStats prefill, decode;                               // tokens/s over the timed runs
    Backend::DispatchCounts prefill_counts, decode_counts;  // the timed runs' thread-pool dispatches
};

// Prefill: one window of n_prefill tokens (default block_size). CPU: forward_window (logits of
// every row), or with --prefill-logits last the prompt path. CUDA: reset + append (the prompt
// path, last-row logits), so that copying [block_size, V] logits to the host is not counted as
// prefill. Decode: from one token, `steps` new tokens (within the KV cache), greedy. Each after
// one warm-up run. Throws Error for -p or -n past block_size.
BenchFigures measure_bench(Session& session, const ModelConfig& c, const BenchArgs& a, bool gpu) {
    const Backend& backend = session.backend();
    BenchFigures f;
    f.n_prefill = a.prompt > 0 ? a.prompt : c.block_size;
    f.steps = a.tokens > 0 ? a.tokens : c.block_size - 1;
    if (f.n_prefill > c.block_size) throw Error("bench: -p " + std::to_string(f.n_prefill) + " exceeds block_size " + std::to_string(c.block_size));
    if (f.steps > c.block_size - 1) throw Error("bench: -n " + std::to_string(f.steps) + " exceeds block_size - 1 = " + std::to_string(c.block_size - 1));
    SamplerOptions greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy, c.tokenizer_size, session.sampler_probs(), session.sampler_ids());
    std::vector<int> window(f.n_prefill);
    for (int i = 0; i < f.n_prefill; ++i) window[i] = (i * 7 + 3) % c.tokenizer_size;
    auto prefill_once = [&] {
        if (gpu || a.prefill_logits == "last") {
            session.reset();
            session.append(window.data(), f.n_prefill);
        } else {
            session.forward_window(window.data(), f.n_prefill);
        }
    };
    // The thread pool's dispatches (all, and run on the caller alone) over the timed runs.
    auto counts_since = [&backend](const Backend::DispatchCounts& from) {
        const Backend::DispatchCounts now = backend.dispatch_counts();
        return Backend::DispatchCounts{now.dispatches - from.dispatches, now.solo - from.solo};
    };
    std::vector<double> prefill, decode;
    prefill_once();  // warm-up
    const Backend::DispatchCounts prefill_from = backend.dispatch_counts();
    for (int r = 0; r < a.runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        prefill_once();
        prefill.push_back(f.n_prefill / seconds_since(t0));
    }
    f.prefill_counts = counts_since(prefill_from);
    Backend::DispatchCounts decode_from;
    for (int r = 0; r <= a.runs; ++r) {
        if (r == 1) decode_from = backend.dispatch_counts();
        session.reset();
        int id = 0;
        session.append(&id, 1);
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < f.steps; ++s) {
            id = sampler.sample(session.logits());
            session.append(&id, 1);
        }
        if (r > 0) decode.push_back(f.steps / seconds_since(t0));  // run 0 warms up
    }
    f.decode_counts = counts_since(decode_from);
    f.prefill = run_stats(prefill);
    f.decode = run_stats(decode);
    return f;
}

// The CPU kernels chosen by the CPU's features (and EMBER_CPU_KERNELS); int8's as this
// model's first layer gets it (the cache hint, kernels/cpu/weights.h).
std::string cpu_kernels_line(const Model& model) {
    kernels::WeightView i8 = model.weights().layers[0].qkv;
    i8.type = kernels::WType::I8;
    return std::string(kernels::linear_kernel_name(kernels::WType::F32)) + ", " + kernels::linear_kernel_name(kernels::WType::F16) + ", " +
           kernels::linear_kernel_name(i8) + ", attention/layernorm/activation: " + kernels::ops_kernel_name();
}

// "last-level cache: ..." of bench's text: the cache hint needs the cache's size; where neither
// EMBER_LLC_BYTES nor sysfs gives it (some VMs and containers) the weights are taken to come
// from DRAM, which bench says.
void print_llc_line(const Model& model) {
    const size_t llc = kernels::last_level_cache_bytes();
    if (llc == 0) {
        const bool env_zero = std::string(kernels::last_level_cache_source()) == "EMBER_LLC_BYTES";
        std::printf("last-level cache: size unknown (%s): int8 weights are taken to come from DRAM, so the 8-row decode kernel "
                    "of cache-resident weights is not used%s\n",
                    env_zero ? "EMBER_LLC_BYTES=0" : "no /sys/devices/system/cpu/cpu0/cache, EMBER_LLC_BYTES not set to a size",
                    env_zero ? "" : " (EMBER_LLC_BYTES=32M, say, gives the cache's size)");
        return;
    }
    char size[40];
    if (llc >= (size_t{1} << 20)) {
        std::snprintf(size, sizeof size, "%.1f MiB", llc / 1048576.0);
    } else if (llc >= 1024) {
        std::snprintf(size, sizeof size, "%zu KiB", llc >> 10);
    } else {
        std::snprintf(size, sizeof size, "%zu bytes", llc);
    }
    std::printf("last-level cache: %s (%s); int8 weights %s\n", size, kernels::last_level_cache_source(),
                model.weight_bytes() <= llc ? "fit in it (8-row decode kernel where the group size allows)" : "exceed it");
}

}  // namespace

int cmd_bench(const BenchArgs& a) {
    auto model = Model::open(a.model, a.load);
    const ModelConfig& c = model->config();
    SessionOptions so;
    so.threads = a.threads;
    so.all_logits = a.prefill_logits != "last";  // [block_size, V] logits only for forward_window
    so.kv_cache = parse_kv_cache(a.kv_cache);
    auto session = make_session(*model, so, parse_backend(a.backend));
    const Backend& backend = session->backend();
    const bool gpu = std::string(backend.name()) == "cuda";
    const BenchFigures f = measure_bench(*session, c, a, gpu);
    const RunStats &ps = f.prefill, &ds = f.decode;
    const int steps = f.steps;
    // block_size 1 leaves no token to decode: no figure (JSON null), not "0 tokens/s".
    auto none_if_no_steps = [steps](double v) { return steps > 0 ? nlohmann::json(v) : nlohmann::json(); };
    const double p = ps.median, d = ds.median;
    const int threads = backend.threads();
    CudaDeviceInfo dev;
    double share = 0.0;  // weight bytes per token / time per token / peak bandwidth
    if (gpu) {
        dev = cuda_device_info();
        if (dev.peak_bytes_per_s > 0) share = static_cast<double>(model->weight_bytes()) * d / dev.peak_bytes_per_s;
    }
    const std::string kernels = cpu_kernels_line(*model);
    if (a.json) {
        nlohmann::json j{{"engine", "ember"}, {"backend", backend.name()}, {"threads", threads}, {"runs", a.runs},
                         {"prefill_tok_s", p}, {"prefill_tok_s_min", ps.min}, {"prefill_tok_s_max", ps.max},
                         {"decode_tok_s", none_if_no_steps(d)}, {"decode_tok_s_min", none_if_no_steps(ds.min)}, {"decode_tok_s_max", none_if_no_steps(ds.max)}, {"prefill_tokens", f.n_prefill}, {"prefill_logits", gpu ? "last" : a.prefill_logits}, {"decode_tokens", steps}, {"block_size", c.block_size}, {"weight_bytes", model->weight_bytes()},
                         {"mmap", a.load.mmap}, {"mlock", a.load.mlock}, {"mlocked", model->locked()}, {"huge_page_bytes", model->huge_page_bytes()}};
        if (!gpu) {
            j["kernels"] = kernels;
            j["last_level_cache_bytes"] = kernels::last_level_cache_bytes();  // 0: unknown
            j["last_level_cache_source"] = kernels::last_level_cache_source();
            j["prefill_dispatches"] = f.prefill_counts.dispatches;  // the timed runs' (thread pool)
            j["prefill_solo_dispatches"] = f.prefill_counts.solo;
            j["decode_dispatches"] = f.decode_counts.dispatches;
            j["decode_solo_dispatches"] = f.decode_counts.solo;
        }
        j["kv_cache"] = gpu ? "f16" : kernels::kv_dtype_name(so.kv_cache);  // the CUDA backend's is always fp16
        if (gpu) {
            j["device"] = dev.name;
            j["peak_bytes_per_s"] = dev.peak_bytes_per_s;
            j["decode_bandwidth_share"] = share;
            j["describe"] = backend.describe();
        }
        std::printf("%s\n", j.dump().c_str());
        return 0;
    }
    std::printf("model: %s (n_layer %d, n_head %d, n_embd %d, block_size %d, %zu weight bytes)\n", a.model.c_str(), c.n_layer, c.n_head,
                c.n_embd, c.block_size, model->weight_bytes());
    if (gpu) {
        std::printf("backend: cuda, %s (sm_%d%d, %.0f GB/s peak from the memory clock and bus width)\n", dev.name.c_str(), dev.major, dev.minor,
                    dev.peak_bytes_per_s / 1e9);
    } else {
        std::printf("backend: cpu\nthreads: %d\nkernels: %s\nkv cache: %s\n", threads, kernels.c_str(), kernels::kv_dtype_name(so.kv_cache));
        print_llc_line(*model);
    }
    if (!backend.describe().empty()) std::printf("%s\n", backend.describe().c_str());
    std::printf("weights: %s\n", weights_held(*model, a.load).c_str());
    auto print_solo = [threads](const Backend::DispatchCounts& n) {
        if (threads > 1 && n.dispatches > 0) {
            std::printf("         %ld of %ld dispatches to the %d threads ran on this thread alone (workers measured slower)\n", n.solo,
                        n.dispatches, threads);
        }
    };
    std::printf("prefill: %.0f tokens/s (window of %d; median of %d runs, min %.0f, max %.0f)\n", p, f.n_prefill, a.runs, ps.min, ps.max);
    print_solo(f.prefill_counts);
    if (steps == 0) {
        std::printf("decode:  none (block_size %d leaves no token to decode after the first)\n", c.block_size);
    } else {
        std::printf("decode:  %.0f tokens/s (%d tokens within block_size; median of %d runs, min %.0f, max %.0f)\n", d, steps, a.runs, ds.min,
                    ds.max);
        print_solo(f.decode_counts);
    }
    if (gpu) {
        std::printf("decode bandwidth: %.1f%% of peak (%zu weight bytes per token x %.0f tokens/s / %.0f GB/s)\n", 100.0 * share,
                    model->weight_bytes(), d, dev.peak_bytes_per_s / 1e9);
    }
    return 0;
}

}  // namespace ember::cli

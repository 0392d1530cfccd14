// llama.cpp's peer in ember's benchmarks: loads a GGUF through node-llama-cpp's prebuilt
// libllama / libggml (built by bench/llama/setup.sh against the bundled llama.cpp headers) and
// measures what `ember bench --json` does, on token ids only (the GGUFs from
// bench/llama/gguf_write.py carry no tokenizer).
//
//   llama_bench -m M.gguf -t THREADS [-p N_PREFILL] [-n N_DECODE] [--runs R]
//       one JSON line: prefill tok/s (one batch of N_PREFILL ids, default the window), decode
//       tok/s (N_DECODE tokens from one, default window - 1, greedy argmax over the logits as
//       ember bench samples), medians over R runs after one warm-up; startup_ms (process start
//       to the first token's logits: backend load, model load, context, threadpool, one decode)
//       and peak_rss_bytes (getrusage), the CPU backend variant that ggml loaded and its features.
//       --first-token: print startup_ms and exit at once (for timing start-up as a process).
//   llama_bench -m M.gguf -t THREADS --logits IDS OUT
//       evaluates the comma-separated ids in one batch and writes float32 logits [T, V] to OUT.
//
// Threads: a persistent ggml threadpool attached to the context, as llama-bench does
// (tools/llama-bench/llama-bench.cpp: ggml_threadpool_new + llama_attach_threadpool).
// Errors print what failed and exit 1 (this is a benchmark main, not library code).
#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "llama_bench: %s\n", what.c_str());
    std::exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// The folder of the loaded libllama: the CPU backend variants lie beside it.
std::string lib_dir() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&llama_backend_init), &info) || !info.dli_fname) die("dladdr(libllama) failed");
    std::string p = info.dli_fname;
    return p.substr(0, p.rfind('/'));
}

// Which libggml-cpu-<variant>.so ggml's scorer chose (ggml_backend_load_best keeps only that one).
std::string loaded_cpu_variant() {
    std::string found;
    dl_iterate_phdr(
        [](dl_phdr_info* i, size_t, void* out) {
            const char* base = std::strrchr(i->dlpi_name, '/');
            base = base ? base + 1 : i->dlpi_name;
            if (std::strncmp(base, "libggml-cpu-", 12) == 0) *static_cast<std::string*>(out) = base;
            return 0;
        },
        &found);
    return found;
}

std::string cpu_features(ggml_backend_reg_t reg) {
    auto get = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    std::string s;
    if (!get) return s;
    for (ggml_backend_feature* f = get(reg); f && f->name; ++f) s += (s.empty() ? "" : " ") + std::string(f->name);
    return s;
}

struct Args {
    std::string model, ids, out;
    int threads = 1, prefill = 0, decode = 0, runs = 3;
    bool first_token = false;  // stop after the start-up figure
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + k);
            return argv[++i];
        };
        if (k == "-m") a.model = next();
        else if (k == "-t") a.threads = std::atoi(next().c_str());
        else if (k == "-p") a.prefill = std::atoi(next().c_str());
        else if (k == "-n") a.decode = std::atoi(next().c_str());
        else if (k == "--runs") a.runs = std::atoi(next().c_str());
        else if (k == "--first-token") a.first_token = true;
        else if (k == "--logits") {
            a.ids = next();
            a.out = next();
        } else die("unknown argument " + k + " (usage: llama_bench -m M.gguf -t N [-p N] [-n N] [--runs R] [--first-token] [--logits IDS OUT])");
    }
    if (a.model.empty() || a.threads < 1 || a.runs < 1) die("need -m MODEL, -t >= 1, --runs >= 1");
    return a;
}

void decode_or_die(llama_context* ctx, llama_batch b, const char* where) {
    if (llama_decode(ctx, b) != 0) die(std::string("llama_decode failed in ") + where);
}

int argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// ids [T] -> logits [T, V] written as raw float32 to `path`.
void dump_logits(llama_context* ctx, int n_vocab, const std::string& ids_csv, const std::string& path) {
    std::vector<llama_token> ids;
    for (const char* p = ids_csv.c_str(); *p;) {
        char* end = nullptr;
        ids.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) die("bad id list at: " + std::string(p));
    }
    llama_batch b = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
    for (size_t i = 0; i < ids.size(); ++i) {
        b.token[i] = ids[i];
        b.pos[i] = static_cast<llama_pos>(i);
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = static_cast<int32_t>(ids.size());
    decode_or_die(ctx, b, "logits");
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) die("cannot write " + path);
    for (size_t i = 0; i < ids.size(); ++i) std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), sizeof(float), n_vocab, f);
    std::fclose(f);
    llama_batch_free(b);
}

}  // namespace

int main(int argc, char** argv) {
    const auto t_start = Clock::now();
    const Args a = parse(argc, argv);
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    ggml_backend_load_all_from_path(lib_dir().c_str());
    ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu_dev) die("no CPU backend loaded from " + lib_dir());
    ggml_backend_reg_t cpu_reg = ggml_backend_dev_backend_reg(cpu_dev);
    auto tp_new = reinterpret_cast<decltype(ggml_threadpool_new)*>(ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_new"));
    auto tp_free = reinterpret_cast<decltype(ggml_threadpool_free)*>(ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_free"));
    if (!tp_new || !tp_free) die("the CPU backend exports no ggml_threadpool_new/free");
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(a.model.c_str(), mp);
    if (!model) die("cannot load " + a.model);
    const int n_ctx = llama_model_n_ctx_train(model);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_ctx);  // a whole window in one batch
    cp.n_threads = cp.n_threads_batch = a.threads;
    cp.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context of " + std::to_string(n_ctx) + " positions");
    ggml_threadpool_params tpp = ggml_threadpool_params_default(a.threads);
    ggml_threadpool* tp = tp_new(&tpp);
    if (!tp) die("ggml_threadpool_new failed for " + std::to_string(a.threads) + " threads");
    llama_attach_threadpool(ctx, tp, nullptr);
    llama_memory_t mem = llama_get_memory(ctx);

    if (!a.ids.empty()) {
        dump_logits(ctx, n_vocab, a.ids, a.out);
    } else {
        llama_token tok = 0;
        decode_or_die(ctx, llama_batch_get_one(&tok, 1), "first token");
        argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        const double startup_ms = 1e3 * seconds_since(t_start);
        if (a.first_token) {
            std::printf("{\"engine\":\"llama.cpp\",\"startup_ms\":%.3f}\n", startup_ms);
            std::fflush(stdout);
            std::_Exit(0);  // what follows the first token is not start-up
        }

        const int n_prefill = a.prefill > 0 ? a.prefill : n_ctx;
        const int steps = a.decode > 0 ? a.decode : n_ctx - 1;
        if (n_prefill > n_ctx || steps > n_ctx - 1) die("-p exceeds the window or -n exceeds window - 1");
        std::vector<llama_token> window(n_prefill);
        for (int i = 0; i < n_prefill; ++i) window[i] = (i * 7 + 3) % n_vocab;  // as ember bench
        std::vector<double> prefill, decode;
        for (int r = 0; r <= a.runs; ++r) {  // run 0 warms up
            llama_memory_clear(mem, true);
            const auto t0 = Clock::now();
            decode_or_die(ctx, llama_batch_get_one(window.data(), n_prefill), "prefill");
            llama_synchronize(ctx);
            if (r > 0) prefill.push_back(n_prefill / seconds_since(t0));
        }
        for (int r = 0; r <= a.runs; ++r) {
            llama_memory_clear(mem, true);
            llama_token id = 0;
            decode_or_die(ctx, llama_batch_get_one(&id, 1), "decode start");
            const auto t0 = Clock::now();
            for (int s = 0; s < steps; ++s) {
                id = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
                decode_or_die(ctx, llama_batch_get_one(&id, 1), "decode");
            }
            llama_synchronize(ctx);
            if (r > 0) decode.push_back(steps / seconds_since(t0));
        }
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        std::printf("{\"engine\":\"llama.cpp\",\"threads\":%d,\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"prefill_tokens\":%d,"
                    "\"decode_tokens\":%d,\"block_size\":%d,\"weight_bytes\":%llu,\"startup_ms\":%.3f,\"peak_rss_bytes\":%lld,"
                    "\"cpu_variant\":\"%s\",\"cpu_features\":\"%s\",\"llama_system_info\":\"%s\"}\n",
                    a.threads, median(prefill), median(decode), n_prefill, steps, n_ctx,
                    static_cast<unsigned long long>(llama_model_size(model)), startup_ms, static_cast<long long>(ru.ru_maxrss) * 1024,
                    loaded_cpu_variant().c_str(), cpu_features(cpu_reg).c_str(), llama_print_system_info());
    }
    llama_free(ctx);
    tp_free(tp);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

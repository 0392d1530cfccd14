#include "runtime/session.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/cpu_backend.h"
#include "runtime/cuda_module.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/stop_strings.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"

namespace ember {

namespace {

// The first index in [0, n) whose value is not finite (inf or NaN: exponent bits all ones),
// or -1. An integer OR over the bits first, which vectorizes at -O3 (GPT-2's 50257 logits: 7 us
// on the AMD EPYC VM, 0.2% of a 4 ms decode step), then the index only when there is one.
int first_non_finite(const float* x, int n) {
    constexpr uint32_t kExp = 0x7f800000u;
    uint32_t any = 0;
    for (int i = 0; i < n; ++i) {
        uint32_t b;
        std::memcpy(&b, x + i, 4);
        any |= (b & kExp) == kExp ? 1u : 0u;
    }
    if (!any) return -1;
    for (int i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) return i;
    }
    return -1;
}

}  // namespace

Session::Session(const Model& model, const SessionOptions& opts, std::unique_ptr<Backend> backend)
    : model_(model), opts_(opts), backend_(std::move(backend)) {
    if (!backend_) fail("a session needs a backend");
    scratch_ = backend_->host_scratch();
    ctx_ = ContextWindow(opts.policy, model.config().block_size, scratch_.history, scratch_.window);
}

Session::Session(const Model& model, const SessionOptions& opts) : Session(model, opts, std::make_unique<CpuBackend>(model, opts)) {}

Session::~Session() = default;

void Session::reset() {
    ctx_.reset();
    logits_ = nullptr;
}

int prompt_length(size_t n) {
    constexpr size_t kMax = static_cast<size_t>(std::numeric_limits<int>::max());
    if (n > kMax) fail("prompt: ", n, " tokens is more than the ", kMax, " a session takes (it reads only the last block_size)");
    return static_cast<int>(n);
}

void Session::append(const int* ids, int n) {
    check_token_ids(ids, n, model_.config().vocab_size);
    ctx_.append(ids, n, [this](const int* span, int T, int pos0, int row0, int n_keys0) {
        rows_run_ += T;
        logits_ = backend_->forward(span, T, pos0, row0, n_keys0, false);
    });
}

const float* Session::forward_window(const int* ids, int T) {
    const ModelConfig& c = model_.config();
    check_window(ids, T, c.block_size, c.vocab_size, opts_.all_logits);
    reset();
    const float* all = backend_->forward(ids, T, 0, 0, 1, true);
    logits_ = all + static_cast<size_t>(T - 1) * c.vocab_size;
    return all;
}

GenerateResult Session::generate(int n, const SamplerOptions& sampling, const Tokenizer& tok, Utf8Stream& stream,
                                 const std::function<void(std::string_view)>& on_text, const std::function<bool()>& should_stop,
                                 StopStrings* stops) {
    if (!logits_) fail("generate: the sequence is empty (append the prompt first)");
    Sampler sampler(sampling, tok.size(), scratch_.sampler_probs, scratch_.sampler_ids);
    const bool penalty = sampling.repeat_penalty != 1.0f && sampling.repeat_last_n != 0;
    if (stops) stops->reset();
    // Text out, through the stop strings when there are any.
    auto emit = [&](std::string_view text) {
        if (stops) text = stops->feed(text);
        if (!text.empty()) on_text(text);
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    GenerateResult r;
    generated_ = 0;
    for (int i = 0; i < n; ++i) {
        if (should_stop && should_stop()) {
            r.stopped = true;
            break;
        }
        // A logit that is not a number to sample from: the model is broken (eval refuses it
        // too); sampling around it would print text from a model that overflows.
        if (const int bad = first_non_finite(logits_, tok.size()); bad >= 0) {
            stream.finish();  // drop a partial character: the next generate starts clean
            fail("generate: new token ", i + 1, " of ", n, ": logit ", bad, " of ", tok.size(), " is ", non_finite_text(logits_[bad]),
                 ": the model's activations overflow f32");
        }
        int id = 0;
        if (penalty) {
            const int k = ctx_.recent(sampling.repeat_last_n, scratch_.repeat_ids);
            id = sampler.sample(logits_, scratch_.repeat_ids, k, scratch_.repeat_logits);
        } else {
            id = sampler.sample(logits_);
        }
        generated_ = r.tokens + 1;  // sampled: counted before its text goes out (on_text may throw)
        r.seconds = since();
        if (r.tokens == 0) r.first_token_s = r.seconds;
        const std::string_view b = tok.token_bytes(id);
        emit(stream.feed(b.data(), b.size()));  // whole characters only
        ++r.tokens;
        if (stops && stops->matched()) {
            r.stop = stops->which();
            break;
        }
        if (i + 1 < n) append(&id, 1);
    }
    // The tail of a character the last token left incomplete (U+FFFD): the text equals the
    // decode of the whole sequence. After a stop string, nothing more goes out.
    if (!(stops && stops->matched())) {
        emit(stream.finish());
        if (stops && !stops->matched()) {
            const std::string_view held = stops->finish();
            if (!held.empty()) on_text(held);
        }
    }
    stream.finish();  // empty it
    return r;
}

BackendKind resolve_backend(BackendKind b, const SessionOptions& opts) {
    if (b != BackendKind::Auto) return b;
    if (opts.adapter || opts.arena) return BackendKind::Cpu;
    return cuda_available() ? BackendKind::Cuda : BackendKind::Cpu;
}

std::unique_ptr<Session> make_session(const Model& model, const SessionOptions& opts, BackendKind backend) {
    if (resolve_backend(backend, opts) == BackendKind::Cpu) return std::make_unique<Session>(model, opts);
    if (opts.adapter) fail("LoRA adapters run on the CPU backend only so far: use --backend cpu (or auto)");
    if (opts.arena) fail("a caller-owned arena is for the CPU backend; the CUDA backend plans its own device memory");
    return std::make_unique<Session>(model, opts, make_cuda_backend(model, opts));
}

}  // namespace ember

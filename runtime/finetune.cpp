#include "runtime/finetune.h"

#include <sys/stat.h>

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/lora.h"
#include "runtime/arena.h"
#include "runtime/block.h"
#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/paths.h"
#include "runtime/utf8.h"

namespace ember {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

TrainPlan plan_training(const Model& model, int batch, int seq, int rank, size_t n_params, int threads) {
    const ModelConfig& c = model.config();
    const size_t M = static_cast<size_t>(batch) * seq, T = seq, C = c.n_embd, F = c.ffn_hidden, V = c.vocab_size,
                 L = c.n_layer, r = rank, f4 = sizeof(float);
    const int groups = int8_groups_per_row(model);
    TrainPlan p;
    ArenaPlanner arena(kDataAlignment);
    p.x = arena.take((L + 1) * M * C * f4);
    p.xn1 = arena.take(L * M * C * f4);
    p.qkv = arena.take(L * M * 3 * C * f4);
    p.att = arena.take(L * M * C * f4);
    p.x_mid = arena.take(L * M * C * f4);
    p.xn2 = arena.take(L * M * C * f4);
    p.h_pre = arena.take(L * M * F * f4);
    p.h_act = arena.take(L * M * F * f4);
    p.u = arena.take(L * kLoraTargets * M * r * f4);
    p.xnf = arena.take(M * C * f4);
    p.logits = arena.take(M * V * f4);
    p.dx = arena.take(M * C * f4);
    p.dtmp = arena.take(M * C * f4);
    p.datt = arena.take(M * C * f4);
    p.dqkv = arena.take(M * 3 * C * f4);
    p.dh = arena.take(M * F * f4);
    p.du = arena.take(M * r * f4);
    p.kc = arena.take(T * C * f4);
    p.vc = arena.take(T * C * f4);
    p.scores = arena.take(static_cast<size_t>(threads) * 2 * T * f4);
    p.rows = arena.take(static_cast<size_t>(threads) * std::max(C, F) * f4);
    p.xq = arena.take(M * std::max(C, F));
    p.xs = arena.take(M * static_cast<size_t>(groups) * f4);
    p.xf_floats = linear_xf_floats(model);
    p.xf = arena.take(static_cast<size_t>(threads) * p.xf_floats * f4);
    p.grads = arena.take(n_params * f4);
    p.total = arena.total();
    return p;
}

Trainer::Trainer(const Model& model, LoraAdapter& adapter, int batch, int seq, const kernels::AdamWParams& adamw, float clip,
                 int threads)
    : model_(model),
      adapter_(adapter),
      B_(batch),
      T_(seq),
      adamw_(adamw),
      clip_(clip),
      pool_(threads < 0 || threads > kMaxThreads ? 1 : threads > 0 ? threads : kernels::ThreadPool::default_threads()) {
    const ModelConfig& c = model.config();
    if (threads < 0 || threads > kMaxThreads) fail("threads ", threads, " is outside [0, ", kMaxThreads, "] (0 = all cores)");
    if (seq < 1 || seq > c.block_size) fail("sequence length ", seq, " is outside [1, block_size = ", c.block_size, "]");
    if (batch < 1 || batch > kMaxTrainBatch) fail("batch ", batch, " is outside [1, ", kMaxTrainBatch, "]");
    if (adapter.base_checksum() != model.checksum() || adapter.n_layer() != c.n_layer) fail("the adapter was made for another model than ", model.path());
    if (!(clip >= 0.0f) || !std::isfinite(clip)) fail("gradient clip ", clip, " must be finite and >= 0 (0 = off)");
    if (const std::string bad = kernels::adamw_params_problem(adamw); !bad.empty()) fail("AdamW ", bad);
    if (adapter.adam_m.size() != adapter.size() || adapter.adam_v.size() != adapter.size()) {
        adapter.adam_m.assign(adapter.size(), 0.0f);
        adapter.adam_v.assign(adapter.size(), 0.0f);
    }
    plan_ = plan_training(model, batch, seq, adapter.rank(), adapter.size(), pool_.size());
    check_memory(plan_.total, 0, "the training arena", " (batch " + std::to_string(batch) + " x seq " + std::to_string(seq) + "; lower --batch or --seq)");
    own_arena_ = ResidentMemory(plan_.total, "the training arena");  // zeroed by the kernel
    arena_ = own_arena_.data();
}

Trainer::~Trainer() = default;

const float* Trainer::grads() const { return buf<float>(plan_.grads); }

void Trainer::check_ids(const int* ids) const {
    const int V = model_.config().vocab_size;
    for (int i = 0; i < B_ * T_; ++i) {
        if (ids[i] < 0 || ids[i] >= V) fail("token id ", ids[i], " at position ", i, " is outside the vocabulary [0, ", V, ")");
    }
}

double Trainer::loss(const int* x, const int* y) { return forward(x, y, false); }

double Trainer::forward_backward(const int* x, const int* y) { return forward(x, y, true); }

double Trainer::forward(const int* x, const int* y, bool backward) {
    check_ids(x);
    check_ids(y);
    const ModelConfig& c = model_.config();
    const ModelWeights& w = model_.weights();
    const int C = c.n_embd, F = c.ffn_hidden, V = c.vocab_size, L = c.n_layer, T = T_;
    const int M = B_ * T_;
    const size_t MC = static_cast<size_t>(M) * C, MF = static_cast<size_t>(M) * F;
    float* X = buf<float>(plan_.x);
    float* XN1 = buf<float>(plan_.xn1);
    float* QKV = buf<float>(plan_.qkv);
    float* ATT = buf<float>(plan_.att);
    float* XMID = buf<float>(plan_.x_mid);
    float* XN2 = buf<float>(plan_.xn2);
    float* HPRE = buf<float>(plan_.h_pre);
    float* HACT = buf<float>(plan_.h_act);
    float* xnf = buf<float>(plan_.xnf);
    float* logits = buf<float>(plan_.logits);
    float* tmp = buf<float>(plan_.dtmp);  // forward scratch [M, C]
    float* kc = buf<float>(plan_.kc);
    float* vc = buf<float>(plan_.vc);
    const kernels::LinearScratch scratch{buf<int8_t>(plan_.xq), buf<float>(plan_.xs), buf<float>(plan_.xf), plan_.xf_floats};

    // x = wte[ids] + wpe[t]
    for (int i = 0; i < M; ++i) embed_row(w, C, x[i], i % T, X + static_cast<size_t>(i) * C, tmp);
    kernels::AttentionShape as;
    as.T = T;
    as.n_head = c.n_head;
    as.head_size = c.head_size();
    as.n_keys0 = 1;
    as.ldq = 3 * C;
    as.scale = c.attn_scale;
    for (int l = 0; l < L; ++l) {
        // Every layer's activations kept for the backward (runtime/block.h).
        BlockBuffers io;
        io.x_in = X + l * MC;
        io.xn1 = XN1 + l * MC;
        io.qkv = QKV + l * MC * 3;
        io.att = ATT + l * MC;
        io.x_mid = XMID + l * MC;
        io.xn2 = XN2 + l * MC;
        io.hpre = HPRE + l * MF;
        io.hact = HACT + l * MF;
        io.tmp = tmp;
        io.x_out = X + (l + 1) * MC;
        auto adapted = [&](LoraTarget t, const float* in, const kernels::WeightView& wv, const float* bias, float* out) {
            kernels::linear(in, M, wv, bias, out, scratch, pool_);
            kernels::lora_forward(in, adapter_.A(l, t), adapter_.B(l, t), lora_shape(t), lora_u(l, t), out, pool_);
        };
        // Each sequence of the batch attends within itself; K and V stay in f32.
        auto attend = [&](const float* qkv, float* att) {
            for (int b = 0; b < B_; ++b) {
                const float* qb = qkv + static_cast<size_t>(b) * T * 3 * C;
                for (int t = 0; t < T; ++t) {
                    std::memcpy(kc + static_cast<size_t>(t) * C, qb + static_cast<size_t>(t) * 3 * C + C, C * sizeof(float));
                    std::memcpy(vc + static_cast<size_t>(t) * C, qb + static_cast<size_t>(t) * 3 * C + 2 * C, C * sizeof(float));
                }
                kernels::attention(qb, kc, vc, as, att + static_cast<size_t>(b) * T * C, buf<float>(plan_.scores), 2 * T, pool_);
            }
        };
        block_forward(w.layers[l], c, M, io, adapted, attend, pool_);
    }
    const float* xlast = X + L * MC;
    kernels::layernorm(xlast, M, C, w.ln_f_w, w.ln_f_b, c.ln_eps, xnf, pool_);
    kernels::linear(xnf, M, w.lm_head, w.lm_head_b, logits, scratch, pool_);
    const double loss = kernels::cross_entropy_backward(logits, y, M, V);  // logits now hold d loss / d logits
    if (backward) this->backward();
    return loss;
}

float* Trainer::lora_u(int l, LoraTarget t) const {
    const size_t Mr = static_cast<size_t>(B_) * T_ * adapter_.rank();
    return buf<float>(plan_.u) + (static_cast<size_t>(l) * kLoraTargets + static_cast<int>(t)) * Mr;
}

kernels::LoraShape Trainer::lora_shape(LoraTarget t) const {
    kernels::LoraShape s;
    s.T = B_ * T_;
    s.K = adapter_.in_features(t);
    s.N = adapter_.out_features(t);
    s.r = adapter_.rank();
    s.scale = adapter_.scale();
    return s;
}

void Trainer::backward() {
    const ModelConfig& c = model_.config();
    const ModelWeights& w = model_.weights();
    const int C = c.n_embd, F = c.ffn_hidden, L = c.n_layer, T = T_;
    const int M = B_ * T_;
    const size_t MC = static_cast<size_t>(M) * C, MF = static_cast<size_t>(M) * F;
    const float* X = buf<float>(plan_.x);
    const float* XN1 = buf<float>(plan_.xn1);
    const float* QKV = buf<float>(plan_.qkv);
    const float* ATT = buf<float>(plan_.att);
    const float* XMID = buf<float>(plan_.x_mid);
    const float* XN2 = buf<float>(plan_.xn2);
    const float* HPRE = buf<float>(plan_.h_pre);
    const float* HACT = buf<float>(plan_.h_act);
    const float* logits = buf<float>(plan_.logits);
    float* grads = buf<float>(plan_.grads);
    std::memset(grads, 0, adapter_.size() * sizeof(float));
    float* dx = buf<float>(plan_.dx);
    float* dtmp = buf<float>(plan_.dtmp);
    float* datt = buf<float>(plan_.datt);
    float* dqkv = buf<float>(plan_.dqkv);
    float* dh = buf<float>(plan_.dh);
    float* du = buf<float>(plan_.du);
    float* rows = buf<float>(plan_.rows);
    auto lora_back = [&](int l, LoraTarget t, const float* in, const float* dy, float* din) {
        kernels::lora_backward(in, lora_u(l, t), dy, adapter_.A(l, t), adapter_.B(l, t), lora_shape(t), grads + adapter_.offset_a(l, t),
                               grads + adapter_.offset_b(l, t), du, din, pool_);
    };

    kernels::linear_backward_input(logits, M, w.lm_head, dtmp, false, rows, pool_);
    std::memset(dx, 0, MC * sizeof(float));
    kernels::layernorm_backward(X + L * MC, M, C, w.ln_f_w, c.ln_eps, dtmp, dx, pool_);
    for (int l = L - 1; l >= 0; --l) {
        const LayerWeights& Lw = w.layers[l];
        // MLP: x_out = x_mid + fc2(act(fc(ln_2(x_mid))))
        kernels::linear_backward_input(dx, M, Lw.fc2, dh, false, rows, pool_);
        lora_back(l, LoraTarget::Fc2, HACT + l * MF, dx, dh);
        kernels::activation_backward(c.activation, HPRE + l * MF, dh, dh, M, F, pool_);
        kernels::linear_backward_input(dh, M, Lw.fc, dtmp, false, rows, pool_);
        lora_back(l, LoraTarget::Fc, XN2 + l * MC, dh, dtmp);
        kernels::layernorm_backward(XMID + l * MC, M, C, Lw.ln_2_w, c.ln_eps, dtmp, dx, pool_);
        // attention: x_mid = x_in + proj(attention(qkv(ln_1(x_in))))
        kernels::linear_backward_input(dx, M, Lw.proj, datt, false, rows, pool_);
        lora_back(l, LoraTarget::Proj, ATT + l * MC, dx, datt);
        kernels::attention_backward(QKV + l * MC * 3, datt, B_, T, c.n_head, c.head_size(), c.attn_scale, dqkv,
                                    buf<float>(plan_.scores), pool_);
        if (l > 0) {
            kernels::linear_backward_input(dqkv, M, Lw.qkv, dtmp, false, rows, pool_);
            lora_back(l, LoraTarget::Qkv, XN1 + l * MC, dqkv, dtmp);
            kernels::layernorm_backward(X + l * MC, M, C, Lw.ln_1_w, c.ln_eps, dtmp, dx, pool_);
        } else {  // nothing below block 0 learns: its input gradient is not needed
            lora_back(l, LoraTarget::Qkv, XN1, dqkv, nullptr);
        }
    }
}

StepResult Trainer::step(const int* x, const int* y) {
    StepResult r;
    r.loss = forward_backward(x, y);
    float* g = buf<float>(plan_.grads);
    const size_t n = adapter_.size();
    r.grad_norm = kernels::grad_norm(g, n);
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
        r.skipped = true;
        return r;
    }
    if (clip_ > 0.0f) kernels::clip_grad_norm(g, n, r.grad_norm, clip_);
    const int64_t t = static_cast<int64_t>(++adapter_.train.adam_step);
    kernels::adamw_step(adapter_.params(), g, adapter_.adam_m.data(), adapter_.adam_v.data(), n, adamw_, t);
    return r;
}

BatchSampler::BatchSampler(const int* ids, int64_t n, int batch, int seq, uint64_t seed)
    : ids_(ids), n_(n), B_(batch), T_(seq), seed_(seed) {
    if (n < static_cast<int64_t>(seq) + 1) fail("the training text holds ", n, n == 1 ? " token" : " tokens", "; a window of --seq ", seq, " needs at least ", seq + 1);
}

void BatchSampler::fill(uint64_t step, int* x, int* y) const {
    const uint64_t starts = static_cast<uint64_t>(n_ - T_);  // offsets 0 .. n - T - 1
    for (int b = 0; b < B_; ++b) {
        const uint64_t h = splitmix64(splitmix64(seed_ ^ splitmix64(step)) + static_cast<uint64_t>(b));
        const int64_t s = static_cast<int64_t>(h % starts);
        for (int t = 0; t < T_; ++t) {
            x[b * T_ + t] = ids_[s + t];
            y[b * T_ + t] = ids_[s + t + 1];
        }
    }
}

std::vector<int> encode_training_text(const CharTokenizer& tok, std::string_view text, const std::string& what,
                                      bool skip_unknown, int64_t* skipped) {
    std::vector<int> ids;
    ids.reserve(text.size());
    std::map<uint32_t, int64_t> unknown;
    size_t pos = 0;
    while (pos < text.size()) {
        uint32_t cp = 0;
        if (!utf8_next(text, pos, cp)) fail(what, ": invalid UTF-8 at byte ", pos);
        const int id = tok.find(cp);
        if (id < 0) {
            ++unknown[cp];
        } else {
            ids.push_back(id);
        }
    }
    int64_t total = 0;
    std::string names;
    size_t listed = 0;
    for (const auto& [cp, count] : unknown) {
        total += count;
        if (names.size() < 400) names += (names.empty() ? "" : ", ") + describe_code_point(cp) + " x" + std::to_string(count), ++listed;
    }
    // The list stops near 400 characters: the rest counted, not named (they were left out unsaid).
    if (listed < unknown.size()) names += ", and " + std::to_string(unknown.size() - listed) + " more";
    if (total > 0 && !skip_unknown) {
        fail(what, ": ", unknown.size(), " character(s) are not in the model's vocabulary: ", names,
             " (--skip-unknown drops them)");
    }
    // Said as `generate -f` says it, not as a text of 0 tokens after "N characters skipped".
    if (ids.empty() && total > 0) fail(what, ": none of its ", total, " characters is in the vocabulary (--skip-unknown dropped them all)");
    if (skipped) *skipped = total;
    return ids;
}

std::vector<int> encode_training_text(const Model& model, std::string_view text, const std::string& what, bool skip_unknown,
                                      int64_t* skipped) {
    if (!model.bpe()) return encode_training_text(CharTokenizer(model.code_points()), text, what, skip_unknown, skipped);
    if (skipped) *skipped = 0;
    return make_tokenizer(model)->encode(text, what);
}

uint64_t ids_checksum(const std::vector<int>& ids) {
    static_assert(sizeof(int) == 4, "ids are int32");
    return XXH64(ids.data(), ids.size() * sizeof(int), 0);
}

FinetuneRun::FinetuneRun(const Model& model, LoraAdapter& adapter, std::vector<int> ids, const FinetuneOptions& opts,
                         const std::string& text_name)
    : model_(model), adapter_(adapter), ids_(std::move(ids)), opts_(opts) {
    const ModelConfig& c = model.config();
    const int64_t n = static_cast<int64_t>(ids_.size());
    split_ = val_split_start(n);
    if (n - split_ < 2) fail(text_name, " holds ", n, n == 1 ? " token" : " tokens", ": its held-out last 10% needs at least 2 (a text of 20 tokens or more)");
    if (opts_.steps < 0) fail("--steps ", opts_.steps, " must be >= 0");
    if (opts_.eval_every < 1) fail("--eval-every ", opts_.eval_every, " must be >= 1");
    LoraTrainState& st = adapter_.train;
    const uint64_t text_hash = ids_checksum(ids_);
    if (st.present) {  // resume: the run's settings come from the adapter
        if (st.text_xxh64 != text_hash) fail("the adapter was trained on another text (its token checksum differs); resume needs the same text and options");
        opts_.batch = st.batch;
        opts_.seq = st.seq;
        opts_.seed = st.seed;
        opts_.lr = st.lr;
        opts_.weight_decay = st.weight_decay;
        opts_.clip = st.clip;
    } else {
        if (opts_.seq == 0) opts_.seq = c.block_size;
        adapter_.init(opts_.seed);
        st.present = true;
        st.step = 0;
        st.adam_step = 0;
        st.seed = opts_.seed;
        st.batch = opts_.batch;
        st.seq = opts_.seq;
        st.lr = opts_.lr;
        st.weight_decay = opts_.weight_decay;
        st.beta1 = 0.9f;
        st.beta2 = 0.999f;
        st.eps = 1e-8f;
        st.clip = opts_.clip;
        st.text_xxh64 = text_hash;
    }
    kernels::AdamWParams aw;
    aw.lr = st.lr;
    aw.weight_decay = st.weight_decay;
    aw.beta1 = st.beta1;
    aw.beta2 = st.beta2;
    aw.eps = st.eps;
    trainer_ = std::make_unique<Trainer>(model, adapter, opts_.batch, opts_.seq, aw, opts_.clip, opts_.threads);
    // The windows come from the training split (the first 90% of tokens): said so when it is
    // too short, with the longest --seq it allows ("56 tokens" of a 63-token text read as a miscount).
    if (split_ < static_cast<int64_t>(opts_.seq) + 1) {
        fail("the training split (the first 90% of the text's ", ids_.size(), " tokens) holds ", split_, " tokens; a window of --seq ", opts_.seq,
             " needs at least ", opts_.seq + 1, split_ >= 2 ? " (a longer text, or --seq " + std::to_string(split_ - 1) + " or less)" : " (a longer text)");
    }
    sampler_ = std::make_unique<BatchSampler>(ids_.data(), split_, opts_.batch, opts_.seq, opts_.seed);
    SessionOptions so;
    so.threads = opts_.threads;
    so.all_logits = true;
    so.adapter = &adapter_;
    eval_session_ = std::make_unique<Session>(model, so);
    x_.assign(static_cast<size_t>(opts_.batch) * opts_.seq, 0);
    y_.assign(x_.size(), 0);
}

double FinetuneRun::validation_loss() {
    const ModelConfig& c = model_.config();
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = evaluate(*eval_session_, ids_.data() + split_, val_tokens(), c.block_size, c.vocab_size, c.tokenizer_size).loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    forward_tps_ = static_cast<double>(val_tokens()) / std::max(secs, 1e-9);
    return loss;
}

double FinetuneRun::step_seconds_floor() const {
    return forward_tps_ > 0 ? static_cast<double>(opts_.batch) * opts_.seq / forward_tps_ : 0.0;
}

std::string FinetuneRun::long_step_note(double min_seconds) const {
    const double floor_s = step_seconds_floor();
    if (forward_tps_ <= 0 || floor_s < min_seconds) return "";
    char b[256];
    std::snprintf(b, sizeof b, "step %lld trains %d x %d = %lld tokens: a forward pass alone over them takes %.1f s here (%.0f tokens/s), "
                  "a training step several times that",
                  static_cast<long long>(step() + 1), opts_.batch, opts_.seq, static_cast<long long>(opts_.batch) * opts_.seq, floor_s,
                  forward_tps_);
    return b;
}

namespace {

// What out_path holds after a divergence: the last adapter this run wrote, or what it held.
std::string kept_text(const std::string& out_path, int64_t saved_step, double saved_val) {
    if (saved_step < 0) {
        struct stat st;  // this run wrote nothing there: a file now was there before
        if (stat(out_path.c_str(), &st) != 0) return printable(out_path, 200) + " was not created (no checkpoint of it was written)";
        return printable(out_path, 200) + " is as it was before this run (no checkpoint of it was written)";
    }
    return printable(out_path, 200) + " keeps the adapter of step " + std::to_string(saved_step) +
           (std::isfinite(saved_val) ? " (val loss " + std::to_string(saved_val) + ")" : std::string());
}

// The likely cause of a divergence: the lr, or alpha / r, the scale of the update; or, where
// lr x weight decay >= 1, the decay, which then flips or zeroes the adapter every step
// (p *= 1 - lr * weight_decay, kernels/cpu/adamw.h).
std::string diverged_cause(const LoraAdapter& a) {
    std::ostringstream s;
    const double shrink = static_cast<double>(a.train.lr) * a.train.weight_decay;
    s << "(lr " << a.train.lr << " or alpha / rank " << a.alpha() / static_cast<float>(a.rank()) << " is likely too high";
    if (shrink >= 1.0) s << "; lr x weight decay " << a.train.weight_decay << " = " << shrink << " >= 1 scales the adapter by 1 - that each step";
    s << ")";
    return s.str();
}

}  // namespace

double FinetuneRun::save_if_finite(const std::string& out_path, int64_t* saved_step, double* saved_val) {
    const double val = validation_loss();
    if (!std::isfinite(val)) {
        fail("training diverged at step ", adapter_.train.step, ": the validation loss is ", non_finite_text(val),
             " ", diverged_cause(adapter_), "; ",
             kept_text(out_path, *saved_step, *saved_val));
    }
    // A finite loss with an infinite moment: a gradient too large to square in float (a huge
    // alpha with the clip off or as large).
    if (const char* part = adapter_.non_finite_part()) {
        fail("training diverged at step ", adapter_.train.step, ": the adapter's ", part, " holds non-finite values ",
             diverged_cause(adapter_), "; ", kept_text(out_path, *saved_step, *saved_val));
    }
    // A checkpoint that cannot be written (a full disk) says what out_path still holds, as a
    // divergence does (it named only the temporary file).
    try {
        adapter_.save(out_path);
    } catch (const Error& e) {
        fail(e.what(), "; ", kept_text(out_path, *saved_step, *saved_val));
    }
    *saved_step = static_cast<int64_t>(adapter_.train.step);
    *saved_val = val;
    return val;
}

int64_t FinetuneRun::run(const std::string& out_path, const std::function<void(const FinetuneProgress&)>& on_step,
                         const std::atomic<bool>* stop) {
    double train_secs = 0.0;  // steps only: evaluation and saving are not training time
    int64_t done = 0;
    output_target(out_path);  // an unwritable path fails now, before any work; nothing is written yet
    int64_t saved_step = -1;  // none written by this run
    double saved_val = std::nan("");
    bool saved_last = false;  // a stop before the first checkpoint writes the adapter as it is
    int skipped_in_a_row = 0;
    while (static_cast<int64_t>(adapter_.train.step) < opts_.steps && !(stop && stop->load())) {
        FinetuneProgress p;
        const auto t0 = std::chrono::steady_clock::now();
        sampler_->fill(adapter_.train.step, x_.data(), y_.data());
        p.result = trainer_->step(x_.data(), y_.data());
        train_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++adapter_.train.step;
        ++done;
        p.step = static_cast<int64_t>(adapter_.train.step);
        p.steps = opts_.steps;
        p.tokens_per_s = static_cast<double>(done) * opts_.batch * opts_.seq / std::max(train_secs, 1e-9);
        skipped_in_a_row = p.result.skipped ? skipped_in_a_row + 1 : 0;
        if (p.step % opts_.eval_every == 0 || p.step == opts_.steps) {
            p.val_loss = save_if_finite(out_path, &saved_step, &saved_val);
            p.saved = true;
        }
        saved_last = p.saved;
        if (on_step) on_step(p);
        if (skipped_in_a_row >= kMaxSkippedInARow) {
            fail("training diverged: steps ", p.step - skipped_in_a_row + 1, " to ", p.step, " each gave a non-finite loss or gradient ",
                 diverged_cause(adapter_), "; ", kept_text(out_path, saved_step, saved_val));
        }
    }
    if (!saved_last) save_if_finite(out_path, &saved_step, &saved_val);
    return done;
}

}  // namespace ember

#include "runtime/adapter.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <random>

#include "adapter_generated.h"
#include "kernels/cpu/adamw.h"
#include "runtime/error.h"
#include "runtime/paths.h"
#include "runtime/utf8.h"

namespace ember {

namespace {

constexpr uint32_t kAdapterVersion = 2;      // written; values_xxh64 required
constexpr uint32_t kAdapterVersionOld = 1;   // read: no values_xxh64
constexpr size_t kMaxAdapterBytes = size_t(1) << 30;

std::string hex64(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

void check_finite(const flatbuffers::Vector<float>* v, const std::string& what, const char* field) {
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
        if (!std::isfinite(v->Get(i))) fail(what, ": ", field, " element ", i, " is ", v->Get(i), "; adapter values must be finite");
    }
}

// values_xxh64 (schema/adapter.fbs) of an adapter as read: the values in a fixed order, so
// that a flipped bit in any of them (a value still finite, say, but 2^64 times too large) is
// caught. save() hashes the buffer it built, load() the one it read: one list of fields.
uint64_t values_xxh64(const fba::Adapter& a) {
    std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> st(XXH64_createState(), XXH64_freeState);
    if (!st) throw std::bad_alloc();
    XXH64_reset(st.get(), 0);
    auto add = [&](auto v) { XXH64_update(st.get(), &v, sizeof v); };
    auto add_floats = [&](const flatbuffers::Vector<float>* v) {
        if (v) XXH64_update(st.get(), v->data(), v->size() * sizeof(float));
    };
    add(a.format_version()), add(a.rank()), add(a.alpha()), add(a.base_xxh64()), add(a.n_layer()), add(a.n_embd()), add(a.ffn_hidden());
    add_floats(a.params());
    if (const fba::TrainState* t = a.train()) {
        add(uint8_t{1}), add(t->step()), add(t->adam_step()), add(t->seed()), add(t->batch()), add(t->seq()), add(t->lr());
        add(t->weight_decay()), add(t->beta1()), add(t->beta2()), add(t->eps()), add(t->clip()), add(t->text_xxh64());
        add_floats(t->adam_m());
        add_floats(t->adam_v());
    }
    return XXH64_digest(st.get());
}

}  // namespace

const char* lora_target_name(LoraTarget t) {
    switch (t) {
    case LoraTarget::Qkv: return "qkv";
    case LoraTarget::Proj: return "proj";
    case LoraTarget::Fc: return "fc";
    case LoraTarget::Fc2: return "fc2";
    }
    return "?";
}

LoraAdapter::LoraAdapter(const Model& model, int rank, float alpha) {
    const ModelConfig& c = model.config();
    if (rank < 1 || rank > c.n_embd) fail("LoRA rank ", rank, " is outside [1, n_embd = ", c.n_embd, "]");
    if (!std::isfinite(alpha) || alpha <= 0.0f) fail("LoRA alpha ", alpha, " must be finite and > 0");
    rank_ = rank;
    alpha_ = alpha;
    base_checksum_ = model.checksum();
    n_layer_ = c.n_layer;
    n_embd_ = c.n_embd;
    ffn_hidden_ = c.ffn_hidden;
    size_t off = 0;
    for (int l = 0; l < n_layer_; ++l) {
        for (int t = 0; t < kLoraTargets; ++t) {
            offsets_.push_back(off);
            const auto tt = static_cast<LoraTarget>(t);
            off += static_cast<size_t>(rank_) * (in_features(tt) + out_features(tt));
        }
    }
    params_.assign(off, 0.0f);
}

namespace {

// W [out, in] of target t in a model of width C and FFN width F.
int target_in(LoraTarget t, int C, int F) { return t == LoraTarget::Fc2 ? F : C; }
int target_out(LoraTarget t, int C, int F) {
    switch (t) {
    case LoraTarget::Qkv: return 3 * C;
    case LoraTarget::Fc: return F;
    default: return C;
    }
}

}  // namespace

int LoraAdapter::in_features(LoraTarget t) const { return target_in(t, n_embd_, ffn_hidden_); }
int LoraAdapter::out_features(LoraTarget t) const { return target_out(t, n_embd_, ffn_hidden_); }

size_t LoraAdapter::param_count(const ModelConfig& c, int rank) {
    size_t per_layer = 0;
    for (int t = 0; t < kLoraTargets; ++t) {
        const auto tt = static_cast<LoraTarget>(t);
        per_layer += static_cast<size_t>(target_in(tt, c.n_embd, c.ffn_hidden)) + target_out(tt, c.n_embd, c.ffn_hidden);
    }
    return static_cast<size_t>(rank) * static_cast<size_t>(c.n_layer) * per_layer;
}

void LoraAdapter::init(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::fill(params_.begin(), params_.end(), 0.0f);
    for (int l = 0; l < n_layer_; ++l) {
        for (int t = 0; t < kLoraTargets; ++t) {
            const auto tt = static_cast<LoraTarget>(t);
            const double bound = 1.0 / std::sqrt(static_cast<double>(in_features(tt)));
            float* a = params_.data() + offset_a(l, tt);
            const size_t n = static_cast<size_t>(rank_) * in_features(tt);
            for (size_t i = 0; i < n; ++i) {
                // uniform in [-bound, bound) from the top 53 bits
                const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
                a[i] = static_cast<float>((2.0 * u - 1.0) * bound);
            }
        }
    }
}

const char* LoraAdapter::non_finite_part() const {
    auto all_finite = [](const std::vector<float>& v) {
        return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
    };
    if (!all_finite(params_)) return "weights";
    if (!all_finite(adam_m)) return "AdamW first moment";
    if (!all_finite(adam_v)) return "AdamW second moment";
    return nullptr;
}

void LoraAdapter::save(const std::string& path) const {
    if (const char* part = non_finite_part()) {
        fail(printable(path, 200), ": the adapter's ", part, " holds non-finite values; not written");
    }
    flatbuffers::FlatBufferBuilder b(params_.size() * 4 * 3 + 4096);
    b.ForceDefaults(true);
    flatbuffers::Offset<fba::TrainState> ts;
    if (train.present) {
        if (adam_m.size() != params_.size() || adam_v.size() != params_.size()) fail(printable(path, 200), ": AdamW moments of ", adam_m.size(), " and ", adam_v.size(), " values for an adapter of ", params_.size(), "; not written");
        const auto m = b.CreateVector(adam_m);
        const auto v = b.CreateVector(adam_v);
        ts = fba::CreateTrainState(b, train.step, train.adam_step, train.seed, static_cast<uint32_t>(train.batch),
                                   static_cast<uint32_t>(train.seq), train.lr, train.weight_decay, train.beta1, train.beta2,
                                   train.eps, train.clip, train.text_xxh64, m, v);
    }
    const auto pv = b.CreateVector(params_);
    // values_xxh64 is written as 0 (present: ForceDefaults), then set to the hash of the built buffer.
    const auto root = fba::CreateAdapter(b, kAdapterVersion, static_cast<uint32_t>(rank_), alpha_, base_checksum_,
                                         static_cast<uint32_t>(n_layer_), static_cast<uint32_t>(n_embd_),
                                         static_cast<uint32_t>(ffn_hidden_), pv, ts, 0);
    fba::FinishAdapterBuffer(b, root);
    {
        // The generated table derives privately from flatbuffers::Table, at the same address.
        auto* table = reinterpret_cast<flatbuffers::Table*>(flatbuffers::GetMutableRoot<fba::Adapter>(b.GetBufferPointer()));
        const uint64_t h = values_xxh64(*fba::GetAdapter(b.GetBufferPointer()));
        if (!table->SetField<uint64_t>(fba::Adapter::VT_VALUES_XXH64, h, 0)) fail("adapter save: values_xxh64 missing from the built buffer");
    }

    const std::string target = output_target(path);  // through a link, into its file
    const std::string tmp = target + ".tmp-" + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail(printable(path, 200), ": cannot create its temporary file ", printable(tmp, 200), ": ", std::strerror(errno));
    try {
        if (!write_fully(fd, b.GetBufferPointer(), b.GetSize())) fail(printable(tmp, 200), ": write failed: ", std::strerror(errno));
        if (::fsync(fd) != 0) fail(printable(tmp, 200), ": fsync failed: ", std::strerror(errno));
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        ::unlink(tmp.c_str());
        fail(printable(tmp, 200), ": close failed: ", std::strerror(errno));
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(printable(path, 200), ": cannot rename the finished adapter into place: ", std::strerror(err));
    }
}

std::unique_ptr<LoraAdapter> LoraAdapter::load(const std::string& path, const Model& model) {
    const std::string what = printable(path, 200);
    const std::string bytes = read_text_file(path, kMaxAdapterBytes, "an adapter");
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    if (bytes.size() < 8 || !fba::AdapterBufferHasIdentifier(data)) {
        if (bytes.size() >= 12 && std::memcmp(bytes.data() + 8, "EMBR", 4) == 0) fail(what, ": is a model (.ember), not an adapter");
        fail(what, ": not an ember adapter (identifier EMBA missing)");
    }
    flatbuffers::Verifier verifier(data, bytes.size());
    if (!fba::VerifyAdapterBuffer(verifier)) fail(what, ": adapter fails the FlatBuffers verifier (corrupted or truncated)");
    const fba::Adapter* a = fba::GetAdapter(data);
    if (a->format_version() != kAdapterVersion && a->format_version() != kAdapterVersionOld) {
        fail(what, ": adapter format_version ", a->format_version(), " is not supported (this build reads ", kAdapterVersionOld, " and ",
             kAdapterVersion, ")");
    }
    if (a->format_version() == kAdapterVersion) {
        const uint64_t h = values_xxh64(*a);
        if (h != a->values_xxh64()) {
            fail(what, ": adapter checksum mismatch (values_xxh64 ", hex64(a->values_xxh64()), ", values hash to ", hex64(h),
                 "): the file is corrupted");
        }
    }
    const ModelConfig& c = model.config();
    if (a->base_xxh64() != model.checksum()) {
        fail(what, ": adapter was trained for another model (base xxh64 ", hex64(a->base_xxh64()), "; ", printable(model.path(), 200),
             " has ", hex64(model.checksum()), ")");
    }
    if (static_cast<int>(a->n_layer()) != c.n_layer || static_cast<int>(a->n_embd()) != c.n_embd ||
        static_cast<int>(a->ffn_hidden()) != c.ffn_hidden) {
        fail(what, ": adapter shapes (n_layer ", a->n_layer(), ", n_embd ", a->n_embd(), ", ffn_hidden ", a->ffn_hidden(),
             ") do not match the model (", c.n_layer, ", ", c.n_embd, ", ", c.ffn_hidden, ")");
    }
    if (a->rank() < 1 || a->rank() > static_cast<uint32_t>(c.n_embd)) fail(what, ": adapter rank ", a->rank(), " is outside [1, n_embd = ", c.n_embd, "]");
    // Sizes are compared before anything is allocated: a 200-byte file claiming rank = n_embd
    // used to zero-fill the whole adapter (425 MB for GPT-2 small) first.
    const size_t need = param_count(c, static_cast<int>(a->rank()));
    if (a->params()->size() != need) fail(what, ": adapter holds ", a->params()->size(), " values; rank ", a->rank(), " needs ", need);
    if (const fba::TrainState* t = a->train(); t && (!t->adam_m() || !t->adam_v() || t->adam_m()->size() != need || t->adam_v()->size() != need)) {
        fail(what, ": training state's AdamW moments are missing or not sized like the adapter (", need, ")");
    }
    if (!std::isfinite(a->alpha()) || a->alpha() <= 0.0f) fail(what, ": adapter alpha ", a->alpha(), " must be finite and > 0");
    auto out = std::make_unique<LoraAdapter>(model, static_cast<int>(a->rank()), a->alpha());
    check_finite(a->params(), what, "params");
    std::memcpy(out->params(), a->params()->data(), out->size() * sizeof(float));
    if (const fba::TrainState* t = a->train()) {
        LoraTrainState& s = out->train;
        s.present = true;
        s.step = t->step();
        s.adam_step = t->adam_step();
        s.seed = t->seed();
        s.batch = static_cast<int>(std::min<uint32_t>(t->batch(), 1u << 20));
        s.seq = static_cast<int>(std::min<uint32_t>(t->seq(), 1u << 20));
        s.lr = t->lr();
        s.weight_decay = t->weight_decay();
        s.beta1 = t->beta1();
        s.beta2 = t->beta2();
        s.eps = t->eps();
        s.clip = t->clip();
        s.text_xxh64 = t->text_xxh64();
        // A resumed run takes these from the file: what the Trainer and ember finetune refuse
        // is refused here too, naming the file (lr 0 trained nothing; eps 0 divided 0 by 0 and
        // was reported as a divergence blamed on lr; batch 0 said "batch 0 is outside [1, 4096]").
        if (!std::isfinite(s.clip) || s.clip < 0.0f) fail(what, ": training state clip ", s.clip, " must be finite and >= 0 (0 = off)");
        kernels::AdamWParams adamw;
        adamw.lr = s.lr, adamw.beta1 = s.beta1, adamw.beta2 = s.beta2, adamw.eps = s.eps, adamw.weight_decay = s.weight_decay;
        if (const std::string bad = kernels::adamw_params_problem(adamw); !bad.empty()) fail(what, ": training state ", bad);
        if (t->batch() < 1 || t->batch() > static_cast<uint32_t>(kMaxTrainBatch) || t->seq() < 1 || t->seq() > static_cast<uint32_t>(c.block_size)) {
            fail(what, ": training state batch ", t->batch(), " x seq ", t->seq(), " is outside [1, ", kMaxTrainBatch, "] x [1, block_size = ",
                 c.block_size, "]");
        }
        if (s.step > (uint64_t{1} << 53) || s.adam_step > (uint64_t{1} << 53)) {
            fail(what, ": training state step ", s.step, " or adam_step ", s.adam_step, " is past 2^53");
        }
        // Each step takes at most one AdamW step (none when its gradient is not finite).
        if (s.adam_step > s.step) fail(what, ": training state adam_step ", s.adam_step, " is past step ", s.step, " (a step takes at most one AdamW step)");
        check_finite(t->adam_m(), what, "adam_m");
        check_finite(t->adam_v(), what, "adam_v");
        out->adam_m.assign(t->adam_m()->begin(), t->adam_m()->end());
        out->adam_v.assign(t->adam_v()->begin(), t->adam_v()->end());
        for (float v : out->adam_v) {
            if (v < 0.0f) fail(what, ": adam_v holds a negative second moment");
        }
    }
    return out;
}

}  // namespace ember

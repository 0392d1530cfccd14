#include "runtime/finetune_options.h"

#include <sstream>

#include "runtime/adapter.h"
#include "runtime/gen_options.h"

namespace ember {

namespace {

// A float option's value: parse_float's checks, then > 0 (positive) or >= 0.
std::string parse_scale(std::string_view v, const std::string& name, bool positive, std::optional<float>& out) {
    float x = 0.0f;
    if (std::string bad = parse_float(v, name, x); !bad.empty()) return bad;
    if (positive ? !(x > 0.0f) : !(x >= 0.0f)) return name + " " + std::string(v) + (positive ? " must be > 0" : " must be >= 0");
    out = x;
    return "";
}

template <class Int>
std::string parse_range(std::string_view v, const std::string& name, long long lo, long long hi, std::optional<Int>& out) {
    long long x = 0;
    if (std::string bad = parse_int(v, name, lo, hi, x); !bad.empty()) return bad;
    out = static_cast<Int>(x);
    return "";
}

}  // namespace

void FinetuneOverrides::apply(FinetuneOptions& o) const {
    if (steps) o.steps = *steps;
    if (eval_every) o.eval_every = *eval_every;
    if (rank) o.rank = *rank;
    if (alpha) o.alpha = *alpha;
    if (batch) o.batch = *batch;
    if (seq) o.seq = *seq;
    if (seed) o.seed = *seed;
    if (lr) o.lr = *lr;
    if (weight_decay) o.weight_decay = *weight_decay;
    if (clip) o.clip = *clip;
}

bool FinetuneOverrides::settings_given() const { return rank || alpha || batch || seq || seed || lr || weight_decay || clip; }

const FinetuneOptionSpec* find_finetune_option(std::string_view name) {
    for (const FinetuneOptionSpec& s : kFinetuneOptions) {
        if (name == s.name) return &s;
    }
    return nullptr;
}

std::vector<std::string> finetune_option_names() {
    std::vector<std::string> names;
    for (const FinetuneOptionSpec& s : kFinetuneOptions) names.emplace_back(s.name);
    return names;
}

std::string finetune_settings_text() {
    std::vector<std::string> names;
    for (const FinetuneOptionSpec& s : kFinetuneOptions) {
        if (s.setting) names.emplace_back(s.name + 2);
    }
    std::string text;
    for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return text;
}

std::string finetune_option_default(FinetuneOption id) {
    const FinetuneOptions d;
    std::ostringstream s;
    switch (id) {
    case FinetuneOption::Steps: s << d.steps; break;
    case FinetuneOption::EvalEvery: s << d.eval_every; break;
    case FinetuneOption::Rank: s << d.rank; break;
    case FinetuneOption::Alpha: s << d.alpha; break;
    case FinetuneOption::Batch: s << d.batch; break;
    case FinetuneOption::Seq: s << d.seq; break;
    case FinetuneOption::Seed: s << d.seed; break;
    case FinetuneOption::Lr: s << d.lr; break;
    case FinetuneOption::WeightDecay: s << d.weight_decay; break;
    case FinetuneOption::Clip: s << d.clip; break;
    }
    return s.str();
}

std::string parse_finetune_option(FinetuneOption id, std::string_view v, FinetuneOverrides& o) {
    const FinetuneOptionSpec* spec = nullptr;
    for (const FinetuneOptionSpec& s : kFinetuneOptions) {
        if (s.id == id) spec = &s;
    }
    const std::string name = spec ? spec->name : "?";
    switch (id) {
    case FinetuneOption::Steps: return parse_range(v, name, 0, 1LL << 30, o.steps);
    case FinetuneOption::EvalEvery: return parse_range(v, name, 1, 1LL << 30, o.eval_every);
    case FinetuneOption::Rank: return parse_range(v, name, 1, 1 << 16, o.rank);
    case FinetuneOption::Alpha: return parse_scale(v, name, true, o.alpha);
    case FinetuneOption::Batch: return parse_range(v, name, 1, kMaxTrainBatch, o.batch);
    case FinetuneOption::Seq: return parse_range(v, name, 0, 1 << 20, o.seq);
    case FinetuneOption::Seed: {
        uint64_t x = 0;
        if (std::string bad = parse_u64(v, name, x); !bad.empty()) return bad;
        o.seed = x;
        return "";
    }
    case FinetuneOption::Lr: return parse_scale(v, name, true, o.lr);
    case FinetuneOption::WeightDecay: return parse_scale(v, name, false, o.weight_decay);
    case FinetuneOption::Clip: return parse_scale(v, name, false, o.clip);
    }
    return name + ": unknown option";
}

}  // namespace ember

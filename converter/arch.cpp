#include "converter/arch.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include "runtime/error.h"
#include "runtime/tensors.h"
#include "runtime/utf8.h"

namespace ember::convert {

ArchChoice parse_arch(const std::string& s) {
    if (s == "auto") return ArchChoice::Auto;
    if (s == "gptpy") return ArchChoice::GptPy;
    if (s == "nanogpt") return ArchChoice::NanoGPT;
    if (s == "hf-gpt2") return ArchChoice::HfGpt2;
    fail("--arch '", s, "' is unknown (auto, gptpy, nanogpt or hf-gpt2)");
}

std::pair<std::string, std::string> parse_rename(const std::string& s) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) fail("--rename '", printable(s), "': expected OLD=NEW with OLD not empty (a literal substring of the keys)");
    return {s.substr(0, eq), s.substr(eq + 1)};
}

namespace {

using TensorMap = std::map<std::string, SourceTensor>;

// Mapping failures that to_canonical completes with what it knows: the keys it found (a key
// missing or left over) or the layout it assumed and why (a shape that does not fit).
struct KeyMissing : Error {
    using Error::Error;
};
struct ShapeMismatch : Error {
    using Error::Error;
};
template <class E, class... Parts>
[[noreturn]] void fail_as(const Parts&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    throw E(os.str());
}

// A few of the keys, layer and head numbers folded to N, deduplicated, in key order:
// "blocks.N.ln1.weight, ..., (12 distinct)".
std::string found_keys(const TensorMap& t, size_t max_listed = 6) {
    std::vector<std::string> folded;
    std::set<std::string> seen;
    for (const auto& kv : t) {
        std::string f;
        for (size_t i = 0; i < kv.first.size(); ++i) {
            const bool digit = kv.first[i] >= '0' && kv.first[i] <= '9';
            if (!digit) f += kv.first[i];
            else if (i == 0 || kv.first[i - 1] < '0' || kv.first[i - 1] > '9') f += 'N';
        }
        if (seen.insert(f).second) folded.push_back(printable(f, 80));
    }
    std::string r;
    for (size_t i = 0; i < folded.size() && i < max_listed; ++i) r += (i ? ", " : "") + folded[i];
    if (folded.size() > max_listed) r += ", ... (" + std::to_string(folded.size()) + " distinct)";
    return r;
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// Every key through the renames, in order (each replaces every occurrence of OLD). A rename
// that changes no key, one that leaves a key empty, or two keys renamed to one, is an error.
// Returns the keys changed.
int apply_renames(TensorMap& t, const std::vector<std::pair<std::string, std::string>>& renames, const std::string& what) {
    if (renames.empty()) return 0;
    std::vector<int> used(renames.size(), 0);
    TensorMap out;
    int changed = 0;
    for (auto& kv : t) {
        std::string k = kv.first;
        for (size_t i = 0; i < renames.size(); ++i) {
            const auto& [from, to] = renames[i];
            for (size_t at = k.find(from); at != std::string::npos; at = k.find(from, at + to.size())) {
                k.replace(at, from.size(), to);
                ++used[i];
            }
        }
        if (k.empty()) fail(what, ": --rename makes the key '", printable(kv.first), "' empty");
        changed += k != kv.first;
        const std::string key = k;
        if (!out.emplace(std::move(k), std::move(kv.second)).second) {
            fail(what, ": --rename maps two keys to '", printable(key), "' (one of them '", printable(kv.first), "')");
        }
    }
    for (size_t i = 0; i < renames.size(); ++i) {
        if (!used[i]) fail(what, ": --rename ", printable(renames[i].first), "=", printable(renames[i].second), " matches no key");
    }
    t.swap(out);
    return changed;
}

// n_head from the source (model_args, config.json, the gpt.py heads) against --n-head.
int agreed_n_head(int source, int given, const char* source_name, const std::string& what) {
    if (given > 0 && source > 0 && given != source) fail(what, ": --n-head ", given, " but ", source_name, " gives n_head ", source);
    return source > 0 ? source : given;
}

void strip_prefixes(TensorMap& t, std::string& stripped) {
    for (bool changed = true; changed && !t.empty();) {
        changed = false;
        for (const char* prefix : {"_orig_mod.", "module."}) {
            const std::string p = prefix;
            bool all = true;
            for (const auto& kv : t) all = all && kv.first.compare(0, p.size(), p) == 0;
            if (!all) continue;
            TensorMap out;
            for (auto& kv : t) out.emplace(kv.first.substr(p.size()), std::move(kv.second));
            t.swap(out);
            stripped += p;
            changed = true;
        }
    }
}

// Whether a and b hold the same values (each read from its file when lazy).
bool same_values(const SourceTensor& a, const SourceTensor& b) {
    if (!a.read && !b.read) return a.values == b.values;
    return values_of(a) == values_of(b);
}

// Takes a tensor out of the map, checking its shape. Missing or misshapen: error.
struct Taker {
    TensorMap& t;
    const std::string& what;
    CanonicalModel& out;

    SourceTensor take(const std::string& key, const std::vector<int64_t>& shape) {
        auto it = t.find(key);
        if (it == t.end()) fail_as<KeyMissing>(what, ": tensor '", key, "' is missing");
        SourceTensor s = std::move(it->second);
        t.erase(it);
        if (s.shape != shape) fail_as<ShapeMismatch>(what, ": tensor '", key, "' has shape ", shape_str(s.shape), ", expected ", shape_str(shape));
        return s;
    }
    bool has(const std::string& key) const { return t.count(key) != 0; }
    void put(const std::string& name, SourceTensor&& s, const std::string& source) {
        out.tensors.push_back({name, s.shape, std::move(s.values), source, s.dtype, std::move(s.read)});
    }
    // The canonical tensor e from `key`, shaped as e; an absent optional one is left out.
    void move(const std::string& key, const CanonicalEntry& e) {
        if (!e.required && !has(key)) return;
        put(e.name, take(key, e.shape), key);
    }
};

// A checkpoint's key for a canonical tensor: `canonical` is the suffix of runtime/tensors.h
// (the key of a per-layer tensor follows the layer's prefix, e.g. "blocks.N.").
struct SourceKey {
    const char* canonical;
    const char* key;
};

// gpt.py; per layer under "blocks.N.". qkv.weight is stacked from the heads; no qkv.bias.
constexpr SourceKey kGptPyKeys[] = {
    {"wte", "token_embedding_table.weight"}, {"wpe", "position_embedding_table.weight"},
    {"ln_1.weight", "ln1.weight"}, {"ln_1.bias", "ln1.bias"},
    {"proj.weight", "sa.proj.weight"}, {"proj.bias", "sa.proj.bias"},
    {"ln_2.weight", "ln2.weight"}, {"ln_2.bias", "ln2.bias"},
    {"fc.weight", "ffwd.net.0.weight"}, {"fc.bias", "ffwd.net.0.bias"},
    {"fc2.weight", "ffwd.net.2.weight"}, {"fc2.bias", "ffwd.net.2.bias"},
    {"ln_f.weight", "ln_f.weight"}, {"ln_f.bias", "ln_f.bias"},
    {"lm_head.weight", "lm_head.weight"}, {"lm_head.bias", "lm_head.bias"},
};

// nanoGPT and Hugging Face GPT-2 layers, under "[transformer.]h.N.".
constexpr SourceKey kGpt2LayerKeys[] = {
    {"ln_1.weight", "ln_1.weight"}, {"ln_1.bias", "ln_1.bias"},
    {"qkv.weight", "attn.c_attn.weight"}, {"qkv.bias", "attn.c_attn.bias"},
    {"proj.weight", "attn.c_proj.weight"}, {"proj.bias", "attn.c_proj.bias"},
    {"ln_2.weight", "ln_2.weight"}, {"ln_2.bias", "ln_2.bias"},
    {"fc.weight", "mlp.c_fc.weight"}, {"fc.bias", "mlp.c_fc.bias"},
    {"fc2.weight", "mlp.c_proj.weight"}, {"fc2.bias", "mlp.c_proj.bias"},
};

// The global tensors besides wte and lm_head.weight (those two are taken first, to tell tied
// from untied): nanoGPT's full keys; Hugging Face's after its prefix, and it has no lm_head.bias.
constexpr SourceKey kNanoGptKeys[] = {
    {"wpe", "transformer.wpe.weight"}, {"ln_f.weight", "transformer.ln_f.weight"},
    {"ln_f.bias", "transformer.ln_f.bias"}, {"lm_head.bias", "lm_head.bias"},
};
constexpr SourceKey kHfGpt2Keys[] = {
    {"wpe", "wpe.weight"}, {"ln_f.weight", "ln_f.weight"}, {"ln_f.bias", "ln_f.bias"},
};

// prefix + the key of e's suffix in `keys`; "" when the architecture has no such tensor.
template <size_t N>
std::string key_of(const SourceKey (&keys)[N], const CanonicalEntry& e, const std::string& prefix) {
    for (const SourceKey& k : keys) {
        if (std::strcmp(k.canonical, e.spec->suffix) == 0) return prefix + k.key;
    }
    return "";
}

bool is(const CanonicalEntry& e, const char* suffix) { return std::strcmp(e.spec->suffix, suffix) == 0; }

// The number of distinct N among keys PREFIX + N + REST (N decimal digits; REST starts with
// `rest`, or equals it when `exact`), when they run 0..count-1; -i-1 when index i is missing,
// -1 for an N of more than 4 digits (no such model). Plain string scanning: std::regex
// recursed once per character and overflowed the stack on a key of a million digits.
int count_indexed(const TensorMap& t, const std::string& prefix, const std::string& rest, bool exact = false) {
    std::set<int> seen;
    for (const auto& kv : t) {
        const std::string& k = kv.first;
        if (k.compare(0, prefix.size(), prefix) != 0) continue;
        size_t end = prefix.size();
        while (end < k.size() && k[end] >= '0' && k[end] <= '9') ++end;
        const size_t digits = end - prefix.size();
        if (digits == 0) continue;
        if (exact ? k.compare(end, std::string::npos, rest) != 0 : k.compare(end, rest.size(), rest) != 0) continue;
        if (digits > 4) return -1;
        seen.insert(std::stoi(k.substr(prefix.size(), digits)));
    }
    for (int i = 0; i < static_cast<int>(seen.size()); ++i) {
        if (!seen.count(i)) return -i - 1;  // a gap: index i missing
    }
    return static_cast<int>(seen.size());
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

const std::vector<int64_t>& shape_of(const TensorMap& t, const std::string& key, const std::string& what, size_t rank) {
    auto it = t.find(key);
    if (it == t.end()) fail_as<KeyMissing>(what, ": tensor '", key, "' is missing");
    if (it->second.shape.size() != rank) fail_as<ShapeMismatch>(what, ": tensor '", key, "' has shape ", shape_str(it->second.shape), ", expected rank ", rank);
    return it->second.shape;
}

void check_config(const ModelConfig& c, const std::string& what) {
    if (c.n_head <= 0 || c.n_embd % c.n_head != 0) {
        fail(what, ": n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head);
    }
}

void finish(TensorMap& t, CanonicalModel& out, const std::string& what) {
    // Drop the buffers that carry no weights; anything else left over is an error.
    auto is_buffer = [](const std::string& k) {
        for (const char* b : {"tril", "attn.bias", "attn.masked_bias"}) {
            if (k == b || ends_with(k, std::string(".") + b)) return true;
        }
        return false;
    };
    for (auto it = t.begin(); it != t.end();) {
        if (is_buffer(it->first)) {
            out.dropped.push_back(it->first);
            it = t.erase(it);
        } else {
            ++it;
        }
    }
    if (!t.empty()) fail_as<KeyMissing>(what, ": unexpected tensor '", printable(t.begin()->first), "' for a ", arch_name(out.config.arch), " checkpoint");
    // The mapping produced exactly the canonical set, in file order (runtime/tensors.h).
    size_t i = 0;
    for (const CanonicalEntry& e : canonical_tensors(out.config)) {
        const bool here = i < out.tensors.size() && out.tensors[i].name == e.name;
        if (!here && e.required) fail_as<KeyMissing>(what, ": the ", arch_name(out.config.arch), " mapping produced no tensor '", e.name, "'");
        if (!here) continue;
        if (out.tensors[i].shape != e.shape) {
            fail_as<ShapeMismatch>(what, ": tensor '", e.name, "' maps to shape ", shape_str(out.tensors[i].shape), ", expected ", shape_str(e.shape));
        }
        ++i;
    }
    if (i != out.tensors.size()) fail(what, ": the ", arch_name(out.config.arch), " mapping produced tensor '", out.tensors[i].name, "' out of the canonical order");
}

CanonicalModel map_gptpy(TensorMap& t, const std::string& what, const ArchOverrides& over, CanonicalModel out) {
    ModelConfig& c = out.config;
    c.arch = Arch::GptPy;
    c.activation = kernels::ActivationKind::ReLU;
    const auto& wte = shape_of(t, "token_embedding_table.weight", what, 2);
    c.vocab_size = static_cast<int>(wte[0]);
    c.n_embd = static_cast<int>(wte[1]);
    c.block_size = static_cast<int>(shape_of(t, "position_embedding_table.weight", what, 2)[0]);
    c.n_layer = count_indexed(t, "blocks.", ".");
    if (c.n_layer <= 0) fail_as<KeyMissing>(what, ": no transformer blocks (blocks.N.*) found", c.n_layer < 0 ? " (a gap in the numbering, or an index over 9999)" : "");
    c.n_head = count_indexed(t, "blocks.0.sa.heads.", ".query.weight", true);
    if (c.n_head <= 0) fail_as<KeyMissing>(what, ": blocks.0.sa.heads.N.query.weight not found");
    c.n_head = agreed_n_head(c.n_head, over.n_head, "the count of blocks.0.sa.heads.N", what);
    const int64_t hs = shape_of(t, "blocks.0.sa.heads.0.query.weight", what, 2)[0];
    // hs is bounded first: a pickle may give a zero-element [2^62, 0] tensor, and hs * n_head overflowed.
    if (hs <= 0 || hs > c.n_embd || hs * c.n_head != c.n_embd) fail(what, ": n_head ", c.n_head, " x head_size ", hs, " != n_embd ", c.n_embd);
    check_config(c, what);
    c.ffn_hidden = static_cast<int>(shape_of(t, "blocks.0.ffwd.net.0.weight", what, 2)[0]);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(hs));
    c.tied_lm_head = false;
    const int64_t C = c.n_embd;

    Taker tk{t, what, out};
    for (const CanonicalEntry& e : canonical_tensors(c)) {
        const std::string b = e.layer < 0 ? "" : "blocks." + std::to_string(e.layer) + ".";
        if (is(e, "qkv.weight")) {
            // qkv [3C, C]: all heads' query rows, then key rows, then value rows.
            SourceTensor qkv;
            qkv.shape = e.shape;
            auto parts = std::make_shared<std::vector<SourceTensor>>();
            bool lazy = false;
            for (const char* part : {"query", "key", "value"}) {
                for (int h = 0; h < c.n_head; ++h) {
                    parts->push_back(tk.take(b + "sa.heads." + std::to_string(h) + "." + part + ".weight", {hs, C}));
                    if (parts->back().dtype != SourceDType::F32) qkv.dtype = parts->back().dtype;
                    lazy = lazy || parts->back().read;
                }
            }
            const size_t n = static_cast<size_t>(3 * C * C);
            auto stack = [parts, n] {
                std::vector<float> v;
                v.reserve(n);
                for (const SourceTensor& s : *parts) {
                    const std::vector<float> x = values_of(s);
                    v.insert(v.end(), x.begin(), x.end());
                }
                return v;
            };
            if (lazy) qkv.read = stack;
            else qkv.values = stack();
            tk.put(e.name, std::move(qkv), b + "sa.heads.*.{query,key,value}.weight");
        } else if (const std::string key = key_of(kGptPyKeys, e, b); !key.empty()) {
            tk.move(key, e);
        }
    }
    finish(t, out, what);
    return out;
}

CanonicalModel map_nanogpt(TensorMap& t, const std::string& model_args, const std::string& what, const ArchOverrides& over,
                           CanonicalModel out) {
    ModelConfig& c = out.config;
    c.arch = Arch::NanoGPT;
    c.activation = kernels::ActivationKind::GeluErf;
    const std::string p = "transformer.";
    const auto& wte = shape_of(t, p + "wte.weight", what, 2);
    c.vocab_size = static_cast<int>(wte[0]);
    c.n_embd = static_cast<int>(wte[1]);
    c.block_size = static_cast<int>(shape_of(t, p + "wpe.weight", what, 2)[0]);
    c.n_layer = count_indexed(t, "transformer.h.", ".");
    if (c.n_layer <= 0) fail_as<KeyMissing>(what, ": no transformer blocks (transformer.h.N.*) found");
    if (model_args.empty() && over.n_head <= 0) fail(what, ": nanoGPT checkpoint without model_args: n_head cannot be read from the weights (give --n-head)");
    nlohmann::json args = nlohmann::json::object();
    try {
        if (!model_args.empty()) args = nlohmann::json::parse(model_args);
    } catch (const std::exception& e) {
        fail(what, ": model_args is not readable: ", e.what());
    }
    if (!model_args.empty() && (!args.contains("n_head") || !args["n_head"].is_number_integer())) fail(what, ": model_args has no integer n_head");
    // A model_args integer, whole: 1 .. 2^31 - 1 (get<int>() would wrap 2^32 + 4 to 4).
    auto arg = [&](const char* k) {
        const nlohmann::json& v = args[k];
        const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= INT32_MAX
                                                 : v.get<int64_t>() >= 1 && v.get<int64_t>() <= INT32_MAX;
        if (!fits) fail(what, ": model_args.", k, " = ", v.dump(), " is not an integer in 1..", INT32_MAX);
        return static_cast<int>(v.get<int64_t>());
    };
    c.n_head = agreed_n_head(model_args.empty() ? 0 : arg("n_head"), over.n_head, "model_args", what);
    for (const char* k : {"n_layer", "n_embd", "block_size", "vocab_size"}) {
        if (args.contains(k) && args[k].is_number_integer()) {
            const int v = arg(k);
            const std::string key = k;
            const int have = key == "n_layer" ? c.n_layer : key == "n_embd" ? c.n_embd : key == "block_size" ? c.block_size : c.vocab_size;
            if (v != have) fail(what, ": model_args.", k, " = ", v, " but the weights give ", have, key == "vocab_size" ? " (rows of wte)" : "");
        }
    }
    check_config(c, what);
    c.ffn_hidden = static_cast<int>(shape_of(t, p + "h.0.mlp.c_fc.weight", what, 2)[0]);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
    const int64_t C = c.n_embd, V = c.vocab_size;

    Taker tk{t, what, out};
    SourceTensor wte_t = tk.take(p + "wte.weight", {V, C});
    // Tied unless the checkpoint holds an lm_head with other values.
    c.tied_lm_head = true;
    SourceTensor lm;
    if (tk.has("lm_head.weight")) {
        lm = tk.take("lm_head.weight", {V, C});
        c.tied_lm_head = same_values(lm, wte_t);
    }
    for (const CanonicalEntry& e : canonical_tensors(c)) {
        const std::string b = e.layer < 0 ? "" : p + "h." + std::to_string(e.layer) + ".";
        if (is(e, "wte")) {
            tk.put(e.name, std::move(wte_t), p + "wte.weight");
        } else if (is(e, "lm_head.weight")) {
            tk.put(e.name, std::move(lm), "lm_head.weight");  // untied only
            continue;
        }
        const std::string key = e.layer >= 0 ? key_of(kGpt2LayerKeys, e, b) : key_of(kNanoGptKeys, e, "");
        if (!key.empty()) tk.move(key, e);
    }
    finish(t, out, what);
    return out;
}

// A Conv1D weight stored [in, out] (Hugging Face GPT-2), as the [out, in] of nn.Linear.
// A lazy tensor is transposed when it is read.
std::vector<float> transpose(const std::vector<float>& v, int64_t rows, int64_t cols) {
    std::vector<float> t(v.size());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
    }
    return t;
}

SourceTensor transposed(SourceTensor&& s) {
    const int64_t rows = s.shape[0], cols = s.shape[1];
    if (s.read) {
        s.read = [read = std::move(s.read), rows, cols] { return transpose(read(), rows, cols); };
    } else {
        s.values = transpose(s.values, rows, cols);
    }
    s.shape = {cols, rows};
    return std::move(s);
}

CanonicalModel map_hf_gpt2(TensorMap& t, const std::string& config_json, const std::string& what, const ArchOverrides& over,
                           CanonicalModel out) {
    ModelConfig& c = out.config;
    c.arch = Arch::HfGpt2;
    if (config_json.empty()) {
        fail(what, ": a Hugging Face GPT-2 checkpoint needs its config.json beside it (n_head cannot be read from the weights)");
    }
    nlohmann::json cfg;
    try {
        cfg = nlohmann::json::parse(config_json);
    } catch (const std::exception& e) {
        fail(what, ": config.json is not readable JSON: ", e.what());
    }
    if (!cfg.is_object()) fail(what, ": config.json is not a JSON object");
    auto get_int = [&](std::initializer_list<const char*> keys, bool required) -> int {
        for (const char* k : keys) {
            if (cfg.contains(k) && !cfg[k].is_null()) {
                if (!cfg[k].is_number_integer() || cfg[k].get<int64_t>() <= 0 || cfg[k].get<int64_t>() > (1 << 24)) {
                    fail(what, ": config.json ", k, " is not a positive integer of at most 2^24");
                }
                return cfg[k].get<int>();
            }
        }
        if (required) fail(what, ": config.json has no ", *keys.begin());
        return 0;
    };
    auto get_bool = [&](const char* k, bool dflt) {
        if (!cfg.contains(k) || cfg[k].is_null()) return dflt;
        if (!cfg[k].is_boolean()) fail(what, ": config.json ", k, " is not true or false");
        return cfg[k].get<bool>();
    };
    if (cfg.contains("model_type") && cfg["model_type"] != "gpt2") {
        // Only a string is printed: dump() recurses per nesting level of a hostile value.
        const auto& mt = cfg["model_type"];
        fail(what, ": config.json model_type is ", mt.is_string() ? "\"" + printable(mt.get<std::string>()) + "\"" : std::string("a JSON ") + mt.type_name(),
             ", not \"gpt2\"");
    }
    c.n_head = agreed_n_head(get_int({"n_head"}, true), over.n_head, "config.json", what);
    const int cfg_layer = get_int({"n_layer"}, true), cfg_embd = get_int({"n_embd"}, true);
    const int cfg_pos = get_int({"n_positions", "n_ctx"}, true), cfg_vocab = get_int({"vocab_size"}, true);
    const int cfg_inner = get_int({"n_inner"}, false);
    const std::string act = cfg.contains("activation_function") && cfg["activation_function"].is_string()
                                ? cfg["activation_function"].get<std::string>()
                                : std::string("gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") c.activation = kernels::ActivationKind::GeluTanh;
    else if (act == "gelu") c.activation = kernels::ActivationKind::GeluErf;
    else if (act == "relu") c.activation = kernels::ActivationKind::ReLU;
    else fail(what, ": config.json activation_function '", printable(act), "' is not supported (gelu_new, gelu_pytorch_tanh, gelu, relu)");
    c.ln_eps = 1e-5f;
    if (cfg.contains("layer_norm_epsilon")) {
        if (!cfg["layer_norm_epsilon"].is_number()) fail(what, ": config.json layer_norm_epsilon is not a number");
        c.ln_eps = cfg["layer_norm_epsilon"].get<float>();
        if (!(c.ln_eps > 0.0f && c.ln_eps < 1.0f)) fail(what, ": config.json layer_norm_epsilon ", c.ln_eps, " is out of range (0, 1)");
    }
    if (get_bool("scale_attn_by_inverse_layer_idx", false)) fail(what, ": config.json scale_attn_by_inverse_layer_idx is not supported");
    const bool scale = get_bool("scale_attn_weights", true);

    // Keys with "transformer." (GPT2LMHeadModel) or without (GPT2Model).
    const std::string p = t.count("transformer.h.0.attn.c_attn.weight") || t.count("transformer.wte.weight") ? "transformer." : "";
    const bool has_wte = t.count(p + "wte.weight") != 0, has_lm = t.count("lm_head.weight") != 0;
    if (!has_wte && !has_lm) fail_as<KeyMissing>(what, ": neither ", p, "wte.weight nor lm_head.weight is present");
    const auto& emb = shape_of(t, has_wte ? p + "wte.weight" : "lm_head.weight", what, 2);
    c.vocab_size = static_cast<int>(emb[0]);
    c.n_embd = static_cast<int>(emb[1]);
    c.block_size = static_cast<int>(shape_of(t, p + "wpe.weight", what, 2)[0]);
    c.n_layer = count_indexed(t, p + "h.", ".");
    if (c.n_layer <= 0) fail_as<KeyMissing>(what, ": no transformer blocks (", p, "h.N.*) found");
    const std::pair<const char*, std::pair<int, int>> agree[] = {{"n_layer", {cfg_layer, c.n_layer}},
                                                                 {"n_embd", {cfg_embd, c.n_embd}},
                                                                 {"n_positions", {cfg_pos, c.block_size}},
                                                                 {"vocab_size", {cfg_vocab, c.vocab_size}}};
    for (const auto& [k, v] : agree) {
        if (v.first != v.second) fail(what, ": config.json ", k, " = ", v.first, " but the weights give ", v.second);
    }
    check_config(c, what);
    c.ffn_hidden = static_cast<int>(shape_of(t, p + "h.0.mlp.c_fc.weight", what, 2)[1]);  // Conv1D [C, F]
    if (cfg_inner && cfg_inner != c.ffn_hidden) fail(what, ": config.json n_inner = ", cfg_inner, " but the weights give ", c.ffn_hidden);
    c.attn_scale = scale ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head)) : 1.0f;
    const int64_t C = c.n_embd, V = c.vocab_size;

    Taker tk{t, what, out};
    // Tied when only one of them is present (safetensors stores a shared tensor once) or when
    // both hold the same values.
    SourceTensor wte_t, lm;
    if (has_wte) wte_t = tk.take(p + "wte.weight", {V, C});
    if (has_lm) lm = tk.take("lm_head.weight", {V, C});
    c.tied_lm_head = !(has_wte && has_lm) || same_values(lm, wte_t);
    if (!has_wte) wte_t = std::move(lm);
    for (const CanonicalEntry& e : canonical_tensors(c)) {
        const std::string b = e.layer < 0 ? "" : p + "h." + std::to_string(e.layer) + ".";
        if (is(e, "wte")) {
            tk.put(e.name, std::move(wte_t), has_wte ? p + "wte.weight" : "lm_head.weight (tied)");
        } else if (is(e, "lm_head.weight")) {
            tk.put(e.name, std::move(lm), "lm_head.weight");  // untied only
            continue;
        }
        const std::string key = e.layer >= 0 ? key_of(kGpt2LayerKeys, e, b) : key_of(kHfGpt2Keys, e, p);
        if (key.empty()) continue;  // GPT-2 has no lm_head.bias
        if (e.layer >= 0 && !e.vector()) {
            // Conv1D: stored [in, out], transposed to [out, in] because this is GPT-2.
            tk.put(e.name, transposed(tk.take(key, {e.shape[1], e.shape[0]})), key + " (Conv1D, transposed)");
        } else {
            tk.move(key, e);
        }
    }
    finish(t, out, what);
    return out;
}

// The architecture chosen, how it reads the weights, why, and how to choose another: said
// when a shape does not fit.
std::string layout_reason(ArchChoice arch, bool by_auto, const std::string& why) {
    const std::string how = by_auto ? why : "because of --arch";
    switch (arch) {
    case ArchChoice::HfGpt2:
        return "read as Hugging Face GPT-2 (Conv1D weights stored [in, out], transposed) " + how +
               "; for nn.Linear weights [out, in] (nanoGPT, makemore) give --arch nanogpt (with --n-head N without model_args)";
    case ArchChoice::NanoGPT:
        return "read as nanoGPT (nn.Linear weights [out, in]) " + how +
               "; for Hugging Face Conv1D weights [in, out] give --arch hf-gpt2 with its config.json beside the checkpoint";
    default:
        return "read as the lecture's gpt.py (per-head query/key/value [head_size, n_embd]) " + how + "; --arch chooses another (auto, gptpy, nanogpt, hf-gpt2)";
    }
}

CanonicalModel map_chosen(TensorMap& t, ArchChoice arch, const Checkpoint& ckpt, const std::string& what, const std::string& hf_config_json,
                          const ArchOverrides& over, CanonicalModel out) {
    if (arch == ArchChoice::HfGpt2) return map_hf_gpt2(t, hf_config_json, what, over, std::move(out));
    if (arch == ArchChoice::GptPy) {
        if (!t.count("token_embedding_table.weight")) {
            fail_as<KeyMissing>(what, ": not a gpt.py state_dict (no token_embedding_table.weight); --arch auto detects the architecture");
        }
        return map_gptpy(t, what, over, std::move(out));
    }
    if (!t.count("transformer.wte.weight")) {
        fail_as<KeyMissing>(what, ": not a nanoGPT checkpoint (no transformer.wte.weight); --arch auto detects the architecture");
    }
    if (ckpt.model_args_json.empty() && over.n_head <= 0) {
        fail(what, ": nanoGPT checkpoint without model_args: n_head cannot be read from the weights",
             " (give --n-head N; for a Hugging Face GPT-2 checkpoint, put its config.json beside it)");
    }
    return map_nanogpt(t, ckpt.model_args_json, what, over, std::move(out));
}

}  // namespace

std::vector<float> values_of(const CanonicalTensor& t) { return t.read ? t.read() : t.values; }

CanonicalModel to_canonical(Checkpoint&& ckpt, ArchChoice arch, const std::string& what, const std::string& hf_config_json,
                            const ArchOverrides& over) {
    CanonicalModel out;
    out.dropped = ckpt.skipped;
    TensorMap& t = ckpt.tensors;
    out.renamed_keys = apply_renames(t, over.renames, what);
    strip_prefixes(t, out.stripped_prefix);
    const std::string keys = found_keys(t);
    const std::string rename_hint = "; keys found: " + keys + " (numbers as N); --rename OLD=NEW maps them onto the names expected";
    const bool by_auto = arch == ArchChoice::Auto;
    std::string why;
    if (by_auto) {
        const bool gpt2_keys = t.count("transformer.h.0.attn.c_attn.weight") || t.count("transformer.wte.weight");
        const bool hf_bare_keys = t.count("h.0.attn.c_attn.weight") || t.count("wte.weight");
        if (t.count("token_embedding_table.weight")) {
            arch = ArchChoice::GptPy;
            why = "because of token_embedding_table.weight";
        } else if (hf_bare_keys) {
            arch = ArchChoice::HfGpt2;
            why = "because its keys have no transformer. prefix (Hugging Face GPT2Model)";
        } else if (gpt2_keys && ckpt.model_args_json.empty() && !hf_config_json.empty()) {
            arch = ArchChoice::HfGpt2;
            why = "because config.json is beside the checkpoint and it has no model_args";
        } else if (gpt2_keys) {
            arch = ArchChoice::NanoGPT;
            why = ckpt.model_args_json.empty() ? "because of transformer.wte.weight and no config.json beside it"
                                               : "because of transformer.wte.weight and model_args";
        } else {
            fail(what, ": neither a gpt.py state_dict (token_embedding_table.weight) nor a nanoGPT / GPT-2 one (transformer.wte.weight, h.0.attn.c_attn.weight)",
                 t.empty() ? " (no tensors)" : rename_hint);
        }
    }
    try {
        return map_chosen(t, arch, ckpt, what, hf_config_json, over, std::move(out));
    } catch (const KeyMissing& e) {
        throw Error(e.what() + rename_hint);
    } catch (const ShapeMismatch& e) {
        throw Error(std::string(e.what()) + ": " + layout_reason(arch, by_auto, why));
    }
}

}  // namespace ember::convert

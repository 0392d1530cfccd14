#include "converter/arch.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>
#include <set>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::convert {

ArchChoice parse_arch(const std::string& s) {
    if (s == "auto") return ArchChoice::Auto;
    if (s == "gptpy") return ArchChoice::GptPy;
    if (s == "nanogpt") return ArchChoice::NanoGPT;
    fail("--arch '", s, "' is unknown (auto, gptpy or nanogpt)");
}

namespace {

using TensorMap = std::map<std::string, SourceTensor>;

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
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

// Takes a tensor out of the map, checking its shape. Missing or misshapen: error.
struct Taker {
    TensorMap& t;
    const std::string& what;
    CanonicalModel& out;

    SourceTensor take(const std::string& key, const std::vector<int64_t>& shape) {
        auto it = t.find(key);
        if (it == t.end()) fail(what, ": tensor '", key, "' is missing");
        SourceTensor s = std::move(it->second);
        t.erase(it);
        if (s.shape != shape) fail(what, ": tensor '", key, "' has shape ", shape_str(s.shape), ", expected ", shape_str(shape));
        return s;
    }
    bool has(const std::string& key) const { return t.count(key) != 0; }
    void put(const std::string& name, SourceTensor&& s, const std::string& source) {
        out.tensors.push_back({name, s.shape, std::move(s.values), source, s.dtype});
    }
    void move(const std::string& key, const std::string& name, const std::vector<int64_t>& shape, bool required = true) {
        if (!required && !has(key)) return;
        put(name, take(key, shape), key);
    }
};

int count_indexed(const TensorMap& t, const std::regex& re) {
    std::set<int> seen;
    std::smatch m;
    for (const auto& kv : t) {
        if (std::regex_search(kv.first, m, re)) {
            if (m[1].length() > 4) return -1;  // an index past 9999: no such model
            seen.insert(std::stoi(m[1]));
        }
    }
    for (int i = 0; i < static_cast<int>(seen.size()); ++i) {
        if (!seen.count(i)) return -i - 1;  // a gap: index i missing
    }
    return static_cast<int>(seen.size());
}

const std::vector<int64_t>& shape_of(const TensorMap& t, const std::string& key, const std::string& what, size_t rank) {
    auto it = t.find(key);
    if (it == t.end()) fail(what, ": tensor '", key, "' is missing");
    if (it->second.shape.size() != rank) fail(what, ": tensor '", key, "' has shape ", shape_str(it->second.shape), ", expected rank ", rank);
    return it->second.shape;
}

void check_config(const ModelConfig& c, const std::string& what) {
    if (c.n_head <= 0 || c.n_embd % c.n_head != 0) {
        fail(what, ": n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head);
    }
}

void finish(TensorMap& t, CanonicalModel& out, const std::string& what) {
    // Drop the buffers that carry no weights; anything else left over is an error.
    const std::regex buffers(R"((^|\.)(tril|attn\.bias|attn\.masked_bias)$)");
    for (auto it = t.begin(); it != t.end();) {
        if (std::regex_search(it->first, buffers)) {
            out.dropped.push_back(it->first);
            it = t.erase(it);
        } else {
            ++it;
        }
    }
    if (!t.empty()) fail(what, ": unexpected tensor '", printable(t.begin()->first), "' for a ", arch_name(out.config.arch), " checkpoint");
}

CanonicalModel map_gptpy(TensorMap& t, const std::string& what, CanonicalModel out) {
    ModelConfig& c = out.config;
    c.arch = Arch::GptPy;
    c.activation = kernels::ActivationKind::ReLU;
    const auto& wte = shape_of(t, "token_embedding_table.weight", what, 2);
    c.vocab_size = static_cast<int>(wte[0]);
    c.n_embd = static_cast<int>(wte[1]);
    c.block_size = static_cast<int>(shape_of(t, "position_embedding_table.weight", what, 2)[0]);
    c.n_layer = count_indexed(t, std::regex(R"(^blocks\.(\d+)\.)"));
    if (c.n_layer <= 0) fail(what, ": no transformer blocks (blocks.N.*) found", c.n_layer < 0 ? " (gap in the numbering)" : "");
    c.n_head = count_indexed(t, std::regex(R"(^blocks\.0\.sa\.heads\.(\d+)\.query\.weight$)"));
    if (c.n_head <= 0) fail(what, ": blocks.0.sa.heads.N.query.weight not found");
    const int64_t hs = shape_of(t, "blocks.0.sa.heads.0.query.weight", what, 2)[0];
    if (hs * c.n_head != c.n_embd) fail(what, ": n_head ", c.n_head, " x head_size ", hs, " != n_embd ", c.n_embd);
    check_config(c, what);
    c.ffn_hidden = static_cast<int>(shape_of(t, "blocks.0.ffwd.net.0.weight", what, 2)[0]);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(hs));
    c.tied_lm_head = false;
    const int64_t C = c.n_embd, V = c.vocab_size, S = c.block_size, F = c.ffn_hidden;

    Taker tk{t, what, out};
    tk.move("token_embedding_table.weight", "wte", {V, C});
    tk.move("position_embedding_table.weight", "wpe", {S, C});
    for (int l = 0; l < c.n_layer; ++l) {
        const std::string b = "blocks." + std::to_string(l) + ".";
        auto name = [&](const char* s) { return layer_tensor_name(l, s); };
        tk.move(b + "ln1.weight", name("ln_1.weight"), {C});
        tk.move(b + "ln1.bias", name("ln_1.bias"), {C}, false);
        // qkv [3C, C]: all heads' query rows, then key rows, then value rows.
        SourceTensor qkv;
        qkv.shape = {3 * C, C};
        qkv.values.reserve(static_cast<size_t>(3 * C * C));
        for (const char* part : {"query", "key", "value"}) {
            for (int h = 0; h < c.n_head; ++h) {
                SourceTensor s = tk.take(b + "sa.heads." + std::to_string(h) + "." + part + ".weight", {hs, C});
                if (s.dtype != SourceDType::F32) qkv.dtype = s.dtype;
                qkv.values.insert(qkv.values.end(), s.values.begin(), s.values.end());
            }
        }
        tk.put(name("qkv.weight"), std::move(qkv), b + "sa.heads.*.{query,key,value}.weight");
        tk.move(b + "sa.proj.weight", name("proj.weight"), {C, C});
        tk.move(b + "sa.proj.bias", name("proj.bias"), {C}, false);
        tk.move(b + "ln2.weight", name("ln_2.weight"), {C});
        tk.move(b + "ln2.bias", name("ln_2.bias"), {C}, false);
        tk.move(b + "ffwd.net.0.weight", name("fc.weight"), {F, C});
        tk.move(b + "ffwd.net.0.bias", name("fc.bias"), {F}, false);
        tk.move(b + "ffwd.net.2.weight", name("fc2.weight"), {C, F});
        tk.move(b + "ffwd.net.2.bias", name("fc2.bias"), {C}, false);
    }
    tk.move("ln_f.weight", "ln_f.weight", {C});
    tk.move("ln_f.bias", "ln_f.bias", {C}, false);
    tk.move("lm_head.weight", "lm_head.weight", {V, C});
    tk.move("lm_head.bias", "lm_head.bias", {V}, false);
    finish(t, out, what);
    return out;
}

CanonicalModel map_nanogpt(TensorMap& t, const std::string& model_args, const std::string& what, CanonicalModel out) {
    ModelConfig& c = out.config;
    c.arch = Arch::NanoGPT;
    c.activation = kernels::ActivationKind::GeluErf;
    const std::string p = "transformer.";
    const auto& wte = shape_of(t, p + "wte.weight", what, 2);
    c.vocab_size = static_cast<int>(wte[0]);
    c.n_embd = static_cast<int>(wte[1]);
    c.block_size = static_cast<int>(shape_of(t, p + "wpe.weight", what, 2)[0]);
    c.n_layer = count_indexed(t, std::regex(R"(^transformer\.h\.(\d+)\.)"));
    if (c.n_layer <= 0) fail(what, ": no transformer blocks (transformer.h.N.*) found");
    if (model_args.empty()) fail(what, ": nanoGPT checkpoint without model_args: n_head cannot be read from the weights");
    nlohmann::json args;
    try {
        args = nlohmann::json::parse(model_args);
    } catch (const std::exception& e) {
        fail(what, ": model_args is not readable: ", e.what());
    }
    if (!args.contains("n_head") || !args["n_head"].is_number_integer()) fail(what, ": model_args has no integer n_head");
    c.n_head = args["n_head"].get<int>();
    for (const char* k : {"n_layer", "n_embd", "block_size"}) {
        if (args.contains(k) && args[k].is_number_integer()) {
            const int v = args[k].get<int>();
            const int have = std::string(k) == "n_layer" ? c.n_layer : std::string(k) == "n_embd" ? c.n_embd : c.block_size;
            if (v != have) fail(what, ": model_args.", k, " = ", v, " but the weights give ", have);
        }
    }
    check_config(c, what);
    c.ffn_hidden = static_cast<int>(shape_of(t, p + "h.0.mlp.c_fc.weight", what, 2)[0]);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
    const int64_t C = c.n_embd, V = c.vocab_size, S = c.block_size, F = c.ffn_hidden;

    Taker tk{t, what, out};
    SourceTensor wte_t = tk.take(p + "wte.weight", {V, C});
    // Tied unless the checkpoint holds an lm_head with other values.
    c.tied_lm_head = true;
    SourceTensor lm;
    if (tk.has("lm_head.weight")) {
        lm = tk.take("lm_head.weight", {V, C});
        c.tied_lm_head = lm.values == wte_t.values;
    }
    tk.put("wte", std::move(wte_t), p + "wte.weight");
    tk.move(p + "wpe.weight", "wpe", {S, C});
    for (int l = 0; l < c.n_layer; ++l) {
        const std::string b = p + "h." + std::to_string(l) + ".";
        auto name = [&](const char* s) { return layer_tensor_name(l, s); };
        tk.move(b + "ln_1.weight", name("ln_1.weight"), {C});
        tk.move(b + "ln_1.bias", name("ln_1.bias"), {C}, false);
        tk.move(b + "attn.c_attn.weight", name("qkv.weight"), {3 * C, C});
        tk.move(b + "attn.c_attn.bias", name("qkv.bias"), {3 * C}, false);
        tk.move(b + "attn.c_proj.weight", name("proj.weight"), {C, C});
        tk.move(b + "attn.c_proj.bias", name("proj.bias"), {C}, false);
        tk.move(b + "ln_2.weight", name("ln_2.weight"), {C});
        tk.move(b + "ln_2.bias", name("ln_2.bias"), {C}, false);
        tk.move(b + "mlp.c_fc.weight", name("fc.weight"), {F, C});
        tk.move(b + "mlp.c_fc.bias", name("fc.bias"), {F}, false);
        tk.move(b + "mlp.c_proj.weight", name("fc2.weight"), {C, F});
        tk.move(b + "mlp.c_proj.bias", name("fc2.bias"), {C}, false);
    }
    tk.move(p + "ln_f.weight", "ln_f.weight", {C});
    tk.move(p + "ln_f.bias", "ln_f.bias", {C}, false);
    if (!c.tied_lm_head) tk.put("lm_head.weight", std::move(lm), "lm_head.weight");
    tk.move("lm_head.bias", "lm_head.bias", {V}, false);
    finish(t, out, what);
    return out;
}

}  // namespace

CanonicalModel to_canonical(Checkpoint&& ckpt, ArchChoice arch, const std::string& what) {
    CanonicalModel out;
    TensorMap& t = ckpt.tensors;
    strip_prefixes(t, out.stripped_prefix);
    if (arch == ArchChoice::Auto) {
        if (t.count("token_embedding_table.weight")) {
            arch = ArchChoice::GptPy;
        } else if (t.count("transformer.wte.weight")) {
            arch = ArchChoice::NanoGPT;
        } else {
            fail(what, ": neither a gpt.py state_dict (token_embedding_table.weight) nor a nanoGPT one (transformer.wte.weight)",
                 t.empty() ? " (no tensors)" : "; first key is '" + printable(t.begin()->first) + "'");
        }
    }
    if (arch == ArchChoice::GptPy) {
        if (!t.count("token_embedding_table.weight")) {
            fail(what, ": not a gpt.py state_dict (no token_embedding_table.weight); --arch auto detects the architecture");
        }
        return map_gptpy(t, what, std::move(out));
    }
    if (!t.count("transformer.wte.weight")) {
        fail(what, ": not a nanoGPT checkpoint (no transformer.wte.weight); --arch auto detects the architecture");
    }
    return map_nanogpt(t, ckpt.model_args_json, what, std::move(out));
}

}  // namespace ember::convert

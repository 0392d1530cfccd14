#include "runtime/attention_probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember {

namespace {

// softmax(q k^T * scale) over keys 0..t of each query t, for head h: row-major [T, T] into out.
// qkv [T, 3C]: q in columns [h*hs, (h+1)*hs), k in [C + h*hs, C + (h+1)*hs).
void head_weights(const float* qkv, int T, int C, int hs, int h, double scale, float* out) {
    std::vector<double> s(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) {
        const float* q = qkv + static_cast<size_t>(t) * 3 * C + h * hs;
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
            const float* k = qkv + static_cast<size_t>(j) * 3 * C + C + h * hs;
            double dot = 0.0;
            for (int d = 0; d < hs; ++d) dot += static_cast<double>(q[d]) * k[d];
            s[j] = dot * scale;
            mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= t; ++j) sum += s[j] = std::exp(s[j] - mx);
        float* row = out + static_cast<size_t>(t) * T;
        for (int j = 0; j < T; ++j) row[j] = j <= t ? static_cast<float>(s[j] / sum) : 0.0f;  // masked: exactly 0
    }
}

}  // namespace

AttentionWeights attention_weights(const Model& model, const std::vector<int>& ids, int layer, const SessionOptions& opts) {
    const ModelConfig& c = model.config();
    const int T = static_cast<int>(std::min<size_t>(ids.size(), 1u << 30));
    if (layer < 0 || layer >= c.n_layer) fail("attention: layer ", layer, " is outside [0, ", c.n_layer, ") (n_layer ", c.n_layer, ")");
    if (T < 1) fail("attention: the prompt is empty (at least one token)");
    if (T > c.block_size)
        fail("attention: the prompt is ", ids.size(), " tokens, more than block_size ", c.block_size,
             ": the weights are those of one window (shorten the prompt to at most ", c.block_size, " tokens)");
    for (int t = 0; t < T; ++t)
        if (ids[t] < 0 || ids[t] >= c.vocab_size) fail("attention: token id ", ids[t], " at position ", t, " is outside [0, ", c.vocab_size, ")");

    SessionOptions o = opts;
    o.kv_cache = KvDType::F32;
    o.all_logits = false;
    o.arena = nullptr;
    o.arena_bytes = 0;
    CpuBackend backend(model, o);
    const int C = c.n_embd;
    std::vector<float> qkv(static_cast<size_t>(T) * 3 * C);
    backend.set_qkv_tap(layer, qkv.data(), T);
    backend.forward(ids.data(), T, 0, 0, 1, false);

    AttentionWeights w;
    w.layer = layer;
    w.n_head = c.n_head;
    w.T = T;
    w.wei.resize(static_cast<size_t>(c.n_head) * T * T);
    for (int h = 0; h < c.n_head; ++h) head_weights(qkv.data(), T, C, c.head_size(), h, c.attn_scale, w.wei.data() + static_cast<size_t>(h) * T * T);
    return w;
}

std::string token_label(const Tokenizer& tok, int id) {
    const std::string_view b = tok.token_bytes(id);
    std::string out;
    size_t pos = 0;
    while (pos < b.size()) {
        const size_t at = pos;
        uint32_t cp = 0;
        char hex[8];
        if (!utf8_next(b, pos, cp)) {
            std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(b[at]));
            out += hex;
            pos = at + 1;
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\\') {
            out += "\\\\";
        } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(cp));
            out += hex;
        } else {
            out.append(b.substr(at, pos - at));
        }
    }
    return out;
}

std::string attention_text(const AttentionWeights& w, const std::vector<std::string>& labels, int h, int top) {
    if (h < 0 || h >= w.n_head) fail("attention: head ", h, " is outside [0, ", w.n_head, ")");
    if (static_cast<int>(labels.size()) != w.T) fail("attention: ", labels.size(), " labels for ", w.T, " tokens");
    const int T = w.T;
    std::string out = "layer " + std::to_string(w.layer) + " head " + std::to_string(h) + ": " + std::to_string(T) +
                      " tokens; each query's " + std::to_string(std::min(top, T)) + " strongest keys (key 'token' weight)\n";  // no more than there are
    std::vector<int> order(static_cast<size_t>(T));
    char num[32];
    for (int t = 0; t < T; ++t) {
        const float* row = w.head(h) + static_cast<size_t>(t) * T;
        std::iota(order.begin(), order.begin() + t + 1, 0);
        const int k = std::min(top, t + 1);
        std::partial_sort(order.begin(), order.begin() + k, order.begin() + t + 1,
                          [row](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
        std::snprintf(num, sizeof num, "%4d ", t);
        out += num;
        out += "'" + labels[t] + "' ->";
        for (int i = 0; i < k; ++i) {
            std::snprintf(num, sizeof num, " %.3f", row[order[i]]);
            out += "  " + std::to_string(order[i]) + " '" + labels[order[i]] + "'" + num;
        }
        out += "\n";
    }
    return out;
}

}  // namespace ember

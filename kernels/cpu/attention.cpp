#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/ops_variants.h"

namespace ember::kernels {

void attention_ref(const float* q, const float* k, const float* v, const AttentionShape& s, float* out) {
    const int C = s.n_head * s.head_size;
    std::vector<double> w(static_cast<size_t>(s.n_keys0 + s.T));
    for (int t = 0; t < s.T; ++t) {
        const int n_keys = s.n_keys0 + t;
        for (int h = 0; h < s.n_head; ++h) {
            const float* qh = q + static_cast<size_t>(t) * s.ldq + h * s.head_size;
            float* o = out + static_cast<size_t>(t) * C + h * s.head_size;
            if (n_keys == 0) {
                for (int d = 0; d < s.head_size; ++d) o[d] = 0.0f;
                continue;
            }
            double mx = -INFINITY;
            for (int j = 0; j < n_keys; ++j) {
                const float* kh = k + static_cast<size_t>(j) * s.row_stride() + h * s.head_stride();
                double dot = 0.0;
                for (int d = 0; d < s.head_size; ++d) dot += static_cast<double>(qh[d]) * kh[d];
                w[j] = dot * s.scale;
                mx = std::max(mx, w[j]);
            }
            double sum = 0.0;
            for (int j = 0; j < n_keys; ++j) sum += (w[j] = std::exp(w[j] - mx));
            for (int d = 0; d < s.head_size; ++d) {
                double acc = 0.0;
                for (int j = 0; j < n_keys; ++j) acc += w[j] * v[static_cast<size_t>(j) * s.row_stride() + h * s.head_stride() + d];
                o[d] = static_cast<float>(acc / sum);
            }
        }
    }
}

namespace ops_detail {

// The plain bodies of ops_variants.h's ScoresFn and WeightedSumFn.
void scores_plain(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores) {
    for (int j = 0; j < n_keys; ++j) {
        const float* kj = k + static_cast<size_t>(j) * ldk;
        float acc = 0.0f;
        for (int d = 0; d < n; ++d) acc += q[d] * kj[d];
        scores[j] = acc * scale;
    }
}

void weighted_sum_plain(const float* w, const float* v, int ldv, int n_keys, float* o, int n) {
    for (int d = 0; d < n; ++d) {
        float acc = 0.0f;
        for (int j = 0; j < n_keys; ++j) acc += w[j] * v[static_cast<size_t>(j) * ldv + d];
        o[d] = acc;
    }
}

void scores_f16_plain(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores) {
    for (int j = 0; j < n_keys; ++j) {
        const uint16_t* kj = k + static_cast<size_t>(j) * ldk;
        float acc = 0.0f;
        for (int d = 0; d < n; ++d) acc += q[d] * half_to_float(kj[d]);
        scores[j] = acc * scale;
    }
}

void weighted_sum_f16_plain(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n) {
    for (int d = 0; d < n; ++d) {
        float acc = 0.0f;
        for (int j = 0; j < n_keys; ++j) acc += w[j] * half_to_float(v[static_cast<size_t>(j) * ldv + d]);
        o[d] = acc;
    }
}

void round_f16_plain(const float* x, uint16_t* y, int n) {
    for (int i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

void softmax_plain(float* w, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = std::max(mx, w[j]);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) w[j] *= inv;
}

}  // namespace ops_detail

namespace {

using ops_detail::OpKernels;

// The q.k and weighted-sum loops for a cache of element type E.
struct F32Loops {
    ops_detail::ScoresFn scores;
    ops_detail::WeightedSumFn weighted_sum;
    ops_detail::Scores4Fn scores4;
    ops_detail::WeightedSum4Fn weighted_sum4;
};
struct F16Loops {
    ops_detail::ScoresF16Fn scores;
    ops_detail::WeightedSumF16Fn weighted_sum;
    ops_detail::Scores4F16Fn scores4;
    ops_detail::WeightedSum4F16Fn weighted_sum4;
};
F32Loops loops_for(const OpKernels& k, const float*) { return {k.scores, k.weighted_sum, k.scores4, k.weighted_sum4}; }
F16Loops loops_for(const OpKernels& k, const uint16_t*) {
    return {k.scores_f16, k.weighted_sum_f16, k.scores4_f16, k.weighted_sum4_f16};
}

template <typename E>
void run_attention(const OpKernels& kern, const float* q, const E* k, const E* v, const AttentionShape& s,
                   float* out, float* scores, int scores_ld, ThreadPool& pool) {
    const auto loops = loops_for(kern, k);
    const int C = s.n_head * s.head_size;
    const int hs = s.head_size, kv_row = s.row_stride();
    const size_t kv_head = s.head_stride();
    // One (query, head) item: scores, softmax, weighted sum of v.
    auto item_fn = [&](int item, int thread) {
        const int t = item / s.n_head;
        const int h = item % s.n_head;
        const int n_keys = s.n_keys0 + t;
        const float* qh = q + static_cast<size_t>(t) * s.ldq + h * hs;
        float* o = out + static_cast<size_t>(t) * C + h * hs;
        if (n_keys == 0) {
            std::fill(o, o + hs, 0.0f);
            return;
        }
        float* w = scores + static_cast<size_t>(thread) * scores_ld;
        loops.scores(qh, k + h * kv_head, kv_row, n_keys, hs, s.scale, w);
        kern.softmax(w, n_keys);
        loops.weighted_sum(w, v + h * kv_head, kv_row, n_keys, o, hs);
    };
    // Prefill with the four-query loops, when the scratch holds four rows of scores: items are
    // (block of 4 queries, head); the block's keys are those of its last query, each query's
    // softmax runs over its own keys and its weights past them are 0 (an exact no-op in the sums).
    const int max_keys = s.n_keys0 + s.T - 1;
    if (s.T >= kAttentionQueryBlock && loops.scores4 && scores_ld >= kAttentionQueryBlock * max_keys) {
        const int blocks = s.T / kAttentionQueryBlock;
        pool.run(blocks * s.n_head + (s.T - blocks * kAttentionQueryBlock) * s.n_head, [&](int item, int thread) {
            if (item >= blocks * s.n_head) {  // the last T % 4 queries, one at a time
                item_fn(blocks * kAttentionQueryBlock * s.n_head + (item - blocks * s.n_head), thread);
                return;
            }
            const int t0 = item / s.n_head * kAttentionQueryBlock, h = item % s.n_head;
            if (s.n_keys0 + t0 == 0) {  // query 0 sees no key
                for (int i = 0; i < kAttentionQueryBlock; ++i) item_fn((t0 + i) * s.n_head + h, thread);
                return;
            }
            const int n = s.n_keys0 + t0 + kAttentionQueryBlock - 1;
            float* w = scores + static_cast<size_t>(thread) * scores_ld;
            loops.scores4(q + static_cast<size_t>(t0) * s.ldq + h * hs, s.ldq, k + h * kv_head, kv_row, n, hs, s.scale, w, n);
            for (int i = 0; i < kAttentionQueryBlock; ++i) {
                const int n_i = s.n_keys0 + t0 + i;
                kern.softmax(w + static_cast<size_t>(i) * n, n_i);
                std::fill(w + static_cast<size_t>(i) * n + n_i, w + static_cast<size_t>(i + 1) * n, 0.0f);
            }
            loops.weighted_sum4(w, n, v + h * kv_head, kv_row, n, out + static_cast<size_t>(t0) * C + h * hs, C, hs);
        });
        return;
    }
    const int n_items = s.T * s.n_head;
    if (s.T == 1) {  // decode: equal items, one contiguous range per thread
        pool.parallel_for(n_items, 1, [&](int i0, int i1, int thread) {
            for (int i = i0; i < i1; ++i) item_fn(i, thread);
        });
    } else {  // prefill: later queries see more keys, so items are claimed one by one
        pool.run(n_items, item_fn);
    }
}

}  // namespace

void attention(const float* q, const float* k, const float* v, const AttentionShape& s, float* out,
               float* scores, int scores_ld, ThreadPool& pool) {
    run_attention(ops_detail::op_kernels(), q, k, v, s, out, scores, scores_ld, pool);
}

void attention(const float* q, const uint16_t* k, const uint16_t* v, const AttentionShape& s, float* out,
               float* scores, int scores_ld, ThreadPool& pool) {
    run_attention(ops_detail::op_kernels(), q, k, v, s, out, scores, scores_ld, pool);
}

void attention_at(CpuLevel level, const float* q, const float* k, const float* v, const AttentionShape& s,
                  float* out, float* scores, int scores_ld, ThreadPool& pool) {
    run_attention(ops_detail::op_kernels_at(level), q, k, v, s, out, scores, scores_ld, pool);
}

void attention_at(CpuLevel level, const float* q, const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                  float* out, float* scores, int scores_ld, ThreadPool& pool) {
    run_attention(ops_detail::op_kernels_at(level), q, k, v, s, out, scores, scores_ld, pool);
}

void kv_round_f16(const float* x, uint16_t* y, int n) { ops_detail::op_kernels().round_f16(x, y, n); }

void kv_round_f16_at(CpuLevel level, const float* x, uint16_t* y, int n) {
    ops_detail::op_kernels_at(level).round_f16(x, y, n);
}

}  // namespace ember::kernels

namespace ember::kernels {

void attention_backward_ref(const float* qkv, const float* dout, int B, int T, int n_head, int hs, float scale,
                            float* dqkv) {
    const int C = n_head * hs;
    const size_t ld = 3 * static_cast<size_t>(C);
    std::vector<double> p(T), dp(T);
    for (size_t i = 0; i < static_cast<size_t>(B) * T * ld; ++i) dqkv[i] = 0.0f;
    for (int b = 0; b < B; ++b) {
        const float* base = qkv + static_cast<size_t>(b) * T * ld;
        float* dbase = dqkv + static_cast<size_t>(b) * T * ld;
        for (int h = 0; h < n_head; ++h) {
            for (int t = 0; t < T; ++t) {
                const float* q = base + t * ld + h * hs;
                const float* dot = dout + (static_cast<size_t>(b) * T + t) * C + h * hs;
                double mx = -INFINITY;
                for (int j = 0; j <= t; ++j) {
                    const float* k = base + j * ld + C + h * hs;
                    double s = 0.0;
                    for (int d = 0; d < hs; ++d) s += static_cast<double>(q[d]) * k[d];
                    p[j] = s * scale;
                    mx = std::max(mx, p[j]);
                }
                double sum = 0.0;
                for (int j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - mx));
                double pd = 0.0;
                for (int j = 0; j <= t; ++j) {
                    p[j] /= sum;
                    const float* v = base + j * ld + 2 * C + h * hs;
                    double s = 0.0;
                    for (int d = 0; d < hs; ++d) s += static_cast<double>(dot[d]) * v[d];
                    dp[j] = s;
                    pd += p[j] * s;
                }
                for (int j = 0; j <= t; ++j) {
                    const double ds = p[j] * (dp[j] - pd) * scale;
                    const float* k = base + j * ld + C + h * hs;
                    float* dq = dbase + t * ld + h * hs;
                    float* dk = dbase + j * ld + C + h * hs;
                    float* dv = dbase + j * ld + 2 * C + h * hs;
                    for (int d = 0; d < hs; ++d) {
                        dq[d] += static_cast<float>(ds * k[d]);
                        dk[d] += static_cast<float>(ds * q[d]);
                        dv[d] += static_cast<float>(p[j] * dot[d]);
                    }
                }
            }
        }
    }
}

void attention_backward(const float* qkv, const float* dout, int B, int T, int n_head, int hs, float scale, float* dqkv,
                        float* scratch, ThreadPool& pool) {
    const int C = n_head * hs;
    const size_t ld = 3 * static_cast<size_t>(C);
    const auto scores_of = ops_detail::op_kernels().scores;
    pool.run(B * n_head, [&](int item, int thread) {
        const int b = item / n_head;
        const int h = item % n_head;
        const float* base = qkv + static_cast<size_t>(b) * T * ld;
        float* dbase = dqkv + static_cast<size_t>(b) * T * ld;
        float* p = scratch + static_cast<size_t>(thread) * 2 * T;
        float* dp = p + T;
        for (int t = 0; t < T; ++t) {
            for (int part = 0; part < 3; ++part) std::fill(dbase + t * ld + part * C + h * hs, dbase + t * ld + part * C + (h + 1) * hs, 0.0f);
        }
        for (int t = 0; t < T; ++t) {
            const float* q = base + t * ld + h * hs;
            const float* dot = dout + (static_cast<size_t>(b) * T + t) * C + h * hs;
            scores_of(q, base + C + h * hs, static_cast<int>(ld), t + 1, hs, scale, p);
            float mx = -INFINITY;
            for (int j = 0; j <= t; ++j) mx = std::max(mx, p[j]);
            float sum = 0.0f;
            for (int j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - mx));
            const float inv = 1.0f / sum;
            scores_of(dot, base + 2 * C + h * hs, static_cast<int>(ld), t + 1, hs, 1.0f, dp);
            float pd = 0.0f;
            for (int j = 0; j <= t; ++j) pd += (p[j] *= inv) * dp[j];
            float* dq = dbase + t * ld + h * hs;
            for (int j = 0; j <= t; ++j) {
                const float ds = p[j] * (dp[j] - pd) * scale;
                const float pj = p[j];
                const float* k = base + j * ld + C + h * hs;
                float* dk = dbase + j * ld + C + h * hs;
                float* dv = dbase + j * ld + 2 * C + h * hs;
                for (int d = 0; d < hs; ++d) {
                    dq[d] += ds * k[d];
                    dk[d] += ds * q[d];
                    dv[d] += pj * dot[d];
                }
            }
        }
    });
}

}  // namespace ember::kernels

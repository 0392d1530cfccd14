// Causal multi-head self-attention of T new queries over a KV cache, as the lecture's Head
// computes it: softmax(q k^T * scale) v per head, masked so that a query sees only the keys
// before it and itself (Vaswani et al. 2017, "scaled dot-product attention").
//
// Dimension letters: T new queries, S cache rows (block_size), C = n_head * hs.
//   q   [T, C]: head h in columns [h*hs, (h+1)*hs); row stride ldq floats
//   k,v S cache rows of C values: key j, head h, value d at j * kv_row + h * kv_head + d
//       (AttentionShape; [S, C], row stride C, unless set)
//   out [T, C]
// Query t attends to cache rows [0, n_keys0 + t): the cache holds the past in rows
// [0, n_keys0 - 1) and the new tokens from row n_keys0 - 1 on. Order within the rows does not
// matter to softmax, so a ring whose rows are all valid uses n_keys0 = S with T = 1.
// A query with no visible key (n_keys0 + t == 0) gets 0, not NaN.
// The cache is f32 or IEEE binary16 (uint16_t bits, KvDType::F16): f16 rows are widened to f32
// as they are read (F16C / fcvtl / half.h) and all arithmetic is f32; rows are stored with
// kv_round_f16 (round to nearest even, as torch's .half()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace ember::kernels {

struct AttentionShape {
    int T = 0;           // new queries
    int n_head = 0;
    int head_size = 0;
    int n_keys0 = 0;     // keys visible to query 0 (n_keys0 + T - 1 <= S)
    int ldq = 0;         // row stride of q in floats (3C when q lives in a fused qkv buffer)
    float scale = 0.0f;  // 1/sqrt(head_size)
    // Where K and V value (key j, head h, d) lives: k[j * kv_row + h * kv_head + d], the same for
    // v. 0 takes the [S, C] layout (kv_row = C, kv_head = head_size); the CPU backend's cache is
    // head-major, [n_head, S, head_size] (kv_row = head_size, kv_head = S * head_size), so that a
    // head's keys are one contiguous run.
    int kv_row = 0;
    size_t kv_head = 0;
    int row_stride() const { return kv_row ? kv_row : n_head * head_size; }
    size_t head_stride() const { return kv_head ? kv_head : static_cast<size_t>(head_size); }
};

// Plain reference, double accumulation (allocates its own scores).
void attention_ref(const float* q, const float* k, const float* v, const AttentionShape& s, float* out);

// Queries a prefill takes at once where the level has four-query loops (avx2, neon).
constexpr int kAttentionQueryBlock = 4;

// Fast: (t, h) pairs split across the pool; scores [pool.size(), max keys] caller-owned
// scratch with row stride `scores_ld` >= max keys (not checked: the caller sizes it at load,
// docs/kernels.md). With scores_ld >= kAttentionQueryBlock * max keys
// (max keys = n_keys0 + T - 1) and T >= kAttentionQueryBlock, a level with four-query loops
// takes (4 queries, head) items: each cache row is loaded (and widened) once for four queries. Allocates nothing. The q.k, softmax and weighted-sum
// loops are those of cpu_level() (cpu_features.h: AVX2 + FMA on x86-64, NEON on aarch64, else
// plain); plain's softmax uses std::exp, the vector ones a Cephes-style e^x within a few ulp.
void attention(const float* q, const float* k, const float* v, const AttentionShape& s, float* out,
               float* scores, int scores_ld, ThreadPool& pool);
// The same over an f16 cache (binary16 bits, laid out as s says).
void attention(const float* q, const uint16_t* k, const uint16_t* v, const AttentionShape& s, float* out,
               float* scores, int scores_ld, ThreadPool& pool);
// y[0:n] = binary16(x[0:n]), round to nearest even (half.h's float_to_half, bit for bit on
// finite values; NaN stays NaN): a new K or V row into an f16 cache.
void kv_round_f16(const float* x, uint16_t* y, int n);
// Which loops attention, layernorm and activation run here: "plain", "avx2" or "neon"
// (cpu_level(), capped by EMBER_CPU_KERNELS), for `ember bench`.
const char* ops_kernel_name();

// attention() with the loops of `level`, or of the highest level below it this CPU runs
// (cpu_level_clamp): for tests and benchmarks.
void attention_at(CpuLevel level, const float* q, const float* k, const float* v, const AttentionShape& s,
                  float* out, float* scores, int scores_ld, ThreadPool& pool);
void attention_at(CpuLevel level, const float* q, const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                  float* out, float* scores, int scores_ld, ThreadPool& pool);
void kv_round_f16_at(CpuLevel level, const float* x, uint16_t* y, int n);

// Training backward: B sequences of T tokens in the fused layout qkv [B, T, 3C] (q | k | v,
// heads in order), causal (query t sees keys 0..t), as the forward above computes with
// n_keys0 = 1. From dout [B, T, C] it writes dqkv [B, T, 3C] (overwritten): with p the
// softmax row and dp_j = dout_t . v_j, ds_j = p_j (dp_j - sum_i p_i dp_i);
// dq_t = scale sum_j ds_j k_j, dk_j += scale ds_j q_t, dv_j += p_j dout_t.
// Probabilities are recomputed from q and k, never stored. scratch: [pool.size(), 2T] floats.
// (b, h) pairs are split across the pool; allocates nothing.
void attention_backward_ref(const float* qkv, const float* dout, int B, int T, int n_head, int head_size, float scale,
                            float* dqkv);
void attention_backward(const float* qkv, const float* dout, int B, int T, int n_head, int head_size, float scale,
                        float* dqkv, float* scratch, ThreadPool& pool);

}  // namespace ember::kernels

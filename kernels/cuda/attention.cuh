// Causal multi-head self-attention on the GPU over the fp16 KV cache, with an online softmax
// (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022): no score matrix is ever
// stored, not even one row; scores, running max and sum are f32, so raw q.k beyond fp16's
// 65504 neither overflows nor turns into NaN. Same semantics as kernels/cpu/attention.h:
//
//   q    [T, ldq] fp16: head h in columns [h*hs, (h+1)*hs)
//   k, v [S, C] fp16 cache rows (C = n_head * hs)
//   out  [T, C] fp16
//   query t attends to cache rows [0, *n_keys0 + t) (clamped to [0, S]); order within the
//   rows does not matter to softmax, so the `ring` policy's full ring uses *n_keys0 = S.
//   A query with no visible key gets 0, not NaN.
//
// One block per (query, head); the block's warps split the keys in chunks of 32 (chunk c to
// warp c mod warps; a lane computes one key's score), each keeps its own running max, sum and
// weighted v (lanes own head dimensions, or with head_size a multiple of 8 four groups of 8
// lanes each sum a quarter of the chunk's keys over 16-byte runs), and the warps' partial
// results are merged at the end. n_keys0 lives in device memory so a
// captured decode graph reads each step's value at replay.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace ember::cuda {

constexpr int kMaxHeadSize = 256;

struct AttentionShape {
    int T = 0;           // new queries
    int n_head = 0;
    int head_size = 0;   // 1..kMaxHeadSize
    int S = 0;           // cache rows
    int ldq = 0;         // row stride of q in elements (3C inside the fused qkv buffer)
    float scale = 0.0f;  // 1/sqrt(head_size)
};

// Prefill: T queries (four warps per (query, head)). Throws ember::Error on a bad shape or launch.
void attention_prefill(const __half* q, const __half* k, const __half* v, const AttentionShape& s, const int* n_keys0,
                       __half* out, cudaStream_t stream);
// Decode: one new query (T must be 1) over the ring, sixteen warps per head. With store_row
// (device memory) not null, q must be the new token's fused q | k | v row: its K and V are
// first written to cache row *store_row (what kv_store does), then attended to.
void attention_decode(const __half* q, __half* k, __half* v, const AttentionShape& s, const int* n_keys0, const int* store_row,
                      __half* out, cudaStream_t stream);

// Copies the K and V parts of qkv [T, 3C] (q | k | v) into cache rows *row0 .. *row0+T-1 of
// k, v [S, C]. Rows past S are skipped (the runtime never asks for them).
void kv_store(const __half* qkv, int T, int C, int S, const int* row0, __half* k, __half* v, cudaStream_t stream);

}  // namespace ember::cuda

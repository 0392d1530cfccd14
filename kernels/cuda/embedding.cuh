// Token + position embedding on the GPU: x[t] = wte[ids[t]] + wpe[*pos0 + t], in f32 (the
// residual stream stays f32; the matrix products read fp16 copies of it). As gpt.py's
// token_embedding_table(idx) + position_embedding_table(arange(T)).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cpu/weights.h"

namespace ember::cuda {

// wte [V, C], wpe [S, C]: device views. ids [T] and pos0 [1]: device memory (so that a
// captured CUDA graph reads the step's token and position at replay). x [T, C] f32.
// An id outside [0, V) or a position outside [0, S) writes NaN to its row (the runtime
// validates ids and positions before; this only keeps a bug from reading out of bounds).
// Throws ember::Error if the launch fails.
void embedding(const kernels::WeightView& wte, const kernels::WeightView& wpe, const int* ids, const int* pos0, int T,
               float* x, cudaStream_t stream);

}  // namespace ember::cuda

// The optimizer of fine-tuning: gradient-norm clipping (torch.nn.utils.clip_grad_norm_) and
// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) exactly as torch.optim.AdamW
// (amsgrad off, maximize off) computes one step t >= 1 on parameters p with gradient g:
//   p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::kernels {

// The symbols of the update above; defaults are torch.optim.AdamW's.
struct AdamWParams {
    float lr = 1e-3f;            // learning rate
    float beta1 = 0.9f;          // decay of the first moment m
    float beta2 = 0.999f;        // decay of the second moment v
    float eps = 1e-8f;           // added to the denominator
    float weight_decay = 0.01f;  // decoupled: p *= 1 - lr * weight_decay
};

// Empty when a's values can train: lr and eps finite and > 0 (lr 0 trains nothing; eps 0
// divides 0 by 0; lr at least FLT_MIN, the least --lr takes), weight_decay finite and >= 0, beta1 and beta2 in [0, 1) (bias correction
// divides by 1 - beta^t; torch.optim.AdamW's ranges). Else the first bad one with its value,
// e.g. "eps 0 must be finite and > 0 (AdamW divides by sqrt(v) + eps)". One rule for the
// Trainer and for a training state read from an adapter file.
std::string adamw_params_problem(const AdamWParams& a);

// ||g||_2 over n values, accumulated in double (inf or NaN when g holds one).
double grad_norm(const float* g, size_t n);

// clip_grad_norm_(max_norm): when norm > max_norm, g *= max_norm / (norm + 1e-6).
// Returns the factor applied (1 when none).
float clip_grad_norm(float* g, size_t n, double norm, float max_norm);

// One AdamW step t (1-based) over n parameters; m and v [n] are the moments, updated.
void adamw_step_ref(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& a, int64_t t);
void adamw_step(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& a, int64_t t);

}  // namespace ember::kernels

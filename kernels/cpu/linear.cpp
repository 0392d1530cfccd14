#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/linear_variants.h"

namespace ember::kernels {

size_t linear_scratch_xq_bytes(int T, int K) { return static_cast<size_t>(T) * K; }

size_t linear_scratch_xf_floats(int K) { return linear_detail::f_gemm_scratch_floats(K); }

size_t linear_scratch_xs_bytes(int T, int K, int group_size) {
    const int g = group_size > 0 ? (K + group_size - 1) / group_size : 1;
    return static_cast<size_t>(T) * g * sizeof(float);
}

void linear_ref(const float* x, int T, const WeightView& w, const float* bias, float* y) {
    std::vector<float> row(w.cols);
    for (int n = 0; n < w.rows; ++n) {
        dequantize_row(w, n, row.data());
        for (int t = 0; t < T; ++t) {
            const float* xt = x + static_cast<size_t>(t) * w.cols;
            double acc = bias ? bias[n] : 0.0;
            for (int k = 0; k < w.cols; ++k) acc += static_cast<double>(xt[k]) * row[k];
            y[static_cast<size_t>(t) * w.rows + n] = static_cast<float>(acc);
        }
    }
}

namespace linear_detail {

size_t f_gemm_scratch_floats(int K) {
    if (K <= 0) return 0;
    const int blocks = (K + kFBlockK - 1) / kFBlockK;
    const size_t kb = static_cast<size_t>((K + blocks - 1) / blocks);
    return (kb * (kFGemmRows + kFGemmMaxR) + 15) / 16 * 16;
}

bool takes_rows8_decode(bool cache_resident, int T, int K, int group) {
    return cache_resident && T == 1 && (group == 64 || group == 32) && K % group == 0;
}

}  // namespace linear_detail

namespace {

using linear_detail::Args;
using linear_detail::Kernels;

// Plain kernels: scalar C++, the lowest level, and the fallback on every CPU.
void f32_rows_plain(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const float* w = static_cast<const float*>(a.w) + static_cast<size_t>(n) * a.K;
        for (int t = 0; t < a.T; ++t) {
            const float* x = a.x + static_cast<size_t>(t) * a.K;
            float acc = 0.0f;
            for (int k = 0; k < a.K; ++k) acc += x[k] * w[k];
            a.y[static_cast<size_t>(t) * a.N + n] = acc + (a.bias ? a.bias[n] : 0.0f);
        }
    }
}

void f16_rows_plain(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const uint16_t* w = static_cast<const uint16_t*>(a.w) + static_cast<size_t>(n) * a.K;
        for (int t = 0; t < a.T; ++t) {
            const float* x = a.x + static_cast<size_t>(t) * a.K;
            float acc = 0.0f;
            for (int k = 0; k < a.K; ++k) acc += x[k] * half_to_float(w[k]);
            a.y[static_cast<size_t>(t) * a.N + n] = acc + (a.bias ? a.bias[n] : 0.0f);
        }
    }
}

// y = sum over groups of (xq . wq)_g * xs[g] * ws[g], integer dot products per group.
void i8_rows_plain(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * a.K;
        const float* ws = a.wscales + static_cast<size_t>(n) * a.gpr;
        for (int t = 0; t < a.T; ++t) {
            const int8_t* x = a.xq + static_cast<size_t>(t) * a.K;
            const float* xs = a.xs + static_cast<size_t>(t) * a.gpr;
            float acc = 0.0f;
            for (int g = 0; g < a.gpr; ++g) {
                const int end = std::min(a.K, (g + 1) * a.group);
                int32_t s = 0;
                for (int k = g * a.group; k < end; ++k) s += static_cast<int32_t>(x[k]) * w[k];
                acc += static_cast<float>(s) * xs[g] * ws[g];
            }
            a.y[static_cast<size_t>(t) * a.N + n] = acc + (a.bias ? a.bias[n] : 0.0f);
        }
    }
}

// Symmetric int8 quantization of one row x [K] in groups: xs[g] = absmax / 127,
// q = round_half_even(x / xs[g]) (std::nearbyint in the default rounding mode).
void quantize_plain(const float* x, int K, int group, int8_t* xq, float* xs) {
    const int n_groups = (K + group - 1) / group;
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int end = std::min(K, begin + group);
        float amax = 0.0f, probe = 0.0f;  // probe: x * 0 summed, NaN where an x is inf or NaN
        for (int k = begin; k < end; ++k) amax = std::max(amax, std::fabs(x[k])), probe += x[k] * 0.0f;
        const float inv = linear_detail::group_quant_factor(amax, probe == 0.0f, &xs[g]);
        for (int k = begin; k < end; ++k) xq[k] = inv == 0.0f ? 0 : static_cast<int8_t>(std::nearbyint(x[k] * inv));
    }
}

// The kernels of each level; a level without its own kernel for a dtype uses the next lower.
Kernels kernels_for(CpuLevel level) {
    Kernels k{f32_rows_plain, f16_rows_plain, i8_rows_plain, quantize_plain, "f32: plain", "f16: plain", "int8: plain"};
#if defined(__x86_64__) || defined(__i386__)
    if (level == CpuLevel::Avx2 || level == CpuLevel::AvxVnni || level == CpuLevel::Avx512) {
        using namespace linear_detail;
        k = {f32_rows_avx2, f16_rows_avx2, i8_rows_avx2, quantize_avx2, "f32: avx2", "f16: avx2", "int8: avx2"};
        k.i8_cached_name = "int8: avx2 (8-row decode: weights in cache)";
        if (level == CpuLevel::AvxVnni) {
            k.i8 = i8_rows_avxvnni, k.i8_name = "int8: avx-vnni";
            k.i8_cached_name = "int8: avx-vnni (8-row decode: weights in cache)";
        }
        if (level == CpuLevel::Avx512) {
            k.i8 = i8_rows_avx512, k.i8_name = "int8: avx512-vnni";
            k.i8_cached_name = "int8: avx512-vnni (8-row decode: weights in cache)";
        }
        // The GEMMs' panels (linear_gemm_int8.h's P * NB per policy; f32 rows per cache block).
        k.f32_gemm = f32_gemm_avx2, k.f16_gemm = f16_gemm_avx2, k.f_gemm_rows = kFGemmRows, k.f_gemm_scratch = true;
        k.i8_gemm = level == CpuLevel::Avx512 ? i8_gemm_avx512 : level == CpuLevel::AvxVnni ? i8_gemm_avxvnni : i8_gemm_avx2;
        k.i8_gemm_rows = level == CpuLevel::Avx512 ? 32 : level == CpuLevel::AvxVnni ? 16 : 64;  // avx2: four panels of 16
        if (level == CpuLevel::Avx512) {
            k.f32_gemm = f32_gemm_avx512, k.f16_gemm = f16_gemm_avx512;
            k.f32_name = "f32: avx2, prefill avx512", k.f16_name = "f16: avx2, prefill avx512";
        }
    }
#elif defined(__aarch64__)
    if (level == CpuLevel::Neon || level == CpuLevel::Dotprod || level == CpuLevel::I8mm) {
        using namespace linear_detail;
        k = {f32_rows_neon, f16_rows_neon, i8_rows_neon, quantize_neon, "f32: neon", "f16: neon", "int8: neon"};
        if (level == CpuLevel::Dotprod) k.i8 = i8_rows_dotprod, k.i8_name = "int8: dotprod";
        if (level == CpuLevel::I8mm) k.i8 = i8_rows_dotprod, k.i8_name = "int8: i8mm";  // sdot rows, smmla GEMM
        k.f32_gemm = f32_gemm_neon, k.f16_gemm = f16_gemm_neon, k.f_gemm_rows = 64;
        k.i8_gemm = level == CpuLevel::I8mm ? i8_gemm_i8mm : level == CpuLevel::Dotprod ? i8_gemm_dotprod : i8_gemm_neon;
        k.i8_gemm_rows = 8;
    }
#endif
    return k;
}

const Kernels& kernels_in_use() {
    static const Kernels k = kernels_for(cpu_level());
    return k;
}

const Kernels& kernels_at(CpuLevel level) {
    // One table per level, built once; `level` is first clamped to what this CPU runs.
    static const Kernels table[] = {kernels_for(CpuLevel::Plain),   kernels_for(CpuLevel::Avx2),
                                    kernels_for(CpuLevel::AvxVnni), kernels_for(CpuLevel::Avx512),
                                    kernels_for(CpuLevel::Neon),    kernels_for(CpuLevel::Dotprod),
                                    kernels_for(CpuLevel::I8mm)};
    static const CpuFeatures features = detect_cpu_features();
    return table[static_cast<int>(cpu_level_clamp(level, features))];
}

constexpr int kRowGrain = 4;  // rows of W per unit of work: the int8 kernels take four at a time
// ... and eight where the x86 int8 kernels take their 8-row decode loop (takes_rows8_decode):
// a thread's range that began or ended off a multiple of 8 ran some rows in the 4-row kernel,
// whose sums round differently, so a 2-thread session's logits differed from a 1-thread one's.
constexpr int kRows8Grain = 8;

// Prefill: T >= kGemmMinRows runs the level's GEMM (linear_variants.h's GemmFn). Tasks are
// panels of `panel_rows` rows of x times chunks of N (multiples of 16 rows of W), at least two
// per thread so that every thread gets work; a task's rows of W run against its panel.
constexpr int kGemmMinRows = 8;

// xf: the f32 / f16 GEMMs' scratch, xf_floats per thread (null for the others).
void run_gemm(linear_detail::GemmFn gemm, int panel_rows, const Args& a, ThreadPool& pool, float* xf, size_t xf_floats) {
    const int panels = (a.T + panel_rows - 1) / panel_rows;
    const int want = 2 * pool.size();
    const int n_chunks = std::min((a.N + 15) / 16, std::max(1, (want + panels - 1) / panels));
    const int n_per = ((a.N + n_chunks - 1) / n_chunks + 15) / 16 * 16;
    const int n_tasks = panels * ((a.N + n_per - 1) / n_per);
    pool.run(n_tasks, [&](int task, int thread) {
        const int t0 = (task % panels) * panel_rows, n0 = (task / panels) * n_per;
        Args b = a;
        if (xf) b.xf = xf + static_cast<size_t>(thread) * xf_floats;
        gemm(b, t0, std::min(a.T, t0 + panel_rows), n0, std::min(a.N, n0 + n_per));
    });
}

void run_linear(const Kernels& kern, const float* x, int T, const WeightView& w, const float* bias, float* y,
                const LinearScratch& scratch, ThreadPool& pool) {
    Args a;
    a.x = x;
    a.T = T;
    a.K = w.cols;
    a.N = w.rows;
    a.w = w.data;
    a.bias = bias;
    a.y = y;
    linear_detail::RowsFn rows = w.type == WType::F32 ? kern.f32 : kern.f16;
    if (w.type == WType::I8) {
        a.wscales = w.scales;
        a.group = w.group_size;
        a.gpr = w.groups_per_row();
        a.xq = scratch.xq;
        a.xs = scratch.xs;
        a.cache_resident = w.cache_resident;
        auto quantize = [&](int t0, int t1, int) {
            for (int t = t0; t < t1; ++t) {
                kern.quantize(x + static_cast<size_t>(t) * a.K, a.K, a.group, scratch.xq + static_cast<size_t>(t) * a.K,
                              scratch.xs + static_cast<size_t>(t) * a.gpr);
            }
        };
        if (T >= 8) {
            pool.parallel_for(T, 1, quantize);
        } else {
            quantize(0, T, 0);
        }
        rows = kern.i8;
    }
    linear_detail::GemmFn gemm = w.type == WType::F32 ? kern.f32_gemm : w.type == WType::F16 ? kern.f16_gemm : kern.i8_gemm;
    // The f32 / f16 GEMMs that pack x need the caller's scratch; without it, the row kernels.
    const bool f_scratch = w.type != WType::I8 && kern.f_gemm_scratch;
    if (f_scratch && (!scratch.xf || scratch.xf_floats < linear_detail::f_gemm_scratch_floats(a.K))) gemm = nullptr;
    if (T >= kGemmMinRows && gemm) {
        run_gemm(gemm, w.type == WType::I8 ? kern.i8_gemm_rows : kern.f_gemm_rows, a, pool, f_scratch ? scratch.xf : nullptr,
                 scratch.xf_floats);
        return;
    }
    const bool rows8 = w.type == WType::I8 && linear_detail::takes_rows8_decode(a.cache_resident, T, a.K, a.group);
    pool.parallel_for(a.N, rows8 ? kRows8Grain : kRowGrain, [&](int n_begin, int n_end, int) { rows(a, n_begin, n_end); });
}

const char* kernel_name(const Kernels& k, WType type) {
    return type == WType::F32 ? k.f32_name : type == WType::F16 ? k.f16_name : k.i8_name;
}

}  // namespace

void linear(const float* x, int T, const WeightView& w, const float* bias, float* y,
            const LinearScratch& scratch, ThreadPool& pool) {
    run_linear(kernels_in_use(), x, T, w, bias, y, scratch, pool);
}

void linear_at(CpuLevel level, const float* x, int T, const WeightView& w, const float* bias, float* y,
               const LinearScratch& scratch, ThreadPool& pool) {
    run_linear(kernels_at(level), x, T, w, bias, y, scratch, pool);
}

const char* linear_kernel_name(WType type) { return kernel_name(kernels_in_use(), type); }

bool linear_uses_xf() { return kernels_in_use().f_gemm_scratch; }

const char* linear_kernel_name(WType type, CpuLevel level) { return kernel_name(kernels_at(level), type); }

const char* linear_kernel_name(const WeightView& w) {
    const Kernels& k = kernels_in_use();
    const bool rows8 = w.type == WType::I8 && linear_detail::takes_rows8_decode(w.cache_resident, 1, w.cols, w.group_size);
    return rows8 && k.i8_cached_name ? k.i8_cached_name : kernel_name(k, w.type);
}

}  // namespace ember::kernels

namespace ember::kernels {

void linear_backward_input_ref(const float* dy, int T, const WeightView& w, float* dx, bool accumulate) {
    const int N = w.rows, K = w.cols;
    std::vector<float> row(K);
    std::vector<double> acc(static_cast<size_t>(T) * K, 0.0);
    for (int n = 0; n < N; ++n) {
        dequantize_row(w, n, row.data());
        for (int t = 0; t < T; ++t) {
            const double g = dy[static_cast<size_t>(t) * N + n];
            for (int k = 0; k < K; ++k) acc[static_cast<size_t>(t) * K + k] += g * row[k];
        }
    }
    for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i] + (accumulate ? dx[i] : 0.0f));
}

namespace {
constexpr int kBackwardRows = 16;  // rows of dx per pass over W: one dequantized row serves 16
}

void linear_backward_input(const float* dy, int T, const WeightView& w, float* dx, bool accumulate, float* row_scratch,
                           ThreadPool& pool) {
    const int N = w.rows, K = w.cols;
    pool.parallel_for(T, kBackwardRows, [&](int t_begin, int t_end, int thread) {
        float* row = row_scratch + static_cast<size_t>(thread) * K;
        for (int t0 = t_begin; t0 < t_end; t0 += kBackwardRows) {
            const int t1 = std::min(t_end, t0 + kBackwardRows);
            if (!accumulate) std::fill(dx + static_cast<size_t>(t0) * K, dx + static_cast<size_t>(t1) * K, 0.0f);
            for (int n = 0; n < N; ++n) {
                const float* wr;
                if (w.type == WType::F32) {
                    wr = static_cast<const float*>(w.data) + static_cast<size_t>(n) * K;
                } else {
                    dequantize_row(w, n, row);
                    wr = row;
                }
                for (int t = t0; t < t1; ++t) {
                    const float g = dy[static_cast<size_t>(t) * N + n];
                    if (g == 0.0f) continue;
                    float* o = dx + static_cast<size_t>(t) * K;
                    for (int k = 0; k < K; ++k) o[k] += g * wr[k];
                }
            }
        }
    });
}

}  // namespace ember::kernels

// The backend seam: what a Session (session.h) needs from whatever runs the network. The CPU
// backend (cpu_backend.h) is linked into every program; the CUDA backend (cuda_backend.h) is
// a separate shared module, libember-cuda.so, opened with dlopen only when CUDA is asked for
// or `auto` finds a GPU (cuda_module.h), so a CPU process never maps a CUDA library.
// Letters: V vocab_size, S block_size, T rows of a forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

// Host buffers a Session keeps its bookkeeping in, owned by the backend's plan (so that a
// caller-owned arena holds them too): history [S] and window [S] token ids for the context
// policies (context.h), sampler scratch [V] floats and [V] ints, and the repetition
// penalty's (sampler.h) penalized logits [V] and recent ids [S].
struct HostScratch {
    int* history = nullptr;
    int* window = nullptr;
    float* sampler_probs = nullptr;
    int* sampler_ids = nullptr;
    float* repeat_logits = nullptr;
    int* repeat_ids = nullptr;
};

class Backend {
public:
    virtual ~Backend() = default;

    // Runs ids [T] (checked by the caller: in [0, V)) at positions pos0..pos0+T-1, writing
    // their K/V to KV-cache rows row0..row0+T-1; query t attends to rows [0, n_keys0 + t).
    // Returns host logits: [T, V] for every row when all_rows (the backend must have been
    // planned for it), else [V] of the last row; valid until the next forward.
    // Throws ember::Error on a bad span or a failing device call.
    virtual const float* forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows) = 0;
    // The Session's bookkeeping buffers (HostScratch above), planned with the backend's own
    // memory; valid for the backend's life. Never throws.
    virtual HostScratch host_scratch() = 0;

    virtual const char* name() const = 0;  // "cpu" | "cuda"
    virtual int threads() const { return 0; }  // CPU threads (0 for a GPU backend)
    // The CPU thread pool's dispatches so far (kernels/cpu/thread_pool.h): those of more than
    // one task, and of them those run on the caller alone because the workers were measured
    // slower than none (a busy machine). Zeros for a GPU backend.
    struct DispatchCounts {
        long dispatches = 0, solo = 0;
    };
    virtual DispatchCounts dispatch_counts() const { return {}; }
    // Bytes of the planned arena (host for the CPU; device memory, weights included, for CUDA).
    virtual size_t arena_bytes() const = 0;
    // One line on how this backend runs (e.g. whether CUDA captured its decode graph); empty
    // when there is nothing to say.
    virtual std::string describe() const { return {}; }
};

// A Backend::forward span against block_size S and the logit rows planned: 1 <= T, the
// positions and rows inside [0, S), the keys at most S, all_rows only when T rows were planned.
// Throws ember::Error naming the backend and the values.
void check_forward_span(const char* backend, int T, int pos0, int row0, int n_keys0, bool all_rows, int block_size, int logit_rows);

// `--backend cpu | cuda | auto`.
enum class BackendKind { Cpu, Cuda, Auto };
BackendKind parse_backend(const std::string& s);  // throws ember::Error
const char* backend_name(BackendKind b);          // "cpu" | "cuda" | "auto", as --backend spells them

// The device a CUDA backend runs on (device 0).
struct CudaDeviceInfo {
    std::string name;            // e.g. "NVIDIA H200"
    int major = 0, minor = 0;    // compute capability
    double peak_bytes_per_s = 0; // memory bandwidth from the memory clock and bus width
    size_t total_bytes = 0;      // device memory
};

}  // namespace ember

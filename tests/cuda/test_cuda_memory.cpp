// The CUDA session's memory: its plan (checked on the host, without a GPU: the test suite
// "cuda-host", which runs in CI too) and, on a GPU, nothing allocated per token.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "converter/convert.h"
#include "kernels/cuda/check.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_module.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "../convert_util.h"
#include "../test_util.h"

// Counting every heap allocation of this test binary (operator new replaced globally).
namespace {
std::atomic<long> g_allocations{0};
}
void* operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace ember;
using ember::test::fixture;

namespace {

std::unique_ptr<Model> open_gptpy(const test::TempDir& dir, convert::WeightDType dt, int group = 64) {
    return Model::open(test::convert_gptpy(dir, dt, std::string("m.") + kernels::wtype_name(dt) + ".ember", group));
}

}  // namespace

TEST_SUITE("cuda-host") {
TEST_CASE("cuda memory plan: weights as stored (int8 stays int8, no fp16 copy), regions aligned and disjoint") {
    test::TempDir dir;
    for (const auto dt : {convert::WeightDType::F32, convert::WeightDType::F16, convert::WeightDType::I8}) {
        CAPTURE(std::string(kernels::wtype_name(dt)));
        auto model = open_gptpy(dir, dt);
        const ModelConfig& c = model->config();
        for (const bool all_logits : {false, true}) {
            CAPTURE(all_logits);
            const CudaPlan p = plan_cuda_memory(*model, all_logits);
            // The weights: the file's tensor bytes, each rounded up to 256 (tied lm_head once).
            CHECK(p.weights >= model->weight_bytes() - c.vocab_size * c.n_embd * 4);  // lm_head may be shared
            CHECK(p.weights <= model->weight_bytes() + 256 * model->tensors().size());
            // Regions in order, 256-aligned, each large enough for its shape.
            const size_t S = c.block_size, C = c.n_embd, F = c.ffn_hidden, V = c.vocab_size, L = c.n_layer;
            const std::vector<std::pair<size_t, size_t>> regions = {
                {p.x, S * C * 4},        {p.xn, S * C * 2},       {p.qkv, S * 3 * C * 2},
                {p.att, S * C * 2},      {p.hidden, S * F * 2},   {p.gemm_out, S * std::max(3 * C, F) * 4},
                {p.wscratch, p.wscratch_elems * 2},                {p.logits, p.logit_rows * V * 4},
                {p.k_cache, L * S * C * 2}, {p.v_cache, L * S * C * 2},
                {p.step, 16 + S * 4},    {p.workspace, p.workspace_bytes}};
            size_t end = p.weights;
            for (const auto& [off, bytes] : regions) {
                CHECK(off % 256 == 0);
                CHECK(off >= end);
                end = off + bytes;
            }
            CHECK(end <= p.total);
            CHECK(p.ids == p.step + 16);
            CHECK(p.logit_rows == (all_logits ? c.block_size : 1));
            // Scratch for one expanded matrix at most (none when the weights are already fp16).
            const size_t biggest = std::max<size_t>({3 * C * C, C * C, F * C, all_logits ? V * C : 0});
            CHECK(p.wscratch_elems == (dt == convert::WeightDType::F16 ? 0 : biggest));
        }
    }
}
}  // TEST_SUITE

TEST_CASE("cuda decode allocates nothing per token: no heap allocation on the host, no device memory") {
    test::TempDir dir;
    for (const auto dt : {convert::WeightDType::F32, convert::WeightDType::I8}) {
        auto model = open_gptpy(dir, dt);
        const int S = model->config().block_size;
        for (const auto policy : {ContextPolicy::Exact, ContextPolicy::Shift, ContextPolicy::Ring}) {
            CAPTURE(std::string(kernels::wtype_name(dt)));
            CAPTURE(std::string(context_policy_name(policy)));
            SessionOptions so;
            so.policy = policy;
            auto s_owner = make_session(*model, so, BackendKind::Cuda);
        Session& s = *s_owner;
            SamplerOptions sopt;
            sopt.temperature = 0.8f;
            sopt.top_k = 10;
            Sampler sampler(sopt, model->config().vocab_size, s.sampler_probs(), s.sampler_ids());
            // Warm-up: one run past the window loads every kernel this policy uses (CUDA loads
            // modules lazily, into device memory) and launches the graph once.
            int id = 0;
            s.append(&id, 1);
            for (int i = 0; i < 2 * S; ++i) {
                id = sampler.sample(s.logits());
                s.append(&id, 1);
            }
            s.reset();
            id = 0;
            s.append(&id, 1);
            size_t free0 = 0, total = 0, free1 = 0;
            EMBER_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
            // Within the window every step is a graph replay; past it, `ring` stays one.
            const int steps = policy == ContextPolicy::Ring ? 3 * S : S - 1;
            const long before = g_allocations.load();
            for (int i = 0; i < steps; ++i) {
                id = sampler.sample(s.logits());
                s.append(&id, 1);
            }
            CHECK(g_allocations.load() - before == 0);
            // Past the window (exact and shift recompute with cuBLASLt): still no device memory.
            for (int i = 0; i < 2 * S; ++i) {
                id = sampler.sample(s.logits());
                s.append(&id, 1);
            }
            EMBER_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
            CHECK(free1 == free0);
        }
    }
}

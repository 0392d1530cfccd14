// libFuzzer: the .ember loader with all its checks on arbitrary bytes; a file that passes
// them is run for a few tokens (small models only), so the kernels meet whatever the
// verifier let through.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = ember::fuzz::input_file(data, size, ".ember");
    try {
        auto model = ember::Model::open(path);
        const ember::ModelConfig& c = model->config();
        const uint64_t work = static_cast<uint64_t>(c.n_layer) * c.n_embd * (c.n_embd + c.ffn_hidden) + 
                              static_cast<uint64_t>(c.vocab_size) * c.n_embd;
        if (work > (1u << 22) || c.block_size > 4096) return 0;  // too big to run per input
        ember::SessionOptions so;
        so.threads = 1;
        so.policy = ember::ContextPolicy::Ring;
        ember::Session s(*model, so);
        const int n = c.block_size + 2 < 12 ? c.block_size + 2 : 12;
        for (int i = 0; i < n; ++i) {
            const int id = i % c.vocab_size;
            s.append(&id, 1);
        }
    } catch (const ember::Error&) {
    }
    return 0;
}

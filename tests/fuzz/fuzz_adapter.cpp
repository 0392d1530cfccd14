// libFuzzer: the LoRA adapter loader (runtime/adapter.h) on arbitrary bytes, against the
// committed seed model tests/fuzz/seeds/ember/gptpy_int8.ember; an adapter that passes its
// checks is applied for a few decode steps, so the kernels meet whatever the checks let through.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_util.h"
#include "runtime/adapter.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::unique_ptr<ember::Model> model = ember::Model::open(EMBER_FUZZ_ADAPTER_MODEL);
    const std::string path = ember::fuzz::input_file(data, size, ".emba");
    try {
        auto adapter = ember::LoraAdapter::load(path, *model);
        ember::SessionOptions so;
        so.threads = 1;
        so.adapter = adapter.get();
        ember::Session s(*model, so);
        for (int i = 0; i < 4; ++i) s.append(&i, 1);
    } catch (const ember::Error&) {
    }
    return 0;
}

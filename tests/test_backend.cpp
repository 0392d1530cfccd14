// Choosing the backend (runtime/backend.h): names, auto, the factory, and what a CUDA request
// says where there is no GPU (here and in CI: no device; or a build without CUDA).
#include <doctest/doctest.h>

#include <string>

#include "converter/convert.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace ember;

TEST_CASE("backend names: cpu, cuda, auto; anything else is refused with the choices") {
    CHECK(parse_backend("cpu") == Backend::Cpu);
    CHECK(parse_backend("cuda") == Backend::Cuda);
    CHECK(parse_backend("auto") == Backend::Auto);
    CHECK(std::string(backend_name(Backend::Cuda)) == "cuda");
    try {
        parse_backend("gpu");
        FAIL("parse_backend accepted 'gpu'");
    } catch (const Error& e) {
        CHECK(std::string(e.what()) == "backend 'gpu' is unknown (cpu, cuda or auto)");
    }
}

TEST_CASE("make_session: cpu gives the CPU Session; auto follows the device count; cuda without a GPU is a clear error") {
    test::TempDir dir;
    convert::ConvertOptions o;
    o.checkpoint = test::fixture("gptpy/model.pt");
    o.vocab_text = test::fixture("gptpy/vocab.txt");
    o.out = dir.file("m.ember");
    convert::convert(o);
    auto model = Model::open(o.out);
    SessionOptions so;
    so.threads = 1;
    auto cpu = make_session(*model, so, Backend::Cpu);
    CHECK(dynamic_cast<Session*>(cpu.get()) != nullptr);
    const int devices = cuda_device_count();
    CHECK(resolve_backend(Backend::Auto) == (devices > 0 ? Backend::Cuda : Backend::Cpu));
    CHECK(resolve_backend(Backend::Cpu) == Backend::Cpu);
    if (devices == 0) {
        auto a = make_session(*model, so, Backend::Auto);
        CHECK(dynamic_cast<Session*>(a.get()) != nullptr);
        try {
            make_session(*model, so, Backend::Cuda);
            FAIL("a CUDA session without a device");
        } catch (const Error& e) {
            const std::string msg = e.what();
            CHECK((msg.find("no CUDA device") != std::string::npos || msg.find("built without CUDA") != std::string::npos));
        }
    }
    // The interface serves both: append and logits through Generator.
    Generator& g = *cpu;
    const int id = 1;
    g.append(&id, 1);
    CHECK(g.tokens_seen() == 1);
    CHECK(g.logits() != nullptr);
}

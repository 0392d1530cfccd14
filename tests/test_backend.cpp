// The backend seam (runtime/backend.h, session.h, cuda_module.h): names, auto, the factory,
// what a CUDA request says where there is no GPU or no module (here and in CI), and that the
// Session drives any Backend through its one forward.
#include <doctest/doctest.h>

#include <cstdlib>
#include <utility>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/backend.h"
#include "runtime/cuda_module.h"
#include "runtime/error.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "convert_util.h"
#include "test_util.h"

using namespace ember;

namespace {

std::unique_ptr<Model> gptpy_model(test::TempDir& dir) { return Model::open(test::convert_gptpy(dir)); }

// Sets an environment variable for one scope.
struct ScopedEnv {
    std::string name;
    ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
    ~ScopedEnv() { unsetenv(name.c_str()); }
};

// A backend that records the spans the Session asks for and returns logits favouring id 1.
struct RecordingBackend : Backend {
    struct Call {
        std::vector<int> ids;
        int pos0, row0, n_keys0;
        bool all_rows;
    };
    std::vector<Call> calls;
    std::vector<int> history, window, ids;
    std::vector<float> probs, logits;
    int V;
    RecordingBackend(int S, int vocab) : history(S), window(S), ids(vocab), probs(vocab), logits(static_cast<size_t>(S) * vocab), V(vocab) {
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % V == 1 ? 5.0f : 0.0f;
    }
    const float* forward(const int* p, int T, int pos0, int row0, int n_keys0, bool all_rows) override {
        calls.push_back({std::vector<int>(p, p + T), pos0, row0, n_keys0, all_rows});
        return logits.data();
    }
    HostScratch host_scratch() override { return {history.data(), window.data(), probs.data(), ids.data()}; }
    const char* name() const override { return "recording"; }
    size_t arena_bytes() const override { return 0; }
};

}  // namespace

TEST_CASE("backend names: cpu, cuda, auto, anything else is refused with the choices") {
    CHECK(parse_backend("cpu") == BackendKind::Cpu);
    CHECK(parse_backend("cuda") == BackendKind::Cuda);
    CHECK(parse_backend("auto") == BackendKind::Auto);
    CHECK(std::string(backend_name(BackendKind::Cuda)) == "cuda");
    try {
        parse_backend("gpu");
        FAIL("parse_backend accepted 'gpu'");
    } catch (const Error& e) {
        CHECK(std::string(e.what()) == "backend 'gpu' is unknown (cpu, cuda or auto)");
    }
}

TEST_CASE("make_session: cpu gives the CPU backend, auto without a GPU is the CPU, cuda without a GPU or module is one clear error") {
    test::TempDir dir;
    auto model = gptpy_model(dir);
    SessionOptions so;
    so.threads = 1;
    auto cpu = make_session(*model, so, BackendKind::Cpu);
    CHECK(std::string(cpu->backend().name()) == "cpu");
    CHECK(cpu->backend().threads() == 1);
    CHECK(resolve_backend(BackendKind::Cpu) == BackendKind::Cpu);
    CHECK(resolve_backend(BackendKind::Auto) == (cuda_available() ? BackendKind::Cuda : BackendKind::Cpu));
    if (!cuda_available()) {
        auto a = make_session(*model, so, BackendKind::Auto);
        CHECK(std::string(a->backend().name()) == "cpu");
        try {
            make_session(*model, so, BackendKind::Cuda);
            FAIL("a CUDA session without a device");
        } catch (const Error& e) {
            const std::string msg = e.what();
            // With the module built (EMBER_CUDA): it loads and finds no device. Without it: not found.
            CHECK((msg == "no CUDA device found (use --backend cpu)" || msg.find("the CUDA backend module cannot be loaded") == 0));
        }
    }
    {  // a module path that does not exist: cuda names it; auto stays quiet on the CPU
        ScopedEnv env("EMBER_CUDA_MODULE", "/nonexistent/libember-cuda.so");
        CHECK(cuda_device_count() == 0);
        CHECK_FALSE(cuda_available());
        CHECK(std::string(make_session(*model, so, BackendKind::Auto)->backend().name()) == "cpu");
        CHECK_THROWS_WITH_AS(make_session(*model, so, BackendKind::Cuda),
                             "the CUDA backend module cannot be loaded: EMBER_CUDA_MODULE=/nonexistent/libember-cuda.so: no such file; "
                             "unset EMBER_CUDA_MODULE or point it at libember-cuda.so; use --backend cpu",
                             Error);
    }
    {  // a file that is no module: cuda says why
        const std::string junk = dir.file("libember-cuda.so");
        test::write_file(junk, "not an ELF file");
        ScopedEnv env("EMBER_CUDA_MODULE", junk.c_str());
        CHECK_FALSE(cuda_available());
        const std::string want = "cannot load " + junk;
        CHECK_THROWS_WITH_AS(make_session(*model, so, BackendKind::Cuda), doctest::Contains(want.c_str()), Error);
    }
    // Shared libraries that are not this build's module: refused with the reason, and unloaded.
    for (const auto& [path, reason] : {std::pair<std::string, std::string>{EMBER_FAKE_MODULE_NOSYM, "is not ember's CUDA module"},
                                       {EMBER_FAKE_MODULE_OLDABI, "was built from another version of ember"}}) {
        CAPTURE(path);
        ScopedEnv env("EMBER_CUDA_MODULE", path.c_str());
        CHECK_FALSE(cuda_available());
        CHECK_THROWS_WITH_AS(make_session(*model, so, BackendKind::Cuda), doctest::Contains(reason.c_str()), Error);
        CHECK(test::read_file("/proc/self/maps").find(path) == std::string::npos);
    }
    // The one Session type serves every backend.
    Session& g = *cpu;
    const int id = 1;
    g.append(&id, 1);
    CHECK(g.tokens_seen() == 1);
    CHECK(g.logits() != nullptr);
}

TEST_CASE("Session over any Backend: the context policy decides the spans, the generate loop samples and appends") {
    test::TempDir dir;
    auto model = gptpy_model(dir);
    const ModelConfig& c = model->config();
    const int S = c.block_size;
    SessionOptions so;
    auto rb = std::make_unique<RecordingBackend>(S, c.vocab_size);
    RecordingBackend& rec = *rb;
    Session s(*model, so, std::move(rb));
    std::vector<int> prompt(S - 1, 2);
    s.append(prompt.data(), S - 1);
    REQUIRE(rec.calls.size() == 1);
    CHECK(rec.calls[0].ids.size() == static_cast<size_t>(S - 1));
    CHECK(rec.calls[0].pos0 == 0);
    CHECK_FALSE(rec.calls[0].all_rows);
    // Greedy generation picks id 1 (the recording backend's largest logit) and appends it:
    // the first token inside the window (position S-1), the next recomputes the window (exact).
    const auto tok = make_tokenizer(*model);
    Utf8Stream stream(static_cast<size_t>(tok->max_token_bytes()));
    SamplerOptions greedy;
    greedy.temperature = 0.0f;
    std::string out;
    const GenerateResult r = s.generate(3, greedy, *tok, stream, [&](std::string_view t) { out += t; });
    CHECK(r.tokens == 3);
    CHECK_FALSE(r.stopped);
    CHECK(out == std::string(3, static_cast<char>(model->code_points()[1])));
    REQUIRE(rec.calls.size() == 3);  // the prompt, then 2 appends (not after the last token)
    CHECK(rec.calls[1].ids == std::vector<int>{1});
    CHECK(rec.calls[1].pos0 == S - 1);
    CHECK(rec.calls[2].ids.size() == static_cast<size_t>(S));  // past block_size: the window again
    CHECK(rec.calls[2].pos0 == 0);
    CHECK(rec.calls[2].ids.back() == 1);
    // should_stop is polled before each token.
    int polls = 0;
    const GenerateResult st = s.generate(5, greedy, *tok, stream, [&](std::string_view) {}, [&] { return ++polls > 2; });
    CHECK(st.tokens == 2);
    CHECK(st.stopped);
    // forward_window needs a session planned with all_logits.
    CHECK_THROWS_WITH_AS(s.forward_window(prompt.data(), 4), "forward_window needs a session planned with all_logits", Error);
}

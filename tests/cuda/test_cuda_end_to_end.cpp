// The CUDA session end to end: the fixtures' logits and eval loss against PyTorch's, the
// context policies against the CPU session step by step, and the shipped default model:
// greedy text for 200 tokens identical to the CPU backend's (f32 file), int8 logits within
// 0.3 of the CPU's (whose activations are 8-bit), eval loss within 0.01.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_module.h"
#include "runtime/eval.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"
#include "../convert_util.h"
#include "../test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

std::vector<int> ids_of(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

SessionOptions options(ContextPolicy policy = ContextPolicy::Exact, bool all_logits = false) {
    SessionOptions so;
    so.threads = 0;
    so.policy = policy;
    so.all_logits = all_logits;
    so.kv_cache = KvDType::F32;  // the CPU sessions here are the f32 reference (CUDA's cache is fp16 regardless)
    return so;
}

// max |CUDA logits - PyTorch's| over every position of the fixture's window.
double cuda_logits_error(const Model& m, const nlohmann::json& ex) {
    auto s_owner = make_session(m, options(ContextPolicy::Exact, true), BackendKind::Cuda);
        Session& s = *s_owner;
    const auto ids = ids_of(ex["ids"]);
    const auto want = ex["logits"].get<std::vector<double>>();
    REQUIRE(want.size() == ids.size() * m.config().vocab_size);
    const float* got = s.forward_window(ids.data(), static_cast<int>(ids.size()));
    double err = 0.0;
    for (size_t i = 0; i < want.size(); ++i) err = std::isfinite(got[i]) ? std::max(err, std::fabs(got[i] - want[i])) : 1e30;
    return err;
}

std::vector<int> greedy_run(Session& s, int vocab_size, std::vector<int> seq, int n) {
    SamplerOptions g;
    g.temperature = 0.0f;
    Sampler sampler(g, vocab_size, s.sampler_probs(), s.sampler_ids());
    s.append(seq.data(), static_cast<int>(seq.size()));
    for (int i = 0; i < n; ++i) {
        const int id = sampler.sample(s.logits());
        seq.push_back(id);
        if (i + 1 < n) s.append(&id, 1);
    }
    return seq;
}

EvalResult eval_ids(Session& s, const std::vector<int>& ids, int64_t start, const ModelConfig& c) {
    return evaluate(s, ids.data() + start, static_cast<int64_t>(ids.size()) - start, c.block_size, c.vocab_size);
}

}  // namespace

TEST_CASE("cuda end to end: fixtures' logits, greedy ids and eval loss against PyTorch (f32, f16, int8 weights)") {
    // Tolerances on logits whose largest magnitude is 3.2: fp16 activations round each
    // activation by 2^-11 relative, so f32 and f16 weights stay within 2e-2; int8 weights
    // (group 64) within 0.1 (the CPU's int8 path, with 8-bit activations, is held to 0.1 too).
    for (const auto& [dir, ckpt, flag, vocab] :
         {std::tuple<std::string, std::string, std::string, std::string>{"gptpy", "model.pt", "text", "vocab.txt"},
          {"nanogpt", "ckpt.pt", "meta", "meta.pkl"}}) {
        CAPTURE(dir);
        const auto ex = test::load_json(fixture(dir + "/expected.json"));
        auto f32 = test::open_converted(fixture(dir + "/" + ckpt), flag, fixture(dir + "/" + vocab), convert::WeightDType::F32);
        auto f16 = test::open_converted(fixture(dir + "/" + ckpt), flag, fixture(dir + "/" + vocab), convert::WeightDType::F16);
        auto i8 = test::open_converted(fixture(dir + "/" + ckpt), flag, fixture(dir + "/" + vocab), convert::WeightDType::I8);
        const double e32 = cuda_logits_error(*f32->model, ex), e16 = cuda_logits_error(*f16->model, ex), e8 = cuda_logits_error(*i8->model, ex);
        MESSAGE("CUDA max abs logit error vs PyTorch: f32 ", e32, ", f16 ", e16, ", int8/64 ", e8);
        CHECK(e32 < 2e-2);
        CHECK(e16 < 2e-2);
        CHECK(e8 < 0.1);
        // Greedy past block_size (exact policy: the window is recomputed each step), teacher-
        // forced on PyTorch's ids: CUDA's argmax must be PyTorch's token at every step, except
        // where PyTorch's own top two logits lie within the fp16 tolerance (a near-tie, which
        // fp16 activations may break either way; counted and reported).
        const Model& m = *f32->model;
        auto s_owner = make_session(m, options(), BackendKind::Cuda);
        Session& s = *s_owner;
        Session cpu(m, options());  // f32 throughout: PyTorch's logits within 1e-4 (test_end_to_end.cpp)
        const auto want = ids_of(ex["greedy"]["ids"]);
        const auto prompt = ids_of(ex["greedy"]["prompt"]);
        const int V = m.config().vocab_size;
        s.append(prompt.data(), static_cast<int>(prompt.size()));
        cpu.append(prompt.data(), static_cast<int>(prompt.size()));
        int ties = 0, wrong = 0;
        for (size_t i = prompt.size(); i < want.size(); ++i) {
            const float* g = s.logits();
            const float* c = cpu.logits();
            const int arg = static_cast<int>(std::max_element(g, g + V) - g);
            if (arg != want[i]) {
                std::vector<float> sorted(c, c + V);
                std::sort(sorted.begin(), sorted.end(), std::greater<float>());
                (sorted[0] - sorted[1] < 2e-2 ? ties : wrong) += 1;
            }
            s.append(&want[i], 1);
            cpu.append(&want[i], 1);
        }
        MESSAGE("greedy steps: ", want.size() - prompt.size(), ", CUDA argmax differing at a near-tie: ", ties, ", elsewhere: ", wrong);
        CHECK(wrong == 0);
        // Eval loss over the fixture text (all of it), against PyTorch's.
        auto se_owner = make_session(m, options(ContextPolicy::Exact, true), BackendKind::Cuda);
        Session& se = *se_owner;
        const CharTokenizer tok(m.code_points());
        const std::string text = fixture(dir + "/" + ex["eval"]["text"].get<std::string>());
        const auto ids = tok.encode(test::read_file(text), text);
        const EvalResult r = eval_ids(se, ids, 0, m.config());
        CHECK(r.tokens == ex["eval"]["tokens_all"].get<int64_t>());
        CHECK(std::fabs(r.loss - ex["eval"]["loss_all"].get<double>()) < 0.01);
    }
}

TEST_CASE("cuda context policies exact, shift, ring past block_size track the CPU session step by step") {
    // Teacher-forced: both sessions get the CPU's greedy tokens, so one near-tie cannot make
    // the sequences part; each step's logits must agree within the fp16 tolerance.
    const auto ex = test::load_json(fixture("gptpy/expected.json"));
    auto c = test::open_converted(fixture("gptpy/model.pt"), "text", fixture("gptpy/vocab.txt"), convert::WeightDType::F32);
    const Model& m = *c->model;
    const int V = m.config().vocab_size, S = m.config().block_size;
    for (const ContextPolicy policy : {ContextPolicy::Exact, ContextPolicy::Shift, ContextPolicy::Ring}) {
        CAPTURE(std::string(context_policy_name(policy)));
        Session cpu(m, options(policy));
        auto gpu_owner = make_session(m, options(policy), BackendKind::Cuda);
        Session& gpu = *gpu_owner;
        CHECK_MESSAGE(gpu.backend().describe().find("NOT captured") == std::string::npos, gpu.backend().describe());
        SamplerOptions g;
        g.temperature = 0.0f;
        Sampler sampler(g, V, cpu.sampler_probs(), cpu.sampler_ids());
        auto prompt = ids_of(ex["greedy"]["prompt"]);
        cpu.append(prompt.data(), static_cast<int>(prompt.size()));
        gpu.append(prompt.data(), static_cast<int>(prompt.size()));
        double worst = 0.0;
        for (int step = 0; step < 3 * S; ++step) {
            for (int v = 0; v < V; ++v) {
                const double d = std::fabs(static_cast<double>(cpu.logits()[v]) - gpu.logits()[v]);
                worst = std::isfinite(d) ? std::max(worst, d) : 1e30;
            }
            const int id = sampler.sample(cpu.logits());
            cpu.append(&id, 1);
            gpu.append(&id, 1);
        }
        MESSAGE("max abs logit difference CPU vs CUDA over ", 3 * S, " steps: ", worst);
        CHECK(worst < 2e-2);
        CHECK(gpu.tokens_seen() == cpu.tokens_seen());
    }
}

namespace {

std::unique_ptr<test::ConvertedModel> default_model(convert::WeightDType dtype) {
    const std::string root = test::source_dir() + "/models/";
    return test::open_converted(root + "shakespeare_char.pt", "text", root + "shakespeare_char.vocab.txt", dtype);
}

}  // namespace

TEST_CASE("cuda default model: greedy text for 200 tokens identical to the CPU backend's (f32 file)") {
    auto c = default_model(convert::WeightDType::F32);
    const Model& m = *c->model;
    Session cpu(m, options());
    auto gpu_owner = make_session(m, options(), BackendKind::Cuda);
    const auto a = greedy_run(cpu, m.config().vocab_size, {0}, 200);
    const auto b = greedy_run(*gpu_owner, m.config().vocab_size, {0}, 200);
    CHECK(a == b);
}

// The int8 file: the CPU backend quantizes each activation row to int8 for its integer dot
// products (kernels/cpu/linear.h, as ggml's q8_0), the CUDA backend multiplies fp16
// activations by the dequantized weights, so their logits differ by more than the f32 file's
// and a greedy text may part where the CPU's top two logits nearly tie. Along the CPU's
// greedy ids (both sessions fed the same tokens) the logits must stay within kInt8Logits of
// each other (a real fault, a wrong row or a stale cache, moves logits by whole units; the
// bound also means the texts can part only where the two picks lie within 2 kInt8Logits), and
// the free-running CUDA text must equal the CPU's exactly up to the first step whose
// teacher-forced argmaxes differ (a session that strays earlier is not deterministic).
TEST_CASE("cuda default model: int8 file, logits along 200 greedy tokens within 0.3 of the CPU's, text equal up to the first differing argmax") {
    constexpr double kInt8Logits = 0.3;  // 0.188 measured on an H200, 2026-12-04
    auto c = default_model(convert::WeightDType::I8);
    const Model& m = *c->model;
    const int V = m.config().vocab_size;
    // One pass: the CPU session generates greedily (as greedy_run does) and the CUDA session is
    // fed the same ids (teacher-forced); every step's logits are compared.
    Session cpu(m, options());
    auto forced_owner = make_session(m, options(), BackendKind::Cuda);
    Session& forced = *forced_owner;
    SamplerOptions greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy, V, cpu.sampler_probs(), cpu.sampler_ids());
    std::vector<int> a{0};
    cpu.append(a.data(), 1);
    forced.append(a.data(), 1);
    double worst = 0.0;
    size_t parted = 201;  // the first index of `a` whose CUDA argmax differs from the CPU's pick
    double gap_at_parting = 0.0;
    for (int step = 0; step < 200; ++step) {
        const float* lc = cpu.logits();
        const float* lg = forced.logits();
        for (int v = 0; v < V; ++v) {
            const double d = std::fabs(static_cast<double>(lc[v]) - lg[v]);
            worst = std::isfinite(d) ? std::max(worst, d) : 1e30;
        }
        const int id = sampler.sample(lc);  // greedy: the first maximal index
        const int ag = static_cast<int>(std::max_element(lg, lg + V) - lg);
        a.push_back(id);
        if (id != ag && parted == 201) {
            parted = a.size() - 1;
            gap_at_parting = static_cast<double>(lc[id]) - lc[ag];
        }
        if (step + 1 < 200) {
            cpu.append(&id, 1);
            forced.append(&id, 1);
        }
    }
    MESSAGE("max |CPU - CUDA| logit over 200 teacher-forced steps (int8): ", worst);
    CHECK(worst < kInt8Logits);
    auto gpu_owner = make_session(m, options(), BackendKind::Cuda);
    const auto b = greedy_run(*gpu_owner, V, {0}, 200);
    size_t first = 0;
    while (first < a.size() && first < b.size() && a[first] == b[first]) ++first;
    const std::string lead = parted < a.size() ? ", where the CPU's pick leads CUDA's by " + std::to_string(gap_at_parting) : "";
    MESSAGE("CPU and CUDA greedy ids agree for the first ", first, " of ", a.size(), "; teacher-forced argmaxes first differ at ",
            parted, lead);
    CHECK(parted == first);
}

TEST_CASE("cuda default model: eval loss on tinyshakespeare's val split within 0.01 of the CPU figure") {
    const std::string text = test::shared_dir() + "/data/tinyshakespeare.txt";
    const std::string bytes = test::read_file(text);
    REQUIRE_MESSAGE(!bytes.empty(), "missing ", text, " (set EMBER_SHARED_DIR)");
    const auto report = test::load_json(test::source_dir() + "/models/shakespeare_char.pt.json");
    for (const auto dtype : {convert::WeightDType::F32, convert::WeightDType::I8}) {
        CAPTURE(std::string(kernels::wtype_name(dtype)));
        auto c = default_model(dtype);
        const Model& m = *c->model;
        const CharTokenizer tok(m.code_points());
        const auto ids = tok.encode(bytes, text);
        const int64_t start = val_split_start(static_cast<int64_t>(ids.size()));
        Session cpu(m, options(ContextPolicy::Exact, true));
        auto gpu_owner = make_session(m, options(ContextPolicy::Exact, true), BackendKind::Cuda);
        Session& gpu = *gpu_owner;
        const EvalResult rc = eval_ids(cpu, ids, start, m.config());
        const EvalResult rg = eval_ids(gpu, ids, start, m.config());
        MESSAGE("val loss: CPU ", rc.loss, ", CUDA ", rg.loss, " (PyTorch f32 ", report["val_loss"].get<double>(), ")");
        CHECK(rg.tokens == rc.tokens);
        CHECK(std::fabs(rg.loss - rc.loss) < 0.01);
    }
}

// LoRA fine-tuning against PyTorch autograd (fixtures: tools/make_lora_fixtures.py, committed
// in tests/fixtures/lora/): loss and every LoRA gradient on f32, f16 and int8 bases of a ReLU
// gpt.py and a GELU nanoGPT model; AdamW steps; overfitting one batch; exact resume; the
// adapter file; inference with adapters equal to the training forward.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>

#include "adapter_generated.h"
#include "converter/convert.h"
#include "converter/gpt2_tokenizer.h"
#include "converter/merge.h"
#include "runtime/adapter.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/finetune.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"
#include "gpt2_test_util.h"
#include "convert_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

struct Base {
    test::TempDir dir;
    std::unique_ptr<Model> model;
};

std::unique_ptr<Base> convert_base(const std::string& arch, convert::WeightDType dtype, const std::string& name = "m.ember") {
    auto b = std::make_unique<Base>();
    const std::string out = arch == "gptpy" ? test::convert_gptpy(b->dir, dtype, name)
                                            : test::convert_to(b->dir, fixture("nanogpt/ckpt.pt"), "meta", fixture("nanogpt/meta.pkl"), dtype, name);
    b->model = Model::open(out);
    return b;
}

// max |a - b| / max |b| over one block of values
double block_err(const float* a, const std::vector<float>& b, size_t off, size_t n) {
    double err = 0.0, mag = 1e-30;
    for (size_t i = off; i < off + n; ++i) {
        err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
        mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
    }
    return err / mag;
}

// Worst block error over every A and B of the adapter.
double worst_block_err(const LoraAdapter& a, const float* got, const std::vector<float>& want) {
    double worst = 0.0;
    for (int l = 0; l < a.n_layer(); ++l) {
        for (int t = 0; t < kLoraTargets; ++t) {
            const auto tt = static_cast<LoraTarget>(t);
            const size_t na = static_cast<size_t>(a.rank()) * a.in_features(tt), nb = static_cast<size_t>(a.rank()) * a.out_features(tt);
            worst = std::max(worst, block_err(got, want, a.offset_a(l, tt), na));
            worst = std::max(worst, block_err(got, want, a.offset_b(l, tt), nb));
        }
    }
    return worst;
}

std::unique_ptr<LoraAdapter> fixture_adapter(const Model& m, const nlohmann::json& fx) {
    auto a = std::make_unique<LoraAdapter>(m, fx["rank"].get<int>(), fx["alpha"].get<float>());
    const auto p = fx["params"].get<std::vector<float>>();
    REQUIRE(p.size() == a->size());
    std::copy(p.begin(), p.end(), a->params());
    return a;
}

}  // namespace

TEST_CASE("LoRA loss and gradients equal PyTorch autograd on f32, f16 and int8 bases (gpt.py ReLU, nanoGPT GELU)") {
    struct Tol {
        const char* name;
        convert::WeightDType dt;
        double loss, grad;
    };
    // Gradient error: max |g - g_torch| / max |g_torch| over each A and each B.
    // f32 and f16: the same f32 arithmetic as PyTorch on the same weights. int8: the fixture
    // also quantizes each frozen linear's input as the kernel does (straight-through); a sum
    // landing on a rounding boundary may round the other way here, hence 1e-3.
    const Tol tols[] = {{"f32", convert::WeightDType::F32, 1e-5, 1e-4},
                        {"f16", convert::WeightDType::F16, 1e-5, 1e-4},
                        {"int8", convert::WeightDType::I8, 1e-4, 1e-3}};
    for (const char* arch : {"gptpy", "nanogpt"}) {
        const auto fx = test::load_json(fixture(std::string("lora/") + arch + ".json"));
        const auto x = fx["x"].get<std::vector<int>>(), y = fx["y"].get<std::vector<int>>();
        for (const Tol& tol : tols) {
            const std::string what = std::string(arch) + " " + tol.name;
            CAPTURE(what);
            auto base = convert_base(arch, tol.dt);
            auto adapter = fixture_adapter(*base->model, fx);
            Trainer tr(*base->model, *adapter, fx["batch"].get<int>(), fx["seq"].get<int>(), kernels::AdamWParams{}, 0.0f, 2);
            const auto& want = fx["bases"][tol.name];
            const double loss = tr.forward_backward(x.data(), y.data());
            const double want_loss = want["loss"].get<double>();
            CHECK(std::fabs(loss - want_loss) / want_loss < tol.loss);
            const double err = worst_block_err(*adapter, tr.grads(), want["grads"].get<std::vector<float>>());
            MESSAGE(what, ": loss ", loss, " vs ", want_loss, ", worst gradient block error ", err);
            CHECK(err < tol.grad);
            CHECK(tr.loss(x.data(), y.data()) == loss);  // forward alone gives the same loss
        }
    }
}

TEST_CASE("two AdamW steps with gradient clipping equal torch.optim.AdamW's") {
    for (const char* arch : {"gptpy", "nanogpt"}) {
        const std::string what = arch;
        CAPTURE(what);
        const auto fx = test::load_json(fixture(std::string("lora/") + arch + ".json"));
        const auto x = fx["x"].get<std::vector<int>>(), y = fx["y"].get<std::vector<int>>();
        auto base = convert_base(arch, convert::WeightDType::F32);
        auto adapter = fixture_adapter(*base->model, fx);
        const auto& aw = fx["adamw"];
        kernels::AdamWParams p;
        p.lr = aw["lr"].get<float>();
        p.weight_decay = aw["weight_decay"].get<float>();
        p.beta1 = aw["betas"][0].get<float>();
        p.beta2 = aw["betas"][1].get<float>();
        p.eps = aw["eps"].get<float>();
        Trainer tr(*base->model, *adapter, fx["batch"].get<int>(), fx["seq"].get<int>(), p, aw["clip"].get<float>(), 2);
        for (const auto& want : aw["steps"]) {
            const StepResult r = tr.step(x.data(), y.data());
            CHECK_FALSE(r.skipped);
            CHECK(r.loss == doctest::Approx(want["loss"].get<double>()).epsilon(1e-5));
            CHECK(r.grad_norm == doctest::Approx(want["grad_norm"].get<double>()).epsilon(1e-4));
            const double err = worst_block_err(*adapter, adapter->params(), want["params"].get<std::vector<float>>());
            MESSAGE(what, ": parameters after the step, worst block error ", err);
            CHECK(err < 1e-4);
        }
        CHECK(adapter->train.adam_step == 2);
    }
}

TEST_CASE("fifty AdamW steps on one fixed batch drive its loss below a tenth of its start") {
    for (auto dt : {convert::WeightDType::F32, convert::WeightDType::I8}) {
        const auto fx = test::load_json(fixture("lora/gptpy.json"));
        const auto x = fx["x"].get<std::vector<int>>(), y = fx["y"].get<std::vector<int>>();
        auto base = convert_base("gptpy", dt);
        LoraAdapter adapter(*base->model, 8, 16.0f);
        adapter.init(1);
        kernels::AdamWParams p;
        p.lr = 2e-2f;
        Trainer tr(*base->model, adapter, fx["batch"].get<int>(), fx["seq"].get<int>(), p, 1.0f, 2);
        const double start = tr.loss(x.data(), y.data());
        double last = start;
        for (int i = 0; i < 50; ++i) last = tr.step(x.data(), y.data()).loss;
        const double end = tr.loss(x.data(), y.data());
        MESSAGE("dtype ", static_cast<int>(dt), ": loss ", start, " -> ", end, " (last step ", last, ")");
        CHECK(end < 0.1 * start);
    }
}

TEST_CASE("a non-finite loss skips the step: values and moments untouched") {
    const auto fx = test::load_json(fixture("lora/gptpy.json"));
    const auto x = fx["x"].get<std::vector<int>>(), y = fx["y"].get<std::vector<int>>();
    auto base = convert_base("gptpy", convert::WeightDType::F32);
    auto adapter = fixture_adapter(*base->model, fx);
    Trainer tr(*base->model, *adapter, fx["batch"].get<int>(), fx["seq"].get<int>(), kernels::AdamWParams{}, 1.0f, 2);
    tr.step(x.data(), y.data());
    adapter->params()[adapter->offset_b(1, LoraTarget::Fc2)] = 3e38f;  // overflows the forward
    const std::vector<float> before(adapter->params(), adapter->params() + adapter->size());
    const std::vector<float> m = adapter->adam_m, v = adapter->adam_v;
    const StepResult r = tr.step(x.data(), y.data());
    CHECK(r.skipped);
    CHECK(std::equal(before.begin(), before.end(), adapter->params()));
    CHECK(m == adapter->adam_m);
    CHECK(v == adapter->adam_v);
    CHECK(adapter->train.adam_step == 1);
}

TEST_CASE("inference with an adapter (Session) equals the training forward") {
    const auto fx = test::load_json(fixture("lora/nanogpt.json"));
    for (auto dt : {convert::WeightDType::F32, convert::WeightDType::I8}) {
        auto base = convert_base("nanogpt", dt);
        auto adapter = fixture_adapter(*base->model, fx);
        const int T = fx["seq"].get<int>();
        const auto x = fx["x"].get<std::vector<int>>(), y = fx["y"].get<std::vector<int>>();
        Trainer tr(*base->model, *adapter, 1, T, kernels::AdamWParams{}, 0.0f, 2);
        const double train_loss = tr.loss(x.data(), y.data());
        SessionOptions so;
        so.threads = 2;
        so.all_logits = true;
        so.adapter = adapter.get();
        so.kv_cache = KvDType::F32;  // training's forward keeps K and V in f32: the same arithmetic, to 1e-5
        Session s(*base->model, so);
        std::vector<int> seq(x.begin(), x.begin() + T);
        seq.push_back(y[T - 1]);
        const EvalResult r = evaluate(s, seq.data(), T + 1, T, base->model->config().vocab_size);
        CHECK(r.loss == doctest::Approx(train_loss).epsilon(1e-5));
        // the default f16 cache rounds K and V: the loss moves by well under 1e-2 relative
        SessionOptions so16 = so;
        so16.kv_cache = KvDType::F16;
        Session s16(*base->model, so16);
        const double loss16 = evaluate(s16, seq.data(), T + 1, T, base->model->config().vocab_size).loss;
        CHECK(loss16 == doctest::Approx(train_loss).epsilon(1e-2));
        MESSAGE("inference with an adapter, f16 cache: loss ", loss16, " vs training's ", train_loss);
        // without the adapter the loss differs (the adapter does something)
        SessionOptions plain = so;
        plain.adapter = nullptr;
        Session s0(*base->model, plain);
        CHECK(std::fabs(evaluate(s0, seq.data(), T + 1, T, base->model->config().vocab_size).loss - train_loss) > 1e-3);
    }
}

TEST_CASE("adapter file: round trip, wrong model, corruption, truncation, non-finite values") {
    auto base = convert_base("gptpy", convert::WeightDType::I8);
    auto other = convert_base("nanogpt", convert::WeightDType::I8);
    const auto fx = test::load_json(fixture("lora/gptpy.json"));
    auto a = fixture_adapter(*base->model, fx);
    a->train.present = true;
    a->train.step = 7;
    a->train.adam_step = 6;
    a->train.seed = 99;
    a->train.batch = 3;
    a->train.seq = 12;
    a->train.lr = 1e-3f;
    a->train.beta1 = 0.9f;
    a->train.beta2 = 0.999f;
    a->train.eps = 1e-8f;
    a->train.text_xxh64 = 1234;
    a->adam_m.assign(a->size(), 0.5f);
    a->adam_v.assign(a->size(), 0.25f);
    const std::string path = base->dir.file("a.emba");
    a->save(path);
    auto b = LoraAdapter::load(path, *base->model);
    CHECK(b->rank() == a->rank());
    CHECK(b->alpha() == a->alpha());
    CHECK(std::equal(a->params(), a->params() + a->size(), b->params()));
    CHECK(b->train.present);
    CHECK(b->train.step == 7);
    CHECK(b->train.adam_step == 6);
    CHECK(b->train.seed == 99);
    CHECK(b->adam_m == a->adam_m);
    CHECK(b->adam_v == a->adam_v);

    auto refused = [&](const std::string& p, const Model& m, const std::string& what) {
        try {
            LoraAdapter::load(p, m);
            FAIL("loaded: ", p);
        } catch (const Error& e) {
            CAPTURE(e.what());
            CHECK(std::string(e.what()).find(what) != std::string::npos);
        }
    };
    refused(path, *other->model, "trained for another model");
    refused(base->model->path(), *base->model, "is a model");
    const std::string bytes = test::read_file(path);
    test::write_file(base->dir.file("cut.emba"), bytes.substr(0, bytes.size() / 2));
    refused(base->dir.file("cut.emba"), *base->model, "verifier");
    // Files too short for a model's identifier at bytes 8..11 (the check read past a file of 8
    // to 11 bytes, inside std::string's own buffer, so no tool saw it): no identifier; 12 bytes
    // ending in a model's identifier: a model.
    for (const size_t n : {0, 4, 8, 9, 11, 12}) {
        CAPTURE(n);
        test::write_file(base->dir.file("short.emba"), std::string("\0\0\0\0XXXXEMBR", n));
        refused(base->dir.file("short.emba"), *base->model, n < 12 ? "not an ember adapter (identifier EMBA missing)" : "is a model");
    }
    // a NaN in the values: find the first A value's bytes and overwrite them
    std::string bad = bytes;
    const float first = a->params()[0];
    const size_t at = bad.find(std::string(reinterpret_cast<const char*>(&first), 4));
    REQUIRE(at != std::string::npos);
    const float nan = std::nanf("");
    bad.replace(at, 4, std::string(reinterpret_cast<const char*>(&nan), 4));
    test::write_file(base->dir.file("nan.emba"), bad);
    refused(base->dir.file("nan.emba"), *base->model, "adapter checksum mismatch");
    // A value still finite but 2^64 times larger or smaller (an exponent bit flipped): such flips gave NaN logits
    // before format 2's values_xxh64. So does a flip in the training state's moments.
    std::string big = bytes;
    big[at + 3] = static_cast<char>(big[at + 3] ^ 0x20);
    float flipped = 0.0f;
    std::memcpy(&flipped, &big[at], 4);
    REQUIRE(std::isfinite(flipped));
    test::write_file(base->dir.file("big.emba"), big);
    refused(base->dir.file("big.emba"), *base->model, "adapter checksum mismatch");
    std::string moment = bytes;
    const float quarter = 0.25f;
    const size_t v_at = moment.rfind(std::string(reinterpret_cast<const char*>(&quarter), 4));
    REQUIRE(v_at != std::string::npos);
    moment[v_at] = static_cast<char>(moment[v_at] ^ 1);
    test::write_file(base->dir.file("moment.emba"), moment);
    refused(base->dir.file("moment.emba"), *base->model, "adapter checksum mismatch");
    // Format 1 (no values_xxh64) still loads, unchecked but for finite values.
    auto format1 = [&](float first_value, float alpha) {
        flatbuffers::FlatBufferBuilder fbb;
        std::vector<float> v(a->params(), a->params() + a->size());
        v[0] = first_value;
        const auto pv = fbb.CreateVector(v);
        fbb.Finish(fba::CreateAdapter(fbb, 1, static_cast<uint32_t>(a->rank()), alpha, base->model->checksum(),
                                      static_cast<uint32_t>(base->model->config().n_layer), static_cast<uint32_t>(base->model->config().n_embd),
                                      static_cast<uint32_t>(base->model->config().ffn_hidden), pv),
                   fba::AdapterIdentifier());
        return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
    };
    test::write_file(base->dir.file("v1.emba"), format1(a->params()[0], a->alpha()));
    auto v1 = LoraAdapter::load(base->dir.file("v1.emba"), *base->model);
    CHECK(std::equal(a->params(), a->params() + a->size(), v1->params()));
    CHECK_FALSE(v1->train.present);
    test::write_file(base->dir.file("v1nan.emba"), format1(std::nanf(""), a->alpha()));
    refused(base->dir.file("v1nan.emba"), *base->model, "finite");
    test::write_file(base->dir.file("v1alpha.emba"), format1(a->params()[0], -INFINITY));
    refused(base->dir.file("v1alpha.emba"), *base->model, "v1alpha.emba: adapter alpha -inf must be finite and > 0");
    // saving non-finite values is refused and leaves the old file
    a->params()[3] = INFINITY;
    CHECK(std::string(a->non_finite_part()) == "weights");
    CHECK_THROWS_WITH_AS(a->save(path), doctest::Contains("the adapter's weights holds non-finite values; not written"), Error);
    CHECK(test::read_file(path) == bytes);
    a->params()[3] = 0.0f;
    CHECK(a->non_finite_part() == nullptr);
    a->adam_v.assign(a->size(), 0.0f);
    a->adam_v[5] = INFINITY;
    CHECK(std::string(a->non_finite_part()) == "AdamW second moment");
    CHECK_THROWS_WITH_AS(a->save(path), doctest::Contains("the adapter's AdamW second moment holds non-finite values"), Error);
    CHECK(test::read_file(path) == bytes);
}

TEST_CASE("stop after step k, resume from the adapter file: the losses equal an uninterrupted run's") {
    auto base = convert_base("gptpy", convert::WeightDType::I8);
    const CharTokenizer tok(base->model->code_points());
    const std::vector<int> ids = tok.encode(read_text_file(fixture("gptpy/eval.txt")), "eval.txt");
    FinetuneOptions o;
    o.rank = 4;
    o.alpha = 8.0f;
    o.batch = 2;
    o.seq = 12;
    o.steps = 8;
    o.lr = 1e-2f;
    o.eval_every = 4;
    o.threads = 2;
    const std::string full = base->dir.file("full.emba"), part = base->dir.file("part.emba");

    std::vector<double> losses_full, val_full;
    {
        LoraAdapter a(*base->model, o.rank, o.alpha);
        FinetuneRun run(*base->model, a, ids, o);
        run.run(full, [&](const FinetuneProgress& p) {
            losses_full.push_back(p.result.loss);
            if (p.val_loss >= 0) val_full.push_back(p.val_loss);
        }, nullptr);
    }
    REQUIRE(losses_full.size() == 8);
    CHECK(val_full.size() == 2);
    CHECK(losses_full.back() < losses_full.front());

    std::vector<double> losses;
    {
        LoraAdapter a(*base->model, o.rank, o.alpha);
        FinetuneRun run(*base->model, a, ids, o);
        std::atomic<bool> stop{false};
        run.run(part, [&](const FinetuneProgress& p) {
            losses.push_back(p.result.loss);
            if (p.step == 3) stop = true;  // stops between steps, writes the adapter
        }, &stop);
        CHECK(run.step() == 3);
    }
    {
        auto a = LoraAdapter::load(part, *base->model);
        CHECK(a->train.step == 3);
        FinetuneOptions other = o;
        other.lr = 5.0f;  // ignored: a resumed run takes its settings from the adapter
        FinetuneRun run(*base->model, *a, ids, other);
        run.run(part, [&](const FinetuneProgress& p) { losses.push_back(p.result.loss); }, nullptr);
    }
    CHECK(losses == losses_full);
    CHECK(test::read_file(part) == test::read_file(full));  // the same values, moments and state

    // another text cannot resume it
    auto a = LoraAdapter::load(part, *base->model);
    std::vector<int> other_ids(ids.rbegin(), ids.rend());
    CHECK_THROWS_WITH_AS(FinetuneRun(*base->model, *a, other_ids, o), doctest::Contains("another text"), Error);
}

TEST_CASE("a step's time floor: batch x seq over the held-out pass's forward tokens/s, and the note a long step gets") {
    auto base = convert_base("gptpy", convert::WeightDType::I8);
    const CharTokenizer tok(base->model->code_points());
    const std::vector<int> ids = tok.encode(read_text_file(fixture("gptpy/eval.txt")), "eval.txt");
    FinetuneOptions o;
    o.batch = 3;
    o.seq = 12;
    o.threads = 1;
    LoraAdapter a(*base->model, 4, 8.0f);
    FinetuneRun run(*base->model, a, ids, o);
    CHECK(run.forward_tokens_per_s() == 0.0);  // nothing measured yet: no note
    CHECK(run.step_seconds_floor() == 0.0);
    CHECK(run.long_step_note(0.0).empty());
    run.validation_loss();
    const double tps = run.forward_tokens_per_s();
    REQUIRE(tps > 0.0);
    CHECK(run.step_seconds_floor() == doctest::Approx(36.0 / tps));
    CHECK(run.long_step_note().empty());  // 36 tokens: far below 2 s
    const std::string note = run.long_step_note(0.0);
    CHECK(note.rfind("step 1 trains 3 x 12 = 36 tokens: ", 0) == 0);
    CHECK(note.find("a forward pass alone over them takes ") != std::string::npos);
}

TEST_CASE("the trainer refuses an lr or eps not > 0, a negative weight decay, a beta not below 1 or negative, naming it and its value") {
    // lr 0 and eps 0 passed here while an adapter file holding them was refused (the rules were
    // written twice): now one rule, kernels::adamw_params_problem.
    auto base = convert_base("gptpy", convert::WeightDType::I8);
    LoraAdapter a(*base->model, 4, 8.0f);
    for (const auto& [field, value, want] : {std::tuple<int, float, const char*>{0, -1.0f, "AdamW lr -1 must be finite and > 0"},
                                             {0, 0.0f, "AdamW lr 0 must be finite and > 0"},
                                             {1, -0.5f, "AdamW weight decay -0.5 must be finite and >= 0"},
                                             {2, std::nanf(""), "AdamW eps nan must be finite and > 0"},
                                             {2, 0.0f, "AdamW eps 0 must be finite and > 0 (AdamW divides by sqrt(v) + eps)"},
                                             {3, 1.0f, "AdamW beta1 1 must be in [0, 1)"},
                                             {4, -0.1f, "AdamW beta2 -0.1 must be in [0, 1)"}}) {
        CAPTURE(want);
        kernels::AdamWParams aw;
        (field == 0 ? aw.lr : field == 1 ? aw.weight_decay : field == 2 ? aw.eps : field == 3 ? aw.beta1 : aw.beta2) = value;
        CHECK_THROWS_WITH_AS(Trainer(*base->model, a, 2, 8, aw, 1.0f, 1), doctest::Contains(want), Error);
    }
}

TEST_CASE("training text: unknown characters are named, or skipped and counted") {
    const CharTokenizer tok({' ', 'a', 'b'});
    CHECK_THROWS_WITH_AS(encode_training_text(tok, "ab ça", "t.txt", false, nullptr), doctest::Contains("U+00E7"), Error);
    int64_t skipped = 0;
    const auto ids = encode_training_text(tok, "ab \xc3\xa7" "a\xc3\xa7", "t.txt", true, &skipped);
    CHECK(skipped == 2);
    CHECK(ids == std::vector<int>{1, 2, 0, 1});
}

TEST_CASE("a merged model's eval loss equals the unmerged adapter's within the requantization error") {
    const auto fx = test::load_json(fixture("lora/gptpy.json"));
    const CharTokenizer tok = [] {
        auto b = convert_base("gptpy", convert::WeightDType::F32);
        return CharTokenizer(b->model->code_points());
    }();
    const std::vector<int> ids = tok.encode(read_text_file(fixture("gptpy/eval.txt")), "eval.txt");
    struct Case {
        convert::WeightDType dt;
        double tol;
    };
    // f32: only the order of the additions differs. f16 and int8: W + sBA rounds to the grid.
    for (const Case& k : {Case{convert::WeightDType::F32, 1e-5}, Case{convert::WeightDType::F16, 5e-4},
                          Case{convert::WeightDType::I8, 5e-3}}) {
        auto base = convert_base("gptpy", k.dt);
        auto adapter = fixture_adapter(*base->model, fx);
        for (int l = 0; l < adapter->n_layer(); ++l) {  // a stronger adapter than the fixture's
            for (int t = 0; t < kLoraTargets; ++t) {
                const auto tt = static_cast<LoraTarget>(t);
                float* b = adapter->params() + adapter->offset_b(l, tt);
                for (int i = 0; i < adapter->rank() * adapter->out_features(tt); ++i) b[i] *= 10.0f;
            }
        }
        SessionOptions so;
        so.threads = 2;
        so.all_logits = true;
        auto loss_of = [&](const Model& m, const LoraAdapter* a) {
            SessionOptions o = so;
            o.adapter = a;
            Session s(m, o);
            return evaluate(s, ids.data(), static_cast<int64_t>(ids.size()), m.config().block_size, m.config().vocab_size).loss;
        };
        const double base_loss = loss_of(*base->model, nullptr);
        const double unmerged = loss_of(*base->model, adapter.get());
        const std::string out = base->dir.file("merged.ember");
        convert::merge_adapter(*base->model, *adapter, "a.emba", out);
        auto merged = Model::open(out);
        CHECK(merged->tensors()[0].dtype == base->model->tensors()[0].dtype);
        const double merged_loss = loss_of(*merged, nullptr);
        MESSAGE("dtype ", static_cast<int>(k.dt), ": base ", base_loss, ", adapter ", unmerged, ", merged ", merged_loss);
        CHECK(std::fabs(merged_loss - unmerged) < k.tol);
        CHECK(std::fabs(unmerged - base_loss) > 10 * k.tol);  // the adapter changes the model more than that
    }
}

TEST_CASE("memory plan: the training arena of the fixture model stays at its budget") {
    auto base = convert_base("gptpy", convert::WeightDType::I8);
    LoraAdapter a(*base->model, 4, 8.0f);
    // n_layer 2, n_embd 32, block_size 16, vocab 37; batch 2 x 16, rank 4, 2 threads. Grows only
    // when someone adds a buffer; update it deliberately.
    const TrainPlan p = plan_training(*base->model, 2, 16, 4, a.size(), 2);
    MESSAGE("training arena bytes: ", p.total);
    CHECK(p.total <= 215680);
    // linear in the batch: twice the rows, at most about twice the bytes
    CHECK(plan_training(*base->model, 4, 16, 4, a.size(), 2).total < 2 * p.total);
}

TEST_CASE("GPT-2 (BPE, padded wte): --merge keeps the tokenizer and padding, finetune's validation loss is ember eval's") {
    // Padding rows 297..319 carry the largest logits (lm_head bias 1000): a softmax over them
    // would put the loss near 1000.
    const int V = 320, C = 16, S = 16, n_real = 297;
    convert::CanonicalModel cm = test::tiny_gpt2_model(V, C, S, 5);
    for (int i = n_real; i < V; ++i) cm.tensors.back().values[static_cast<size_t>(i)] = 1000.0f;
    convert::TokenizerSpec spec;
    spec.bpe = convert::read_gpt2_tokenizer({fixture("gpt2/tiny_tokenizer")});
    test::TempDir dir;
    const std::string path = dir.file("tiny.ember");
    convert::write_ember(cm, spec, {"random", "", "GPT-2"}, {convert::WeightDType::F32, 0}, path);
    auto model = Model::open(path);
    REQUIRE(model->config().tokenizer_size == n_real);
    std::vector<int> ids = make_tokenizer(*model)->encode(read_text_file(fixture("gptpy/eval.txt")), "eval.txt");
    LoraAdapter adapter(*model, 2, 4.0f);
    FinetuneOptions fo;
    fo.rank = 2;
    fo.alpha = 4.0f;
    fo.batch = 2;
    fo.seq = S;
    fo.steps = 0;
    fo.threads = 1;
    FinetuneRun run(*model, adapter, ids, fo);
    for (size_t i = 0; i < adapter.size(); ++i) adapter.params()[i] += 0.05f * static_cast<float>(static_cast<int>(i % 7) - 3);
    SessionOptions so;
    so.threads = 1;
    so.all_logits = true;
    so.adapter = &adapter;
    const int64_t split = static_cast<int64_t>(ids.size()) - run.val_tokens();
    Session s(*model, so);
    const double want = evaluate(s, ids.data() + split, run.val_tokens(), S, V, n_real).loss;
    CHECK(want < 50.0);
    CHECK(run.validation_loss() == doctest::Approx(want).epsilon(1e-9));
    // The merge writes the base's BPE tables and tokenizer_size, and gives the adapter's loss.
    const std::string out = dir.file("merged.ember");
    convert::merge_adapter(*model, adapter, "a.emba", out);
    auto merged = Model::open(out);
    REQUIRE(merged->bpe() != nullptr);
    CHECK(merged->bpe()->size() == n_real);
    CHECK(merged->bpe()->merges.size() == model->bpe()->merges.size());
    CHECK(merged->config().tokenizer_size == n_real);
    CHECK(merged->config().arch == Arch::HfGpt2);
    so.adapter = nullptr;
    Session ms(*merged, so);
    const double got = evaluate(ms, ids.data() + split, run.val_tokens(), S, V, n_real).loss;
    MESSAGE("adapter ", want, ", merged ", got);
    CHECK(std::fabs(got - want) < 1e-4);
}

// Runtime behaviour: no allocation per token, sampler semantics, tokenizer errors, model file
// verification (checksum, truncation, semantic checks).
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>
#include <thread>

#include "adapter_generated.h"
#include "converter/convert.h"
#include "runtime/adapter.h"
#include "runtime/error.h"
#include "runtime/file_dtype.h"
#include "runtime/model.h"
#include "runtime/paths.h"
#include "runtime/sampler.h"
#include "runtime/finetune.h"
#include "runtime/memory.h"
#include "runtime/cpu_backend.h"
#include "runtime/session.h"
#include "runtime/sha256.h"
#include "runtime/stop_strings.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "convert_util.h"
#include "test_util.h"

// Counting every heap allocation of this test binary (operator new replaced globally), and
// the largest one since a test last reset g_largest_allocation.
namespace {
std::atomic<long> g_allocations{0};
std::atomic<size_t> g_largest_allocation{0};
}
void* operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
// GCC flags free() inlined where it sees `new`; here operator new is malloc, so it matches.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

using namespace ember;
using ember::test::fixture;

namespace {

std::string convert_to(const test::TempDir& dir, convert::WeightDType dt, const std::string& name = "m.ember") {
    return test::convert_gptpy(dir, dt, name);
}

}  // namespace

TEST_CASE("decoding a token allocates nothing, in every policy, weight dtype and KV cache dtype") {
    test::TempDir dir;
    for (auto dt : {convert::WeightDType::F32, convert::WeightDType::F16, convert::WeightDType::I8}) {
        auto model = Model::open(convert_to(dir, dt));
        for (auto policy : {ContextPolicy::Exact, ContextPolicy::Shift, ContextPolicy::Ring})
        for (auto kv : {KvDType::F16, KvDType::F32}) {
            SessionOptions so;
            so.threads = 2;
            so.policy = policy;
            so.kv_cache = kv;
            Session s(*model, so);
            SamplerOptions sopt;
            sopt.temperature = 0.8f;
            sopt.top_k = 10;
            sopt.top_p = 0.9f;
            Sampler sampler(sopt, model->config().vocab_size, s.sampler_probs(), s.sampler_ids());
            const CharTokenizer tok(model->code_points());
            int id = 0;
            s.append(&id, 1);
            char buf[4];
            const long before = g_allocations.load();
            for (int i = 0; i < 3 * model->config().block_size; ++i) {  // well past block_size
                id = sampler.sample(s.logits());
                tok.decode(id, buf);
                s.append(&id, 1);
            }
            CHECK(g_allocations.load() - before == 0);
            // The runtime's generate loop (ember generate, the console, the C API): what one
            // call allocates does not grow with the tokens it makes.
            const auto btok = make_tokenizer(*model);
            Utf8Stream stream(static_cast<size_t>(btok->max_token_bytes()));
            int made = 0;
            auto count = [&](int n) {
                s.reset();
                s.append(&id, 1);
                const long at = g_allocations.load();
                made += s.generate(n, sopt, *btok, stream, [&](std::string_view) {}).tokens;
                return g_allocations.load() - at;
            };
            const long one = count(1);
            CHECK(count(3 * model->config().block_size) == one);
            CHECK(made == 1 + 3 * model->config().block_size);
            // With the repetition penalty over the whole window and stop strings that hold
            // text back (a space starts one) but never complete: the same.
            SamplerOptions pen = sopt;
            pen.repeat_penalty = 1.3f;
            pen.repeat_last_n = -1;
            StopStrings stops({" \x01", "e\x02\x03"}, 3 * static_cast<size_t>(btok->max_token_bytes() + 4));
            auto count_stops = [&](int n) {
                s.reset();
                s.append(&id, 1);
                const long at = g_allocations.load();
                made += s.generate(n, pen, *btok, stream, [&](std::string_view) {}, {}, &stops).tokens;
                return g_allocations.load() - at;
            };
            const long one_stop = count_stops(1);
            CHECK(count_stops(3 * model->config().block_size) == one_stop);
        }
    }
}

TEST_CASE("sampler: greedy takes the first maximum, top-k above V keeps every token, top-k V - 1 drops the least") {
    std::vector<float> probs(5);
    std::vector<int> ids(5);
    const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    SamplerOptions g;
    g.temperature = 0.0f;
    CHECK(Sampler(g, 5, probs.data(), ids.data()).sample(logits) == 1);

    SamplerOptions a, b;
    a.seed = b.seed = 42;
    a.top_k = 0;
    b.top_k = 1000;  // clamped to V
    Sampler sa(a, 5, probs.data(), ids.data());
    std::vector<float> probs2(5);
    std::vector<int> ids2(5);
    Sampler sb(b, 5, probs2.data(), ids2.data());
    for (int i = 0; i < 200; ++i) CHECK(sa.sample(logits) == sb.sample(logits));
    // Above V every token stays drawable: id 2 (logit -1, p = 0.0189 by softmax) comes up in
    // 4000 draws (missing it has odds e^-75), and top-k V - 1 = 4 never draws it.
    int least_kept = 0, least_cut = 0;
    SamplerOptions c4 = b;
    c4.top_k = 4;
    Sampler s4(c4, 5, probs2.data(), ids2.data());
    for (int i = 0; i < 4000; ++i) {
        least_kept += sb.sample(logits) == 2;
        least_cut += s4.sample(logits) == 2;
    }
    CHECK(least_kept > 0);
    CHECK(least_cut == 0);

    // top-k 1 keeps both tied maxima (>= the 1st largest), never anything else.
    SamplerOptions k1;
    k1.top_k = 1;
    Sampler s1(k1, 5, probs.data(), ids.data());
    for (int i = 0; i < 100; ++i) {
        const int id = s1.sample(logits);
        CHECK((id == 1 || id == 3));
    }
    // top-p tiny keeps only the most probable (ties broken by id).
    SamplerOptions p;
    p.top_p = 1e-6f;
    Sampler sp(p, 5, probs.data(), ids.data());
    for (int i = 0; i < 50; ++i) CHECK(sp.sample(logits) == 1);
}

TEST_CASE("sha256: FIPS 180-4's test vectors, raw and in hex, of a buffer and of a file") {
    // FIPS 180-4 (NIST's examples): SHA-256("abc") and of the empty string.
    const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    CHECK(sha256_hex("abc", 3) == abc);
    CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const std::string raw = sha256_raw("abc", 3);
    REQUIRE(raw.size() == 32);
    CHECK(static_cast<unsigned char>(raw[0]) == 0xba);
    CHECK(static_cast<unsigned char>(raw[31]) == 0xad);
    CHECK(hex_lower(raw.data(), raw.size()) == abc);
    test::TempDir dir;
    test::write_file(dir.file("abc"), "abc");
    CHECK(sha256_file(dir.file("abc")) == abc);
}

TEST_CASE("write_fully: every byte through short pipe writes, and a failure's errno") {
    // A pipe takes at most its buffer per write while the reader drains it: 1 MiB in pieces.
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::string bytes(1 << 20, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + (i >> 9));
    std::string got;
    std::thread reader([&] {
        char buf[4096];
        for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    });
    const bool ok = write_fully(fds[1], bytes.data(), bytes.size());
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
    CHECK(ok);
    CHECK(got == bytes);
    // A full device: false with ENOSPC; a closed descriptor: EBADF.
    const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (full >= 0) {
        errno = 0;
        CHECK_FALSE(write_fully(full, "abc", 3));
        CHECK(errno == ENOSPC);
        ::close(full);
    }
    errno = 0;
    CHECK_FALSE(write_fully(-1, "abc", 3));
    CHECK(errno == EBADF);
    CHECK(write_fully(-1, "", 0));  // nothing to write: nothing tried
}

TEST_CASE("sampler: frequencies follow softmax(logits / T)") {
    std::vector<float> probs(3);
    std::vector<int> ids(3);
    const float logits[3] = {1.0f, 2.0f, 0.0f};
    SamplerOptions o;
    o.temperature = 2.0f;
    o.seed = 7;
    Sampler s(o, 3, probs.data(), ids.data());
    int count[3] = {0, 0, 0};
    const int n = 20000;
    for (int i = 0; i < n; ++i) count[s.sample(logits)]++;
    // softmax([0.5, 1, 0]) = [0.3072, 0.5065, 0.1863]
    CHECK(count[0] / double(n) == doctest::Approx(0.3072).epsilon(0.05));
    CHECK(count[1] / double(n) == doctest::Approx(0.5065).epsilon(0.05));
    CHECK(count[2] / double(n) == doctest::Approx(0.1863).epsilon(0.05));
}

TEST_CASE("sampler: greedy passes over NaN logits wherever they sit, keeps the first maximum, all NaN is an error") {
    std::vector<float> probs(4);
    std::vector<int> ids(4);
    SamplerOptions o;
    o.temperature = 0.0f;
    Sampler s(o, 4, probs.data(), ids.data());
    const float nan = std::nanf("");
    const float first[] = {nan, 0.5f, 2.0f, 1.0f}, last[] = {0.5f, 2.0f, 1.0f, nan}, tie[] = {nan, 2.0f, nan, 2.0f},
                all[] = {nan, nan, nan, nan}, inf[] = {nan, 1.0f, INFINITY, 3.0f}, neg[] = {nan, -INFINITY, nan, -INFINITY};
    CHECK(s.sample(first) == 2);
    CHECK(s.sample(last) == 1);
    CHECK(s.sample(tie) == 1);
    CHECK_THROWS_WITH_AS(s.sample(all), "sampling: all 4 logits are NaN (the model's activations overflowed)", Error);  // was id 0
    CHECK(s.sample(inf) == 2);
    CHECK(s.sample(neg) == 1);  // -inf is a number: chosen over NaN
}

TEST_CASE("sampler: greedy takes the first maximum over random logits with ties, -0 and +0, denormals, infinities and NaN") {
    // The vectorized greedy pass (integer keys) against the scalar rule it replaced: the first
    // i whose logit is a number and greater than every earlier one's.
    const int V = 1000;
    std::vector<float> probs(V), logits(V);
    std::vector<int> ids(V);
    SamplerOptions o;
    o.temperature = 0.0f;
    Sampler s(o, V, probs.data(), ids.data());
    const float special[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, -1e-38f, INFINITY, -INFINITY, std::nanf(""), -std::nanf(""), 3.0f, -3.0f};
    std::mt19937 rng(5);
    for (int round = 0; round < 300; ++round) {
        for (float& l : logits) {
            const unsigned r = rng() % 16;
            l = r < 12 ? special[r] : static_cast<float>(static_cast<int>(rng() % 7) - 3);  // small integers: many ties
        }
        if (round % 3 == 0) std::fill(logits.begin(), logits.end() - 1, -0.0f);  // -0 before a final +0: equal
        if (round % 3 == 0) logits.back() = 0.0f;
        int expect = -1;
        for (int i = 0; i < V; ++i) {
            if (!std::isnan(logits[i]) && (expect < 0 || logits[i] > logits[expect])) expect = i;
        }
        REQUIRE(expect >= 0);
        CHECK(s.sample(logits.data()) == expect);
    }
}

TEST_CASE("sampler: NaN logits (overflowing weights) are never drawn, +inf wins, all NaN is an error, all -inf a valid id") {
    const int V = 100;  // above std::sort's insertion-sort threshold, where a NaN comparator can run off the array
    std::vector<float> probs(V), logits(V);
    std::vector<int> ids(V);
    for (int i = 0; i < V; ++i) logits[i] = i % 3 == 0 ? std::nanf("") : 0.01f * static_cast<float>(i % 17);
    for (int top_k : {0, 10, 60}) {
        for (float top_p : {1.0f, 0.9f, 0.3f}) {
            SamplerOptions o;
            o.temperature = 0.8f;
            o.top_k = top_k;
            o.top_p = top_p;
            o.seed = 3;
            Sampler s(o, V, probs.data(), ids.data());
            for (int d = 0; d < 500; ++d) {
                const int id = s.sample(logits.data());
                REQUIRE(id >= 0);
                REQUIRE(id < V);
                CHECK_FALSE(std::isnan(logits[id]));
            }
        }
    }
    SamplerOptions o;
    o.top_p = 0.5f;
    Sampler s(o, V, probs.data(), ids.data());
    logits[42] = INFINITY;
    CHECK(s.sample(logits.data()) == 42);
    std::fill(logits.begin(), logits.end(), -INFINITY);
    const int id = s.sample(logits.data());
    CHECK((id >= 0 && id < V));
    std::fill(logits.begin(), logits.end(), std::nanf(""));
    CHECK_THROWS_WITH_AS(s.sample(logits.data()), "sampling: all 100 logits are NaN (the model's activations overflowed)", Error);
    logits[V - 1] = 0.0f;  // one number among the NaNs is chosen
    CHECK(s.sample(logits.data()) == V - 1);
}

TEST_CASE("sampler options are validated") {
    SamplerOptions o;
    o.temperature = -0.5f;
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("temperature"), Error);
    o = SamplerOptions{};
    o.top_p = 0.0f;
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("top-p"), Error);
    o = SamplerOptions{};
    o.top_k = -1;
    CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("top-k"), Error);
}

TEST_CASE("tokenizer names an unknown character and its position") {
    const CharTokenizer tok({'\n', ' ', 'a', 'b', 0xE9});
    CHECK(tok.encode("ab \xC3\xA9", "prompt") == std::vector<int>{2, 3, 1, 4});
    CHECK_THROWS_WITH_AS(tok.encode("abZa", "prompt"), "prompt: character 'Z' (U+005A) at position 2 is not in the model's vocabulary", Error);
    CHECK_THROWS_WITH_AS(tok.encode("a\xFF", "prompt"), doctest::Contains("invalid UTF-8 at byte 1"), Error);
    char buf[4];
    CHECK(tok.decode(4, buf) == 2);
}

TEST_CASE("a corrupted or truncated .ember file is refused with a message") {
    test::TempDir dir;
    const std::string good = convert_to(dir, convert::WeightDType::I8);
    const std::string bytes = test::read_file(good);
    REQUIRE_NOTHROW(Model::open(good));

    // One flipped byte in the data section (the last byte holds weights or padding).
    std::string flipped = bytes;
    flipped[flipped.size() - 100] ^= 0x01;
    test::write_file(dir.file("flip.ember"), flipped);
    CHECK_THROWS_WITH_AS(Model::open(dir.file("flip.ember")), doctest::Contains("checksum mismatch"), Error);
    // info-style open reports instead of throwing.
    CHECK_FALSE(Model::open(dir.file("flip.ember"), false)->checksum_ok());

    // Cut short at several places.
    for (size_t cut : {size_t(3), size_t(40), bytes.size() / 2, bytes.size() - 1}) {
        CAPTURE(cut);
        test::write_file(dir.file("cut.ember"), bytes.substr(0, cut));
        CHECK_THROWS_AS(Model::open(dir.file("cut.ember")), Error);
    }
    test::write_file(dir.file("cut.ember"), bytes.substr(0, bytes.size() - 1));
    CHECK_THROWS_WITH_AS(Model::open(dir.file("cut.ember")), doctest::Contains("truncated"), Error);

    // Not an .ember file at all.
    test::write_file(dir.file("text.ember"), std::string(200, 'x'));
    CHECK_THROWS_AS(Model::open(dir.file("text.ember")), Error);
    CHECK_THROWS_WITH_AS(Model::open(dir.file("missing.ember")), doctest::Contains("cannot open"), Error);
}

TEST_CASE("file enums: every arch and activation goes into the file and back, and a value the build does not know is none") {
    for (const Arch a : {Arch::GptPy, Arch::NanoGPT, Arch::HfGpt2}) CHECK(arch_of(file_arch(a)) == a);
    for (const auto k : {kernels::ActivationKind::ReLU, kernels::ActivationKind::GeluErf, kernels::ActivationKind::GeluTanh})
        CHECK(activation_of(file_activation(k)) == k);
    // The bytes written are those the files already made hold (schema/ember.fbs's values).
    CHECK(static_cast<int>(file_arch(Arch::GptPy)) == 0);
    CHECK(static_cast<int>(file_arch(Arch::NanoGPT)) == 1);
    CHECK(static_cast<int>(file_arch(Arch::HfGpt2)) == 2);
    CHECK(static_cast<int>(file_activation(kernels::ActivationKind::ReLU)) == 0);
    CHECK(static_cast<int>(file_activation(kernels::ActivationKind::GeluErf)) == 1);
    CHECK(static_cast<int>(file_activation(kernels::ActivationKind::GeluTanh)) == 2);
    CHECK_FALSE(arch_of(static_cast<fb::Arch>(99)).has_value());
    CHECK_FALSE(activation_of(static_cast<fb::Activation>(99)).has_value());
}

TEST_CASE("a model whose n_embd is not divisible by n_head is refused") {
    test::TempDir dir;
    convert::CanonicalModel cm;
    cm.config.arch = Arch::NanoGPT;
    cm.config.n_layer = 1;
    cm.config.n_head = 3;
    cm.config.n_embd = 8;
    cm.config.block_size = 4;
    cm.config.vocab_size = 2;
    cm.config.ffn_hidden = 8;
    cm.config.activation = kernels::ActivationKind::GeluErf;
    cm.config.attn_scale = 0.5f;
    cm.config.tied_lm_head = true;
    auto add = [&](const std::string& name, std::vector<int64_t> shape) {
        size_t n = 1;
        for (auto d : shape) n *= static_cast<size_t>(d);
        cm.tensors.push_back({name, shape, std::vector<float>(n, 0.1f), name, convert::SourceDType::F32, nullptr});
    };
    add("wte", {2, 8});
    add("wpe", {4, 8});
    add("h.0.ln_1.weight", {8});
    add("h.0.qkv.weight", {24, 8});
    add("h.0.proj.weight", {8, 8});
    add("h.0.ln_2.weight", {8});
    add("h.0.fc.weight", {8, 8});
    add("h.0.fc2.weight", {8, 8});
    add("ln_f.weight", {8});
    const std::string out = dir.file("bad.ember");
    convert::WriteOptions unchecked;
    unchecked.verify = false;  // the loader's refusal is under test: the writer must not refuse first
    convert::write_ember(cm, {'a', 'b'}, {}, unchecked, out);
    CHECK_THROWS_WITH_AS(Model::open(out), doctest::Contains("n_embd 8 is not divisible by config.n_head 3"), Error);
    // The same tensors with n_head 2 load: the refusal was for the divisibility alone.
    cm.config.n_head = 2;
    convert::write_ember(cm, {'a', 'b'}, {}, {}, out);
    CHECK_NOTHROW(Model::open(out));
    // By default the writer opens its temporary with Model::open before the rename: a file the
    // loader refuses never replaces a good model (it used to be renamed over it, then removed).
    const std::string before = test::read_file(out);
    cm.config.n_head = 3;
    CHECK_THROWS_WITH_AS(convert::write_ember(cm, {'a', 'b'}, {}, {}, out),
                         doctest::Contains("the converted model fails the loader's checks, nothing written to"), Error);
    CHECK(test::read_file(out) == before);
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) CHECK(e.path().filename() == "bad.ember");
}

TEST_CASE("memory plan: the arena of the fixture model stays at its budget") {
    test::TempDir dir;
    auto model = Model::open(convert_to(dir, convert::WeightDType::I8));
    // Budget for n_layer 2, n_embd 32, block_size 16, vocab 37, 2 threads: grows only when
    // someone adds a buffer; update it deliberately.
    // The default KV cache is f16; an f32 one takes exactly L x S x C x 2 bytes more per cache
    // (4096: both caches stay 64-byte multiples). 30016 since the attention scores became four
    // rows per thread (prefill's four-query loops): 2 threads x 3 more rows x 16 x 4 bytes.
    // 30272 since the repetition penalty's buffers: logits [37] f32 (192 bytes, 64-aligned)
    // and recent ids [16] (64 bytes).
    const MemoryPlan p = plan_memory(*model, 2, false);
    CHECK(p.kv == KvDType::F16);
    CHECK(p.total <= 30272);
    const MemoryPlan e = plan_memory(*model, 2, true);
    CHECK(e.total - p.total < static_cast<size_t>(16 * 37 * 4 + 64));
    const MemoryPlan p32 = plan_memory(*model, 2, false, 0, KvDType::F32);
    CHECK(p32.total - p.total == 2u * 2 * 16 * 32 * 2);
    MESSAGE("arena bytes: generate ", p.total, " (f32 cache ", p32.total, "), eval ", e.total);
}

TEST_CASE("a fine-tuning step and decoding with a LoRA adapter allocate nothing") {
    test::TempDir dir;
    for (auto dt : {convert::WeightDType::F32, convert::WeightDType::I8}) {
        auto model = Model::open(convert_to(dir, dt));
        LoraAdapter adapter(*model, 4, 8.0f);
        adapter.init(3);
        Trainer tr(*model, adapter, 2, model->config().block_size, kernels::AdamWParams{}, 1.0f, 2);
        std::vector<int> x(2 * model->config().block_size), y(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] = static_cast<int>(i * 7 % model->config().vocab_size);
            y[i] = static_cast<int>((i * 7 + 1) % model->config().vocab_size);
        }
        tr.step(x.data(), y.data());
        const long before = g_allocations.load();
        for (int i = 0; i < 3; ++i) tr.step(x.data(), y.data());
        CHECK(g_allocations.load() - before == 0);

        SessionOptions so;
        so.threads = 2;
        so.adapter = &adapter;
        Session s(*model, so);
        int id = 0;
        s.append(&id, 1);
        const long before_decode = g_allocations.load();
        for (int i = 0; i < 2 * model->config().block_size; ++i) {
            id = (id * 5 + 1) % model->config().vocab_size;
            s.append(&id, 1);
        }
        CHECK(g_allocations.load() - before_decode == 0);
    }
}

TEST_CASE("adapter file: the values a claimed rank needs are counted before anything is allocated, AdamW's ranges") {
    test::TempDir dir;
    auto model = Model::open(convert_to(dir, convert::WeightDType::I8));
    const ModelConfig& c = model->config();
    // A small file whose header claims rank = n_embd but holds one value (and one moment).
    auto adapter_file = [&](uint32_t rank, size_t n_values, float beta1, uint64_t adam_step) {
        flatbuffers::FlatBufferBuilder fbb;
        const std::vector<float> v(n_values, 0.0f);
        const auto params = fbb.CreateVector(v);
        const auto m = fbb.CreateVector(v), vv = fbb.CreateVector(v);
        const auto train = fba::CreateTrainState(fbb, 1, adam_step, 0, 1, 8, 1e-3f, 0.0f, beta1, 0.999f, 1e-8f, 1.0f, 0, m, vv);
        fba::FinishAdapterBuffer(fbb, fba::CreateAdapter(fbb, 1, rank, 8.0f, model->checksum(), c.n_layer, c.n_embd, c.ffn_hidden,
                                                         params, train));
        const std::string path = dir.file("a.emba");
        test::write_file(path, std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
        return path;
    };
    const auto rank = static_cast<uint32_t>(c.n_embd);
    const size_t need = LoraAdapter::param_count(c, c.n_embd);
    const std::string small = adapter_file(rank, 1, 0.9f, 1);
    g_largest_allocation = 0;
    const std::string holds = "adapter holds 1 values; rank " + std::to_string(rank) + " needs " + std::to_string(need);
    CHECK_THROWS_WITH_AS(LoraAdapter::load(small, *model), doctest::Contains(holds.c_str()), Error);
    // The refusal allocated nothing near the claimed adapter (it used to zero-fill it first).
    CHECK(g_largest_allocation.load() < need * sizeof(float) / 4);
    // A well-sized file loads; AdamW's ranges are checked by name.
    CHECK_NOTHROW(LoraAdapter::load(adapter_file(rank, need, 0.9f, 1), *model));
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(rank, need, 1.0f, 1), *model),
                         doctest::Contains("training state beta1 1 must be in [0, 1)"), Error);
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(rank, need, 0.9f, uint64_t{1} << 63), *model),
                         doctest::Contains("adam_step 9223372036854775808 is past 2^53"), Error);
}

TEST_CASE("adapter file: a training state that ember finetune would refuse as options is refused, naming the file") {
    // lr 0 resumed a run that trained nothing; eps 0 ran until 0 / 0 and was then reported as a
    // divergence blamed on lr; batch 0 and seq 0 were refused without naming the file.
    test::TempDir dir;
    auto model = Model::open(convert_to(dir, convert::WeightDType::I8));
    const ModelConfig& c = model->config();
    const size_t need = LoraAdapter::param_count(c, 4);
    auto adapter_file = [&](uint32_t batch, uint32_t seq, float lr, float eps, uint64_t adam_step = 1) {
        flatbuffers::FlatBufferBuilder fbb;
        const std::vector<float> v(need, 0.0f);
        const auto params = fbb.CreateVector(v);
        const auto m = fbb.CreateVector(v), vv = fbb.CreateVector(v);
        const auto train = fba::CreateTrainState(fbb, 1, adam_step, 0, batch, seq, lr, 0.0f, 0.9f, 0.999f, eps, 1.0f, 0, m, vv);
        fba::FinishAdapterBuffer(fbb, fba::CreateAdapter(fbb, 1, 4, 8.0f, model->checksum(), c.n_layer, c.n_embd, c.ffn_hidden, params, train));
        const std::string path = dir.file("t.emba");
        test::write_file(path, std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
        return path;
    };
    CHECK_NOTHROW(LoraAdapter::load(adapter_file(2, 8, 1e-3f, 1e-8f), *model));
    const std::string block = std::to_string(c.block_size);
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(2, 8, 0.0f, 1e-8f), *model), doctest::Contains("t.emba: training state lr 0 must be finite and > 0"), Error);
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(2, 8, 1e-3f, 0.0f), *model), doctest::Contains("t.emba: training state eps 0 must be finite and > 0 (AdamW divides by sqrt(v) + eps)"), Error);
    // An lr below a float's normal range, which --lr refuses (it was taken from the file), and
    // more AdamW steps than steps.
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(2, 8, 1e-45f, 1e-8f), *model), doctest::Contains("t.emba: training state lr 1.4013e-45 must be finite and > 0 (at least 1.17549e-38"), Error);
    CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(2, 8, 1e-3f, 1e-8f, 2), *model),
                         doctest::Contains("t.emba: training state adam_step 2 is past step 1 (a step takes at most one AdamW step)"), Error);
    for (const auto& [batch, seq] : {std::pair<uint32_t, uint32_t>{0, 8}, {4097, 8}, {2, 0}, {2, static_cast<uint32_t>(c.block_size + 1)}}) {
        const std::string want = "t.emba: training state batch " + std::to_string(batch) + " x seq " + std::to_string(seq) + " is outside [1, 4096] x [1, block_size = " + block + "]";
        CHECK_THROWS_WITH_AS(LoraAdapter::load(adapter_file(batch, seq, 1e-3f, 1e-8f), *model), doctest::Contains(want.c_str()), Error);
    }
}

TEST_CASE("a session whose arena exceeds the memory limit is refused by name before anything is allocated") {
    test::TempDir dir;
    auto model = Model::open(convert_to(dir, convert::WeightDType::I8));
    SessionOptions o;
    o.threads = 1;
    o.memory_limit = 4096;
    const MemoryPlan p = plan_memory(*model, 1, false);  // the default f16 cache: 2 x 2 x 16 x 32 x 2 bytes
    g_largest_allocation = 0;
    const std::string needs = ": a session needs " + std::to_string(p.total) +
                              " bytes of working memory (KV cache 4096 bytes for n_layer 2 x block_size 16 x n_embd 32) but the limit is 4096 bytes";
    CHECK_THROWS_WITH_AS((Session(*model, o)), doctest::Contains(needs.c_str()), Error);
    CHECK(g_largest_allocation.load() < p.total);
    o.memory_limit = p.total;
    CHECK_NOTHROW((Session(*model, o)));
    // The default limit is what the kernel reports available.
    CHECK(available_memory_bytes() > (uint64_t{1} << 20));
}

TEST_CASE("ResidentMemory: zero-filled, 2 MiB-aligned, every page resident at once, and a refusal that names what") {
    const size_t bytes = (size_t{3} << 20) + 5;
    ResidentMemory m(bytes, "the test arena");
    REQUIRE(m.data() != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(m.data()) % (size_t{2} << 20) == 0);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    CHECK(m.mapped_bytes() == (bytes + page - 1) / page * page);  // no 2 MiB rounding: costs its size
    // Resident before any write of ours (MADV_POPULATE_WRITE, or a write per page): mincore.
    std::vector<unsigned char> in_core(m.mapped_bytes() / page);
    REQUIRE(mincore(m.data(), m.mapped_bytes(), in_core.data()) == 0);
    CHECK(std::count(in_core.begin(), in_core.end(), 0) == 0);
    CHECK(std::all_of(m.data(), m.data() + bytes, [](uint8_t b) { return b == 0; }));
    m.data()[bytes - 1] = 7;  // writable to its last byte
    uint8_t* const p = m.data();
    ResidentMemory n = std::move(m);
    CHECK(n.data() == p);
    CHECK(m.data() == nullptr);
    CHECK(n.data()[bytes - 1] == 7);
    // More than any machine has: the mapping is refused, and the message says what it was for.
    CHECK_THROWS_WITH_AS(ResidentMemory(size_t{1} << 62, "the test arena"),
                         doctest::Contains("cannot allocate the test arena: 4611686018427387904 bytes ("), Error);
    // A size that rounding up to the page and the 2 MiB alignment would wrap past SIZE_MAX.
    CHECK_THROWS_WITH_AS(ResidentMemory(SIZE_MAX - 100, "the test arena"),
                         doctest::Contains("bytes (mmap: Cannot allocate memory)"), Error);
}

TEST_CASE("a prompt of more than INT_MAX tokens is refused, naming the limit, where the int count used to wrap") {
    // Session::append(const std::vector<int>&) counts with prompt_length; a vector of 2^31 ids
    // (8 GiB) is too much for a test, so the count itself is tried.
    const size_t max = static_cast<size_t>(std::numeric_limits<int>::max());
    CHECK(ember::prompt_length(0) == 0);
    CHECK(ember::prompt_length(max) == std::numeric_limits<int>::max());
    CHECK_THROWS_WITH_AS(ember::prompt_length(max + 1), doctest::Contains("prompt: 2147483648 tokens is more than the 2147483647"),
                         ember::Error);
    CHECK_THROWS_AS(ember::prompt_length(size_t{1} << 32), ember::Error);  // wrapped to 0 before
}

// GPT-2: the byte-level BPE tokenizer against OpenAI's tiktoken, the UTF-8 text stream, Hugging
// Face GPT-2 checkpoints against PyTorch, the same weights in nanoGPT's layout, and padding
// rows of the embedding that must never be sampled.
// Fixtures: tools/make_bpe_fixtures.mjs (tiktoken, TextDecoder), tools/make_gpt2_fixtures.py
// (torch), tests/fixtures/gpt2/tokenizer/ (GPT-2's encoder.json + vocab.bpe).
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "converter/checkpoint.h"
#include "converter/convert.h"
#include "converter/gpt2_tokenizer.h"
#include "runtime/bpe.h"
#include "runtime/model.h"
#include "runtime/error.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"
#include "gpt2_test_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

const BpeTokenizer& gpt2() {
    static const BpeTokenizer tok(convert::read_gpt2_tokenizer({fixture("gpt2/tokenizer")}));
    return tok;
}

std::string token_string(const BpeTokenizer& t, const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += t.token_bytes(id);
    return s;
}

std::string unhex(const std::string& h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) s.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return s;
}

std::vector<std::string> piece_strings(std::string_view text) {
    std::vector<std::string> out;
    for (const auto& [b, e] : gpt2_pieces(text, "t")) out.emplace_back(text.substr(b, e - b));
    return out;
}

std::unique_ptr<Model> convert_to(const test::TempDir& dir, const std::string& ckpt, const std::vector<std::string>& tokenizer,
                                  convert::ConvertResult* result = nullptr, convert::ArchChoice arch = convert::ArchChoice::Auto) {
    convert::ConvertOptions o;
    o.checkpoint = ckpt;
    o.out = dir.file("m.ember");
    o.tokenizer = tokenizer;
    o.arch = arch;
    o.write.dtype = convert::WeightDType::F32;
    const auto r = convert::convert(o);
    if (result) *result = r;
    return Model::open(o.out);
}

// The f32 KV cache: the callers compare with transformers' f32 logits within 1e-4, which the
// default f16 cache would not hold (it moves them by about 1e-3).
std::vector<float> all_logits(const Model& m, const std::vector<int>& ids) {
    SessionOptions so;
    so.threads = 2;
    so.kv_cache = KvDType::F32;
    so.all_logits = true;
    Session s(m, so);
    const float* p = s.forward_window(ids.data(), static_cast<int>(ids.size()));
    return std::vector<float>(p, p + ids.size() * static_cast<size_t>(m.config().vocab_size));
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    double e = 0.0;
    for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(a[i] - b[i]));
    return e;
}

const std::vector<std::string> kTiny = {fixture("gpt2/tiny_tokenizer/encoder.json"), fixture("gpt2/tiny_tokenizer/vocab.bpe")};

}  // namespace

TEST_CASE("GPT-2 BPE: ids equal tiktoken's for every fixture text, decoding gives the text back") {
    const auto j = test::load_json(fixture("gpt2/bpe_cases.json"));
    const BpeTokenizer& tok = gpt2();
    CHECK(tok.size() == 50257);
    CHECK(tok.n_merges() == 50000);
    CHECK(tok.find("<|endoftext|>") == 50256);
    int n = 0;
    for (const auto& c : j["cases"]) {
        const std::string text = c["text"].get<std::string>();
        const auto want = c["ids"].get<std::vector<int>>();
        CAPTURE(text);
        const auto got = tok.encode(text, "text");
        CHECK(got == want);
        CHECK(token_string(tok, want) == text);
        ++n;
    }
    CHECK(n > 300);
}

TEST_CASE("GPT-2 pre-tokenization pieces follow the pattern's alternatives") {
    CHECK(piece_strings("Hello world") == std::vector<std::string>{"Hello", " world"});
    CHECK(piece_strings("a  b") == std::vector<std::string>{"a", " ", " b"});
    CHECK(piece_strings("x   \n  y  ") == std::vector<std::string>{"x", "   \n ", " y", "  "});
    CHECK(piece_strings("don't we'll 'S") == std::vector<std::string>{"don", "'t", " we", "'ll", " '", "S"});
    CHECK(piece_strings("abc123 4!?") == std::vector<std::string>{"abc", "123", " 4", "!?"});
    CHECK(piece_strings("\nfoo") == std::vector<std::string>{"\n", "foo"});
    CHECK(piece_strings("日本 語") == std::vector<std::string>{"日本", " 語"});
    CHECK(piece_strings("").empty());
}

TEST_CASE("GPT-2 BPE: invalid UTF-8 is refused with the byte offset, a long run without spaces is fast") {
    const BpeTokenizer& tok = gpt2();
    CHECK_THROWS_WITH_AS(tok.encode("ok \xff", "prompt"), "prompt: invalid UTF-8 at byte 3", Error);
    CHECK_THROWS_WITH_AS(tok.encode("\xe2\x82", "prompt"), "prompt: invalid UTF-8 at byte 0", Error);
    std::string run;
    for (int i = 0; i < 20000; ++i) run += static_cast<char>('a' + (i * 7) % 26);
    const auto ids = tok.encode(run, "run");
    CHECK(token_string(tok, ids) == run);
    CHECK(ids.size() < run.size() * 3 / 4);  // merged, not bytes
}

TEST_CASE("UTF-8 replacement decoding equals TextDecoder / Python errors='replace'") {
    const auto j = test::load_json(fixture("gpt2/bpe_cases.json"));
    int n = 0;
    for (const auto& c : j["decode"]) {
        const std::string bytes = unhex(c["bytes"].get<std::string>());
        CAPTURE(c["bytes"].get<std::string>());
        CHECK(utf8_decode_replace(bytes) == unhex(c["text"].get<std::string>()));
        ++n;
    }
    CHECK(n > 300);
}

TEST_CASE("Utf8Stream: any split of the bytes streams the whole decode, held-back characters come whole") {
    const auto j = test::load_json(fixture("gpt2/bpe_cases.json"));
    std::mt19937 rng(5);
    for (const auto& c : j["decode"]) {
        const std::string bytes = unhex(c["bytes"].get<std::string>());
        Utf8Stream s(8);
        std::string out;
        for (size_t i = 0; i < bytes.size();) {
            const size_t k = std::min<size_t>(bytes.size() - i, 1 + rng() % 8);
            out += s.feed(bytes.data() + i, k);
            i += k;
        }
        out += s.finish();
        CHECK(out == utf8_decode_replace(bytes));
    }
    // Token by token through GPT-2's BPE: emoji split across tokens are held back, and every
    // piece printed is well-formed UTF-8.
    const BpeTokenizer& tok = gpt2();
    const std::string text = "Emoji 😀👍🏽 and 日本語 and e\u0301 👨‍👩‍👧‍👦!";
    const auto ids = tok.encode(text, "text");
    Utf8Stream s(static_cast<size_t>(tok.max_token_bytes()));
    std::string out;
    size_t max_held = 0;
    for (int id : ids) {
        const auto b = tok.token_bytes(id);
        const std::string_view piece = s.feed(b.data(), b.size());
        max_held = std::max(max_held, s.held());
        size_t pos = 0;
        uint32_t cp = 0;
        while (pos < piece.size()) REQUIRE(utf8_next(piece, pos, cp));
        out += piece;
    }
    CHECK(s.finish().empty());
    CHECK(out == text);
    CHECK(max_held > 0);  // some character did arrive split across tokens
    const std::string too_long(static_cast<size_t>(tok.max_token_bytes()) + 1, 'a');
    CHECK_THROWS_AS(s.feed(too_long.data(), too_long.size()), Error);  // more than it was sized for
}

TEST_CASE("verify_bpe refuses tables an encoder could not trust") {
    const BpeData good = convert::read_gpt2_tokenizer(kTiny);
    CHECK_NOTHROW(verify_bpe(good, "tiny"));
    auto refused = [&](auto mutate, const char* what) {
        BpeData d = good;
        mutate(d);
        CHECK_THROWS_WITH_AS(verify_bpe(d, "tiny"), doctest::Contains(what), Error);
    };
    refused([](BpeData& d) { d.merges[3].result = d.merges[4].result; }, "is not token");
    refused([](BpeData& d) { d.merges[0].left = 999999; }, "refers to a token past");
    refused([](BpeData& d) { std::swap(d.merges[0], d.merges[30]); }, "neither a byte nor the result of an earlier merge");
    refused([](BpeData& d) { d.merges.push_back(d.merges[0]); }, "already is");
    refused([](BpeData& d) { d.offsets.back() += 1; }, "token bytes are");
    refused([](BpeData& d) { d.offsets[5] = d.offsets[4]; }, "is empty");
    refused([](BpeData& d) { d.bytes[d.offsets[1]] = d.bytes[0]; }, "have the same bytes");
    refused([](BpeData& d) { d.offsets.resize(100); }, "needs 256");
}

TEST_CASE("Hugging Face GPT-2 (safetensors, pytorch_model.bin zip and legacy): logits equal transformers' math, tanh GELU, tied lm_head") {
    const auto ex = test::load_json(fixture("gpt2/expected.json"));
    const auto ids = ex["ids"].get<std::vector<int>>();
    const auto want = ex["logits_hf"].get<std::vector<double>>();
    for (const char* file : {"gpt2/hf/model.safetensors", "gpt2/hf/pytorch_model.bin", "gpt2/hf_legacy/pytorch_model.bin"}) {
        CAPTURE(file);
        test::TempDir dir;
        convert::ConvertResult r;
        auto m = convert_to(dir, fixture(file), kTiny, &r);
        const ModelConfig& c = m->config();
        CHECK(c.arch == Arch::HfGpt2);
        CHECK(c.activation == kernels::ActivationKind::GeluTanh);
        CHECK(c.tied_lm_head);
        CHECK(c.n_head == ex["config"]["n_head"].get<int>());
        CHECK(c.vocab_size == 320);
        CHECK(c.tokenizer_size == ex["tokenizer_size"].get<int>());
        CHECK(m->format_version() == 2);
        CHECK(r.dropped.size() == 4);  // attn.bias and attn.masked_bias of two layers
        CHECK(max_diff(all_logits(*m, ids), want) < 1e-4);

        // Greedy over the real rows only, past block_size, equals PyTorch's: with the f32 cache
        // (the exact run) and with the default f16 cache (these fixtures have no near ties).
        for (KvDType kv : {KvDType::F32, KvDType::F16}) {
            CAPTURE(std::string(kernels::kv_dtype_name(kv)));
            SessionOptions so;
            so.threads = 2;
            so.kv_cache = kv;
            Session s(*m, so);
            SamplerOptions g;
            g.temperature = 0.0f;
            Sampler sampler(g, c.tokenizer_size, s.sampler_probs(), s.sampler_ids());
            std::vector<int> seq = ex["greedy_hf"]["prompt"].get<std::vector<int>>();
            const auto want_seq = ex["greedy_hf"]["ids"].get<std::vector<int>>();
            s.append(seq.data(), static_cast<int>(seq.size()));
            while (seq.size() < want_seq.size()) {
                const int id = sampler.sample(s.logits());
                seq.push_back(id);
                s.append(&id, 1);
            }
            CHECK(seq == want_seq);
        }
    }
}

TEST_CASE("The same weights from the Hugging Face and the nanoGPT layouts give the same logits") {
    const auto ex = test::load_json(fixture("gpt2/expected.json"));
    const auto ids = ex["ids"].get<std::vector<int>>();
    test::TempDir nano_dir;
    auto nano = convert_to(nano_dir, fixture("gpt2/nanogpt/ckpt.pt"), kTiny);
    CHECK(nano->config().arch == Arch::NanoGPT);
    CHECK(nano->config().activation == kernels::ActivationKind::GeluErf);  // nanoGPT computes exact GELU
    const auto nano_logits = all_logits(*nano, ids);
    CHECK(max_diff(nano_logits, ex["logits_nanogpt"].get<std::vector<double>>()) < 1e-4);

    // The HF files with activation_function "gelu" (exact, as nanoGPT) beside them.
    test::TempDir hf_dir;
    std::filesystem::copy_file(fixture("gpt2/hf/model.safetensors"), hf_dir.file("model.safetensors"));
    auto cfg = test::load_json(fixture("gpt2/hf/config.json"));
    cfg["activation_function"] = "gelu";
    test::write_file(hf_dir.file("config.json"), cfg.dump());
    auto hf = convert_to(hf_dir, hf_dir.file("model.safetensors"), kTiny);
    CHECK(hf->config().activation == kernels::ActivationKind::GeluErf);
    const auto hf_logits = all_logits(*hf, ids);
    double e = 0.0;
    for (size_t i = 0; i < hf_logits.size(); ++i) e = std::max(e, static_cast<double>(std::fabs(hf_logits[i] - nano_logits[i])));
    CHECK(e < 1e-5);
}

TEST_CASE("Hugging Face GPT-2: missing or inconsistent config.json is a clear error") {
    test::TempDir dir;
    std::filesystem::copy_file(fixture("gpt2/hf/model.safetensors"), dir.file("model.safetensors"));
    CHECK_THROWS_WITH_AS(convert_to(dir, dir.file("model.safetensors"), kTiny), doctest::Contains("needs its config.json beside it"), Error);
    auto cfg = test::load_json(fixture("gpt2/hf/config.json"));
    cfg["n_head"] = 3;
    test::write_file(dir.file("config.json"), cfg.dump());
    CHECK_THROWS_WITH_AS(convert_to(dir, dir.file("model.safetensors"), kTiny), doctest::Contains("n_embd 32 is not divisible by n_head 3"), Error);
    cfg["n_head"] = 4;
    cfg["n_embd"] = 64;
    test::write_file(dir.file("config.json"), cfg.dump());
    CHECK_THROWS_WITH_AS(convert_to(dir, dir.file("model.safetensors"), kTiny), doctest::Contains("n_embd = 64 but the weights give 32"), Error);
    cfg["n_embd"] = 32;
    cfg["activation_function"] = "swish";
    test::write_file(dir.file("config.json"), cfg.dump());
    CHECK_THROWS_WITH_AS(convert_to(dir, dir.file("model.safetensors"), kTiny), doctest::Contains("activation_function 'swish' is not supported"), Error);
    // The real GPT-2 tokenizer (50257 tokens) does not fit a 320-row embedding.
    test::write_file(dir.file("config.json"), test::read_file(fixture("gpt2/hf/config.json")));
    CHECK_THROWS_WITH_AS(convert_to(dir, dir.file("model.safetensors"), {fixture("gpt2/tokenizer")}),
                         doctest::Contains("the tokenizer has 50257 tokens but the checkpoint's wte has only 320 rows"), Error);
}

TEST_CASE("GPT-2's tokenizer with an embedding padded to 50304 rows: padding rows are never sampled") {
    // A tiny random model of GPT-2's padded vocabulary whose padding rows have the largest
    // logits (lm_head bias 1000): any sampler that looked at them would pick them.
    const int V = 50304, C = 8, S = 8;
    convert::CanonicalModel cm = test::tiny_gpt2_model(V, C, S, 3);
    for (int i = 50257; i < V; ++i) cm.tensors.back().values[static_cast<size_t>(i)] = 1000.0f;
    convert::TokenizerSpec spec;
    spec.bpe = convert::read_gpt2_tokenizer({fixture("gpt2/tokenizer/vocab.bpe"), fixture("gpt2/tokenizer/encoder.json")});
    test::TempDir dir;
    const std::string path = dir.file("gpt2pad.ember");
    convert::write_ember(cm, spec, {"random", "", "GPT-2"}, {convert::WeightDType::I8, 64}, path);

    auto m = Model::open(path);
    CHECK(m->format_version() == 2);
    CHECK(m->config().vocab_size == V);
    CHECK(m->config().tokenizer_size == 50257);
    const auto tok = make_tokenizer(*m);
    CHECK(tok->size() == 50257);
    CHECK(tok->start_id() == 50256);  // <|endoftext|>
    SessionOptions so;
    so.threads = 2;
    Session s(*m, so);
    const std::vector<int> prompt = tok->encode("Hello, world 😀", "prompt");
    s.append(prompt.data(), static_cast<int>(prompt.size()));
    const float* logits = s.logits();
    CHECK(std::max_element(logits, logits + V) - logits >= 50257);  // the padding would win
    SamplerOptions hot;
    hot.temperature = 2.0f;
    Sampler sampler(hot, tok->size(), s.sampler_probs(), s.sampler_ids());
    for (int i = 0; i < 200; ++i) {
        const int id = sampler.sample(s.logits());
        REQUIRE(id < 50257);
        s.append(&id, 1);
    }

    // The command line: greedy generation streams valid UTF-8 from real tokens only; info
    // names the tokenizer and the padding.
    const std::string out = dir.file("out"), err = dir.file("err");
    auto run = [&](const std::string& args) {
        const int rc = std::system((test::program_cmd(EMBER_CLI) + " " + args + " >'" + out + "' 2>'" + err + "' </dev/null").c_str());
        return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    };
    CHECK(run("generate -m '" + path + "' -p 'Hello 😀' -n 30 --temperature 0.8 --threads 2") == 0);
    const std::string text = test::read_file(out);
    CHECK(text.rfind("Hello 😀", 0) == 0);
    CHECK_NOTHROW(utf8_decode(text, "generated text"));
    CHECK(run("info '" + path + "'") == 0);
    CHECK(test::read_file(out).find("tokenizer: byte-level BPE (GPT-2), 50257 tokens, 50000 merges; rows 50257..50303 of wte are padding") !=
          std::string::npos);
    CHECK(run("generate -m '" + path + "' -p 'bad \xff' -n 3") == 1);
    CHECK(test::read_file(err).find("prompt: invalid UTF-8 at byte 4") != std::string::npos);
}

TEST_CASE("ember convert with --tokenizer: the summary names what was transposed, tied and padded, bad inputs leave no file") {
    test::TempDir dir;
    const std::string out = dir.file("out"), err = dir.file("err");
    auto run = [&](const std::string& args) {
        const int rc = std::system((test::program_cmd(EMBER_CLI) + " " + args + " >'" + out + "' 2>'" + err + "' </dev/null").c_str());
        return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    };
    const std::string tiny = " --tokenizer '" + kTiny[1] + "' --tokenizer '" + kTiny[0] + "'";  // vocab.bpe first: either order
    REQUIRE(run("convert '" + fixture("gpt2/hf/pytorch_model.bin") + "'" + tiny + " -o '" + dir.file("m.ember") + "'") == 0);
    const std::string s = test::read_file(out);
    CHECK(s.find("architecture: hf-gpt2 (gelu (tanh), lm_head tied to wte)") != std::string::npos);
    CHECK(s.find("tokenizer: byte-level BPE, 297 tokens, 40 merges; wte rows 297..319 are padding, never sampled") != std::string::npos);
    CHECK(s.find("Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) transposed from [in, out]") != std::string::npos);
    CHECK(s.find("dropped buffers: 4") != std::string::npos);

    auto refused = [&](const std::string& args, const std::string& what) {
        CHECK(run(args + " -o '" + dir.file("bad.ember") + "'") == 1);
        const std::string e = test::read_file(err);
        CAPTURE(e);
        CHECK(e.rfind("ember: error: ", 0) == 0);
        CHECK(e.find(what) != std::string::npos);
        CHECK(!std::filesystem::exists(dir.file("bad.ember")));
    };
    refused("convert '" + fixture("gpt2/hf/model.safetensors") + "' --tokenizer '" + kTiny[0] + "'",
            "encoder.json: a JSON object without a \"model\" object, not a tokenizers tokenizer.json; --tokenizer takes a tokenizer.json, GPT-2's encoder.json and vocab.bpe");
    refused("convert '" + fixture("gpt2/hf/model.safetensors") + "' --tokenizer '" + kTiny[0] + "' --tokenizer '" + kTiny[0] + "'",
            "give GPT-2's encoder.json (a JSON object) and vocab.bpe");
    refused("convert '" + fixture("gpt2/hf/model.safetensors") + "'" + tiny + " --vocab-text '" + kTiny[1] + "'", "excludes");
    refused("convert '" + fixture("gpt2/hf/model.safetensors") + "' --tokenizer '" + fixture("gpt2") + "'",
            "holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt");
    test::write_file(dir.file("vocab.bpe"), "#version: 0.2\n\xc4\xa0 t\nno_such token\n");
    refused("convert '" + fixture("gpt2/hf/model.safetensors") + "' --tokenizer '" + kTiny[0] + "' --tokenizer '" + dir.file("vocab.bpe") + "'",
            "vocab.bpe:3: merge 'no_such token' uses token 'no_such', which");
}

TEST_CASE("An .ember whose BPE tables were altered is refused at load (the index is untrusted too)") {
    test::TempDir dir;
    auto m = convert_to(dir, fixture("gpt2/hf/model.safetensors"), kTiny);
    m.reset();
    std::string bytes = test::read_file(dir.file("m.ember"));
    // Token bytes of merges 0..3 of GPT-2: " t", " a", "he", "in" (stored one after another).
    const std::string run = " t ahein";
    const size_t at = bytes.find(run);
    REQUIRE(at != std::string::npos);
    REQUIRE(bytes.find(run, at + 1) == std::string::npos);
    bytes[at + 4] = 'x';  // "he" -> "xe": merge 2 (h, e) no longer makes its token
    test::write_file(dir.file("bad.ember"), bytes);
    CHECK_THROWS_WITH_AS(Model::open(dir.file("bad.ember")), doctest::Contains("BPE merge 2: token 258 is not token"), Error);
    bytes[at + 4] = 'h';
    bytes[at + 5] = 'h';  // "he" -> "hh", the same bytes as no other token, still not h + e
    test::write_file(dir.file("bad.ember"), bytes);
    CHECK_THROWS_WITH_AS(Model::open(dir.file("bad.ember")), doctest::Contains("BPE merge 2"), Error);
}

TEST_CASE("torch's legacy checkpoint format: cut or altered files are refused with a message") {
    const std::string good = test::read_file(fixture("gpt2/hf_legacy/pytorch_model.bin"));
    test::TempDir dir;
    auto refused = [&](const std::string& bytes, const char* what) {
        test::write_file(dir.file("p.bin"), bytes);
        CHECK_THROWS_WITH_AS(convert::read_checkpoint(dir.file("p.bin")), doctest::Contains(what), Error);
    };
    refused(good.substr(0, good.size() - 100), "past the end of the file");
    refused(good.substr(0, 2000), "runs past the end of the pickle");
    std::string other_magic = good;
    other_magic[5] = 0;
    refused(other_magic, "a bare pickle, not a PyTorch checkpoint");
    std::string bad_version = good;
    bad_version[good.find("\x4d\xe9\x03") + 1] = 0x00;  // protocol version 1001 -> 768
    refused(bad_version, "protocol version other than 1001");
    // Every prefix of the file is refused cleanly (no crash, no accepted partial checkpoint).
    for (size_t n = 0; n < good.size(); n += 997) {
        test::write_file(dir.file("p.bin"), good.substr(0, n));
        CHECK_THROWS_AS(convert::read_checkpoint(dir.file("p.bin")), Error);
    }
}

TEST_CASE("GPT-2 BPE on random input: valid UTF-8 round-trips, anything else is refused with Error") {
    const BpeTokenizer& tok = gpt2();
    std::mt19937 rng(11);
    const uint32_t pool[] = {' ', '\n', '\t', 'a', 'Z', '0', '\'', '!', 's', 0xA0, 0x301, 0x3000, 0x4E00, 0x1F600, 0x200D, 0x85};
    for (int i = 0; i < 500; ++i) {
        std::string text;
        const int n = 1 + static_cast<int>(rng() % 40);
        for (int j = 0; j < n; ++j) {
            char buf[4];
            const uint32_t cp = rng() % 3 ? pool[rng() % std::size(pool)] : 0x20 + rng() % 0x2FFF0;
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            text.append(buf, static_cast<size_t>(utf8_encode(cp, buf)));
        }
        CAPTURE(text);
        const auto ids = tok.encode(text, "text");
        CHECK(token_string(tok, ids) == text);
        std::string bytes = text;
        bytes[rng() % bytes.size()] = static_cast<char>(0x80 + rng() % 0x80);
        size_t pos = 0;
        uint32_t cp = 0;
        bool valid = true;
        while (valid && pos < bytes.size()) valid = utf8_next(bytes, pos, cp);
        if (valid) {
            CHECK(token_string(tok, tok.encode(bytes, "bytes")) == bytes);
        } else {
            CHECK_THROWS_WITH_AS(tok.encode(bytes, "bytes"), doctest::Contains("bytes: invalid UTF-8 at byte"), Error);
        }
    }
}

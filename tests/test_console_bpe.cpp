// The serial console with a byte-level BPE (GPT-2) model and on-device fine-tuning:
// gen streams whole characters (a character split across tokens comes out whole, the text
// equals `ember generate` and the decode of the whole sequence, a Ctrl-C flushes the held
// tail), `finetune` writes adapters over the pty (Ctrl-C stops it, --resume goes on),
// `adapter` uses one; `ember finetune` on a BPE model.
#include <doctest/doctest.h>

#include <pty.h>
#include <sys/wait.h>

#include <cmath>
#include <random>
#include <thread>

#include "converter/checkpoint.h"
#include "converter/gpt2_tokenizer.h"
#include "converter/writer.h"
#include "firmware/console.h"
#include "firmware/fw_test_util.h"
#include "runtime/adapter.h"
#include "runtime/bpe.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"
#include "cli_util.h"
#include "gpt2_test_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::q;
using ember::test::Run;

namespace {

const std::string kEmoji = "\xF0\x9F\x98\x80";  // U+1F600, several GPT-2 tokens

// A tiny random model with GPT-2's tokenizer (50257 tokens, wte padded to 50304 rows). Its
// lm_head bias makes the tokens of U+1F600 likely (the first, an incomplete UTF-8 sequence,
// more than the rest), so generations often hold a character split across tokens; padding
// rows get the largest bias, so a sampler that looked at them would pick them.
std::string make_bpe_model(const test::TempDir& dir, const std::string& name) {
    const int V = 50304, C = 8, S = 16;
    convert::TokenizerSpec spec;
    spec.bpe = convert::read_gpt2_tokenizer({fixture("gpt2/tokenizer/vocab.bpe"), fixture("gpt2/tokenizer/encoder.json")});
    const BpeTokenizer bpe(spec.bpe);
    const std::vector<int> emoji = bpe.encode(kEmoji, "emoji");
    convert::CanonicalModel cm = test::tiny_gpt2_model(V, C, S, 11);
    std::vector<float>& bias = cm.tensors.back().values;
    for (size_t i = 0; i < emoji.size(); ++i) bias[static_cast<size_t>(emoji[i])] = i == 0 ? 14.0f : 13.0f;
    for (int i = 50257; i < V; ++i) bias[static_cast<size_t>(i)] = 1000.0f;
    const std::string path = dir.file(name + ".ember");
    convert::write_ember(cm, spec, {"random", "", "GPT-2"}, {convert::WeightDType::I8, 64}, path);
    return path;
}

// The runtime's generate loop: the ids sampled after `prompt` (empty: the start id).
std::vector<int> reference_ids(const Model& m, const Tokenizer& tok, const std::string& prompt, int n, uint64_t seed,
                               const LoraAdapter* adapter = nullptr) {
    SessionOptions so;
    so.threads = 1;
    so.adapter = adapter;
    Session s(m, so);
    SamplerOptions o;
    o.seed = seed;
    Sampler smp(o, tok.size(), s.sampler_probs(), s.sampler_ids());
    const std::vector<int> ids = prompt.empty() ? std::vector<int>{tok.start_id()} : tok.encode(prompt, "prompt");
    s.append(ids.data(), static_cast<int>(ids.size()));
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
        const int id = smp.sample(s.logits());
        out.push_back(id);
        if (i + 1 < n) s.append(&id, 1);
    }
    return out;
}

bool is_complete_utf8(std::string_view b) {
    size_t pos = 0;
    uint32_t cp = 0;
    while (pos < b.size())
        if (!utf8_next(b, pos, cp)) return false;
    return true;
}

// A console on a pty slave in a thread; the test talks to the master.
class PtyConsole {
public:
    explicit PtyConsole(fw::ConsoleOptions o) {
        REQUIRE(::openpty(&master_, &slave_, nullptr, nullptr, nullptr) == 0);
        fw::configure_raw(slave_, 115200, false);
        th_ = std::thread([this, o] {
            fw::Console c(slave_, slave_, o);
            c.run();
        });
        REQUIRE(wait_for("> ") != std::string::npos);
    }
    ~PtyConsole() {
        ::close(master_);  // the slave sees a hang-up
        th_.join();
        ::close(slave_);
    }
    void send(const std::string& s) { fw::write_all(master_, s.data(), s.size()); }
    // Waits for pattern after the last match; returns its end or npos.
    size_t wait_for(const std::string& pattern, int timeout_ms = 20000) {
        const size_t k = fwtest::expect(master_, seen_, pattern, mark_, timeout_ms);
        if (k != std::string::npos) mark_ = k;
        return k;
    }
    // Sends a command and returns what it printed up to and including its OK/ERR line.
    std::string command(const std::string& line, int timeout_ms = 60000) {
        const size_t from = mark_;
        send(line + "\n");
        const size_t k = fwtest::expect(master_, seen_, "\n> ", from, timeout_ms);
        REQUIRE(k != std::string::npos);
        mark_ = k;
        return seen_.substr(from, k - 3 - from + 1);
    }
    const std::string& seen() const { return seen_; }

private:
    int master_ = -1, slave_ = -1;
    std::thread th_;
    std::string seen_;
    size_t mark_ = 0;
};

fw::ConsoleOptions opts_for(const test::TempDir& dir, const std::string& load) {
    fw::ConsoleOptions o;
    o.models_dir = dir.path();
    o.threads = 1;
    o.load = load;
    return o;
}

}  // namespace

TEST_CASE("console with a GPT-2 BPE model: gen equals ember generate and the decode of the whole sequence, split characters whole") {
    test::TempDir dir;
    const std::string path = make_bpe_model(dir, "bpe");
    auto m = Model::open(path);
    const auto tok = make_tokenizer(*m);
    REQUIRE(std::string(tok->kind()) == "byte-level BPE");
    // U+1F600 is several tokens; the first holds an incomplete UTF-8 sequence.
    const std::vector<int> emoji = tok->encode(kEmoji, "emoji");
    REQUIRE(emoji.size() >= 2);
    REQUIRE_FALSE(is_complete_utf8(tok->token_bytes(emoji[0])));

    PtyConsole c(opts_for(dir, "bpe"));
    const std::string info = c.command("info");
    CHECK(info.find("tokenizer: byte-level BPE, 50257 tokens\n") != std::string::npos);
    CHECK(info.find("adapter: none\n") != std::string::npos);

    const int n = 40;
    int split_seen = 0;
    for (const std::string& prompt : {std::string("Hello "), std::string()}) {
        for (uint64_t seed : {1ull, 7ull, 42ull}) {
            CAPTURE(prompt);
            CAPTURE(seed);
            const std::string out = c.command("gen -n " + std::to_string(n) + " --seed " + std::to_string(seed) + " " + prompt);
            const size_t ok = out.find("\nOK gen " + std::to_string(n) + " tokens in ");
            REQUIRE(ok != std::string::npos);
            const std::string text = out.substr(0, ok);
            // ember generate with the same seed prints the same text.
            const Run ref = ember_cli("generate -m " + q(path) + (prompt.empty() ? "" : " -p " + q(prompt)) + " -n " + std::to_string(n) +
                                          " --seed " + std::to_string(seed) + " --threads 1",
                                      dir);
            REQUIRE(ref.status == 0);
            CHECK(text + "\n" == ref.out);
            // The decode of the whole sequence (the prompt is printed as typed).
            const std::vector<int> ids = reference_ids(*m, *tok, prompt, n, seed);
            for (int id : ids) REQUIRE(id < 50257);  // padding rows never sampled
            CHECK(text == prompt + tok->decode(ids));
            CHECK_NOTHROW(utf8_decode(text, "console output"));
            // A character split across tokens came out whole: its first token alone is not UTF-8.
            bool split = false;
            for (size_t i = 0; i + emoji.size() <= ids.size(); ++i)
                split = split || std::equal(emoji.begin(), emoji.end(), ids.begin() + static_cast<std::ptrdiff_t>(i));
            if (split) {
                ++split_seen;
                CHECK(text.find(kEmoji) != std::string::npos);
            }
        }
    }
    CHECK(split_seen > 0);
}

TEST_CASE("console with a GPT-2 BPE model: Ctrl-C mid-character flushes the held tail, the text is the decode of the tokens made") {
    test::TempDir dir;
    const std::string path = make_bpe_model(dir, "bpe");
    auto m = Model::open(path);
    const auto tok = make_tokenizer(*m);
    fw::ConsoleOptions o = opts_for(dir, "bpe");
    PtyConsole c(o);
    // Where the stop lands is chance: the tokens' first (incomplete) token is the likeliest,
    // so a few stops see at least one with bytes held back.
    int held_seen = 0;
    for (int attempt = 0; attempt < 8 && held_seen == 0; ++attempt) {
        const uint64_t seed = 100 + static_cast<uint64_t>(attempt);
        c.send("gen -n 1000000 --seed " + std::to_string(seed) + " Hi\n");
        const size_t hi = c.wait_for("Hi");
        REQUIRE(hi != std::string::npos);
        const size_t start = hi - 2;
        ::usleep(50 * 1000);
        c.send("\x03");
        const size_t end = c.wait_for("\n^C\nOK gen interrupted after ");
        REQUIRE(end != std::string::npos);
        REQUIRE(c.wait_for(" tokens\n> ") != std::string::npos);
        const std::string text = c.seen().substr(start, end - std::string("\n^C\nOK gen interrupted after ").size() - start);
        const int made = static_cast<int>(std::stoll(c.seen().substr(end)));
        REQUIRE(made > 0);
        const std::vector<int> ids = reference_ids(*m, *tok, "Hi", made, seed);
        CHECK(text == "Hi" + tok->decode(ids));
        CHECK_NOTHROW(utf8_decode(text, "console output"));
        Utf8Stream s(static_cast<size_t>(tok->max_token_bytes()));
        for (int id : ids) s.feed(tok->token_bytes(id).data(), tok->token_bytes(id).size());
        if (s.held() > 0) ++held_seen;
    }
    CHECK(held_seen > 0);
}

TEST_CASE("console finetune: writes a valid adapter, adapter NAME is used by gen and eval, Ctrl-C stops and --resume goes on") {
    test::TempDir dir;
    const std::string text = fixture("gptpy/eval.txt");
    test::write_file(dir.file("tiny.ember"), test::read_file(fwtest::model_int8()));
    PtyConsole c(opts_for(dir, "tiny"));
    auto m = Model::open(dir.file("tiny.ember"));

    // Bad options: one ERR line each, nothing written, the console goes on.
    const std::pair<std::string, std::string> bad[] = {
        {"finetune", "ERR finetune: usage: finetune [options] FILE"},
        {"finetune --steps x " + text, "ERR finetune: --steps: 'x' is not an integer"},
        {"finetune --steps -1 " + text, "ERR finetune: --steps -1 not in 0..1073741824"},
        {"finetune --lr 0 " + text, "ERR finetune: --lr 0 must be > 0"},
        {"finetune --bogus 1 " + text, "ERR finetune: unknown option '--bogus'"},
        {"finetune --rank", "ERR finetune: option --rank needs a value"},
        {"finetune --name ../x " + text, "ERR finetune: --name: model name '../x' holds a '/': a name, not a path"},
        {"finetune --steps 1 /nonexistent/text.txt", "ERR "},
        {"finetune --steps 1 --seq 17 " + text, "ERR "},  // block_size 16
        {"finetune --steps 1 --resume nothere " + text, "ERR finetune: --resume: no adapter nothere"},
        {"finetune " + text + " extra", "ERR finetune: unexpected argument 'extra'"},
        {"adapter", "ERR adapter: usage: adapter NAME | adapter off"},
        {"adapter nothere", "ERR adapter: no adapter nothere"},
        // The file's name with its suffix: the name to give is said (it showed nothere.emba.emba only).
        {"adapter nothere.emba", "ERR adapter: no adapter nothere.emba (" + dir.file("nothere.emba.emba") + "); give the name without .emba (adapter nothere)"},
    };
    for (const auto& [line, want] : bad) {
        CAPTURE(line);
        const std::string out = c.command(line);
        CHECK(out.find(want) == 0);
        CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    }
    CHECK_FALSE(fwtest::exists(dir.file("tiny.emba")));

    // A short run: progress, then the adapter in DIR.
    std::string out = c.command("finetune --steps 2 --batch 1 --seq 16 --rank 4 --lr 0.01 --eval-every 1 --name ad " + text);
    CAPTURE(out);
    CHECK(out.find("step 0: val loss ") != std::string::npos);
    CHECK(out.find("step 1/2  loss ") != std::string::npos);
    CHECK(out.find("  val ") != std::string::npos);
    CHECK(out.find(" tokens/s") != std::string::npos);
    CHECK(out.find("OK finetune ad.emba at step 2: val loss ") != std::string::npos);
    auto a = LoraAdapter::load(dir.file("ad.emba"), *m);
    CHECK(a->rank() == 4);
    CHECK(a->train.present);
    CHECK(a->train.step == 2);
    // Steps already reached: nothing written (an untrained adapter used to replace ad.emba).
    const std::string trained = ember::test::read_file(dir.file("ad.emba"));
    CHECK(c.command("finetune --steps 0 --name ad " + text).find("OK finetune ad.emba: already at step 0 (--steps 0), nothing written") !=
          std::string::npos);
    CHECK(c.command("finetune --resume ad --steps 1 " + text).find("OK finetune ad.emba: already at step 2 (--steps 1), nothing written") !=
          std::string::npos);
    CHECK(ember::test::read_file(dir.file("ad.emba")) == trained);
    // A resumed run refuses new settings.
    CHECK(c.command("finetune --resume ad --lr 0.1 " + text).find("ERR finetune: --resume takes") == 0);

    // gen and eval with the adapter equal the CLI's with --adapter.
    CHECK(c.command("adapter ad").find("OK adapter ad: rank 4, alpha 16, step 2") == 0);
    CHECK(c.command("info").find("adapter: ad (rank 4, alpha 16)\n") != std::string::npos);
    out = c.command("gen -n 30 --seed 3 The");
    Run ref = ember_cli("generate -m " + q(dir.file("tiny.ember")) + " --adapter " + q(dir.file("ad.emba")) + " -p The -n 30 --seed 3 --threads 1", dir);
    REQUIRE(ref.status == 0);
    CHECK(out.substr(0, ref.out.size()) == ref.out);
    out = c.command("eval " + text);
    ref = ember_cli("eval -m " + q(dir.file("tiny.ember")) + " --adapter " + q(dir.file("ad.emba")) + " --text " + q(text) + " --threads 1", dir);
    REQUIRE(ref.status == 0);
    CHECK(out == "OK " + ref.out);
    // Training the adapter in use reloads it: eval sees the new values, as the CLI does.
    out = c.command("finetune --resume ad --steps 3 " + text);
    CAPTURE(out);
    CHECK(out.find("OK finetune ad.emba at step 3: val loss ") != std::string::npos);
    CHECK(out.find(" (adapter ad reloaded)") != std::string::npos);
    out = c.command("eval " + text);
    ref = ember_cli("eval -m " + q(dir.file("tiny.ember")) + " --adapter " + q(dir.file("ad.emba")) + " --text " + q(text) + " --threads 1", dir);
    REQUIRE(ref.status == 0);
    CHECK(out == "OK " + ref.out);
    CHECK(c.command("adapter off").find("OK adapter ad off") == 0);
    out = c.command("eval " + text);
    ref = ember_cli("eval -m " + q(dir.file("tiny.ember")) + " --text " + q(text) + " --threads 1", dir);
    CHECK(out == "OK " + ref.out);

    // Ctrl-C during a long run: stops after a step, the adapter holds that step, --resume goes on.
    c.send("finetune --steps 1000000 --batch 1 --seq 16 --rank 4 --eval-every 1000000 --name long " + text + "\n");
    REQUIRE(c.wait_for("step 1/1000000  loss ") != std::string::npos);
    c.send("\x03");
    const size_t end = c.wait_for("^C\nOK finetune interrupted at step ");
    REQUIRE(end != std::string::npos);
    REQUIRE(c.wait_for("\n> ") != std::string::npos);
    const int64_t stopped = std::stoll(c.seen().substr(end));
    CHECK(stopped >= 1);
    CHECK(stopped < 1000000);
    a = LoraAdapter::load(dir.file("long.emba"), *m);
    CHECK(a->train.step == static_cast<uint64_t>(stopped));
    out = c.command("finetune --resume long --steps " + std::to_string(stopped + 2) + " " + text);
    CHECK(out.find("step " + std::to_string(stopped) + ": val loss ") != std::string::npos);
    CHECK(out.find("(resumed)") != std::string::npos);
    CHECK(out.find("OK finetune long.emba at step " + std::to_string(stopped + 2)) != std::string::npos);
    CHECK(LoraAdapter::load(dir.file("long.emba"), *m)->train.step == static_cast<uint64_t>(stopped + 2));
    CHECK(c.command("info").find("OK info") != std::string::npos);
}

TEST_CASE("finetune on a GPT-2 BPE model: ember finetune and the console, loss finite, the adapter loads") {
    test::TempDir dir;
    const std::string path = make_bpe_model(dir, "bpe"), text = fixture("gptpy/eval.txt"), a = dir.file("a.emba");
    auto m = Model::open(path);
    const Run r = ember_cli("finetune -m " + q(path) + " --text " + q(text) + " --steps 2 --batch 1 --seq 8 --rank 4 --threads 1 -o " + q(a) +
                                " --skip-unknown",
                            dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("outside the vocabulary") == std::string::npos);  // BPE: nothing to skip
    const double loss = std::stod(r.out.substr(r.out.find("step 1/2  loss ") + 15));
    CHECK(std::isfinite(loss));
    CHECK(loss > 0);
    const auto ad = LoraAdapter::load(a, *m);
    CHECK(ad->train.step == 2);
    CHECK(ember_cli("generate -m " + q(path) + " --adapter " + q(a) + " -n 5 --seed 1", dir).status == 0);

    PtyConsole c(opts_for(dir, "bpe"));
    const std::string out = c.command("finetune --steps 2 --batch 1 --seq 8 --rank 4 " + text);
    CAPTURE(out);
    CHECK(out.find("OK finetune bpe.emba at step 2: val loss ") != std::string::npos);
    CHECK(std::isfinite(std::stod(out.substr(out.find("step 1/2  loss ") + 15))));
    CHECK(LoraAdapter::load(dir.file("bpe.emba"), *m)->train.step == 2);
    CHECK(c.command("adapter bpe").find("OK adapter bpe") == 0);
    CHECK(c.command("gen -n 5 --seed 1 Hi").find("OK gen 5 tokens") != std::string::npos);
}

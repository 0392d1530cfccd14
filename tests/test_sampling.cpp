// Sampling beyond temperature / top-k / top-p: the repetition penalty and greedy decoding with
// it against PyTorch (tests/fixtures/sampling, tools/make_sampling_fixtures.py), stop strings
// (held back while undecided, against PyTorch's greedy text and a reference on random text),
// the one table of sampling options that `ember generate` and the console's gen share, and
// generate's prompt options (-f, -e, --skip-unknown), --stats and the nearest-name suggestions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "converter/convert.h"
#include "firmware/console_parser.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/gen_options.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/stop_strings.h"
#include "runtime/suggest.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"
#include "convert_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::fixture;
using ember::test::q;

namespace {

// The gpt.py fixture in f32 weights (the fixture's logits are f32 PyTorch).
std::string convert_f32(const test::TempDir& dir) { return test::convert_gptpy(dir, convert::WeightDType::F32, "f32.ember"); }

std::vector<int> ints(const nlohmann::json& j) { return j.get<std::vector<int>>(); }
std::vector<float> floats(const nlohmann::json& j) { return j.get<std::vector<float>>(); }

// Greedy text after the fixture's prompt through the runtime's generate loop.
struct Generated {
    std::string text;
    GenerateResult r;
};
Generated generate(const Model& m, const nlohmann::json& ex, int n, SamplerOptions so, const std::vector<std::string>& stops = {}) {
    SessionOptions opt;
    opt.threads = 1;
    opt.kv_cache = KvDType::F32;
    Session s(m, opt);
    const auto tok = make_tokenizer(m);
    const std::vector<int> prompt = ints(ex["prompt_ids"]);
    s.append(prompt.data(), static_cast<int>(prompt.size()));
    Utf8Stream stream(static_cast<size_t>(tok->max_token_bytes()));
    StopStrings st(stops, 64);
    Generated g;
    g.r = s.generate(n, so, *tok, stream, [&](std::string_view t) { g.text += t; }, {}, stops.empty() ? nullptr : &st);
    return g;
}

// The stop rule on whole text fed in pieces: the first piece after which the text holds a stop
// string ends it; what is printed is the text before the earliest stop string it holds.
std::string stop_reference(const std::vector<std::string>& pieces, const std::vector<std::string>& stops, int* which) {
    std::string text;
    *which = -1;
    for (const std::string& p : pieces) {
        text += p;
        size_t first = std::string::npos;
        for (size_t i = 0; i < stops.size(); ++i) {
            const size_t at = text.find(stops[i]);
            if (at < first) first = at, *which = static_cast<int>(i);
        }
        if (first != std::string::npos) return text.substr(0, first);
    }
    return text;
}

}  // namespace

TEST_CASE("repetition penalty: equals Hugging Face's RepetitionPenaltyLogitsProcessor on the fixture's logits") {
    const auto ex = test::load_json(fixture("sampling/expected.json"));
    test::TempDir dir;
    auto m = Model::open(convert_f32(dir));
    SessionOptions opt;
    opt.threads = 1;
    opt.kv_cache = KvDType::F32;
    Session s(*m, opt);
    const std::vector<int> prompt = ints(ex["prompt_ids"]);
    s.append(prompt.data(), static_cast<int>(prompt.size()));
    const int V = m->config().vocab_size;
    for (const auto& c : ex["penalty"]) {
        const float R = c["penalty"].get<float>();
        const std::vector<float> torch_logits = floats(c["logits"]), want = floats(c["penalized"]);
        const std::vector<int> recent = ints(c["recent"]);
        REQUIRE(static_cast<int>(torch_logits.size()) == V);
        // On PyTorch's own logits: the same arithmetic, so equal to rounding.
        std::vector<float> l(V);
        apply_repeat_penalty(torch_logits.data(), V, recent.data(), static_cast<int>(recent.size()), R, l.data());
        double err = 0, moved = 0;
        for (int i = 0; i < V; ++i) err = std::max(err, static_cast<double>(std::fabs(l[i] - want[i])));
        for (int i = 0; i < V; ++i) moved = std::max(moved, static_cast<double>(std::fabs(torch_logits[i] - want[i])));
        CAPTURE(R);
        CHECK(err <= 1e-6);
        CHECK(moved > 1e-3);  // the penalty did change some logit
        // On ember's logits of the same prompt: within the f32 logits tolerance of test_end_to_end (1e-4).
        std::vector<float> ours(V);
        apply_repeat_penalty(s.logits(), V, recent.data(), static_cast<int>(recent.size()), R, ours.data());
        double err2 = 0;
        for (int i = 0; i < V; ++i) err2 = std::max(err2, static_cast<double>(std::fabs(ours[i] - want[i])));
        CHECK(err2 < 1e-4);
    }
}

TEST_CASE("repetition penalty: a repeated id is penalized once, signs, R = 1 and N = 0 change nothing") {
    const float in[5] = {2.0f, -2.0f, 0.0f, 1.0f, -0.5f};
    const int recent[] = {0, 1, 0, 0, 2, 1};
    float l[5];
    apply_repeat_penalty(in, 5, recent, 6, 2.0f, l);
    CHECK(l[0] == 1.0f);    // divided once, not three times
    CHECK(l[1] == -4.0f);   // multiplied
    CHECK(l[2] == 0.0f);
    CHECK(l[3] == 1.0f);    // not recent
    CHECK(l[4] == -0.5f);
    // The sampler: off when R = 1 or no recent ids (the logits are read, not copied).
    std::vector<float> probs(5), pen(5, 99.0f);
    std::vector<int> ids(5);
    const float logits[5] = {3.0f, 2.9f, 0.0f, 0.0f, 0.0f};
    SamplerOptions g;
    g.temperature = 0.0f;
    g.repeat_penalty = 1.0f;
    const int r0[] = {0};
    CHECK(Sampler(g, 5, probs.data(), ids.data()).sample(logits, r0, 1, pen.data()) == 0);
    CHECK(pen[0] == 99.0f);
    g.repeat_penalty = 1.1f;
    CHECK(Sampler(g, 5, probs.data(), ids.data()).sample(logits, r0, 0, pen.data()) == 0);
    CHECK(Sampler(g, 5, probs.data(), ids.data()).sample(logits, r0, 1, pen.data()) == 1);  // 3 / 1.1 < 2.9
    // ContextWindow::recent: the newest N, oldest first; -1 and N past block_size give block_size.
    std::vector<int> hist(4), win(4), out(4);
    ContextWindow w(ContextPolicy::Ring, 4, hist.data(), win.data());
    const int seq[] = {1, 2, 3, 4, 5, 6};
    int calls = 0;
    w.append(seq, 6, [&](const int*, int, int, int, int) { ++calls; });
    CHECK(w.recent(2, out.data()) == 2);
    CHECK(out[0] == 5);
    CHECK(out[1] == 6);
    CHECK(w.recent(-1, out.data()) == 4);
    CHECK(out == std::vector<int>{3, 4, 5, 6});
    CHECK(w.recent(100, out.data()) == 4);
    CHECK(w.recent(0, out.data()) == 0);
    SamplerOptions bad;
    bad.repeat_penalty = 0.0f;
    CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("repeat-penalty"), Error);
    bad.repeat_penalty = 1.0f;
    bad.repeat_last_n = -2;
    CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("repeat-last-n"), Error);
}

TEST_CASE("ContextWindow shift: a prompt past block_size in one append ends in the state of one token at a time, running only its last window") {
    // A model of the KV cache: each row holds a hash of its token, its position and the rows it
    // attends to. Appending token by token is the policy as it always ran; one append of the
    // whole prompt skips every chunk whose K/V the next recompute drops (context.h), and must end
    // with the same rows, having run at most block_size + block_size / 2 of them.
    for (const int S : {4, 8, 9, 128}) {
        for (const int n : {1, S - 1, S, S + 1, S + S / 2, S + S / 2 + 1, 5 * S + 3, 40 * S + 7}) {
            CAPTURE(S);
            CAPTURE(n);
            std::vector<int> ids(n);
            for (int i = 0; i < n; ++i) ids[i] = (i * 37 + 11) % 1000;
            struct Run {
                std::vector<int> hist, win;
                std::vector<uint64_t> rows;
                int64_t run = 0;
                uint64_t last = 0;
            };
            auto forward_into = [](Run& r) {
                return [&r](const int* t, int T, int pos0, int row0, int n_keys0) {
                    for (int k = 0; k < T; ++k) {
                        const uint64_t own = 1469598103934665603ull ^ (static_cast<uint64_t>(t[k]) << 20) ^ static_cast<uint64_t>(pos0 + k);
                        uint64_t h = own;
                        for (int j = 0; j < n_keys0 + k; ++j) h = (h ^ (j == row0 + k ? own : r.rows[j])) * 1099511628211ull;
                        r.rows[row0 + k] = h;
                        r.last = h;
                    }
                    r.run += T;
                };
            };
            Run one{std::vector<int>(S), std::vector<int>(S), std::vector<uint64_t>(S), 0, 0};
            Run each = one;
            ContextWindow a(ContextPolicy::Shift, S, one.hist.data(), one.win.data());
            a.append(ids.data(), n, forward_into(one));
            ContextWindow b(ContextPolicy::Shift, S, each.hist.data(), each.win.data());
            for (int i = 0; i < n; ++i) b.append(&ids[i], 1, forward_into(each));
            CHECK(one.last == each.last);
            CHECK(a.tokens_seen() == b.tokens_seen());
            CHECK(one.run <= S + S / 2);
            // And the next token, appended alone, sees the same cache.
            const int next = 5;
            a.append(&next, 1, forward_into(one));
            b.append(&next, 1, forward_into(each));
            CHECK(one.last == each.last);
        }
    }
}

TEST_CASE("repetition penalty: greedy decoding with it equals PyTorch's, past block_size") {
    const auto ex = test::load_json(fixture("sampling/expected.json"));
    test::TempDir dir;
    auto m = Model::open(convert_f32(dir));
    const auto tok = make_tokenizer(*m);
    for (const auto& c : ex["greedy_penalty"]) {
        SamplerOptions so;
        so.temperature = 0.0f;
        so.repeat_penalty = c["penalty"].get<float>();
        so.repeat_last_n = c["last_n"].get<int>();
        const std::vector<int> ids = ints(c["ids"]);
        const std::vector<int> gen(ids.begin() + static_cast<long>(ex["prompt_ids"].size()), ids.end());
        const Generated g = generate(*m, ex, c["new_tokens"].get<int>(), so);
        CAPTURE(so.repeat_penalty);
        CHECK(g.text == tok->decode(gen));
        CHECK(gen.size() > static_cast<size_t>(2 * m->config().block_size));
    }
    // Without the penalty the text is PyTorch's plain greedy text, another one.
    SamplerOptions so;
    so.temperature = 0.0f;
    CHECK(generate(*m, ex, ex["greedy"]["new_tokens"].get<int>(), so).text == ex["greedy"]["text"].get<std::string>());
}

TEST_CASE("stop strings: the greedy text ends before the stop string, as computed from PyTorch's text") {
    const auto ex = test::load_json(fixture("sampling/expected.json"));
    test::TempDir dir;
    const std::string path = convert_f32(dir);
    auto m = Model::open(path);
    SamplerOptions so;
    so.temperature = 0.0f;
    const int n = ex["greedy"]["new_tokens"].get<int>();
    for (const auto& c : ex["stops"]) {
        const std::vector<std::string> stops = c["stops"].get<std::vector<std::string>>();
        const std::string want = c["printed"].get<std::string>();
        CAPTURE(stops[0]);
        const Generated g = generate(*m, ex, n, so, stops);
        CHECK(g.text == want);
        CHECK(g.r.tokens == c["tokens"].get<int>());
        CHECK((g.r.stop >= 0) == (g.r.tokens < n || want.size() < static_cast<size_t>(n)));
        // The command: the prompt, the text before the stop string, a newline.
        std::string args = "generate -m " + q(path) + " -p " + q(ex["prompt"].get<std::string>()) + " -n " + std::to_string(n) + " --temp 0 --kv-cache f32";
        for (const std::string& s : stops) args += " --stop " + q(s);
        const test::Run r = ember_cli(args, dir);
        CHECK(r.status == 0);
        CHECK(r.out == ex["prompt"].get<std::string>() + want + "\n");
    }
}

TEST_CASE("stop strings: text fed in pieces is held back while it may start a stop string, on random text") {
    std::mt19937 rng(7);
    const std::string alphabet = "ab\n";
    for (int trial = 0; trial < 3000; ++trial) {
        std::vector<std::string> stops;
        const int n_stops = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < n_stops; ++k) {
            std::string s;
            for (int len = 1 + static_cast<int>(rng() % 4); len > 0; --len) s += alphabet[rng() % alphabet.size()];
            stops.push_back(s);
        }
        std::vector<std::string> pieces;
        for (int p = static_cast<int>(rng() % 12); p > 0; --p) {
            std::string s;
            for (int len = static_cast<int>(rng() % 4); len > 0; --len) s += alphabet[rng() % alphabet.size()];
            pieces.push_back(s);
        }
        int want_which = -1;
        const std::string want = stop_reference(pieces, stops, &want_which);
        StopStrings st(stops, 4);
        std::string got;
        for (const std::string& p : pieces) {
            got += st.feed(p);
            // Nothing passed on can still be part of a stop string: the held part is shorter than each.
            if (st.matched()) break;
            size_t longest = 0;
            for (const std::string& s : stops) longest = std::max(longest, s.size());
            CHECK(st.held() < longest);
        }
        if (!st.matched()) got += st.finish();
        CAPTURE(trial);
        CHECK(got == want);
        CHECK(st.which() == want_which);
    }
    CHECK_THROWS_WITH_AS(StopStrings({"a", ""}, 4), doctest::Contains("stop string 2 is empty"), Error);
}

TEST_CASE("sampling options: one table, every option accepted by ember generate and by the console's gen and set") {
    test::TempDir dir;
    const std::string path = convert_f32(dir);
    // A good value for each option.
    auto value_of = [](GenOption id) -> std::string {
        switch (id) {
        case GenOption::Tokens: return "3";
        case GenOption::Temperature: return "0.5";
        case GenOption::TopK: return "5";
        case GenOption::TopP: return "0.9";
        case GenOption::Seed: return "11";
        case GenOption::RepeatPenalty: return "1.2";
        case GenOption::RepeatLastN: return "-1";
        case GenOption::Stop: return "zz";
        }
        return "";
    };
    std::set<std::string> table;
    for (const GenOptionSpec& spec : kGenOptions) {
        for (const std::string& name : gen_option_names(spec)) {
            table.insert(name);
            const std::string v = value_of(spec.id);
            CAPTURE(name);
            const test::Run r = ember_cli("generate -m " + q(path) + " -n 2 " + name + " " + v + " -p The", dir);
            CHECK(r.status == 0);
            CHECK(r.err.empty());
            const fw::ParseResult p = fw::parse_command("gen " + name + " " + v + " The");
            CHECK(p.ok);
            CHECK(p.cmd.text == "The");
            // A bad value: the same one-line reason from both.
            if (spec.id != GenOption::Stop && spec.id != GenOption::Seed) {
                const test::Run bad = ember_cli("generate -m " + q(path) + " " + name + " x1", dir);
                check_refused(bad, "'x1' is not");
                const fw::ParseResult pb = fw::parse_command("gen " + name + " x1 The");
                CHECK_FALSE(pb.ok);
                CHECK(bad.err.find(pb.error) != std::string::npos);
            }
        }
        // Its set key, and the long name as a key.
        CHECK(fw::parse_command(std::string("set ") + spec.set_key + " " + value_of(spec.id)).ok);
    }
    CHECK(fw::parse_command("set top_k 5").ok);  // `_` for `-`
    CHECK(fw::parse_command("set temp 0.5").ok);
    // The other way: every option in `ember generate --help` is in the table, or is one of the
    // command's own (the model, the prompt, how it runs), which the console has as commands or
    // settings of its own.
    const std::set<std::string> cli_only{"-h", "--help", "-m", "--model", "-p", "--prompt", "-f", "--prompt-file", "-e", "--escape",
                                         "--skip-unknown", "--stats", "--context", "--threads", "--backend", "--kv-cache",
                                         "--adapter", "--no-mmap", "--mlock"};
    const test::Run help = ember_cli("generate --help", dir);
    REQUIRE(help.status == 0);
    const std::regex opt_re("(^|[ ,])(--?[a-z][a-z-]*)");
    int seen = 0;
    std::string h = help.out;
    for (std::sregex_iterator it(h.begin(), h.end(), opt_re), end; it != end; ++it) {
        const std::string name = (*it)[2];
        if (name.size() < 2 || (h.find("  " + name) == std::string::npos && h.find(", " + name) == std::string::npos)) continue;
        ++seen;
        CAPTURE(name);
        CHECK((table.count(name) == 1 || cli_only.count(name) == 1));
        if (table.count(name)) CHECK(find_gen_option(name) != nullptr);
    }
    CHECK(seen >= static_cast<int>(table.size()));
    // The console's old single-letter names are gone (-p is the prompt, as on the command line).
    CHECK_FALSE(fw::parse_command("gen -t 0.5 The").ok);
    CHECK_FALSE(fw::parse_command("gen -k 5 The").ok);
    const fw::ParseResult p = fw::parse_command("gen -n 4 -p -not an option");
    REQUIRE(p.ok);
    CHECK(p.cmd.text == "-not an option");
}

TEST_CASE("ember generate: -f FILE and -f - (stdin), -e escapes, --skip-unknown, --temp") {
    test::TempDir dir;
    const std::string path = convert_f32(dir);
    const std::string base = "generate -m " + q(path) + " -n 12 --seed 5 --temperature 0.8";
    const test::Run ref = ember_cli(base + " -p " + q("The\ncafe"), dir);
    REQUIRE(ref.status == 0);
    CHECK(ref.out.rfind("The\ncafe", 0) == 0);
    test::write_file(dir.file("prompt.txt"), "The\ncafe");
    CHECK(ember_cli(base + " -f " + q(dir.file("prompt.txt")), dir).out == ref.out);
    // -f -: the prompt from standard input.
    const std::string out = dir.file("stdin.out");
    const std::string cmd = test::program_cmd(EMBER_CLI) + " " + base + " -f - <" + q(dir.file("prompt.txt")) + " >" + q(out);
    CHECK(std::system(cmd.c_str()) == 0);
    CHECK(test::read_file(out) == ref.out);
    CHECK(ember_cli(base + " -e -p " + q("The\\ncafe"), dir).out == ref.out);
    CHECK(ember_cli(base + " -e -p " + q("The\\scafe"), dir).out == ember_cli(base + " -p " + q("The cafe"), dir).out);
    CHECK(ember_cli(base.substr(0, base.find(" --temperature")) + " --temp 0.8 -p " + q("The\ncafe"), dir).out == ref.out);
    check_refused(ember_cli(base + " -e -p " + q("The\\qcafe"), dir), "unknown escape \\q at byte 3");
    check_refused(ember_cli(base + " -p x -f " + q(dir.file("prompt.txt")), dir), "excludes");
    // A character outside the vocabulary: an error naming it and its position, or with
    // --skip-unknown dropped and counted on stderr.
    check_refused(ember_cli(base + " -p " + q("The\xe2\x82\xac cafe"), dir), "at position 3");
    const test::Run skip = ember_cli(base + " --skip-unknown -p " + q("The\xe2\x82\xac\xe2\x82\xac\ncafe"), dir);
    CHECK(skip.status == 0);
    CHECK(skip.err == "ember: 2 prompt characters outside the vocabulary skipped (--skip-unknown)\n");
    CHECK(skip.out == ref.out);
    // A prompt of -f is named by its file, not as "prompt".
    test::write_file(dir.file("bad.txt"), "ab\xff");
    check_refused(ember_cli(base + " -f " + q(dir.file("bad.txt")), dir), "bad.txt: invalid UTF-8 at byte 2");
    test::write_file(dir.file("euro.txt"), "The\xe2\x82\xac cafe");
    check_refused(ember_cli(base + " -f " + q(dir.file("euro.txt")), dir), "euro.txt: character '\xe2\x82\xac' (U+20AC) at position 3");
    test::write_file(dir.file("all.txt"), "\xe2\x82\xac");
    check_refused(ember_cli(base + " --skip-unknown -f " + q(dir.file("all.txt")), dir), "all.txt: none of its 1 characters is in the vocabulary");
}

TEST_CASE("ember generate --stats: prefill and decode tokens/s and the time to first token on stderr") {
    test::TempDir dir;
    const std::string path = convert_f32(dir);
    const test::Run r = ember_cli("generate -m " + q(path) + " -p " + q("The cafe") + " -n 30 --stats", dir);
    REQUIRE(r.status == 0);
    CAPTURE(r.err);
    const std::regex line(
        "stats: prefill 8 tokens in ([0-9.]+) ms \\(([0-9.]+) tokens/s\\); time to first token ([0-9.]+) ms; "
        "decode 29 tokens in ([0-9.]+) ms \\(([0-9.]+) tokens/s\\)\n");
    std::smatch mm;
    REQUIRE(std::regex_match(r.err, mm, line));
    for (size_t i = 1; i < mm.size(); ++i) CHECK(std::stod(mm[i]) > 0);
    CHECK(std::stod(mm[3]) >= std::stod(mm[1]));  // the first token comes after the prefill
    CHECK(ember_cli("generate -m " + q(path) + " -p " + q("The cafe") + " -n 30", dir).err.empty());
    // A prompt longer than block_size: exact runs only its last block_size rows, and says so
    // (the rate used to count all 108 tokens over the time of the last block_size).
    std::string longer;
    for (int i = 0; i < 12; ++i) longer += "The cafe ";
    const test::Run l = ember_cli("generate -m " + q(path) + " -p " + q(longer) + " -n 3 --stats", dir);
    REQUIRE(l.status == 0);
    CAPTURE(l.err);
    const std::regex rows("stats: prefill 108 tokens \\(([0-9]+) rows run through the model\\) in .*\n");
    REQUIRE(std::regex_match(l.err, mm, rows));
    CHECK(std::stoi(mm[1]) == Model::open(path)->config().block_size);
    // -n 0 samples nothing and -n 1 decodes nothing after the first token: `none`, not
    // "0.00 ms" and "0 tokens in 0.00 ms (0.0 tokens/s)", which read like measurements.
    const test::Run n0 = ember_cli("generate -m " + q(path) + " -p " + q("The cafe") + " -n 0 --stats", dir);
    REQUIRE(n0.status == 0);
    CAPTURE(n0.err);
    CHECK(std::regex_match(n0.err, std::regex("stats: prefill 8 tokens in [0-9.]+ ms \\([0-9.]+ tokens/s\\); time to first token none \\(no token "
                                              "sampled\\); decode none \\(no token after the first\\)\n")));
    const test::Run n1 = ember_cli("generate -m " + q(path) + " -p " + q("The cafe") + " -n 1 --stats", dir);
    REQUIRE(n1.status == 0);
    CAPTURE(n1.err);
    CHECK(std::regex_match(n1.err, std::regex("stats: prefill 8 tokens in [0-9.]+ ms \\([0-9.]+ tokens/s\\); time to first token [0-9.]+ ms; "
                                              "decode none \\(no token after the first\\)\n")));
}

TEST_CASE("mistyped names get the nearest one: ember's options and subcommands, the console's commands, options and settings") {
    CHECK(edit_distance("temprature", "temperature") == 1);
    CHECK(edit_distance("gne", "gen") == 1);  // a swap counts 1
    CHECK(edit_distance("", "abc") == 3);
    CHECK(nearest_name("--temprature", all_gen_option_names()) == "--temperature");
    CHECK(nearest_name("--top_k", all_gen_option_names()) == "--top-k");
    CHECK(nearest_name("-x", {"-n", "-p"}).empty());  // one letter: no guess
    CHECK(nearest_name("--frobnicate", all_gen_option_names()).empty());
    CHECK(nearest_name("--vocab", {"--vocab-text", "--meta"}) == "--vocab-text");  // the one name it begins
    CHECK(nearest_name("--top", {"--top-k", "--top-p"}).empty());                 // two: no guess
    CHECK(nearest_name("--to", {"--top-k"}).empty());                             // under 3 letters: no guess
    test::TempDir dir;
    check_refused(ember_cli("generate -m x.ember --temprature 0.5", dir), "unknown option --temprature; did you mean --temperature?");
    check_refused(ember_cli("generate --modle x.ember", dir), "unknown option --modle; did you mean --model?");
    check_refused(ember_cli("generat -m x.ember", dir), "unknown command generat; did you mean generate?");
    check_refused(ember_cli("eval -m x.ember --text t --splt val", dir), "did you mean --split?");
    check_refused(ember_cli("frobnicate", dir), "unknown command frobnicate (see");
    check_refused(ember_cli("--verison", dir), "unknown option --verison; did you mean --version?");
    check_refused(ember_cli("convert m.pt --vocab v.txt -o o.ember", dir), "unknown option --vocab; did you mean --vocab-text?");
    CHECK(fw::parse_command("gne hi").error == "unknown command 'gne'; did you mean gen? (try help)");
    CHECK(fw::parse_command("gen --temprature 0.5 hi").error.find("gen: unknown option '--temprature'; did you mean --temperature?") == 0);
    CHECK(fw::parse_command("set temprature 0.5").error.find("unknown setting 'temprature'; did you mean temperature?") == 0);
    CHECK(fw::parse_command("finetune --stpes 3 f").error.find("did you mean --steps?") != std::string::npos);
}

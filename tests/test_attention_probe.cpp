// The attention probe (runtime/attention_probe.h) and `ember attn`: the f32 weights equal
// PyTorch's `wei` (tests/fixtures/attn/expected.json, tools/make_attn_fixtures.py) for the gpt.py,
// char nanoGPT and GPT-2-shaped BPE fixtures, every layer and head, within 1e-4; every row sums
// to 1 within 1e-5 (probabilities normalised in double, stored as f32: T rounding errors of
// 2^-24 each); zeros above the diagonal exactly; the refusals; the CLI's text, JSON and PNG.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli_util.h"
#include "converter/convert.h"
#include "runtime/attention_probe.h"
#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/tokenizer.h"
#include "convert_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

constexpr double kTorchTol = 1e-4;  // |ember - PyTorch| per weight, f32 models
constexpr double kRowSumTol = 1e-5;

// The fixture entry's checkpoint converted to `dtype`.
std::unique_ptr<test::ConvertedModel> convert_entry(const nlohmann::json& e, convert::WeightDType dtype) {
    return test::open_converted(fixture(e["checkpoint"].get<std::string>()), e["vocab_flag"].get<std::string>(),
                                fixture(e["vocab"].get<std::string>()), dtype);
}

// Rows sum to 1, zeros above the diagonal, every weight in [0, 1].
void check_rows(const AttentionWeights& w) {
    for (int h = 0; h < w.n_head; ++h)
        for (int t = 0; t < w.T; ++t) {
            const float* row = w.head(h) + static_cast<size_t>(t) * w.T;
            double sum = 0.0;
            for (int j = 0; j < w.T; ++j) {
                if (j > t) REQUIRE(row[j] == 0.0f);
                REQUIRE(row[j] >= 0.0f);
                REQUIRE(row[j] <= 1.0f);
                sum += row[j];
            }
            CAPTURE(h);
            CAPTURE(t);
            REQUIRE(std::fabs(sum - 1.0) <= kRowSumTol);
        }
}

double torch_error(const AttentionWeights& w, const nlohmann::json& e, int layer) {
    double err = 0.0;
    for (int h = 0; h < w.n_head; ++h) {
        const auto want = e["wei"][layer][h].get<std::vector<double>>();
        REQUIRE(want.size() == static_cast<size_t>(w.T) * w.T);
        for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(w.head(h)[i] - want[i]));
    }
    return err;
}

const nlohmann::json& expected() {
    static const nlohmann::json j = test::load_json(fixture("attn/expected.json"));
    return j;
}

}  // namespace

TEST_CASE("attention probe: f32 weights equal PyTorch's wei for gpt.py, nanoGPT and a GPT-2-shaped BPE model, every layer and head") {
    for (const std::string name : {"gptpy", "nanogpt", "gpt2"}) {
        CAPTURE(name);
        const nlohmann::json& e = expected()[name];
        auto c = convert_entry(e, convert::WeightDType::F32);
        const Model& m = *c->model;
        const auto ids = e["ids"].get<std::vector<int>>();
        if (!e["prompt"].is_null())  // the char models: the fixture's ids are the tokenizer's
            CHECK(make_tokenizer(m)->encode(e["prompt"].get<std::string>(), "prompt") == ids);
        REQUIRE(m.config().n_layer == e["n_layer"].get<int>());
        REQUIRE(m.config().n_layer >= 2);
        REQUIRE(m.config().n_head == e["n_head"].get<int>());
        SessionOptions so;
        so.threads = 2;
        for (int layer = 0; layer < m.config().n_layer; ++layer) {
            CAPTURE(layer);
            const AttentionWeights w = attention_weights(m, ids, layer, so);
            CHECK(w.layer == layer);
            CHECK(w.T == static_cast<int>(ids.size()));
            CHECK(w.n_head == m.config().n_head);
            check_rows(w);
            const double err = torch_error(w, e, layer);
            MESSAGE(name << " layer " << layer << ": max |ember - torch| = " << err);
            CHECK(err <= kTorchTol);
        }
        // Another head and layer are not a copy of head 0 of layer 0.
        const AttentionWeights w0 = attention_weights(m, ids, 0, so), w1 = attention_weights(m, ids, 1, so);
        CHECK(std::memcmp(w0.head(0), w0.head(1), sizeof(float) * w0.T * w0.T) != 0);
        CHECK(std::memcmp(w0.head(1), w1.head(1), sizeof(float) * w0.T * w0.T) != 0);
    }
}

TEST_CASE("attention probe: int8 weights give proper rows close to the f32 model's, and a prefix prompt gives the prefix of the weights") {
    const nlohmann::json& e = expected()["gptpy"];
    auto f32 = convert_entry(e, convert::WeightDType::F32);
    auto i8 = convert_entry(e, convert::WeightDType::I8);
    const auto ids = e["ids"].get<std::vector<int>>();
    const AttentionWeights a = attention_weights(*f32->model, ids, 1), b = attention_weights(*i8->model, ids, 1);
    check_rows(b);
    double err = 0.0;
    for (size_t i = 0; i < a.wei.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(a.wei[i] - b.wei[i])));
    MESSAGE("int8 vs f32 layer 1: max |diff| = " << err);
    CHECK(err > 0.0);
    CHECK(err < 0.05);
    // Causal: the first 5 tokens alone see what they saw in the whole prompt.
    const std::vector<int> head5(ids.begin(), ids.begin() + 5);
    const AttentionWeights p = attention_weights(*f32->model, head5, 1);
    for (int h = 0; h < p.n_head; ++h)
        for (int t = 0; t < 5; ++t)
            for (int j = 0; j < 5; ++j) CHECK(p.head(h)[t * 5 + j] == doctest::Approx(a.head(h)[t * a.T + j]).epsilon(1e-5));
}

TEST_CASE("attention probe: refusals name the layer, the prompt length and block_size, the id") {
    const nlohmann::json& e = expected()["gptpy"];
    auto c = convert_entry(e, convert::WeightDType::F32);
    const Model& m = *c->model;
    auto ids = e["ids"].get<std::vector<int>>();
    CHECK_THROWS_WITH_AS(attention_weights(m, ids, 2), doctest::Contains("layer 2 is outside [0, 2)"), Error);
    CHECK_THROWS_WITH_AS(attention_weights(m, ids, -1), doctest::Contains("layer -1 is outside"), Error);
    CHECK_THROWS_WITH_AS(attention_weights(m, {}, 0), doctest::Contains("the prompt is empty"), Error);
    ids.push_back(1);
    CHECK_THROWS_WITH_AS(attention_weights(m, ids, 0), doctest::Contains("the prompt is 17 tokens, more than block_size 16"), Error);
    CHECK_THROWS_WITH_AS(attention_weights(m, {0, 37}, 0), doctest::Contains("token id 37 at position 1 is outside [0, 37)"), Error);
}

TEST_CASE("attention probe: the text lists each query's strongest keys in order, and labels escape what is invisible") {
    AttentionWeights w;
    w.layer = 3;
    w.n_head = 1;
    w.T = 3;
    w.wei = {1.0f, 0, 0, 0.25f, 0.75f, 0, 0.5f, 0.2f, 0.3f};
    const std::string s = attention_text(w, {"a", "\\n", "b"}, 0, 2);
    CHECK(s == "layer 3 head 0: 3 tokens; each query's 2 strongest keys (key 'token' weight)\n"
               "   0 'a' ->  0 'a' 1.000\n"
               "   1 '\\n' ->  1 '\\n' 0.750  0 'a' 0.250\n"
               "   2 'b' ->  0 'a' 0.500  2 'b' 0.300\n");
    CHECK_THROWS_AS(attention_text(w, {"a", "b", "c"}, 1, 2), Error);
    // More keys asked for than there are tokens: the header says how many can be shown.
    CHECK(attention_text(w, {"a", "b", "c"}, 0, 100000).find("3 tokens; each query's 3 strongest keys") != std::string::npos);

    test::TempDir dir;
    auto c = convert_entry(expected()["gpt2"], convert::WeightDType::F32);
    const auto tok = make_tokenizer(*c->model);
    // newline, tab and the backslash are escaped; a token of the lone byte 0xC3 (half of an e-acute) is \\xC3.
    const std::vector<int> b = tok->encode("\n\t\\A\xc3\xa9", "text");
    std::string all;
    for (int id : b) all += token_label(*tok, id);
    CHECK(all.find("\\n\\t\\\\A") == 0);
    int half = -1;  // the token of the lone byte 0xC3
    for (int id = 0; id < tok->size() && half < 0; ++id)
        if (tok->token_bytes(id) == "\xc3") half = id;
    REQUIRE(half >= 0);
    CHECK(token_label(*tok, half) == "\\xC3");
}

TEST_CASE("ember attn: --json equals the probe, text, --png a grid of heads, refusals") {
    const nlohmann::json& e = expected()["gptpy"];
    auto c = convert_entry(e, convert::WeightDType::F32);
    const std::string prompt = e["prompt"];
    test::TempDir dir;
    const std::string base = "attn -m " + test::q(c->path) + " -p " + test::q(prompt);

    // --json with --head: layer 1, head 2 = PyTorch's within 1e-4.
    auto r = test::ember_cli(base + " --layer 1 --head 2 --json", dir);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["layer"] == 1);
    CHECK(j["head"] == 2);
    CHECK(j["ids"] == e["ids"]);
    REQUIRE(j["tokens"].size() == prompt.size());
    CHECK(j["tokens"][1] == "e");
    const auto want = e["wei"][1][2].get<std::vector<double>>();
    const int T = static_cast<int>(prompt.size());
    REQUIRE(j["weights"].size() == static_cast<size_t>(T));
    double err = 0.0;
    for (int t = 0; t < T; ++t) {
        REQUIRE(j["weights"][t].size() == static_cast<size_t>(T));
        for (int k = 0; k < T; ++k) err = std::max(err, std::fabs(j["weights"][t][k].get<double>() - want[t * T + k]));
    }
    CHECK(err <= kTorchTol);

    // --json without --head: every head.
    r = test::ember_cli(base + " --layer 1 --json", dir);
    REQUIRE(r.status == 0);
    const auto all = nlohmann::json::parse(r.out);
    REQUIRE(all["heads"].size() == 4);
    CHECK(all["heads"][3]["head"] == 3);
    CHECK(all["heads"][2]["weights"] == j["weights"]);

    // Text: the probe's attention_text for each head.
    r = test::ember_cli(base + " --head 1 --top 2", dir);
    REQUIRE(r.status == 0);
    const AttentionWeights w = attention_weights(*c->model, e["ids"].get<std::vector<int>>(), 0);
    std::vector<std::string> labels;
    for (char ch : prompt) labels.push_back(std::string(1, ch));
    CHECK(r.out == attention_text(w, labels, 1, 2));
    CHECK(r.out.find("layer 0 head 1: 16 tokens") == 0);

    // --png: a PNG whose size is the layout's (2 x 2 panels for 4 heads, 1 for --head).
    auto png_size = [](const std::string& bytes, uint32_t& wd, uint32_t& ht) {
        REQUIRE(bytes.size() > 24);
        REQUIRE(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
        REQUIRE(bytes.compare(12, 4, "IHDR") == 0);
        auto be32 = [&](size_t at) {
            return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) | (uint32_t(uint8_t(bytes[at + 2])) << 8) |
                   uint32_t(uint8_t(bytes[at + 3]));
        };
        wd = be32(16);
        ht = be32(20);
    };
    r = test::ember_cli(base + " --png " + test::q(dir.file("all.png")), dir);
    REQUIRE(r.status == 0);
    CHECK(r.err.find("wrote ") == 0);
    uint32_t w4 = 0, h4 = 0, w1 = 0, h1 = 0;
    png_size(test::read_file(dir.file("all.png")), w4, h4);
    r = test::ember_cli(base + " --head 3 --png " + test::q(dir.file("one.png")), dir);
    REQUIRE(r.status == 0);
    png_size(test::read_file(dir.file("one.png")), w1, h1);
    // One panel: 12 + label 10 px (1 char + 4) + 16 cells x 14 px + 12 wide; 19 + 10 + 224 + 12 tall.
    CHECK(w1 == 12 + 10 + 16 * 14 + 12);
    CHECK(h1 == 19 + 10 + 16 * 14 + 12);
    CHECK(w4 == 2 * w1);
    CHECK(h4 == 2 * h1);

    test::check_refused(test::ember_cli(base + " --layer 2", dir), "layer 2 is outside [0, 2)");
    test::check_refused(test::ember_cli(base + " --head 4", dir), "head 4 is outside [0, 4)");
    test::check_refused(test::ember_cli("attn -m " + test::q(c->path) + " -p " + test::q(prompt + "x"), dir),
                        "the prompt is 17 tokens, more than block_size 16");
    test::check_refused(test::ember_cli(base + " --png /nonexistent/dir/x.png", dir),
                        "--png /nonexistent/dir/x.png: the folder /nonexistent/dir does not exist");
    // A name with a control byte is shown escaped (the newline was printed as it was).
    r = test::ember_cli(base + " --png " + test::q(dir.path() + "/\n.png"), dir);
    REQUIRE(r.status == 0);
    CHECK(r.err == "wrote " + dir.path() + "/\\x0a.png\n");
    // A file that may be written in a folder that takes no new file: the temporary is named (for
    // /proc/version it said "No such file or directory" of a file that is there; it is 0444, and
    // now refused as read-only, as -o refuses it). Root writes any folder, so as root a writable
    // file in /proc/sys (no new files there), else a read-only folder.
    test::check_refused(test::ember_cli(base + " --png /proc/version", dir), "--png /proc/version exists and is read-only");
    std::string target = "/proc/sys/kernel/hostname";
    if (::access(target.c_str(), W_OK) != 0) {
        REQUIRE(::mkdir(dir.file("ro").c_str(), 0755) == 0);
        target = dir.file("ro/x.png");
        test::write_file(target, "old");
        REQUIRE(::chmod(dir.file("ro").c_str(), 0555) == 0);
    }
    CAPTURE(target);
    r = test::ember_cli(base + " --png " + test::q(target), dir);
    test::check_refused(r, "cannot write " + target + ": cannot create its temporary " + target + ".tmp-");
    ::chmod(dir.file("ro").c_str(), 0755);
}

TEST_CASE("ember attn --png: never writes over the model, never removes what it cannot write, replaces a picture whole") {
    auto c = convert_entry(expected()["gptpy"], convert::WeightDType::F32);
    test::TempDir dir;
    const std::string base = "attn -m " + test::q(c->path) + " -p hi --head 0";
    const std::string model_bytes = test::read_file(c->path);

    // The model itself (through another spelling): refused before anything is written.
    test::check_refused(test::ember_cli(base + " --png " + test::q(c->dir.path() + "/./m.ember"), dir), "is the model (an input)");
    CHECK(test::read_file(c->path) == model_bytes);
    test::check_refused(test::ember_cli(base + " --png ''", dir), "--png: needs a file name");
    test::check_refused(test::ember_cli(base + " --png " + test::q(dir.path()), dir), "--png " + dir.path() + " is a folder: choose a file");

    // A FIFO no one reads: an error at once, not a wait, and the FIFO stays (never removed).
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    test::check_refused(test::ember_cli_in_shell("timeout 20", base + " --png " + test::q(fifo), dir), "cannot write");
    struct stat st {};
    CHECK((::stat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));

    // An existing file is replaced by the whole picture, with no temporary left beside it.
    const std::string png = dir.file("a.png");
    test::write_file(png, "not a picture");
    REQUIRE(test::ember_cli(base + " --png " + test::q(png), dir).status == 0);
    CHECK(test::read_file(png).compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    // Through a link: the link stays, its target becomes the picture.
    const std::string target = dir.file("target.png"), link = dir.file("link.png");
    test::write_file(target, "old");
    std::filesystem::create_symlink(target, link);
    REQUIRE(test::ember_cli(base + " --png " + test::q(link), dir).status == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(test::read_file(target) == test::read_file(png));
    size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) files += entry.path().filename().string().find(".tmp-") != std::string::npos;
    CHECK(files == 0);
}

TEST_CASE("ember attn --png /dev/stdout: the picture alone on a pipe, and --json beside it refused") {
    auto c = convert_entry(expected()["gptpy"], convert::WeightDType::F32);
    test::TempDir dir;
    const std::string base = "attn -m " + test::q(c->path) + " -p hi --head 0";
    // Through a pipe (written in place): the text used to follow the picture's last chunk.
    const std::string err = dir.file("attn.err");
    const std::string cmd = test::program_cmd(EMBER_CLI) + " " + base + " --png /dev/stdout 2>" + test::q(err) + " </dev/null";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buf[4096];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, got);
    const int rc = ::pclose(pipe);
    CAPTURE(test::read_file(err));
    REQUIRE((WIFEXITED(rc) && WEXITSTATUS(rc) == 0));
    CHECK(test::read_file(err) == "wrote /dev/stdout (standard output: the text is not printed after the picture)\n");
    REQUIRE(out.size() > 20);
    CHECK(out.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    const std::string iend("IEND\xae\x42\x60\x82", 8);  // the last chunk and its CRC
    CHECK(out.compare(out.size() - iend.size(), iend.size(), iend) == 0);
    // With --json, both would go there: refused before the model is read.
    test::check_refused(test::ember_cli(base + " --json --png /dev/stdout", dir),
                        "--png /dev/stdout is standard output, where --json goes too: give --png a file, or drop --json");
    // Another file: the text is printed as before.
    const auto t = test::ember_cli(base + " --png " + test::q(dir.file("b.png")), dir);
    REQUIRE(t.status == 0);
    CHECK(t.out.find("head 0") != std::string::npos);

    // Standard output appended to (>>): the picture follows what the file held (it replaced
    // the file by a rename, losing its lines).
    const std::string log = dir.file("app.log");
    test::write_file(log, "earlier line\n");
    const std::string append = test::program_cmd(EMBER_CLI) + " " + base + " --png /dev/stdout >> " + test::q(log) + " 2>/dev/null </dev/null";
    REQUIRE(std::system(append.c_str()) == 0);
    const std::string appended = test::read_file(log);
    CHECK(appended.compare(0, 13, "earlier line\n") == 0);
    CHECK(appended.substr(13) == out);  // the same picture as on the pipe

    // Standard error as FILE (a pipe here): the picture alone, no `wrote` line after it.
    const std::string to_err = test::program_cmd(EMBER_CLI) + " " + base + " --png /dev/stderr 2>&1 >/dev/null </dev/null";
    FILE* err_pipe = ::popen(to_err.c_str(), "r");
    REQUIRE(err_pipe != nullptr);
    std::string err_out;
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, err_pipe)) > 0;) err_out.append(buf, got);
    CHECK(::pclose(err_pipe) == 0);
    CHECK(err_out == out);

    // A read-only picture: refused before the model is read, as -o refuses one (root passed).
    const std::string ro = dir.file("ro.png");
    test::write_file(ro, "old");
    REQUIRE(::chmod(ro.c_str(), 0444) == 0);
    test::check_refused(test::ember_cli(base + " --png " + test::q(ro), dir), "--png " + ro + " exists and is read-only");
    CHECK(test::read_file(ro) == "old");
}

TEST_CASE("cpu backend: the qkv tap copies one layer's rows and leaves the forward as it is, and bad taps are refused") {
    auto c = convert_entry(expected()["gptpy"], convert::WeightDType::F32);
    const Model& m = *c->model;
    const auto ids = expected()["gptpy"]["ids"].get<std::vector<int>>();
    const int T = static_cast<int>(ids.size()), C = m.config().n_embd, V = m.config().vocab_size;
    SessionOptions so;
    so.threads = 1;
    CpuBackend plain(m, so), tapped(m, so);
    std::vector<float> tap(static_cast<size_t>(T) * 3 * C, NAN);
    tapped.set_qkv_tap(1, tap.data(), T);
    const float* lp = plain.forward(ids.data(), T, 0, 0, 1, false);
    const std::vector<float> want(lp, lp + V);
    const float* got = tapped.forward(ids.data(), T, 0, 0, 1, false);
    CHECK(std::memcmp(want.data(), got, V * sizeof(float)) == 0);
    CHECK(std::all_of(tap.begin(), tap.end(), [](float x) { return std::isfinite(x); }));
    tapped.set_qkv_tap(1, tap.data(), 2);
    CHECK_THROWS_WITH_AS(tapped.forward(ids.data(), 5, 0, 0, 1, false), doctest::Contains("the qkv tap of layer 1 holds 2 rows, the forward has 5"), Error);
    CHECK_THROWS_WITH_AS(tapped.set_qkv_tap(2, tap.data(), T), doctest::Contains("qkv tap for layer 2 (n_layer 2)"), Error);
    CHECK_THROWS_AS(tapped.set_qkv_tap(0, nullptr, T), Error);
    tapped.set_qkv_tap(-1, nullptr, 0);  // off
    CHECK_NOTHROW(tapped.forward(ids.data(), T, 0, 0, 1, false));
    // Prefill in passes of 3 rows: every pass's rows land at their place in the tap.
    tapped.set_qkv_tap(1, tap.data(), T);
    tapped.forward(ids.data(), T, 0, 0, 1, false);
    const std::vector<float> one_pass = tap;
    SessionOptions so3 = so;
    so3.prefill_rows = 3;
    CpuBackend passes(m, so3);
    std::vector<float> tap3(tap.size(), NAN);
    passes.set_qkv_tap(1, tap3.data(), T);
    REQUIRE(T > 3);
    passes.forward(ids.data(), T, 0, 0, 1, false);
    for (size_t i = 0; i < tap.size(); ++i) REQUIRE(std::fabs(tap3[i] - one_pass[i]) < 1e-4f);
}

// Checkpoints as users leave them (tools/make_real_fixtures.py, torch): what the weights cannot
// tell (--attention-scale, --activation, --n-head, --rename), against PyTorch's losses and logits.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <tuple>

#include "cli_util.h"
#include "converter/convert.h"
#include "converter/gpt2_tokenizer.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;
using ember::test::q;

namespace {

const std::string kDir = "real/";

convert::ConvertOptions options(const std::string& ckpt, const test::TempDir& dir) {
    convert::ConvertOptions o;
    o.checkpoint = fixture(kDir + ckpt);
    o.out = dir.file("m.ember");
    o.vocab_text = fixture(kDir + "train.txt");
    o.write.dtype = convert::WeightDType::F32;
    return o;
}

// `ember eval --split val` on train.txt with the f32 KV cache (f32 rounding only).
double val_loss(const Model& m) {
    const auto ids = CharTokenizer(m.code_points()).encode(test::read_file(fixture(kDir + "train.txt")), "train.txt");
    SessionOptions so;
    so.threads = 2;
    so.kv_cache = KvDType::F32;
    so.all_logits = true;
    Session s(m, so);
    const int64_t start = val_split_start(static_cast<int64_t>(ids.size()));
    return evaluate(s, ids.data() + start, static_cast<int64_t>(ids.size()) - start, m.config().block_size, m.config().vocab_size).loss;
}

// The renames that undo tools/make_real_fixtures.py's RENAMES (mlp.layers. before layers.).
const std::vector<std::pair<std::string, std::string>> kUndoRenames = {
    {"mlp.layers.", "ffwd.net."}, {"layers.", "blocks."}, {".attn.", ".sa."}, {"norm1", "ln1"}, {"norm2", "ln2"},
    {"tok_emb", "token_embedding_table"}, {"pos_emb", "position_embedding_table"}};

}  // namespace

TEST_CASE("a lecture model trained with the early scale C**-0.5 matches PyTorch only with --attention-scale embd") {
    const auto ex = test::load_json(fixture(kDir + "expected.json"))["oldscale"];
    const double want = ex["loss_val_embd"].get<double>(), other = ex["loss_val_head"].get<double>();
    REQUIRE(std::fabs(want - other) > 0.02);  // the fixture tells the scales apart
    test::TempDir dir;
    auto o = options("oldscale.pt", dir);
    convert::convert(o);
    const double by_default = val_loss(*Model::open(o.out));
    CHECK(by_default == doctest::Approx(other).epsilon(1e-5));  // 1/sqrt(head_size): another model
    o.attention_scale = convert::parse_attention_scale("embd");
    const auto r = convert::convert(o);
    CHECK(r.config.attn_scale == doctest::Approx(0.125));  // 1/sqrt(64)
    auto m = Model::open(o.out);
    CHECK(m->config().attn_scale == doctest::Approx(0.125));
    CHECK(val_loss(*m) == doctest::Approx(want).epsilon(1e-5));
    o.attention_scale = convert::parse_attention_scale("0.125");  // the same scale as a number
    convert::convert(o);
    CHECK(val_loss(*Model::open(o.out)) == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE("--attention-scale, --activation, --rename: bad values are refused naming the choices") {
    CHECK_THROWS_WITH_AS(convert::parse_attention_scale("0"), doctest::Contains("head (1/sqrt(head_size)), embd"), ember::Error);
    CHECK_THROWS_WITH_AS(convert::parse_attention_scale("nan"), doctest::Contains("a number in [1.2e-38, 1000]"), ember::Error);
    // Below f32's normal range (strtof's ERANGE), above the limit (1e38 gave loss nan), blanks.
    for (const char* s : {"1e-40", "1e-50", "1e38", "1001", "inf", "-1", " 0.5", "0.5 ", "", "head,embd"}) {
        CAPTURE(s);
        CHECK_THROWS_WITH_AS(convert::parse_attention_scale(s), doctest::Contains("expected head"), ember::Error);
    }
    CHECK(convert::parse_attention_scale("1000").value == 1000.0f);
    CHECK(convert::parse_attention_scale("1.2e-38").value == doctest::Approx(1.2e-38f));
    CHECK_THROWS_WITH_AS(convert::parse_attention_scale("0.1x"), doctest::Contains("'0.1x'"), ember::Error);
    CHECK_THROWS_WITH_AS(convert::parse_activation("swish"), doctest::Contains("relu, gelu (erf"), ember::Error);
    CHECK(convert::parse_activation("gelu-tanh") == kernels::ActivationKind::GeluTanh);
    CHECK_THROWS_WITH_AS(convert::parse_rename("=x"), doctest::Contains("OLD=NEW"), ember::Error);
    CHECK(convert::parse_rename("a.=b=c").second == "b=c");
}

TEST_CASE("a renamed lecture model converts with --rename and gives the original's loss") {
    const auto ex = test::load_json(fixture(kDir + "expected.json"))["oldscale"];
    test::TempDir dir;
    auto o = options("renamed.pt", dir);
    o.attention_scale = convert::parse_attention_scale("embd");
    o.overrides.renames = kUndoRenames;
    const auto r = convert::convert(o);
    CHECK(r.renamed_keys > 30);
    CHECK(val_loss(*Model::open(o.out)) == doctest::Approx(ex["loss_val_embd"].get<double>()).epsilon(1e-5));
    // In the wrong order, layers. eats mlp.layers. first: the rename of mlp.layers. then matches nothing.
    o.overrides.renames = {{"layers.", "blocks."}, {"mlp.layers.", "ffwd.net."}};
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("--rename mlp.layers.=ffwd.net. matches no key"), ember::Error);
    // Two keys onto one.
    o.overrides.renames = {{"norm1", "n"}, {"norm2", "n"}};
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("--rename maps two keys to"), ember::Error);
    // A key renamed to nothing (once listed as an empty name among the keys found).
    o.overrides.renames = {{"ln_f.bias", ""}};
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("--rename makes the key 'ln_f.bias' empty"), ember::Error);
}

TEST_CASE("ember convert --attention-scale '' and --activation '' are refused, not taken as the default") {
    test::TempDir dir;
    for (const char* opt : {"--attention-scale ''", "--activation ''"}) {
        CAPTURE(opt);
        const std::string out = dir.file("m.ember");
        test::check_refused(test::ember_cli("convert " + q(fixture(kDir + "oldscale.pt")) + " --vocab-text " + q(fixture(kDir + "train.txt")) + " " +
                                                opt + " -o " + q(out),
                                            dir),
                            "''");
        CHECK_FALSE(std::filesystem::exists(out));
    }
}

TEST_CASE("a makemore Transformer (no model_args, tanh GELU, untied lm_head) converts with --n-head and --activation") {
    const auto ex = test::load_json(fixture(kDir + "expected.json"))["makemore"];
    test::TempDir dir;
    auto o = options("makemore.pt", dir);
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("give --n-head N"), ember::Error);
    o.overrides.n_head = 3;
    o.activation = convert::parse_activation("gelu-tanh");
    const auto r = convert::convert(o);
    CHECK_FALSE(r.config.tied_lm_head);
    auto m = Model::open(o.out);
    CHECK(m->config().n_head == 3);
    CHECK(m->config().activation == kernels::ActivationKind::GeluTanh);
    SessionOptions so;
    so.threads = 2;
    so.kv_cache = KvDType::F32;
    so.all_logits = true;
    Session s(*m, so);
    const auto ids = ex["ids"].get<std::vector<int>>();
    const auto want = ex["logits"].get<std::vector<double>>();
    const float* got = s.forward_window(ids.data(), static_cast<int>(ids.size()));
    REQUIRE(want.size() == ids.size() * static_cast<size_t>(m->config().vocab_size));
    double err = 0.0;
    for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
    CHECK(err < 1e-4);  // f32 rounding (the fixture's logits are rounded to 1e-6)
    // Another n_head than model_args / the gpt.py heads is refused.
    auto g = options("oldscale.pt", dir);
    g.overrides.n_head = 2;
    CHECK_THROWS_WITH_AS(convert::convert(g), doctest::Contains("--n-head 2 but the count of blocks.0.sa.heads.N gives n_head 4"), ember::Error);
}

TEST_CASE("ember convert's options reach the file and ember info shows the scale and the activation") {
    test::TempDir dir;
    const std::string out = dir.file("m.ember");
    auto r = test::ember_cli("convert " + q(fixture(kDir + "makemore.pt")) + " --vocab-text " + q(fixture(kDir + "train.txt")) + " -o " + q(out) +
                                 " --n-head 3 --activation gelu-tanh --attention-scale embd --rename transformer.=transformer.",
                             dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("attention scale: 0.144338 (1/sqrt(n_embd), the early gpt.py scale), from --attention-scale") != std::string::npos);
    CHECK(r.out.find("activation gelu (tanh), from --activation") != std::string::npos);
    r = test::ember_cli("info " + q(out), dir);
    CHECK(r.out.find("activation gelu (tanh)") != std::string::npos);
    CHECK(r.out.find("attention scale: 0.144338 (1/sqrt(n_embd)") != std::string::npos);
    test::check_refused(test::ember_cli("convert " + q(fixture(kDir + "oldscale.pt")) + " --vocab-text " + q(fixture(kDir + "train.txt")) +
                                            " -o " + q(out) + " --attention-scale wide", dir),
                        "--attention-scale 'wide'");
}

TEST_CASE("refusals that help: the keys found, the layout assumed and why, the state_dict of a whole model") {
    test::TempDir dir;
    // A renamed model without --rename: a few keys, numbers folded to N, and the option named.
    auto o = options("renamed.pt", dir);
    CHECK_THROWS_WITH_AS(convert::convert(o),
                         doctest::Contains("keys found: layers.N.attn.heads.N.key.weight, layers.N.attn.heads.N.query.weight, "
                                           "layers.N.attn.heads.N.tril"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("(16 distinct) (numbers as N); --rename OLD=NEW"), ember::Error);
    // Half renamed: gpt.py is detected, then a key is missing; the keys are listed the same way.
    o.overrides.renames = {{"tok_emb", "token_embedding_table"}, {"pos_emb", "position_embedding_table"}};
    CHECK_THROWS_WITH_AS(convert::convert(o), doctest::Contains("no transformer blocks (blocks.N.*) found; keys found: layers.N."), ember::Error);
    // makemore's nn.Linear weights with a config.json beside them: read as Conv1D, and said so.
    const std::string ckpt = dir.file("makemore.pt");
    test::write_file(ckpt, test::read_file(fixture(kDir + "makemore.pt")));
    test::write_file(dir.file("config.json"), R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 48, "n_head": 3, "n_positions": 16, "vocab_size": 58})");
    auto m = options("makemore.pt", dir);
    m.checkpoint = ckpt;
    CHECK_THROWS_WITH_AS(convert::convert(m),
                         doctest::Contains("has shape [144, 48], expected [48, 144]: read as Hugging Face GPT-2 (Conv1D weights stored "
                                           "[in, out], transposed) because config.json is beside the checkpoint and it has no model_args; "
                                           "for nn.Linear weights [out, in] (nanoGPT, makemore) give --arch nanogpt"),
                         ember::Error);
    m.arch = convert::ArchChoice::NanoGPT;
    m.overrides.n_head = 3;
    CHECK(convert::convert(m).config.arch == Arch::NanoGPT);
    // torch.save(model) of the user's own class.
    CHECK_THROWS_WITH_AS(convert::convert(options("whole_model.pt", dir)),
                         doctest::Contains("global '__main__.WholeModel', which a checkpoint never needs (a whole model was saved with "
                                           "torch.save(model): load it in Python, where its class is defined, and save its weights with "
                                           "torch.save(model.state_dict(), PATH))"),
                         ember::Error);
}

namespace {

// A gpt.py state_dict as safetensors: n_layer layers of n_embd with one head, vocab a..z,
// block_size 8, every value 0.01. n_embd 512, n_layer 8: 100 MB, which takes the converter
// long enough to write that a test can see its temporary file.
std::string write_big_gptpy(const test::TempDir& dir, int64_t C, int L, int n_head = 1) {
    const int64_t V = 26, S = 8;
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"token_embedding_table.weight", {V, C}},
                                                                        {"position_embedding_table.weight", {S, C}}};
    for (int l = 0; l < L; ++l) {
        const std::string b = "blocks." + std::to_string(l) + ".";
        for (int h = 0; h < n_head; ++h) {
            for (const char* p : {"key", "query", "value"}) tensors.push_back({b + "sa.heads." + std::to_string(h) + "." + p + ".weight", {C / n_head, C}});
        }
        tensors.push_back({b + "sa.proj.weight", {C, C}});
        tensors.push_back({b + "sa.proj.bias", {C}});
        tensors.push_back({b + "ffwd.net.0.weight", {4 * C, C}});
        tensors.push_back({b + "ffwd.net.0.bias", {4 * C}});
        tensors.push_back({b + "ffwd.net.2.weight", {C, 4 * C}});
        tensors.push_back({b + "ffwd.net.2.bias", {C}});
        for (const char* n : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"}) tensors.push_back({b + n, {C}});
    }
    for (const char* n : {"ln_f.weight", "ln_f.bias"}) tensors.push_back({n, {C}});
    tensors.push_back({"lm_head.weight", {V, C}});
    tensors.push_back({"lm_head.bias", {V}});
    nlohmann::json header = nlohmann::json::object();
    uint64_t at = 0;
    for (const auto& [name, shape] : tensors) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= static_cast<uint64_t>(d);
        header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {at, at + 4 * n}}};
        at += 4 * n;
    }
    const std::string h = header.dump();
    const std::string path = dir.file("big.safetensors");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    const uint64_t len = h.size();
    std::fwrite(&len, 8, 1, f);  // little-endian host (x86-64, aarch64)
    std::fwrite(h.data(), 1, h.size(), f);
    const std::vector<float> chunk(1 << 16, 0.01f);
    for (uint64_t left = at / 4; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
        std::fwrite(chunk.data(), 4, n, f);
        left -= n;
    }
    REQUIRE(std::fclose(f) == 0);
    std::string text;
    for (int i = 0; i < 20; ++i) text += "abcdefghijklmnopqrstuvwxyz";  // windows for the scale check (n_head > 1)
    test::write_file(dir.file("vocab.txt"), text);
    return path;
}

// Starts `ember ARGS` (which writes OUT), waits for OUT + wait_for + PID (the output's temporary
// file, or the scale check's probe), sends sig, reaps it; checks that neither file is left nor OUT
// made. Returns the signal that ended it, -1 if it finished before the file was seen.
int killed_while_writing(const std::string& args, const std::string& out, int sig, bool* saw_temp, const std::string& wait_for = ".tmp-") {
    const std::string cmd = "exec " + test::program_cmd(EMBER_CLI) + " " + args + " >/dev/null 2>&1 </dev/null";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    const std::string tmp = out + wait_for + std::to_string(pid);
    *saw_temp = false;
    for (int i = 0; i < 120000 * test::kEmulatorSlowdown && !*saw_temp; ++i) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) return -1;  // finished before its file was seen
        *saw_temp = ::access(tmp.c_str(), F_OK) == 0;
        if (!*saw_temp) ::usleep(wait_for == ".tmp-" ? 1000 : 100);
    }
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(::access(tmp.c_str(), F_OK) != 0);  // the temporary file is gone
    const std::string pid_s = std::to_string(pid);
    for (const std::string& f : {out + ".tmp-" + pid_s, out + ".scale-check-" + pid_s, out + ".scale-check-" + pid_s + ".tmp-" + pid_s}) {
        CAPTURE(f);
        CHECK(::access(f.c_str(), F_OK) != 0);
    }
    CHECK(::access(out.c_str(), F_OK) != 0);  // and nothing took its place
    return WIFSIGNALED(status) ? WTERMSIG(status) : -2;
}

// `ember convert BIG -o DIR/m.ember --dtype f32`, killed as killed_while_writing says.
int convert_killed_by(const test::TempDir& dir, const std::string& big, int sig, bool* saw_temp, const std::string& wait_for = ".tmp-") {
    return killed_while_writing("convert " + q(big) + " --vocab-text " + q(dir.file("vocab.txt")) + " -o " + q(dir.file("m.ember")) + " --dtype f32",
                                dir.file("m.ember"), sig, saw_temp, wait_for);
}

}  // namespace

TEST_CASE("a conversion stopped by SIGINT, SIGTERM or SIGHUP removes its temporary file and dies by the signal") {
    // SIGHUP (a closed terminal or ssh session) left OUT.tmp-PID behind.
    test::TempDir dir;
    const std::string big = write_big_gptpy(dir, 512, 8);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        CAPTURE(sig);
        bool saw = false;
        CHECK(convert_killed_by(dir, big, sig, &saw) == sig);
        CHECK(saw);
    }
    // During the scale check (4 heads: the two scales differ): its probe file OUT.scale-check-PID,
    // a whole f32 model, was once left behind.
    test::TempDir dir4;
    const std::string big4 = write_big_gptpy(dir4, 256, 8, 4);
    // The probe lives for Model::open's checks only (milliseconds): a poll that misses it sees the
    // conversion finish, and is tried again.
    bool saw = false;
    int rc = -1;
    for (int attempt = 0; attempt < 8 && rc == -1; ++attempt) {
        std::filesystem::remove(dir4.file("m.ember"));
        rc = convert_killed_by(dir4, big4, SIGTERM, &saw, ".scale-check-");
    }
    CHECK(rc == SIGTERM);
    CHECK(saw);
}

TEST_CASE("ember finetune --merge stopped by SIGINT, SIGTERM or SIGHUP removes its temporary file and dies by the signal") {
    // The merge wrote OUT.tmp-PID without the handler convert has: a kill left it behind.
    test::TempDir dir;
    const std::string big = write_big_gptpy(dir, 256, 8), model = dir.file("base.ember"), a = dir.file("a.emba");
    REQUIRE(test::ember_cli("convert " + q(big) + " --vocab-text " + q(dir.file("vocab.txt")) + " --dtype f32 -o " + q(model), dir).status == 0);
    const test::Run r = test::ember_cli("finetune -m " + q(model) + " --text " + q(dir.file("vocab.txt")) +
                                            " --steps 1 --batch 1 --seq 8 --rank 1 --threads 1 -o " + q(a),
                                        dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        CAPTURE(sig);
        // The file lives for the write and the check (tens of milliseconds): a poll that misses
        // it sees the merge finish, and is tried again.
        bool saw = false;
        int rc = -1;
        for (int attempt = 0; attempt < 8 && rc == -1; ++attempt) {
            std::filesystem::remove(dir.file("merged.ember"));
            rc = killed_while_writing("finetune --merge -m " + q(model) + " --adapter " + q(a) + " -o " + q(dir.file("merged.ember")),
                                      dir.file("merged.ember"), sig, &saw);
        }
        CHECK(rc == sig);
        CHECK(saw);
    }
}

// A one-layer gpt.py safetensors checkpoint whose wte [V, C] is stored as `dtype` (F32 or F16),
// its bytes a hole of the file (zeros; no disk used), and a text of V distinct characters.
std::string write_sparse_gptpy(const test::TempDir& dir, const std::string& dtype, int64_t V, int64_t C) {
    const int64_t S = 8, elem = dtype == "F16" ? 2 : 4;
    const std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
        {"token_embedding_table.weight", {V, C}}, {"position_embedding_table.weight", {S, C}},
        {"blocks.0.sa.heads.0.key.weight", {C, C}}, {"blocks.0.sa.heads.0.query.weight", {C, C}},
        {"blocks.0.sa.heads.0.value.weight", {C, C}}, {"blocks.0.sa.proj.weight", {C, C}}, {"blocks.0.sa.proj.bias", {C}},
        {"blocks.0.ffwd.net.0.weight", {4 * C, C}}, {"blocks.0.ffwd.net.0.bias", {4 * C}},
        {"blocks.0.ffwd.net.2.weight", {C, 4 * C}}, {"blocks.0.ffwd.net.2.bias", {C}},
        {"blocks.0.ln1.weight", {C}}, {"blocks.0.ln1.bias", {C}}, {"blocks.0.ln2.weight", {C}}, {"blocks.0.ln2.bias", {C}},
        {"ln_f.weight", {C}}, {"ln_f.bias", {C}}, {"lm_head.weight", {V, C}}, {"lm_head.bias", {V}}};
    nlohmann::json header = nlohmann::json::object();
    uint64_t at = 0;
    for (const auto& [name, shape] : tensors) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= static_cast<uint64_t>(d);
        header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {at, at + elem * n}}};
        at += elem * n;
    }
    const std::string h = header.dump();
    const std::string path = dir.file("sparse.safetensors");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    const uint64_t len = h.size();
    std::fwrite(&len, 8, 1, f);  // little-endian host (x86-64, aarch64)
    std::fwrite(h.data(), 1, h.size(), f);
    std::fclose(f);
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(8 + h.size() + at)) == 0);
    std::string text;
    for (int64_t i = 0; i < V; ++i) {
        char u[4];
        text.append(u, static_cast<size_t>(ember::utf8_encode(static_cast<uint32_t>(0x100 + i), u)));  // below the surrogates
    }
    test::write_file(dir.file("vocab.txt"), text);
    return path;
}

TEST_CASE("a conversion that cannot get memory says how much it needed") {
#ifdef EMBER_EMULATOR
    // qemu-user reserves the guest's address space up front: under `ulimit -v` it cannot start.
    MESSAGE("SKIPPED under " EMBER_EMULATOR ": ulimit -v limits the emulator, not the program");
    return;
#endif
#if defined(__SANITIZE_ADDRESS__)
    // ASan maps terabytes of shadow memory at start: under `ulimit -v` the program cannot start
    // ("ReserveShadowMemoryRange failed"), so the ASan + UBSan pass failed here.
    MESSAGE("skipped under AddressSanitizer: ulimit -v stops its shadow memory before the program runs");
    return;
#endif
    // The converter holds one tensor at a time: wte [32768, 2048], 256 MiB as f32, is the one
    // that does not fit. Under 200 MiB of address space the reader cannot hold it as f32; under
    // 320 MiB it can, but the writer cannot add its f16 copy (128 MiB more).
    test::TempDir dir;
    for (const auto& [dtype, limit, what] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"F32", "204800", "out of memory: " + dir.file("sparse.safetensors") + ": tensor 'token_embedding_table.weight' as f32 needs 256 MiB more"},
             {"F32", "327680", "out of memory at tensor 'wte' (67108864 values): holding it as f32 (256 MiB) and as f16 (128 MiB) needs about 384 MiB"}}) {
        CAPTURE(limit);
        const std::string big = write_sparse_gptpy(dir, dtype, 32768, 2048);
        const std::string args = "convert " + q(big) + " --vocab-text " + q(dir.file("vocab.txt")) + " -o " + q(dir.file("m.ember")) +
                                 " --dtype f16 --attention-scale head";
        const auto r = test::ember_cli_in_shell("ulimit -v " + limit + "; exec", args, dir);
        test::check_refused(r, what);
        CHECK((r.err.find(" bytes more") != std::string::npos || r.err.find(" MiB") != std::string::npos));  // the size
        CHECK(r.err.find("(std::bad_alloc)") != std::string::npos);
    }
}

TEST_CASE("a Hugging Face tokenizer.json gives the BPE of vocab.json + merges.txt, and another kind is refused by name") {
    const BpeData pair = convert::read_gpt2_tokenizer({fixture("gpt2/tiny_tokenizer")});
    for (const char* f : {"tokenizer.json", "tokenizer_pairs.json"}) {  // merges as "a b" strings and as [a, b] pairs
        CAPTURE(f);
        const BpeData one = convert::read_gpt2_tokenizer({fixture(kDir + f)});
        CHECK(one.size() == pair.size());
        CHECK(one.bytes == pair.bytes);
        CHECK(one.offsets == pair.offsets);
        REQUIRE(one.merges.size() == pair.merges.size());
        bool same = true;
        for (size_t i = 0; i < one.merges.size(); ++i) {
            same = same && one.merges[i].left == pair.merges[i].left && one.merges[i].right == pair.merges[i].right && one.merges[i].result == pair.merges[i].result;
        }
        CHECK(same);
    }
    // A folder holding only tokenizer.json.
    test::TempDir dir;
    test::write_file(dir.file("tokenizer.json"), test::read_file(fixture(kDir + "tokenizer.json")));
    CHECK(convert::read_gpt2_tokenizer({dir.path()}).bytes == pair.bytes);
    // An added token past model.vocab takes the next id, its text as raw bytes.
    auto j = test::load_json(fixture(kDir + "tokenizer.json"));
    const int n = pair.size();
    j["added_tokens"].push_back({{"id", n}, {"content", "<|pad|>"}, {"special", true}});
    test::write_file(dir.file("added.json"), j.dump());
    const BpeData added = convert::read_gpt2_tokenizer({dir.file("added.json")});
    REQUIRE(added.size() == n + 1);
    CHECK(added.bytes.substr(added.offsets[n]) == "<|pad|>");
    // Other kinds, each named.
    const std::vector<std::pair<std::string, std::string>> refused = {
        {R"({"model": {"type": "WordPiece", "vocab": {}}, "pre_tokenizer": {"type": "BertPreTokenizer"}})", "model.type is WordPiece"},
        {R"({"model": {"type": "Unigram", "vocab": []}})", "model.type is Unigram"},
        {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}, "decoder": {"type": "ByteLevel"}})",
         "pre_tokenizer is Whitespace, not ByteLevel"},
        {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}, "decoder": {"type": "ByteLevel"}})",
         "add_prefix_space true; GPT-2's byte-level BPE adds no space before the text, and ember reads that BPE only"},
        {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "Metaspace"}})",
         "decoder is Metaspace, not ByteLevel"},
        {R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}, "normalizer": {"type": "NFC"}})",
         "normalizer is NFC; GPT-2's byte-level BPE has no normalizer, and ember reads that BPE only"},
    };
    for (const auto& [text, what] : refused) {
        CAPTURE(text);
        test::write_file(dir.file("t.json"), text);
        CHECK_THROWS_WITH_AS(convert::read_gpt2_tokenizer({dir.file("t.json")}), doctest::Contains(what.c_str()), ember::Error);
    }
    // A tokenizer.json beside a merges file is refused as what it is, not read as an encoder.json.
    CHECK_THROWS_WITH_AS(convert::read_gpt2_tokenizer({fixture(kDir + "tokenizer.json"), fixture("gpt2/tiny_tokenizer/vocab.bpe")}),
                         doctest::Contains("tokenizer.json holds the vocabulary and the merges: give it to --tokenizer alone"), ember::Error);
    // The whole conversion: the Hugging Face GPT-2 fixture with tokenizer.json holds the same tokenizer.
    convert::ConvertOptions o;
    o.checkpoint = fixture("gpt2/hf/model.safetensors");
    o.tokenizer = {fixture(kDir + "tokenizer.json")};
    o.out = dir.file("a.ember");
    convert::convert(o);
    o.tokenizer = {fixture("gpt2/tiny_tokenizer")};
    o.out = dir.file("b.ember");
    convert::convert(o);
    auto a = Model::open(dir.file("a.ember")), b = Model::open(dir.file("b.ember"));
    REQUIRE(a->bpe() != nullptr);
    const std::string text = "The quick brown fox, then the lion.";
    CHECK(make_tokenizer(*a)->encode(text, "text") == make_tokenizer(*b)->encode(text, "text"));
}

TEST_CASE("bad input: a tokenizer.json with wrong types, nesting or no model names the file and the field") {
    test::TempDir dir;
    const nlohmann::json good = test::load_json(fixture(kDir + "tokenizer.json"));
    auto refused = [&](const std::string& text, const char* what) {
        CAPTURE(what);
        test::write_file(dir.file("t.json"), text);
        CHECK_THROWS_WITH_AS(convert::read_gpt2_tokenizer({dir.file("t.json")}), doctest::Contains(what), ember::Error);
    };
    auto with = [&](auto change) {
        nlohmann::json j = good;
        change(j);
        return j.dump();
    };
    // Flags of another JSON type (json::value threw a type_error naming no file).
    refused(with([](auto& j) { j["pre_tokenizer"]["add_prefix_space"] = "yes"; }), "t.json: pre_tokenizer.add_prefix_space is a JSON string");
    refused(with([](auto& j) { j["pre_tokenizer"]["use_regex"] = 1; }), "t.json: pre_tokenizer.use_regex is a JSON number");
    refused(with([](auto& j) { j["model"]["byte_fallback"] = "true"; }), "t.json: model.byte_fallback is a JSON string");
    // An added token whose model.vocab entry is nested 200,000 deep: the message once dumped it
    // (recursion per level: a stack overflow).
    nlohmann::json deep = good;
    deep["model"]["vocab"]["<|endoftext|>"] = nullptr;
    std::string text = deep.dump();
    const std::string null_at = "\"<|endoftext|>\":null";
    REQUIRE(text.find(null_at) != std::string::npos);
    text.replace(text.find(null_at), null_at.size(), "\"<|endoftext|>\":" + std::string(200000, '[') + std::string(200000, ']'));
    refused(text, "model.vocab gives it a JSON array");
    // model.vocab not an object: said so (once an added token "must take the next id, 0").
    refused(with([](auto& j) { j["model"]["vocab"] = nlohmann::json::array({1, 2}); }), "t.json: model needs a vocab object");
    // A merge naming a token the vocabulary lacks: that token named.
    refused(with([](auto& j) { j["model"]["merges"].push_back("zzqq xxyy"); }), "uses token 'zzqq'");
    // One file that is not a tokenizer.json: named, with what it is.
    refused("", "t.json: an empty file, not a tokenizers tokenizer.json");
    refused("{\"version\": \"1.0\"}", "t.json: a JSON object without a \"model\" object");
    refused("\xff\xfe garbage", "t.json: not JSON");
    // JSON that is no object, whitespace only (they were "not JSON" and "an empty file"), and a
    // tokenizer.json after a UTF-8 byte-order mark (it was "not JSON"): read as the parser does.
    refused("[1, 2, 3]", "t.json: JSON, but not an object, not a tokenizers tokenizer.json");
    refused(" \n\t ", "t.json: only whitespace, not a tokenizers tokenizer.json");
    test::write_file(dir.file("bom.json"), "\xEF\xBB\xBF" + good.dump());
    CHECK(convert::read_gpt2_tokenizer({dir.file("bom.json")}).size() == convert::read_gpt2_tokenizer({fixture(kDir + "tokenizer.json")}).size());
    // No merges for a vocabulary past the 256 bytes: its other tokens could never be made.
    refused(with([](auto& j) { j["model"]["merges"] = nlohmann::json::array(); }), "t.json: model.merges is empty, but model.vocab has");
}

TEST_CASE("bad input: a GPT-2 merges file with old Mac line ends, a byte-order mark, no merges, or a folder beside it") {
    test::TempDir dir;
    const std::string vocab = fixture("gpt2/tiny_tokenizer/encoder.json");
    const std::string merges = test::read_file(fixture("gpt2/tiny_tokenizer/vocab.bpe"));
    const size_t want = convert::read_gpt2_tokenizer({vocab, fixture("gpt2/tiny_tokenizer/vocab.bpe")}).merges.size();
    REQUIRE(want > 10);
    // Lone \r line ends: every merge read (the file was one line, skipped as #version: 0 merges).
    std::string cr = merges;
    for (char& ch : cr) ch = ch == '\n' ? '\r' : ch;
    test::write_file(dir.file("cr.bpe"), cr);
    CHECK(convert::read_gpt2_tokenizer({vocab, dir.file("cr.bpe")}).merges.size() == want);
    // A byte-order mark before the #version line.
    test::write_file(dir.file("bom.bpe"), "\xEF\xBB\xBF" + merges);
    CHECK(convert::read_gpt2_tokenizer({vocab, dir.file("bom.bpe")}).merges.size() == want);
    // An empty merges file (converted with 0 merges, exit 0).
    test::write_file(dir.file("empty.bpe"), "");
    CHECK_THROWS_WITH_AS(convert::read_gpt2_tokenizer({vocab, dir.file("empty.bpe")}), doctest::Contains("empty.bpe: holds no merges, but "),
                         ember::Error);
    // A folder beside a file (taken as the merges file, then a generic message).
    CHECK_THROWS_WITH_AS(convert::read_gpt2_tokenizer({dir.path(), vocab}), doctest::Contains(": is a directory: with two --tokenizer files"),
                         ember::Error);
}

TEST_CASE("a gpt.py checkpoint is checked against its training text: a warning naming --attention-scale, auto picks the better") {
    test::TempDir dir;
    auto o = options("oldscale.pt", dir);
    auto r = convert::convert(o);
    REQUIRE(r.scale_checked);
    CHECK(r.scale_check_tokens == convert::kScaleCheckWindows * 32);
    CHECK(r.loss_head - r.loss_embd > convert::kScaleCheckMargin);
    CHECK(r.scale_note.find("warning: the text fits the early gpt.py attention scale better") != std::string::npos);
    CHECK(r.scale_note.find("--attention-scale embd") != std::string::npos);
    CHECK(r.config.attn_scale == doctest::Approx(0.25));  // the default is still written
    o.attention_scale = convert::parse_attention_scale("auto");
    r = convert::convert(o);
    CHECK(r.config.attn_scale == doctest::Approx(0.125));
    CHECK(r.scale_note.find("--attention-scale auto chose embd") != std::string::npos);
    CHECK(Model::open(o.out)->config().attn_scale == doctest::Approx(0.125));
    // Told the scale, the converter does not check.
    o.attention_scale = convert::parse_attention_scale("embd");
    CHECK_FALSE(convert::convert(o).scale_checked);
    // A model trained with today's scale: checked, no warning (the gptpy fixture, random weights).
    convert::ConvertOptions g;
    g.checkpoint = fixture("gptpy/model.pt");
    g.vocab_text = fixture("gptpy/vocab.txt");
    g.out = dir.file("g.ember");
    r = convert::convert(g);
    CHECK(r.scale_checked);
    CHECK(r.scale_note.empty());
    // A text shorter than one window (the shipped model's 65-character vocabulary file, block_size
    // 128) is not scored: a note says so, and auto is refused.
    convert::ConvertOptions v;
    v.checkpoint = test::source_dir() + "/models/shakespeare_char.pt";
    v.vocab_text = test::source_dir() + "/models/shakespeare_char.vocab.txt";
    v.out = dir.file("v.ember");
    r = convert::convert(v);
    CHECK_FALSE(r.scale_checked);
    CHECK(r.scale_note.find("note: the attention scale was not checked: shakespeare_char.vocab.txt has 65 tokens, fewer than one window of "
                            "block_size 128 + 1") != std::string::npos);
    v.attention_scale = convert::parse_attention_scale("auto");
    CHECK_THROWS_WITH_AS(convert::convert(v), doctest::Contains("--attention-scale auto scores windows of the training text, but"), ember::Error);
    // auto without a text to score, or on another architecture: refused.
    auto m = options("makemore.pt", dir);
    m.overrides.n_head = 3;
    m.attention_scale = convert::parse_attention_scale("auto");
    CHECK_THROWS_WITH_AS(convert::convert(m), doctest::Contains("--attention-scale auto scores the training text"), ember::Error);
    // The probes leave nothing beside the output; the command prints the warning on stderr.
    auto run = test::ember_cli("convert " + q(fixture(kDir + "oldscale.pt")) + " --vocab-text " + q(fixture(kDir + "train.txt")) + " -o " +
                                   q(dir.file("c.ember")),
                               dir);
    CHECK(run.status == 0);
    CHECK(run.err.find("ember: warning: the text fits the early gpt.py attention scale better") != std::string::npos);
    CHECK(run.err.find("convert with --attention-scale embd (or auto)") != std::string::npos);
    int probes = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) probes += e.path().filename().string().find(".scale-check-") != std::string::npos;
    CHECK(probes == 0);
}

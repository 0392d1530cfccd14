// The `ember` command on bad inputs: each gives one clear line on stderr, a non-zero exit,
// no crash, and never a partial output file. And the good paths print what they promise.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <filesystem>
#include <string>

#include "cli_util.h"
#include "convert_util.h"
#include "firmware/console_parser.h"
#include "runtime/finetune_options.h"
#include "kernels/cpu/cpu_features.h"
#include "test_util.h"

using ember::test::fixture;

using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::q;
using ember::test::Run;

namespace {

// The folder holds no .ember and no temporary left behind.
void check_no_output(const ember::test::TempDir& dir) {
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
        const std::string name = e.path().filename().string();
        CHECK_MESSAGE((name == "stdout" || name == "stderr" || name == "good.ember"), "left behind: " << name);
    }
}

}  // namespace

TEST_CASE("-o naming a FIFO or a folder is refused by convert, finetune and --merge, which leave it as it was") {
    ember::test::TempDir dir;
    const std::string fifo = dir.file("out.fifo"), model = dir.file("good.ember");
    const std::string convert = "convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o ";
    REQUIRE(ember_cli(convert + q(model), dir).status == 0);
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    // The written file used to be renamed over it (run as root: /dev/null replaced by a model).
    for (const std::string& out : {fifo, dir.path()}) {
        check_refused(ember_cli(convert + q(out), dir), "exists and is not a regular file");
        check_refused(ember_cli("finetune -m " + q(model) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 -o " + q(out), dir),
                      "exists and is not a regular file");
    }
    const std::string a = dir.file("a.emba");
    REQUIRE(ember_cli("finetune -m " + q(model) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 --threads 2 -o " + q(a), dir).status == 0);
    check_refused(ember_cli("finetune -m " + q(model) + " --merge --adapter " + q(a) + " -o " + q(fifo), dir), "exists and is not a regular file");
    struct stat st {};
    CHECK((::stat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
}

TEST_CASE("an output past ulimit -f is a failed write that leaves no temporary, not a kill by SIGXFSZ") {
    ember::test::TempDir dir;
    const std::string model = dir.file("good.ember"), a = dir.file("a.emba");
    const std::string convert = "convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o ";
    REQUIRE(ember_cli(convert + q(model), dir).status == 0);
    const std::string train = "finetune -m " + q(model) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 --threads 2 -o ";
    REQUIRE(ember_cli(train + q(a), dir).status == 0);
    const std::string before = ember::test::read_file(a);
    // 16 blocks (8 or 16 KiB, by the shell): less than the model (36 KiB) and the adapter.
    for (const std::string& cmd : {convert + q(dir.file("new.ember")), train + q(a),
                                   "finetune -m " + q(model) + " --merge --adapter " + q(a) + " -o " + q(dir.file("merged.ember"))}) {
        CAPTURE(cmd);
        const Run r = ember::test::ember_cli_in_shell("ulimit -f 16; exec", cmd, dir);
        check_refused(r, "File too large");  // it used to die of SIGXFSZ (exit 153), saying nothing
        // A checkpoint that could not be written says what the adapter at -o still holds.
        if (cmd == train + q(a)) CHECK(r.err.find("File too large; " + a + " is as it was before this run (no checkpoint of it was written)") != std::string::npos);
        for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
            const std::string name = e.path().filename().string();
            CHECK_MESSAGE((name == "stdout" || name == "stderr" || name == "good.ember" || name == "a.emba"), "left behind: " << name);
        }
    }
    CHECK(ember::test::read_file(a) == before);  // the adapter of the earlier run is as it was
}

TEST_CASE("-o in a folder that is not there (or not a folder) is refused before any work, naming the folder") {
    ember::test::TempDir dir;
    const std::string model = dir.file("m.ember");
    const std::string convert = "convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o ";
    REQUIRE(ember_cli(convert + q(model), dir).status == 0);
    const std::string a = dir.file("a.emba");
    const std::string train = "finetune -m " + q(model) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 --threads 2 -o ";
    REQUIRE(ember_cli(train + q(a), dir).status == 0);
    const std::string missing = dir.file("no-such-folder");
    ember::test::write_file(dir.file("a-file"), "x");
    for (const std::string& cmd : {convert, train, "finetune -m " + q(model) + " --merge --adapter " + q(a) + " -o "}) {
        CAPTURE(cmd);
        const Run r = ember_cli(cmd + q(missing + "/out"), dir);
        CHECK(r.status == 1);
        CHECK(r.err.find("the folder " + missing + " does not exist (create it first, e.g. mkdir -p " + missing + ")") != std::string::npos);
        CHECK(r.out.empty());  // refused before the training's first validation
        check_refused(ember_cli(cmd + q(dir.file("a-file") + "/out"), dir), "a-file is not a folder");
    }
    CHECK(!std::filesystem::exists(missing));
    // A bare file name is created in the current folder.
    REQUIRE(ember::test::ember_cli_in_shell("cd " + q(dir.path()) + " &&", convert + "bare.ember", dir).status == 0);
    CHECK(std::filesystem::exists(dir.file("bare.ember")));
}

TEST_CASE("convert given an ember model or adapter says what it is, and finetune --resume names every option it takes") {
    ember::test::TempDir dir;
    const std::string model = dir.file("m.ember"), a = dir.file("a.emba");
    const std::string vocab = " --vocab-text " + q(fixture("gptpy/vocab.txt"));
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + vocab + " -o " + q(model), dir).status == 0);
    const std::string train = "finetune -m " + q(model) + " --text " + q(fixture("gptpy/eval.txt")) + " --threads 2 -o " + q(a);
    REQUIRE(ember_cli(train + " --steps 1", dir).status == 0);
    // Said before the missing vocabulary, which is not the mistake.
    check_refused(ember_cli("convert " + q(model) + " -o " + q(dir.file("again.ember")), dir),
                  model + ": is already an .ember model, not a PyTorch checkpoint: use it as it is (ember generate -m " + model + ")");
    check_refused(ember_cli("convert " + q(a) + vocab + " -o " + q(dir.file("again.ember")), dir),
                  a + ": is an ember LoRA adapter, not a PyTorch checkpoint: fold it into its model with ember finetune --merge");
    CHECK(!std::filesystem::exists(dir.file("again.ember")));
    check_refused(ember_cli(train + " --steps 2 --resume " + q(a) + " --lr 0.1", dir),
                  "besides -m, --text and -o, give only --steps, --eval-every, --threads, --skip-unknown, --log-every and --log");
    // Those it names are taken.
    const Run r = ember_cli(train + " --steps 2 --resume " + q(a) + " --eval-every 1 --skip-unknown --log-every 1 --log " + q(dir.file("l.csv")), dir);
    CAPTURE(r.err);
    CHECK(r.status == 0);
}

TEST_CASE("-o that is a link is written through it, while a link to nothing, a read-only file and an empty name are refused") {
    ember::test::TempDir dir;
    const std::string convert = "convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o ";
    const std::string real = dir.file("real.ember"), link = dir.file("link.ember");
    ember::test::write_file(real, "old");
    REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
    // The rename used to replace the link (run as root, -o /dev/stdout replaced the system's link).
    REQUIRE(ember_cli(convert + q(link), dir).status == 0);
    struct stat st {};
    REQUIRE(::lstat(link.c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(ember_cli("info " + q(real), dir).status == 0);
    const std::string a = dir.file("a.emba"), a_link = dir.file("a_link.emba");
    ember::test::write_file(a, "old");
    REQUIRE(::symlink(a.c_str(), a_link.c_str()) == 0);
    REQUIRE(ember_cli("finetune -m " + q(real) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 -o " + q(a_link), dir).status == 0);
    REQUIRE(::lstat(a_link.c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(ember::test::read_file(a) != "old");

    const std::string dangling = dir.file("dangling.ember");
    REQUIRE(::symlink(dir.file("missing/x.ember").c_str(), dangling.c_str()) == 0);
    check_refused(ember_cli(convert + q(dangling), dir), "is a symbolic link to a file that does not exist");
    const std::string ro = dir.file("ro.ember");
    ember::test::write_file(ro, "keep");
    REQUIRE(::chmod(ro.c_str(), 0444) == 0);
    check_refused(ember_cli(convert + q(ro), dir), "exists and is read-only");
    check_refused(ember_cli("finetune -m " + q(real) + " --text " + q(fixture("gptpy/eval.txt")) + " --steps 1 -o " + q(ro), dir),
                  "exists and is read-only");
    CHECK(ember::test::read_file(ro) == "keep");
    // Refused before the checkpoint is read, not after the conversion.
    check_refused(ember_cli(convert + "''", dir), "-o needs a file name");
}

TEST_CASE("ember convert refuses bad checkpoints and vocabularies, leaving no file") {
    ember::test::TempDir dir;
    const std::string out = " -o " + q(dir.file("out.ember"));
    const std::string vocab = " --vocab-text " + q(fixture("gptpy/vocab.txt"));
    struct Case {
        std::string args, what;
    };
    const std::string real = ember::test::shared_dir() + "/data/real-nanogpt/";
    for (const Case& c : {
             Case{q(fixture("bad/truncated.pt")) + vocab, "truncated.pt"},
             Case{q(fixture("bad/text.txt")) + vocab, "not a PyTorch checkpoint"},
             Case{q(fixture("bad/random.bin")) + vocab, "not a PyTorch checkpoint"},
             Case{q(fixture("bad/evil_global.pt")) + vocab, "os.system"},
             Case{q(fixture("bad/nanogpt_n_head_3.pt")) + " --meta " + q(fixture("nanogpt/meta.pkl")), "not divisible by n_head 3"},
             Case{q(real + "ckpt.pt") + " --vocab-text " + q(real + "input.txt"), "wte has 62 rows"},
             // its CRLF line ends: the '\r' that makes one character more than Python's text mode reads is named
             Case{q(real + "ckpt.pt") + " --vocab-text " + q(real + "input.txt"), "(among them '\\r', U+000D: the text has CRLF line ends"},
             Case{q(fixture("gptpy/model.pt")) + " --meta " + q(real + "meta.pkl"), "has 62 characters but the checkpoint's wte has 37 rows"},
             Case{q(real + "ckpt.pt") + " --meta " + q(fixture("bad/meta_missing.pkl")), "meta_missing.pkl"},
             Case{q(fixture("gptpy/model.pt")), "a vocabulary is needed"},
             Case{q(fixture("gptpy/model.pt")) + vocab + " --dtype int4", "--dtype"},
             Case{q(fixture("gptpy/model.pt")) + vocab + " --group-size -3", "--group-size"},
             Case{q(dir.file("nope.pt")) + vocab, "nope.pt"},
             Case{q(dir.file("nope.pt")), "nope.pt: cannot open the checkpoint (No such file or directory)"},  // before the vocabulary
         }) {
        CAPTURE(c.args);
        check_refused(ember_cli("convert " + c.args + out, dir), c.what);
        check_no_output(dir);
    }
}

using ember::test::safetensors_data_at;

namespace {

// ember-console --stdio on dir/models holding dir/MODEL (moved there), fed "load NAME\n" and
// `commands`; its exit status checked (0), its output (stdout and stderr) returned.
std::string console_on(const ember::test::TempDir& dir, const std::string& model, const std::string& commands) {
    const std::string models = dir.file("models");
    REQUIRE(::mkdir(models.c_str(), 0755) == 0);
    REQUIRE(std::rename(dir.file(model).c_str(), (models + "/" + model).c_str()) == 0);
    ember::test::write_file(dir.file("commands"), "load " + model.substr(0, model.size() - 6) + "\n" + commands);
    const std::string cmd = ember::test::program_cmd(EMBER_CONSOLE) + " --stdio --models " + q(models) + " <" + q(dir.file("commands")) +
                            " >" + q(dir.file("console.out")) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    const std::string con = ember::test::read_file(dir.file("console.out"));
    CAPTURE(con);
    CHECK(rc == 0);
    return con;
}

}  // namespace

TEST_CASE("ember convert refuses non-finite weights, and f16 refuses values past its range") {
    ember::test::TempDir dir;
    // gptpy/model.safetensors with lm_head.bias[0] set to NaN, then lm_head.weight[0] to 1e6.
    std::string bytes = ember::test::read_file(fixture("gptpy/model.safetensors"));
    const size_t at = safetensors_data_at(bytes, "lm_head.bias");
    const size_t at_w = safetensors_data_at(bytes, "lm_head.weight");
    const std::string out = " -o " + q(dir.file("out.ember")) + " --vocab-text " + q(fixture("gptpy/vocab.txt"));
    const float nan = std::numeric_limits<float>::quiet_NaN(), big = 1e6f;
    std::memcpy(&bytes[at], &nan, 4);
    ember::test::write_file(dir.file("nan.safetensors"), bytes);
    check_refused(ember_cli("convert " + q(dir.file("nan.safetensors")) + out, dir), "tensor 'lm_head.bias' (lm_head.bias) element 0 is nan");
    bytes = ember::test::read_file(fixture("gptpy/model.safetensors"));
    std::memcpy(&bytes[at_w], &big, 4);
    ember::test::write_file(dir.file("big.safetensors"), bytes);
    check_refused(ember_cli("convert " + q(dir.file("big.safetensors")) + out + " --dtype f16", dir), "past f16's largest value 65504");
    std::remove(dir.file("nan.safetensors").c_str());
    std::remove(dir.file("big.safetensors").c_str());
    check_no_output(dir);
}

TEST_CASE("ember eval and generate refuse a logit that is not finite (weights that overflow f32), naming the token, where eval printed 'loss nan'") {
    ember::test::TempDir dir;
    // gptpy/model.safetensors with lm_head.weight's row 0 set to 1e38: finite weights, so the
    // converter takes them at f32, but logit 0 overflows to +-inf for every hidden state.
    std::string bytes = ember::test::read_file(fixture("gptpy/model.safetensors"));
    int C = 0;
    const size_t at = safetensors_data_at(bytes, "lm_head.weight", &C);
    const float huge = 1e38f;
    for (int c = 0; c < C; ++c) std::memcpy(&bytes[at + 4 * static_cast<size_t>(c)], &huge, 4);
    ember::test::write_file(dir.file("huge.safetensors"), bytes);
    const Run conv = ember_cli("convert " + q(dir.file("huge.safetensors")) + " -o " + q(dir.file("huge.ember")) + " --vocab-text " +
                                   q(fixture("gptpy/vocab.txt")) + " --dtype f32",
                               dir);
    INFO(conv.err);
    REQUIRE(conv.status == 0);
    ember::test::write_file(dir.file("text.txt"), "The quick brown fox jumps over the lazy dog. The quick brown fox.\n");
    const Run r = ember_cli("eval -m " + q(dir.file("huge.ember")) + " --text " + q(dir.file("text.txt")) + " --split all", dir);
    CAPTURE(r.out);
    check_refused(r, "eval: the loss is nan: ");  // not "-nan", as the stream wrote a NaN with its sign bit
    CHECK(r.err.find(": the logits that predict token 1 of the text evaluated are not finite (logit 0 is ") != std::string::npos);
    CHECK(r.err.find("): the model's weights overflow f32") != std::string::npos);
    CHECK(r.out.find("loss") == std::string::npos);
    // generate: the same logit, one of 37 (it sampled around it and printed a text, exit 0).
    const Run g = ember_cli("generate -m " + q(dir.file("huge.ember")) + " -p 'The' -n 5", dir);
    check_refused(g, "generate: new token 1 of 5: logit 0 of 37 is ");
    CHECK(g.err.find(": the model's activations overflow f32") != std::string::npos);
    CHECK(g.out == "The");
    // The console's eval: the same refusal, one ERR line.
    const std::string con = console_on(dir, "huge.ember", "eval --split all " + dir.file("text.txt") + "\n");
    CAPTURE(con);
    CHECK(con.find("ERR eval: the loss is nan: ") != std::string::npos);
    CHECK(con.find("OK loss") == std::string::npos);
}

TEST_CASE("ember eval and generate refuse an int8 model whose activations overflow f32 at every kernel level (plain printed a finite loss, generate a repeated character)") {
    ember::test::TempDir dir;
    ember::test::write_overflowing_ffn_checkpoint(dir.file("huge.safetensors"));
    const Run conv = ember_cli("convert " + q(dir.file("huge.safetensors")) + " -o " + q(dir.file("huge.ember")) + " --vocab-text " +
                                   q(fixture("gptpy/vocab.txt")),
                               dir);
    INFO(conv.err);
    REQUIRE(conv.status == 0);
    ember::test::write_file(dir.file("text.txt"), "The quick brown fox jumps over the lazy dog. The quick brown fox.\n");
    for (const std::string level : {"plain", ""}) {  // "": the highest level this CPU has
        CAPTURE(level);
        const Run r = ember_cli_in_shell("EMBER_CPU_KERNELS=" + level,
                                         "eval -m " + q(dir.file("huge.ember")) + " --text " + q(dir.file("text.txt")) + " --split all", dir);
        CAPTURE(r.out);
        check_refused(r, "eval: the loss is nan: ");
        CHECK(r.out.find("loss") == std::string::npos);
        // generate: every logit is NaN, so nothing can be drawn (greedy took id 0, sampling the
        // first -inf key, and printed a text of one repeated character); any logit that is not
        // finite is refused, as eval refuses it.
        for (const std::string temp : {"0", "0.8"}) {
            CAPTURE(temp);
            const Run g = ember_cli_in_shell("EMBER_CPU_KERNELS=" + level,
                                             "generate -m " + q(dir.file("huge.ember")) + " -p 'The' -n 5 --temperature " + temp, dir);
            check_refused(g, " of 37 is nan: the model's activations overflow f32");
            CHECK(g.err.find("generate: new token ") != std::string::npos);
            CHECK(g.out.rfind("The", 0) == 0);  // the prompt, and the tokens before the NaN, went out
        }
    }
    // The console: one ERR line, and the next command still runs.
    const std::string con = console_on(dir, "huge.ember", "gen -n 5 The\ninfo\n");
    CAPTURE(con);
    CHECK(con.find(" of 37 is nan: the model's activations overflow f32") != std::string::npos);
    CHECK(con.find("ERR generate: new token ") != std::string::npos);
    CHECK(con.find("OK gen") == std::string::npos);
    CHECK(con.find("OK info") != std::string::npos);
}

TEST_CASE("ember --help: each type once, a pointer to the subcommands' help and ember-console's, and errors naming the subcommand's help") {
    ember::test::TempDir dir;
    const Run top = ember_cli("--help", dir);
    CHECK(top.status == 0);
    CHECK(top.out.find("ember SUBCOMMAND --help") != std::string::npos);
    CHECK(top.out.find("ember-console --help") != std::string::npos);
    for (const char* sub : {"convert", "info", "generate", "eval", "finetune", "bench", "flash", "attn"}) {
        CAPTURE(sub);
        const Run h = ember_cli(std::string(sub) + " --help", dir);
        CHECK(h.status == 0);
        // CLI11 wrote the type twice: "--threads INT:INT in [0 - 256]", "--name NAME:NAME".
        for (const char* twice : {"INT:INT", "NAME:NAME", "FILE:FILE", "UINT:UINT", "TEXT:TEXT"}) CHECK(h.out.find(twice) == std::string::npos);
    }
    CHECK(ember_cli("bench --help", dir).out.find("--threads INT in [0 - 256]=0") != std::string::npos);
    check_refused(ember_cli("generate -m x.ember --threads 100000", dir), "(see ember generate --help)");
    // The context policy is checked as the other options are (it used to be refused later, by
    // the session, without the pointer to --help).
    check_refused(ember_cli("generate -m x.ember --context foo", dir), "--context: foo not in {exact,shift,ring} (see ember generate --help)");
    check_refused(ember_cli("genrate -m x.ember", dir), "(see ember --help)");
    // info and flash take the model as -m too, as every other subcommand does.
    const std::string model = dir.file("m.ember");
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(model), dir).status == 0);
    const Run by_m = ember_cli("info -m " + q(model), dir);
    CHECK(by_m.status == 0);
    CHECK(by_m.out == ember_cli("info " + q(model), dir).out);
    check_refused(ember_cli("flash -m " + q(model) + " --port " + q(dir.file("no-port")), dir), "no-port");
}

TEST_CASE("ember: bad option values give one line and exit 1") {
    ember::test::TempDir dir;
    check_refused(ember_cli("generate -m x.ember -n -1", dir), "-n -1 not in 0..1073741824");
    check_refused(ember_cli("generate -m x.ember --threads 100000", dir), "--threads");
    // Not a number is said as such, not as out of range.
    check_refused(ember_cli("bench -m x.ember --threads two", dir), "--threads: 'two' is not an integer");
    check_refused(ember_cli("info x.ember --threads 1.5", dir), "--threads: '1.5' is not an integer");
    check_refused(ember_cli("info x.ember --threads 99999999999999999999", dir), "--threads 99999999999999999999 not in 0..256");
    // CLI11's range and repetition messages, in the words of ember's own parsers.
    check_refused(ember_cli("bench -m x.ember --runs 0", dir), "--runs 0 not in 1..1000");
    check_refused(ember_cli("generate -m x.ember -m y.ember", dir), "--model given 2 times: give it once");
    check_refused(ember_cli("generate -m x.ember --threads 1 --threads 2", dir), "--threads given 2 times: give it once");
    // Integers are decimal on every option: CLI11's own conversion read 010 as 8 and took 0x2 and +2.
    for (const char* args : {"generate -m x.ember --threads 0x2", "bench -m x.ember -n 0x10", "info x.ember --threads +2",
                            "attn -m x.ember -p a --layer 0x1", "flash --port /dev/null --baud 115200x x.ember",
                            "convert x.pt -o y.ember --n-head 0x4"}) {
        CAPTURE(args);
        check_refused(ember_cli(args, dir), "' is not an integer");
    }
    // A level name the kernels do not know (capitals, a typo) means plain: said on stderr.
    const Run kern = ember_cli_in_shell("EMBER_CPU_KERNELS=AVX2", "--version", dir);
    CHECK(kern.status == 0);
    CHECK(kern.err == "ember: warning: EMBER_CPU_KERNELS='AVX2' is not a kernel level (plain, avx2, avxvnni, avx512, neon, dotprod, i8mm, in lower case): "
                      "the plain kernels run\n");
    CHECK(ember_cli_in_shell("EMBER_CPU_KERNELS=avx2", "--version", dir).err.empty());
    // 010 is ten: here past the range, where it used to be read as 8 and pass.
    check_refused(ember_cli("bench -m x.ember --runs 01001", dir), "--runs 01001 not in 1..1000");
    check_refused(ember_cli("", dir), "ember: error: a subcommand is required (see ember --help)");
    check_refused(ember_cli("flash --port /dev/null --name '' x.ember", dir), "--name: needs a name");
    check_refused(ember_cli("finetune -m x.ember --merge --adapter a.emba --steps 5 -o y.ember", dir),
                  "--merge folds an existing adapter; it takes no --steps (an option of training)");  // it used to ignore them
    check_refused(ember_cli("finetune -m x.ember --merge --adapter a.emba --lr 0.1 -o y.ember", dir), "it takes no --lr");  // it used to mean the default
    // A denormal or an overflowing float is said as such, not as "not a finite number".
    check_refused(ember_cli("generate -m x.ember --temperature 1e-45", dir), "--temperature: '1e-45' is outside a float's range");
    check_refused(ember_cli("generate -m x.ember --bogus", dir), "--bogus");
    check_refused(ember_cli("generate -n 3", dir), "--model is required");
    check_refused(ember_cli("info", dir), "ember: error: a model is required: ember info MODEL (or -m MODEL) (see ember info --help)");
    check_refused(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(dir.path()) + " -o " + q(dir.file("o.ember")), dir),
                  "is a directory");
    check_refused(ember_cli("generate -m " + q(dir.path()) + " -n 3", dir), ": is a directory, not a file (give an .ember file)");
    check_refused(ember_cli("generate -m x.ember --seed -1", dir), "--seed: '-1' is not an integer >= 0");
    // A stop string that is not UTF-8 could never match the text; more than 16 cost a search each per token.
    check_refused(ember_cli("generate -m x.ember --stop \"$(printf 'ab\\377')\"", dir), "--stop 'ab\\xff': invalid UTF-8 at byte 2 (it could never match)");
    std::string stops;
    for (int i = 0; i < 17; ++i) stops += " --stop s" + std::to_string(i);
    check_refused(ember_cli("generate -m x.ember" + stops, dir), "--stop: at most 16 stop strings");
    check_refused(ember_cli("bench -m x.ember --runs 0", dir), "--runs");
    // Common mix-ups get a hint at the fix.
    check_refused(ember_cli("info " + q(fixture("gptpy/model.pt")), dir), "convert it first with `ember convert`");
    check_refused(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --meta " + q(fixture("gptpy/vocab.txt")) + " -o " +
                                q(dir.file("o.ember")),
                            dir),
                  "--meta expects nanoGPT's meta.pkl");
    check_refused(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --arch nanogpt --vocab-text " + q(fixture("gptpy/vocab.txt")) +
                                " -o " + q(dir.file("o.ember")),
                            dir),
                  "--arch auto detects");
    check_refused(ember_cli("convert " + q(fixture("bad/whole_module.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " +
                                q(dir.file("o.ember")),
                            dir),
                  "torch.save(model.state_dict(), PATH)");
}

TEST_CASE("an empty file name is never taken as none, finetune's numbers are parsed as generate's, and the adapter at -o stays") {
    // A script's unset variable ("--resume $A" with A empty) used to start a fresh run that
    // replaced the adapter at -o; "" for a number was taken as 0, 1e-400 as 0 and 0x10 as 16.
    ember::test::TempDir dir;
    const std::string model = dir.file("m.ember"), text = fixture("gptpy/eval.txt"), victim = dir.file("victim.emba");
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(model), dir).status == 0);
    const std::string ft = "finetune -m " + q(model) + " --text " + q(text) + " --batch 2 --seq 16 --rank 4 --threads 1 --steps 1 ";
    REQUIRE(ember_cli(ft + "--steps 2 -o " + q(victim), dir).status == 0);  // the last --steps counts
    const std::string before = ember::test::read_file(victim);
    struct Case {
        std::string args, error;
    };
    for (const Case& c : {
             Case{"--resume ''", "--resume: needs a file name"},
             Case{"--log ''", "--log: needs a file name"},
             Case{"--lr ''", "--lr: '' is not a finite number"},
             Case{"--clip ''", "--clip: '' is not a finite number"},
             Case{"--weight-decay ''", "--weight-decay: '' is not a finite number"},
             Case{"--alpha ''", "--alpha: '' is not a finite number"},
             Case{"--seed ''", "--seed: '' is not an integer >= 0"},
             Case{"--seed 99999999999999999999999", "--seed: '99999999999999999999999' is not an integer in 0..2^64-1"},
             Case{"--lr 1e-400", "--lr: '1e-400' is outside a float's range"},
             Case{"--lr 0x10", "--lr: '0x10' is not a decimal number"},
             Case{"--lr 5abc", "--lr: '5abc' is not a finite number"},
             // Out of range: the option and the value (it said "AdamW lr, weight decay and eps must be ...").
             Case{"--lr -1", "--lr -1 must be > 0"},
             Case{"--lr 0", "--lr 0 must be > 0"},  // the console refused it, ember took it
             Case{"--alpha 0", "--alpha 0 must be > 0"},
             Case{"--weight-decay -0.5", "--weight-decay -0.5 must be >= 0"},
             Case{"--clip -1", "--clip -1 must be >= 0"},
             Case{"--steps ''", "--steps needs a value"},
             Case{"--batch 0", "--batch 0 not in 1..4096"},
             Case{"--threads x", "--threads: 'x' is not an integer"},
         }) {
        CAPTURE(c.args);
        check_refused(ember_cli(ft + "-o " + q(victim) + " " + c.args, dir), c.error);
        CHECK(ember::test::read_file(victim) == before);
    }
    // One table (runtime/finetune_options.h) for ember finetune and the console's finetune: the same
    // value is refused by both, with the same words.
    for (const ember::FinetuneOptionSpec& spec : ember::kFinetuneOptions) {
        for (const char* value : {"-1", "0", "5000"}) {
            const std::string args = std::string(spec.name) + " " + value;
            CAPTURE(args);
            const ember::fw::ParseResult p = ember::fw::parse_command("finetune " + args + " a.txt");
            const auto r = ember_cli(ft + "-o " + q(dir.file("same.emba")) + " " + args, dir);
            if (p.ok) {
                CHECK(r.err.find(std::string(spec.name) + " " + value) == std::string::npos);  // not refused by its parser
            } else {
                REQUIRE(p.error.rfind("finetune: ", 0) == 0);
                check_refused(r, p.error.substr(10));
            }
        }
    }
    // A bad value given before a good one is refused too, as the console refuses it (CLI11 used to
    // hand the check the last value alone).
    check_refused(ember_cli(ft + "-o " + q(victim) + " --lr -1 --lr 0.01", dir), "--lr -1 must be > 0");
    CHECK(!ember::fw::parse_command("finetune --lr -1 --lr 0.01 a.txt").ok);
    check_refused(ember_cli("generate -m " + q(model) + " --temp -1 --temp 0.5 -n 3", dir), "--temperature -1");
    check_refused(ember_cli("finetune -m " + q(model) + " --merge --adapter '' -o " + q(dir.file("x.ember")), dir), "--adapter: needs a file name");
    check_refused(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " --group-size '' -o " +
                                q(dir.file("g.ember")),
                            dir),
                  "--group-size needs a value");
    check_refused(ember_cli("generate -m " + q(model) + " -f '' -n 3", dir), "--prompt-file: needs a file name");
    check_refused(ember_cli("generate -m " + q(model) + " --adapter '' -n 3", dir), "--adapter: needs a file name");
    check_refused(ember_cli("eval -m " + q(model) + " --text ''", dir), "--text: needs a file name");
    check_refused(ember_cli("eval -m " + q(model) + " --text " + q(text) + " --adapter ''", dir), "--adapter: needs a file name");
    check_refused(ember_cli("attn -m " + q(model) + " -p ab --adapter ''", dir), "--adapter: needs a file name");
    // A read error is an error, not the end of the text: /proc/self/mem reads EIO at offset 0.
    check_refused(ember_cli("generate -m " + q(model) + " -f /proc/self/mem -n 3", dir), "/proc/self/mem: cannot read: Input/output error");
    check_refused(ember_cli("eval -m " + q(model) + " --text /proc/self/mem", dir), "/proc/self/mem: cannot read: Input/output error");
    check_refused(ember_cli("finetune -m " + q(model) + " --text /proc/self/mem --steps 1 -o " + q(dir.file("n.emba")), dir), "/proc/self/mem: cannot read");
    check_refused(ember_cli("generate -m " + q(model) + " --adapter " + q(dir.path()) + " -n 3", dir), "is a directory, not a file");
    // A text too short to hold out 10% is named.
    ember::test::write_file(dir.file("tiny.txt"), "abcd");
    check_refused(ember_cli("finetune -m " + q(model) + " --text " + q(dir.file("tiny.txt")) + " -o " + q(dir.file("t.emba")), dir),
                  "tiny.txt holds 4 tokens: its held-out last 10% needs at least 2 (a text of 20 tokens or more)");
    // One character: one token, said so ("holds 1 tokens").
    ember::test::write_file(dir.file("one.txt"), "a");
    check_refused(ember_cli("finetune -m " + q(model) + " --text " + q(dir.file("one.txt")) + " --steps 1 -o " + q(dir.file("one.emba")), dir),
                  "one.txt holds 1 token: its held-out last 10% needs at least 2");
    // A training split shorter than a window: named as the split, with the --seq that fits
    // (the shipped model: block_size 128; the fixture's 16 never lets a split be too short).
    const std::string root = ember::test::source_dir() + "/models/";
    const std::string big = dir.file("shakespeare.ember");
    REQUIRE(ember_cli("convert " + q(root + "shakespeare_char.pt") + " --vocab-text " + q(root + "shakespeare_char.vocab.txt") + " -o " + q(big), dir)
                .status == 0);
    std::string short_text;
    for (int i = 0; i < 63; ++i) short_text += "abcd"[i % 4];
    ember::test::write_file(dir.file("short.txt"), short_text);
    check_refused(ember_cli("finetune -m " + q(big) + " --text " + q(dir.file("short.txt")) + " --seq 64 -o " + q(dir.file("t.emba")), dir),
                  "the training split (the first 90% of the text's 63 tokens) holds 56 tokens; a window of --seq 64 needs at least 65 "
                  "(a longer text, or --seq 55 or less)");
}

TEST_CASE("ember generate and info on good and bad models and options") {
    ember::test::TempDir dir;
    const std::string good = dir.file("good.ember");
    const Run conv = ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) +
                                   " -o " + q(good),
                               dir);
    REQUIRE(conv.status == 0);
    CHECK(conv.out.find("architecture: gptpy") != std::string::npos);
    CHECK(conv.out.find("h.0.qkv.weight") != std::string::npos);
    CHECK(conv.out.find("rel rms") != std::string::npos);

    const Run info = ember_cli("info " + q(good), dir);
    CHECK(info.status == 0);
    CHECK(info.out.find("checksum: ok") != std::string::npos);
    CHECK(info.out.find("n_layer 2, n_head 4, n_embd 32") != std::string::npos);
    CHECK(info.out.find("characters: \\n ") != std::string::npos);

    const Run gen = ember_cli("generate -m " + q(good) + " -n 40 --seed 3", dir);
    CHECK(gen.status == 0);
    CHECK(gen.out.size() >= 41);  // 40 characters (some may be 2-byte) and a newline

    // top-k larger than the vocabulary is clamped: the same text as no top-k.
    const Run k0 = ember_cli("generate -m " + q(good) + " -n 60 --seed 5", dir);
    const Run kbig = ember_cli("generate -m " + q(good) + " -n 60 --seed 5 --top-k 100000", dir);
    CHECK(k0.status == 0);
    CHECK(k0.out == kbig.out);

    check_refused(ember_cli("generate -m " + q(good) + " -p 'abc\\Q' -n 5", dir), "character '\\' (U+005C) at position 3");
    check_refused(ember_cli("generate -m " + q(good) + " -n 5 --temperature -1", dir), "temperature");
    check_refused(ember_cli("generate -m " + q(good) + " -n 5 --top-p 1.5", dir), "top-p");
    check_refused(ember_cli("generate -m " + q(good) + " -n 5 --context sideways", dir), "--context: sideways not in {exact,shift,ring}");

    // A flipped data byte and a cut file: refused before anything runs; info reports it.
    std::string bytes = ember::test::read_file(good);
    std::string flipped = bytes;
    flipped[bytes.size() - 70] ^= 0x10;
    ember::test::write_file(dir.file("flip.ember"), flipped);
    const Run gen_bad = ember_cli("generate -m " + q(dir.file("flip.ember")) + " -n 5", dir);
    check_refused(gen_bad, "checksum mismatch over the data section (file corrupted): stored ");
    const Run info_bad = ember_cli("info " + q(dir.file("flip.ember")), dir);
    CHECK(info_bad.status == 1);
    CHECK(info_bad.out.find("checksum: MISMATCH") != std::string::npos);
    CHECK(info_bad.err == gen_bad.err);  // the same line, both hashes given (info's lacked them)
    ember::test::write_file(dir.file("cut.ember"), bytes.substr(0, bytes.size() / 2));
    check_refused(ember_cli("generate -m " + q(dir.file("cut.ember")) + " -n 5", dir), "truncated");

    const Run ev = ember_cli("eval -m " + q(good) + " --text " + q(fixture("gptpy/eval.txt")) + " --split all", dir);
    CHECK(ev.status == 0);
    CHECK(ev.out.rfind("loss ", 0) == 0);
    CHECK(ev.out.find(" over 3050 tokens") != std::string::npos);
    check_refused(ember_cli("eval -m " + q(good) + " --text " + q(fixture("bad/text.txt")), dir), "not in the model's vocabulary");
}

TEST_CASE("--kv-cache f16|f32 on generate, eval and bench, and bench --json records it") {
    ember::test::TempDir dir;
    const std::string good = dir.file("good.ember");
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(good), dir)
                .status == 0);
    for (const char* kv : {"f16", "f32"}) {
        CAPTURE(kv);
        const std::string opt = std::string(" --backend cpu --kv-cache ") + kv;
        const Run gen = ember_cli("generate -m " + q(good) + " -n 20 --seed 3" + opt, dir);
        CHECK(gen.status == 0);
        const Run ev = ember_cli("eval -m " + q(good) + " --text " + q(fixture("gptpy/eval.txt")) + " --split all" + opt, dir);
        CHECK(ev.status == 0);
        CHECK(ev.out.find(" over 3050 tokens") != std::string::npos);
        const Run be = ember_cli("bench -m " + q(good) + " -p 4 -n 3 --runs 1 --json" + opt, dir);
        CHECK(be.status == 0);
        CHECK(be.out.find(std::string("\"kv_cache\":\"") + kv + "\"") != std::string::npos);
    }
    const Run be = ember_cli("bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu", dir);
    CHECK(be.out.find("kv cache: f16") != std::string::npos);  // the default
    // The last-level cache that the int8 decode hint is sized by, or why there is none.
    const size_t llc = ember::kernels::last_level_cache_bytes();
    CHECK(be.out.find(llc == 0 ? "last-level cache: size unknown (no /sys/devices/system/cpu/cpu0/cache, EMBER_LLC_BYTES not set to a size)" : "last-level cache: ") !=
          std::string::npos);
    if (llc != 0) {
        // One sentence: "int8 weights fit in it (...)" or "int8 weights exceed it", never "fit in (...) it".
        const bool fits = be.out.find("; int8 weights fit in it (8-row decode kernel where the group size allows)\n") != std::string::npos;
        const bool exceeds = be.out.find("; int8 weights exceed it\n") != std::string::npos;
        CHECK(fits != exceeds);
        CHECK(be.out.find(") it\n") == std::string::npos);
    }
    const Run js = ember_cli("bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu --json", dir);
    CHECK(js.out.find("\"last_level_cache_bytes\":" + std::to_string(llc)) != std::string::npos);
    // EMBER_LLC_BYTES gives the size where sysfs has none (some VMs): the hint follows it.
    for (const char* size : {"64M", "1K"}) {
        CAPTURE(size);
        const Run e = ember_cli_in_shell(std::string("EMBER_LLC_BYTES=") + size, "bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu", dir);
        CHECK(e.status == 0);
        CHECK(e.err.empty());
        const bool big = size[1] == '4';
        CHECK(e.out.find(big ? "last-level cache: 64.0 MiB (EMBER_LLC_BYTES); int8 weights fit in it" : "last-level cache: 1 KiB (EMBER_LLC_BYTES); int8 weights exceed it") !=
              std::string::npos);
        if (ember::kernels::cpu_level() == ember::kernels::CpuLevel::Avx2 || ember::kernels::cpu_level() == ember::kernels::CpuLevel::AvxVnni ||
            ember::kernels::cpu_level() == ember::kernels::CpuLevel::Avx512) {
            CHECK((e.out.find("(8-row decode: weights in cache)") != std::string::npos) == big);  // groups of 64
        }
        const Run ej = ember_cli_in_shell(std::string("EMBER_LLC_BYTES=") + size, "bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu --json", dir);
        CHECK(ej.out.find(std::string("\"last_level_cache_bytes\":") + (big ? "67108864" : "1024")) != std::string::npos);
        CHECK(ej.out.find("\"last_level_cache_source\":\"EMBER_LLC_BYTES\"") != std::string::npos);
    }
    // 0: unknown, said as the variable's doing (it read "no /sys/... cache" where sysfs had one).
    const Run zero = ember_cli_in_shell("EMBER_LLC_BYTES=0", "bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu", dir);
    CHECK(zero.out.find("last-level cache: size unknown (EMBER_LLC_BYTES=0): int8 weights are taken to come from DRAM") != std::string::npos);
    const Run tiny = ember_cli_in_shell("EMBER_LLC_BYTES=1", "bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu", dir);
    CHECK(tiny.out.find("last-level cache: 1 bytes (EMBER_LLC_BYTES); int8 weights exceed it") != std::string::npos);  // not "0 KiB"
    CHECK(ember_cli_in_shell("EMBER_LLC_BYTES=", "--version", dir).err.empty());  // empty: as unset
    const Run bad_llc = ember_cli_in_shell("EMBER_LLC_BYTES=32MiB", "bench -m " + q(good) + " -p 4 -n 3 --runs 1 --backend cpu --json", dir);
    CHECK(bad_llc.status == 0);
    CHECK(bad_llc.err == "ember: warning: EMBER_LLC_BYTES='32MiB' is not a cache size (digits, then K, M or G: 32M): ignored, the size is sysfs's where it gives one\n");
    CHECK(bad_llc.out.find("\"last_level_cache_bytes\":" + std::to_string(llc)) != std::string::npos);
    check_refused(ember_cli("generate -m " + q(good) + " -n 5 --kv-cache bf16", dir), "--kv-cache");
}

TEST_CASE("ember: output that cannot be written (a full disk) fails the command with one line") {
    if (!std::filesystem::exists("/dev/full")) {
        MESSAGE("SKIPPED: no /dev/full on this machine");
        return;
    }
    ember::test::TempDir dir;
    const std::string good = dir.file("good.ember");
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(good), dir)
                .status == 0);
    for (const std::string& args : {"generate -m " + q(good) + " -n 20 --seed 1", "info " + q(good)}) {
        CAPTURE(args);
        const std::string err = dir.file("err");
        const int rc = std::system((ember::test::program_cmd(EMBER_CLI) + " " + args + " >/dev/full 2>'" + err + "' </dev/null").c_str());
        REQUIRE(WIFEXITED(rc));
        CHECK(WEXITSTATUS(rc) == 1);
        const std::string text = ember::test::read_file(err);
        CHECK(text == "ember: error: cannot write the output: No space left on device\n");
    }
    // A run of 2^30 tokens stops at the first failed write (it used to go on, writing nowhere).
    {
        const std::string err = dir.file("err");
        const int rc = std::system(("timeout 60 " + ember::test::program_cmd(EMBER_CLI) + " generate -m " + q(good) +
                                    " -n 1073741824 >/dev/full 2>'" + err + "' </dev/null").c_str());
        REQUIRE(WIFEXITED(rc));
        CHECK(WEXITSTATUS(rc) == 1);  // not 124, timeout's
        CHECK(ember::test::read_file(err) == "ember: error: cannot write the output: No space left on device\n");
    }
    // --help and --version too (they used to exit 0 having written nothing), and ember-console's.
    for (const std::string& cmd : {ember::test::program_cmd(EMBER_CLI) + " --help", ember::test::program_cmd(EMBER_CLI) + " --version",
                                   ember::test::program_cmd(EMBER_CLI) + " generate --help", ember::test::program_cmd(EMBER_CONSOLE) + " --version",
                                   ember::test::program_cmd(EMBER_CONSOLE) + " --help"}) {
        CAPTURE(cmd);
        const std::string err = dir.file("err");
        const int rc = std::system((cmd + " >/dev/full 2>'" + err + "' </dev/null").c_str());
        REQUIRE(WIFEXITED(rc));
        CHECK(WEXITSTATUS(rc) == 1);
        // With the reason: ember --version said only "cannot write the output".
        CHECK(ember::test::read_file(err).find("error: cannot write the output: No space left on device\n") != std::string::npos);
    }
}

TEST_CASE("an empty model, checkpoint or vocabulary name is refused by name, never read as a file or as no vocabulary") {
    // -m '' said only ": cannot open: No such file or directory" (naming neither option nor
    // file); --vocab-text '' and --meta '' were taken as not given ("a vocabulary is needed").
    ember::test::TempDir dir;
    const std::string ckpt = q(fixture("gptpy/model.pt")), vocab = q(fixture("gptpy/vocab.txt")), out = q(dir.file("o.ember"));
    struct Case {
        std::string args, error;
    };
    for (const Case& c : {
             Case{"generate -m '' -n 3", "--model: needs a file name"},
             Case{"eval -m '' --text " + vocab, "--model: needs a file name"},
             Case{"bench -m ''", "--model: needs a file name"},
             Case{"attn -m '' -p ab", "--model: needs a file name"},
             Case{"info ''", "needs a file name"},
             Case{"info -m ''", "needs a file name"},
             Case{"finetune -m '' --text " + vocab + " -o " + q(dir.file("a.emba")), "--model: needs a file name"},
             Case{"flash '' --port /dev/null", "needs a file name"},
             Case{"convert '' --vocab-text " + vocab + " -o " + out, "checkpoint: needs a file name"},
             Case{"convert " + ckpt + " --vocab-text '' -o " + out, "--vocab-text: needs a file name"},
             Case{"convert " + ckpt + " --meta '' -o " + out, "--meta: needs a file name"},
             Case{"convert " + ckpt + " --tokenizer '' -o " + out, "--tokenizer: needs a file name"},
         }) {
        CAPTURE(c.args);
        check_refused(ember_cli(c.args, dir), c.error);
    }
    CHECK_FALSE(std::filesystem::exists(dir.file("o.ember")));
}

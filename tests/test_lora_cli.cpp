// `ember finetune`, and `generate` / `eval` with --adapter, from the command line.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_util.h"
#include "test_util.h"

using ember::test::fixture;

using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::q;
using ember::test::Run;

namespace {

double loss_of(const std::string& eval_out) { return std::stod(eval_out.substr(eval_out.find("loss ") + 5)); }

}  // namespace

TEST_CASE("ember finetune: train, resume, generate and eval with the adapter, merge, bad inputs refused") {
    ember::test::TempDir dir;
    const std::string model = dir.file("m.ember"), text = fixture("gptpy/eval.txt"), a = dir.file("a.emba");
    REQUIRE(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(model), dir).status == 0);
    const std::string common = "finetune -m " + q(model) + " --batch 2 --seq 16 --rank 4 --lr 0.01 --threads 2";

    Run r = ember_cli(common + " --text " + q(text) + " --steps 6 --eval-every 3 -o " + q(a), dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("step 0: val loss") != std::string::npos);
    CHECK(r.out.find("step 3/6") != std::string::npos);
    CHECK(r.out.find("tokens/s") != std::string::npos);
    CHECK(r.out.find("wrote") != std::string::npos);
    CHECK(std::filesystem::exists(a));

    // resume to 8 steps; a setting given again is refused
    check_refused(ember_cli("finetune -m " + q(model) + " --text " + q(text) + " --resume " + q(a) + " --lr 0.5 --steps 8 -o " + q(a), dir),
                  "--resume takes");
    r = ember_cli("finetune -m " + q(model) + " --text " + q(text) + " --resume " + q(a) + " --steps 8 --threads 2 -o " + q(a), dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("(resumed)") != std::string::npos);
    CHECK(r.out.find("step 8/8") != std::string::npos);

    // Steps already reached: nothing trained, nothing written. `--steps 0` without --resume
    // used to write an untrained adapter over the trained one at -o.
    const std::string trained = ember::test::read_file(a);
    r = ember_cli(common + " --text " + q(text) + " --steps 0 -o " + q(a), dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("step 0: already at --steps 0, nothing to do; " + a + " not written") != std::string::npos);
    CHECK(ember::test::read_file(a) == trained);
    r = ember_cli("finetune -m " + q(model) + " --text " + q(text) + " --resume " + q(a) + " --steps 5 -o " + q(dir.file("copy.emba")), dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("step 8: already at --steps 5, nothing to do") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file("copy.emba")));

    // generate and eval use it unmerged; eval's loss moves with it
    r = ember_cli("generate -m " + q(model) + " --adapter " + q(a) + " -n 20 --seed 3", dir);
    CHECK(r.status == 0);
    CHECK(r.out.size() >= 20);
    const Run base = ember_cli("eval -m " + q(model) + " --text " + q(text), dir);
    const Run adapted = ember_cli("eval -m " + q(model) + " --text " + q(text) + " --adapter " + q(a), dir);
    REQUIRE(base.status == 0);
    REQUIRE(adapted.status == 0);
    CHECK(loss_of(adapted.out) != loss_of(base.out));

    // merge: the new model's loss is the adapter's within the int8 requantization error
    const std::string merged = dir.file("merged.ember");
    r = ember_cli("finetune -m " + q(model) + " --adapter " + q(a) + " --merge -o " + q(merged), dir);
    CHECK(r.status == 0);
    const Run after = ember_cli("eval -m " + q(merged) + " --text " + q(text), dir);
    REQUIRE(after.status == 0);
    CHECK(std::fabs(loss_of(after.out) - loss_of(adapted.out)) < 5e-3);

    // bad inputs
    const std::string odd = dir.file("odd.txt");
    ember::test::write_file(odd, "The quick brown fox \xe2\x82\xac jumps over the lazy dog. " + ember::test::read_file(text));
    check_refused(ember_cli(common + " --steps 1 -o " + q(dir.file("b.emba")) + " --text " + q(odd), dir), "U+20AC");
    r = ember_cli(common + " --steps 1 -o " + q(dir.file("b.emba")) + " --text " + q(odd) + " --skip-unknown", dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("1 characters outside the vocabulary skipped") != std::string::npos);
    // eval: the same characters refused, or skipped and counted with --skip-unknown
    check_refused(ember_cli("eval -m " + q(model) + " --split all --text " + q(odd), dir), "U+20AC");
    r = ember_cli("eval -m " + q(model) + " --split all --text " + q(odd) + " --skip-unknown", dir);
    CHECK(r.status == 0);
    // The count on stderr, as generate's; stdout is the one result line.
    CHECK(r.err.find("ember: 1 characters outside the vocabulary skipped (--skip-unknown)") != std::string::npos);
    CHECK(r.out.rfind("loss ", 0) == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    // The same text from standard input (--text -): the same line.
    const std::string piped = dir.file("piped.out");
    CHECK(std::system((ember::test::program_cmd(EMBER_CLI) + " eval -m " + q(model) + " --split all --text - --skip-unknown <" + q(odd) + " >" +
                       q(piped) + " 2>/dev/null")
                          .c_str()) == 0);
    CHECK(ember::test::read_file(piped) == r.out);
    check_refused(ember_cli("generate -m " + q(model) + " --adapter " + q(model) + " -n 2", dir), "is a model");
    // and the other way round: it said "not an .ember file (identifier is not "EMBR")"
    check_refused(ember_cli("generate -m " + q(dir.file("b.emba")) + " -n 2", dir),
                  "b.emba: is a LoRA adapter (.emba), not a model: give it with --adapter, beside -m MODEL");
    check_refused(ember_cli("finetune -m " + q(model) + " --merge -o " + q(dir.file("x.ember")), dir), "--merge needs --adapter");
    check_refused(ember_cli("finetune -m " + q(model) + " --text " + q(text) + " --seq 17 --steps 1 -o " + q(dir.file("c.emba")), dir),
                  "block_size");
    CHECK_FALSE(std::filesystem::exists(dir.file("c.emba")));
    CHECK_FALSE(std::filesystem::exists(dir.file("x.ember")));
}

// `ember finetune` and Ctrl-C: SIGINT (or SIGTERM, kill's default, or SIGHUP) sent to the process after
// its first progress line stops the run after the current step; it writes the adapter, says so
// and exits 0; --resume goes on from the step it holds.
#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "runtime/adapter.h"
#include "runtime/model.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

}  // namespace

TEST_CASE("ember finetune: SIGINT, SIGTERM or SIGHUP after the first progress line writes the adapter and exits 0, --resume goes on") {
    // SIGTERM and SIGHUP (a closed ssh session) used to kill the run where it was: a checkpoint
    // being written stayed as a.emba.tmp-PID.
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
        CAPTURE(sig);
        test::TempDir dir;
        const std::string model = test::source_dir() + "/tests/fuzz/seeds/ember/gptpy_int8.ember";
        const std::string text = fixture("gptpy/eval.txt"), a = dir.file("a.emba");
        const test::ProgramArgv argv(EMBER_CLI, {"finetune", "-m", model, "--text", text, "-o", a, "--steps", "1000000", "--batch", "1", "--seq", "16",
                                                 "--rank", "4", "--threads", "1", "--eval-every", "1000000"});
        int out[2];
        REQUIRE(::pipe(out) == 0);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::dup2(out[1], 1);
            ::close(out[0]);
            ::close(out[1]);
            argv.exec();
            _exit(127);
        }
        ::close(out[1]);
        // Read until the first progress line, then interrupt; read the rest to the end.
        std::string seen;
        bool sent = false;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (;;) {
            pollfd p{out[0], POLLIN, 0};
            if (::poll(&p, 1, 100) > 0) {
                char buf[4096];
                const ssize_t n = ::read(out[0], buf, sizeof buf);
                if (n <= 0) break;  // the child closed its output
                seen.append(buf, static_cast<size_t>(n));
            }
            if (!sent && seen.find("step 1/1000000  loss ") != std::string::npos && seen.find('\n', seen.find("step 1/1000000")) != std::string::npos) {
                REQUIRE(::kill(pid, sig) == 0);
                sent = true;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid, SIGKILL);
                break;
            }
        }
        ::close(out[0]);
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CAPTURE(seen);
        REQUIRE(sent);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        const size_t k = seen.find("interrupted at step ");
        REQUIRE(k != std::string::npos);
        const int64_t step = std::stoll(seen.substr(k + 20));
        CHECK(step >= 1);
        CHECK(step < 1000000);
        CHECK(seen.find("wrote " + a + " at step " + std::to_string(step) + ": val loss ") != std::string::npos);

        // The adapter on disk is valid and holds that step.
        auto m = Model::open(model);
        auto ad = LoraAdapter::load(a, *m);
        CHECK(ad->train.present);
        CHECK(ad->train.step == static_cast<uint64_t>(step));

        // --resume goes on from it.
        const std::string log = dir.file("resume.out");
        const std::string cmd = test::program_cmd(EMBER_CLI) + " finetune -m " + q(model) + " --text " + q(text) + " --resume " + q(a) + " -o " + q(a) +
                                " --steps " + std::to_string(step + 2) + " --threads 1 >" + q(log) + " 2>&1 </dev/null";
        const int rc = std::system(cmd.c_str());
        const std::string r = test::read_file(log);
        CAPTURE(r);
        REQUIRE(WIFEXITED(rc));
        CHECK(WEXITSTATUS(rc) == 0);
        CHECK(r.find("step " + std::to_string(step) + ": val loss ") != std::string::npos);
        CHECK(r.find("(resumed)") != std::string::npos);
        CHECK(r.find("step " + std::to_string(step + 1) + "/" + std::to_string(step + 2) + "  loss ") != std::string::npos);
        CHECK(r.find("at step " + std::to_string(step + 2) + ":") != std::string::npos);
        CHECK(LoraAdapter::load(a, *m)->train.step == static_cast<uint64_t>(step + 2));
    }
}

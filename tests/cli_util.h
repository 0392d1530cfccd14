// Running the `ember` command (EMBER_CLI) from a test: its exit status, stdout and stderr.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "test_util.h"

namespace ember::test {

struct Run {
    int status = -1;  // exit status, or 128 + signal
    std::string out, err;
};

// `PREFIX ember ARGS` run by the shell (e.g. PREFIX "ulimit -v N; exec") with no standard
// input; stdout and stderr go through files in dir.
inline Run ember_cli_in_shell(const std::string& prefix, const std::string& args, const TempDir& dir) {
    const std::string out = dir.file("stdout"), err = dir.file("stderr");
    const std::string cmd = prefix + " " + program_cmd(EMBER_CLI) + " " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
    const int rc = std::system(cmd.c_str());
    Run r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

// Runs `ember ARGS` with no standard input, as ember_cli_in_shell with no prefix.
inline Run ember_cli(const std::string& args, const TempDir& dir) { return ember_cli_in_shell("", args, dir); }

// One line, starting "ember: error:", containing `what`; exit 1 (not a crash).
inline void check_refused(const Run& r, const std::string& what) {
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.rfind("ember: error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(what) != std::string::npos);
}

// s in single quotes, for a shell command line (s holds no quote).
inline std::string q(const std::string& s) { return "'" + s + "'"; }

}  // namespace ember::test

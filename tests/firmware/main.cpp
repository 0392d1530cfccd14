// The firmware tests' main: writes to a closed socket or pty must fail with EPIPE (as in
// ember-console, which ignores SIGPIPE), not kill the test binary.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <signal.h>

int main(int argc, char** argv) {
    ::signal(SIGPIPE, SIG_IGN);
    return doctest::Context(argc, argv).run();
}

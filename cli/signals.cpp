#include "cli/signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace ember::cli {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Each path is copied here before its file is created (the count raised after the copy) and
// only read by the handler, which calls async-signal-safe functions alone (unlink, signal,
// raise).
constexpr int kTempSlots = 2;
char g_temp_path[kTempSlots][4096];
volatile std::sig_atomic_t g_temp_depth = 0;

extern "C" void on_temp_signal(int sig) {
    for (int i = 0; i < g_temp_depth && i < kTempSlots; ++i) {
        if (g_temp_path[i][0] != '\0') ::unlink(g_temp_path[i]);
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

}  // namespace

ScopedSignals::ScopedSignals(void (*handler)(int)) {
    static_assert(sizeof previous_ / sizeof previous_[0] == sizeof kSignals / sizeof kSignals[0], "one saved action per signal");
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &previous_[i]);
}

ScopedSignals::~ScopedSignals() {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

void remember_temp(const char* path) {
    if (path == nullptr) {
        if (g_temp_depth > 0) g_temp_depth = g_temp_depth - 1;
        return;
    }
    const int d = g_temp_depth;
    if (d < kTempSlots) {
        // Too long to keep: an empty slot (left to the OS), still counted so that nullptr pairs up.
        const bool fits = std::strlen(path) < sizeof g_temp_path[d];
        if (fits) std::memcpy(g_temp_path[d], path, std::strlen(path) + 1);
        else g_temp_path[d][0] = '\0';
    }
    g_temp_depth = d + 1;
}

TempFileSignals::TempFileSignals() : signals_(on_temp_signal) {}

TempFileSignals::~TempFileSignals() { g_temp_depth = 0; }

}  // namespace ember::cli

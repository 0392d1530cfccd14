#include "cli/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace ember::cli {

namespace {

// Each path is copied here before its file is created (the count raised after the copy) and
// only read by the handler, which calls async-signal-safe functions alone (unlink, signal,
// raise).
constexpr int kTempSlots = 2;
char g_temp_path[kTempSlots][4096];
volatile std::sig_atomic_t g_temp_depth = 0;

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

extern "C" void on_temp_signal(int sig) {
    for (int i = 0; i < g_temp_depth && i < kTempSlots; ++i) {
        if (g_temp_path[i][0] != '\0') ::unlink(g_temp_path[i]);
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

}  // namespace

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

TempFileSignals::TempFileSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_temp_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

TempFileSignals::~TempFileSignals() {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
    g_temp_depth = 0;
}

}  // namespace ember::cli

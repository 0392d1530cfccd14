// Signals that end a command (SIGINT, SIGTERM, SIGHUP: Ctrl-C, kill, a closed terminal or ssh
// session), one list for every command that handles them: `ember finetune` stops its run after
// the current step; `ember convert` and `ember finetune --merge` remove their temporary output
// file (OUT.tmp-PID, renamed over OUT at the end) and die by the signal.
#pragma once

#include <signal.h>

namespace ember::cli {

// While one lives, SIGINT, SIGTERM and SIGHUP go to `handler`; the destructor puts the previous
// handlers back.
class ScopedSignals {
public:
    explicit ScopedSignals(void (*handler)(int));
    ~ScopedSignals();
    ScopedSignals(const ScopedSignals&) = delete;
    ScopedSignals& operator=(const ScopedSignals&) = delete;

private:
    struct sigaction previous_[3];
};

// Tells the handler a temporary file's path before the file is created, and nullptr once it
// is renamed into place or removed (converter/writer.h's WriteOptions::on_temp_file). Calls
// nest (the scale check tells its probe file around the writer's): nullptr forgets the latest.
// At most two at once are kept; a path of 4096 bytes or more is not (left to the OS).
void remember_temp(const char* path);

// While one lives: the three signals remove the files told to remember_temp, then the signal is
// raised again with its default action, so the exit status says the process was killed. The
// destructor forgets every path. One at a time (the paths are static storage: a signal handler
// can reach nothing else).
class TempFileSignals {
public:
    TempFileSignals();
    ~TempFileSignals();

private:
    ScopedSignals signals_;
};

}  // namespace ember::cli

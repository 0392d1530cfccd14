// A temporary output file (OUT.tmp-PID) removed when a signal ends the process: `ember convert`
// and `ember finetune --merge` write whole models through one, renamed over OUT at the end.
#pragma once

namespace ember::cli {

// Tells the handler a temporary file's path before the file is created, and nullptr once it
// is renamed into place or removed (converter/writer.h's WriteOptions::on_temp_file). Calls
// nest (the scale check tells its probe file around the writer's): nullptr forgets the latest.
// At most two at once are kept; a path of 4096 bytes or more is not (left to the OS).
void remember_temp(const char* path);

// While one lives: SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) remove the
// files told to remember_temp, then the signal is raised again with its default action, so
// the exit status says the process was killed. The destructor puts the previous handlers
// back and forgets every path. One at a time (the paths are static storage: a signal handler
// can reach nothing else).
struct TempFileSignals {
    TempFileSignals();
    ~TempFileSignals();
    TempFileSignals(const TempFileSignals&) = delete;
    TempFileSignals& operator=(const TempFileSignals&) = delete;
};

}  // namespace ember::cli

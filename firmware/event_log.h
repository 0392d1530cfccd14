// The console's record of what happened on the device (flashes, loads, refusals, errors): one
// line per event, "2026-12-01T16:05:03.120Z ember-console: <what>" (ISO 8601, UTC, ms), to
// stderr (the journal, under firmware/ember-console.service) and to a file (appended; each
// line is one write(2) on an O_APPEND descriptor, so it is on disk as soon as it is logged
// and lines of two writers never mix).
#pragma once

#include <string>
#include <string_view>

namespace ember::fw {

class EventLog {
public:
    // err_fd: where the journal's copy goes (-1: none). path: the log file ("": none). Throws
    // ember::Error naming the file when it cannot be opened for appending, when it is a FIFO
    // that nobody reads, and when it is a non-empty file whose first line is not one of ours
    // (a model, a text: left as it was).
    EventLog(int err_fd, const std::string& path);
    ~EventLog();
    EventLog(const EventLog&) = delete;
    EventLog& operator=(const EventLog&) = delete;
    // Logs one event (newlines in `what` become spaces). A failed write is dropped; the first
    // of a run of failed writes to the file is said on err_fd, with its reason (ENOSPC: "No
    // space left on device"), and so is the next that works. A line the file took only part
    // of (a full disk) stays as that part, and the next line starts on a line of its own, as
    // it does in a file found ending mid-line: lines are never glued together.
    void log(std::string_view what);

    // Now as "YYYY-MM-DDTHH:MM:SS.mmmZ".
    static std::string timestamp();

private:
    int err_fd_, file_fd_ = -1;
    std::string file_name_;      // printable, for messages
    bool file_failing_ = false;  // the last write to the file failed
    bool file_torn_ = false;     // the file ends mid-line: the next line begins with '\n'
};

}  // namespace ember::fw

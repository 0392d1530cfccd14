#include "firmware/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

// Whether `head` (a file's first bytes) starts as log() writes: "YYYY-MM-DDTHH:MM:SS.mmmZ ember-console: ".
bool starts_as_event_log(const char* head, size_t n) {
    static const char kShape[] = "dddd-dd-ddTdd:dd:dd.dddZ ember-console: ";
    const size_t len = sizeof kShape - 1;
    if (n < len) return false;
    for (size_t i = 0; i < len; ++i) {
        const bool ok = kShape[i] == 'd' ? head[i] >= '0' && head[i] <= '9' : head[i] == kShape[i];
        if (!ok) return false;
    }
    return true;
}

}  // namespace

EventLog::EventLog(int err_fd, const std::string& path) : err_fd_(err_fd), file_name_(printable(path, 200)) {
    if (path.empty()) return;
    const std::string& what = file_name_;
    // O_NONBLOCK: a FIFO that nobody reads is refused at once (ENXIO) instead of a wait.
    file_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (file_fd_ < 0) fail("--log ", what, ": cannot open for appending: ", std::strerror(errno));
    ::fcntl(file_fd_, F_SETFL, ::fcntl(file_fd_, F_GETFL) & ~O_NONBLOCK);
    // A file with something else in it (a model, a text) is left as it is: lines appended
    // would spoil it, and a model still loads with them (the loader reads its own length).
    struct stat st {};
    if (::fstat(file_fd_, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        char head[64], last = '\n';
        const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        const ssize_t got = rd < 0 ? -1 : ::pread(rd, head, sizeof head, 0);
        // A line cut short by an earlier run (a full disk): ours starts after it, not inside it.
        if (rd >= 0 && ::pread(rd, &last, 1, st.st_size - 1) == 1) file_torn_ = last != '\n';
        if (rd >= 0) ::close(rd);
        if (got < 0 || !starts_as_event_log(head, static_cast<size_t>(got))) {
            ::close(file_fd_);
            file_fd_ = -1;
            fail("--log ", what, ": exists and is not an ember-console log (its first line is not 'YYYY-MM-DDTHH:MM:SS.mmmZ ember-console: ...'); ",
                 "lines appended would spoil it: choose another file");
        }
    }
}

EventLog::~EventLog() {
    if (file_fd_ >= 0) ::close(file_fd_);
}

std::string EventLog::timestamp() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    ::gmtime_r(&ts.tv_sec, &t);
    char b[40];
    const size_t n = std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &t);
    std::snprintf(b + n, sizeof b - n, ".%03ldZ", static_cast<long>(ts.tv_nsec / 1000000));
    return b;
}

void EventLog::log(std::string_view what) {
    if (err_fd_ < 0 && file_fd_ < 0) return;
    std::string line = timestamp() + " ember-console: ";
    for (char c : what) line += c == '\n' || c == '\r' ? ' ' : c;
    line += '\n';
    if (err_fd_ >= 0) {
        const ssize_t w = ::write(err_fd_, line.data(), line.size());  // one line, one write
        (void)w;
    }
    if (file_fd_ < 0) return;
    // After a line the file took only part of, this one starts on its own line. The rest of a
    // short write is written again, which says why the file stopped (a short write has no errno).
    const std::string out = file_torn_ ? "\n" + line : line;
    size_t done = 0;
    int error = 0;
    while (done < out.size()) {
        const ssize_t w = ::write(file_fd_, out.data() + done, out.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            error = w < 0 ? errno : EIO;
            break;
        }
        done += static_cast<size_t>(w);
    }
    const bool failed = done != out.size();
    if (done > 0) file_torn_ = out[done - 1] != '\n';
    // A file that stops taking lines (a full disk, /dev/full) is said once on stderr, and again
    // when it takes them again; the events go on to stderr meanwhile.
    if (failed != file_failing_ && err_fd_ >= 0) {
        const std::string note = timestamp() + " ember-console: --log " + file_name_ +
                                 (failed ? ": cannot write (" + std::string(std::strerror(error)) +
                                               "): events go to stderr only until it takes them again\n"
                                         : ": written again\n");
        const ssize_t n = ::write(err_fd_, note.data(), note.size());
        (void)n;
    }
    file_failing_ = failed;
}

}  // namespace ember::fw

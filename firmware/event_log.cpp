#include "firmware/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::fw {

EventLog::EventLog(int err_fd, const std::string& path) : err_fd_(err_fd) {
    if (path.empty()) return;
    file_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (file_fd_ < 0) fail("--log ", printable(path, 200), ": cannot open for appending: ", std::strerror(errno));
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
    for (int fd : {err_fd_, file_fd_}) {
        if (fd < 0) continue;
        const ssize_t w = ::write(fd, line.data(), line.size());  // one line, one write
        (void)w;
    }
}

}  // namespace ember::fw

// Exclusive use of a serial port, so that `ember flash` and ember-console never share a line
// with a terminal program (picocom, minicom, screen) or with each other.
// Two locks, as picocom and minicom take them:
//   - flock(fd, LOCK_EX | LOCK_NB) on the open port (flock(2));
//   - a UUCP lock file LOCKDIR/LCK..NAME (NAME: the device's file name, e.g. ttyUSB0, links
//     such as /dev/serial/by-id/... resolved first) holding
//     the owner's PID as 10 ASCII characters, right-aligned, and a newline (the HDB UUCP format,
//     Filesystem Hierarchy Standard 3.0, /var/lock), taken only where LOCKDIR exists and this
//     process may write it. A lock file whose PID is not running (or is a zombie, exited and
//     not yet reaped, or is this process's own), or that holds no PID (empty, not a number, a
//     number past pid_t, not a regular file) is stale and taken over; one that cannot be
//     removed is an error that names it.
#pragma once

#include <string>

namespace ember::fw {

constexpr char kUucpLockDir[] = "/var/lock";

class PortLock {
public:
    // Locks `port` (the path it was opened by) through its open fd. Throws ember::Error naming
    // the port and saying it is in use (and by which PID, when a lock file says) when another
    // program holds it, or naming the lock file when it cannot be written.
    PortLock(const std::string& port, int fd, const std::string& lock_dir = kUucpLockDir);
    ~PortLock();  // removes the lock file (the flock goes with the fd)
    PortLock(const PortLock&) = delete;
    PortLock& operator=(const PortLock&) = delete;
    const std::string& lock_file() const { return lock_file_; }  // empty: no lock file taken

private:
    std::string lock_file_;
};

// Removes the lock file at `path` when it holds this process's PID (a file another program
// put there since, after ours was taken over as stale, is left alone). Async-signal-safe
// (open, read, close, getpid, unlink): for the destructor and for signal handlers.
void remove_own_lock_file(const char* path) noexcept;

// LOCKDIR/LCK..NAME for a port path ("/dev/ttyUSB0" -> "/var/lock/LCK..ttyUSB0"; a link to
// /dev/ttyUSB0 gives the same).
std::string uucp_lock_path(const std::string& port, const std::string& lock_dir);

}  // namespace ember::fw

#include "firmware/port_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

// The PID a lock file holds; 0 when it holds none: empty, not a number, a number that no PID
// can be (past pid_t: 4294967297 was read as PID 1, 4294967295 as -1, which kill() takes as
// "every process"), or not a regular file at all (a FIFO used to block the open for good; a
// folder; a symbolic link, which is not followed), or gone. -1 when it cannot be opened for
// another reason (EACCES: another user's 0600 lock), errno set: it may well name a live
// holder (it was taken for one holding no PID, and removed where the folder allowed).
long read_lock_pid(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return errno == ENOENT || errno == ELOOP ? 0 : -1;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return 0;
    }
    char buf[64] = {};
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return 0;
    char* end = nullptr;
    errno = 0;
    const long pid = std::strtol(buf, &end, 10);  // skips the leading spaces
    if (end == buf || errno == ERANGE || pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return 0;
    return pid;
}

// Whether /proc/PID/status gives the state Z with one thread: a process that has exited and
// waits for its parent to reap it. kill(pid, 0) succeeds on one, but it holds no port. A
// main thread that ended (pthread_exit) while others run shows Z too, with Threads above 1:
// those threads may hold the port.
bool zombie(long pid) {
    const std::string status = "/proc/" + std::to_string(pid) + "/status";
    const int fd = ::open(status.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    const std::string s(buf, static_cast<size_t>(n));
    return s.find("\nState:\tZ") != std::string::npos && s.find("\nThreads:\t1\n") != std::string::npos;
}

// Our own PID in a lock file was left by an earlier process that had it (PIDs repeat, as in a
// restarted container): we hold no lock yet, so it is not running there.
bool running(long pid) {
    return pid != ::getpid() && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) && !zombie(pid);
}

// Creates `path` holding our PID, atomically: written to a temporary file, then hard-linked
// (link(2) fails when the name exists, so two programs never both win). Returns false when
// the name exists; throws on other failures. The temporary is made by mkstemp (O_EXCL): in a
// folder any user may write, a name chosen in advance (it was LTMP.<pid>, opened with
// O_TRUNC) could be a symbolic link that another user planted, and the file it points at was
// truncated.
bool create_lock(const std::string& path, const std::string& dir) {
    char pid[16];
    std::snprintf(pid, sizeof pid, "%10ld\n", static_cast<long>(::getpid()));
    std::string tmp = dir + "/LTMP.XXXXXX";
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) fail(printable(dir, 200), ": cannot create a lock file there: ", std::strerror(errno));
    const bool wrote = ::fchmod(fd, 0644) == 0 && ::write(fd, pid, 11) == 11;
    const int write_errno = errno;
    ::close(fd);
    if (!wrote) {
        ::unlink(tmp.c_str());  // named by its folder below: the temporary is gone
        fail(printable(dir, 200), ": cannot write a lock file there: ", std::strerror(write_errno));
    }
    const int r = ::link(tmp.c_str(), path.c_str());
    const int e = errno;
    ::unlink(tmp.c_str());
    if (r == 0) return true;
    if (e == EEXIST) return false;
    fail(printable(path, 200), ": cannot create the lock file: ", std::strerror(e));
}

}  // namespace

std::string uucp_lock_path(const std::string& port, const std::string& lock_dir) {
    // A link (/dev/serial/by-id/usb-..., a udev alias) names the device it points at, so
    // that the lock of a program given the device's own name is seen.
    std::string device = port;
    if (char* real = ::realpath(port.c_str(), nullptr)) {
        device = real;
        std::free(real);
    }
    return lock_dir + "/LCK.." + device.substr(device.find_last_of('/') + 1);
}

PortLock::PortLock(const std::string& port, int fd, const std::string& lock_dir) {
    const std::string name = printable(port, 200);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) fail(name, " is in use by another program (it holds the port's flock); close it first");
        fail(name, ": flock: ", std::strerror(errno));
    }
    if (lock_dir.empty() || ::access(lock_dir.c_str(), W_OK) != 0) return;  // no UUCP locks here
    // The device the open fd is (/proc/self/fd), not the name resolved again: a link changed
    // since the open would give another device's lock file.
    char dev[4096];
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t dev_len = ::readlink(self.c_str(), dev, sizeof dev - 1);
    const std::string path = uucp_lock_path(dev_len > 0 && dev[0] == '/' ? std::string(dev, static_cast<size_t>(dev_len)) : port, lock_dir);
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (create_lock(path, lock_dir)) {
            lock_file_ = path;
            return;
        }
        const long pid = read_lock_pid(path);
        const int read_errno = errno;
        if (pid < 0) {
            fail(name, " may be in use: its lock file ", printable(path, 200), " cannot be read: ", std::strerror(read_errno),
                 " (remove it if no program holds the port)");
        }
        if (pid > 0 && running(pid))
            fail(name, " is in use by another program (PID ", pid, ", ", printable(path, 200), "); close it first");
        // Stale: its owner is gone, or it holds no PID. One this process may not remove (a
        // folder, another user's file in a sticky folder) was reported as "came back".
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
            fail(name, ": the stale lock file ", printable(path, 200), " (", pid > 0 ? "its PID " + std::to_string(pid) + " is not running" : std::string("no PID in it"),
                 ") cannot be removed: ", std::strerror(errno), "; remove it by hand");
        }
    }
    fail(name, " is in use: ", printable(path, 200), " came back after it was removed as stale");
}

PortLock::~PortLock() {
    if (!lock_file_.empty()) remove_own_lock_file(lock_file_.c_str());
}

void remove_own_lock_file(const char* path) noexcept {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) return;
    char buf[32];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    long pid = 0;
    bool digits = false;
    for (ssize_t i = 0; i < n; ++i) {  // the HDB format: spaces, then the decimal PID
        if (buf[i] == ' ' && !digits) continue;
        if (buf[i] < '0' || buf[i] > '9') break;
        digits = true;
        pid = pid * 10 + (buf[i] - '0');
        if (pid > std::numeric_limits<pid_t>::max()) return;
    }
    if (digits && pid == ::getpid()) ::unlink(path);
}

}  // namespace ember::fw

#include "firmware/serial_port.h"

#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

struct BaudName {
    int baud;
    speed_t code;
};

constexpr BaudName kBauds[] = {
    {50, B50},           {75, B75},           {110, B110},         {134, B134},         {150, B150},
    {200, B200},         {300, B300},         {600, B600},         {1200, B1200},       {1800, B1800},
    {2400, B2400},       {4800, B4800},       {9600, B9600},       {19200, B19200},     {38400, B38400},
    {57600, B57600},     {115200, B115200},   {230400, B230400},   {460800, B460800},   {500000, B500000},
    {576000, B576000},   {921600, B921600},   {1000000, B1000000}, {1152000, B1152000}, {1500000, B1500000},
    {2000000, B2000000}, {2500000, B2500000}, {3000000, B3000000}, {3500000, B3500000}, {4000000, B4000000},
};

}  // namespace

bool is_standard_baud(int baud) {
    for (const auto& b : kBauds)
        if (b.baud == baud) return true;
    return false;
}

std::string standard_bauds() {
    std::string list;
    for (const auto& b : kBauds) list += (list.empty() ? "" : ", ") + std::to_string(b.baud);
    return list;
}

void configure_raw(int fd, int baud, bool rtscts) {
    speed_t code = 0;
    bool found = false;
    for (const auto& b : kBauds) {
        if (b.baud == baud) {
            code = b.code;
            found = true;
        }
    }
    if (!found) fail("baud ", baud, " is not a standard rate (", standard_bauds(), ")");
    termios t{};
    if (tcgetattr(fd, &t) != 0) fail("not a terminal: ", std::strerror(errno));
    cfmakeraw(&t);  // no echo, no line editing, no signals, no CR/LF translation, 8 bits
    t.c_cflag &= ~static_cast<tcflag_t>(PARENB | CSTOPB | CSIZE);
    t.c_cflag |= CS8 | CLOCAL | CREAD;
    if (rtscts) t.c_cflag |= CRTSCTS;
    else t.c_cflag &= ~static_cast<tcflag_t>(CRTSCTS);
    t.c_iflag &= ~static_cast<tcflag_t>(IXON | IXOFF | IXANY);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    if (cfsetispeed(&t, code) != 0 || cfsetospeed(&t, code) != 0) fail("baud ", baud, ": ", std::strerror(errno));
    if (tcsetattr(fd, TCSANOW, &t) != 0) fail("tcsetattr: ", std::strerror(errno));
}

SerialPort::SerialPort(const std::string& path, int baud, bool rtscts, const std::string& lock_dir) {
    // O_NONBLOCK: until CLOCAL is set, open() of a UART without carrier may wait forever;
    // blocking I/O comes back once the line is configured.
    fd_ = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail(printable(path, 200), ": cannot open: ", std::strerror(errno));
    try {
        lock_ = std::make_unique<PortLock>(path, fd_, lock_dir);
    } catch (const Error&) {
        ::close(fd_);
        throw;  // the message names the port and says it is in use
    }
    try {
        configure_raw(fd_, baud, rtscts);
        const int flags = ::fcntl(fd_, F_GETFL);
        if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) fail("fcntl: ", std::strerror(errno));
    } catch (const Error& e) {
        lock_.reset();
        ::close(fd_);
        fail(printable(path, 200), ": ", e.what());
    }
}

SerialPort::~SerialPort() {
    lock_.reset();  // the lock file goes; the flock goes with the fd
    if (fd_ >= 0) ::close(fd_);
}

void write_all(int fd, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd pfd{fd, POLLOUT, 0};
            ::poll(&pfd, 1, 100);
            continue;
        }
        fail("write to the line: ", w == 0 ? "nothing written" : std::strerror(errno));
    }
}

long read_some(int fd, void* data, size_t n, int timeout_ms) {
    const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        int wait = -1;
        if (deadline >= 0) {
            const int64_t left = deadline - now_ms();
            wait = left > 0 ? static_cast<int>(left) : 0;
        }
        pollfd pfd{fd, POLLIN, 0};
        const int r = ::poll(&pfd, 1, wait);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) return 0;
        if (!(pfd.revents & POLLIN) && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))) return -1;
        const ssize_t got = ::read(fd, data, n);
        if (got > 0) return got;
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        return -1;  // EOF, EIO (pty peer closed), other errors
    }
}

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ember::fw

// Serial lines (termios) and the byte I/O both ends of the protocol use over any file
// descriptor: a serial port, a pty, a pipe or a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "firmware/port_lock.h"

namespace ember::fw {

// Opens a serial device (or a pty slave) read-write and puts it in raw mode, 8 data bits,
// no parity, 1 stop bit (8N1), at `baud` (a standard rate from 50 to 4000000), with RTS/CTS
// hardware flow control when asked. The port is locked first (firmware/port_lock.h): one held
// by another program is refused before any setting or byte of it changes. Throws ember::Error
// naming the device. lock_dir: where UUCP lock files go ("" for none).
class SerialPort {
public:
    SerialPort(const std::string& path, int baud, bool rtscts, const std::string& lock_dir = kUucpLockDir);
    ~SerialPort();
    SerialPort(const SerialPort&) = delete;
    SerialPort& operator=(const SerialPort&) = delete;
    int fd() const { return fd_; }
    const std::string& lock_file() const { return lock_->lock_file(); }  // the UUCP lock file, "" for none

private:
    int fd_ = -1;
    std::unique_ptr<PortLock> lock_;
};

// Raw 8N1 at `baud` on an open terminal fd. Throws ember::Error (not a terminal, bad rate).
void configure_raw(int fd, int baud, bool rtscts);

// True when baud is a rate termios names (B50 .. B4000000).
bool is_standard_baud(int baud);

// The standard rates, for messages: "50, 75, 110, ..., 4000000".
std::string standard_bauds();

// Writes all n bytes (retrying short writes and EINTR/EAGAIN). Throws ember::Error
// ("write to the line: ...") when the fd fails.
void write_all(int fd, const void* data, size_t n);

// Waits up to timeout_ms (-1: forever) for bytes and reads at most n. Returns the count
// (> 0), 0 on timeout, or -1 when the other end is gone (EOF, EIO, hang-up).
long read_some(int fd, void* data, size_t n, int timeout_ms);

// Milliseconds on a monotonic clock.
int64_t now_ms();

}  // namespace ember::fw

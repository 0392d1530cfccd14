// The device's file operations: everything the flash receiver and the DIR/current pointer do
// to the models folder goes through this interface, so a test can stand a journaling disk in
// its place (tests/firmware/journal_fs.h: a power cut drops what was never made durable).
// The calls mirror POSIX (open(2), pwrite(2), fsync(2), rename(2) ...): they return what the
// system call returns, and errno says why on failure; callers name the file in their errors.
// Reads (stat, SHA-256, Model::open) go to the files directly: they change nothing.
#pragma once

#include <sys/types.h>

#include <string>

namespace ember::fw {

class DeviceFs {
public:
    virtual ~DeviceFs() = default;
    virtual int open(const std::string& path, int flags, mode_t mode) = 0;  // an fd, or -1
    virtual ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) = 0;
    virtual int ftruncate(int fd, off_t length) = 0;
    virtual int fsync(int fd) = 0;  // the file's data and size are durable when it returns 0
    virtual int close(int fd) = 0;
    virtual int rename(const std::string& from, const std::string& to) = 0;
    virtual int unlink(const std::string& path) = 0;
    // Opens the folder and fsyncs it: its entries (creations, renames, unlinks) are durable.
    virtual int fsync_dir(const std::string& dir) = 0;
};

// The real thing: each call is the system call of the same name.
class PosixFs : public DeviceFs {
public:
    int open(const std::string& path, int flags, mode_t mode) override;
    ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) override;
    int ftruncate(int fd, off_t length) override;
    int fsync(int fd) override;
    int close(int fd) override;
    int rename(const std::string& from, const std::string& to) override;
    int unlink(const std::string& path) override;
    int fsync_dir(const std::string& dir) override;
};

}  // namespace ember::fw

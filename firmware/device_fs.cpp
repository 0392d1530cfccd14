#include "firmware/device_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace ember::fw {

int PosixFs::open(const std::string& path, int flags, mode_t mode) { return ::open(path.c_str(), flags, mode); }
ssize_t PosixFs::pwrite(int fd, const void* buf, size_t n, off_t offset) { return ::pwrite(fd, buf, n, offset); }
int PosixFs::ftruncate(int fd, off_t length) { return ::ftruncate(fd, length); }
int PosixFs::fsync(int fd) { return ::fsync(fd); }
int PosixFs::close(int fd) { return ::close(fd); }
int PosixFs::rename(const std::string& from, const std::string& to) { return std::rename(from.c_str(), to.c_str()); }
int PosixFs::unlink(const std::string& path) { return ::unlink(path.c_str()); }

int PosixFs::fsync_dir(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int r = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return r;
}

}  // namespace ember::fw

// A journaling disk for power-cut tests: a fw::DeviceFs over a real folder DIR that also
// keeps, in a journal folder J beside it (same filesystem), what a disk would hold if the
// power went now. The rules (POSIX fsync(2), the pessimistic reading every filesystem allows):
//   - a file's data and size count only as of its last fsync (files in DIR when the journal
//     was started count as synced);
//   - DIR's entries (creations, renames, unlinks) count only as of the last fsync of DIR.
// power_cut() rewrites DIR to exactly that: the durable entries, each with its durable data.
// Inodes are tracked by number; J/grave/ holds a hard link to every inode DIR ever named, so
// no number is reused while the journal runs. Each journal update is a write to a temporary
// file and a rename within J, so a process killed at any moment leaves the journal whole.
#pragma once

#include <functional>
#include <string>

#include "firmware/device_fs.h"

namespace ember::fwtest {

class JournalFs : public fw::DeviceFs {
public:
    // Called before every operation with its name ("open", "pwrite", "fsync", "rename",
    // "fsync_dir", ...) and path (or ""); a test counts operations, kills itself or cuts power.
    using Hook = std::function<void(const char* op, const std::string& path)>;

    // dir: the folder every path given must be in; journal: the journal folder (made by start()).
    JournalFs(std::string dir, std::string journal, Hook hook = nullptr);

    // Makes `journal` (removing an old one) and counts everything in dir as durable.
    static void start(const std::string& dir, const std::string& journal);
    // The power goes: dir is rewritten to what is durable, then the journal starts again.
    // Call it with no process writing to dir. Throws ember::Error naming the file on failure.
    static void power_cut(const std::string& dir, const std::string& journal);

    int open(const std::string& path, int flags, mode_t mode) override;
    ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) override;
    int ftruncate(int fd, off_t length) override;
    int fsync(int fd) override;
    int close(int fd) override;
    int rename(const std::string& from, const std::string& to) override;
    int unlink(const std::string& path) override;
    int fsync_dir(const std::string& dir) override;

private:
    void before(const char* op, const std::string& path);
    std::string dir_, journal_;
    Hook hook_;
};

}  // namespace ember::fwtest

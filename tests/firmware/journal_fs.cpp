#include "journal_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace ember::fwtest {

namespace {

// (inode number, name) of every regular file in dir.
std::vector<std::pair<ino_t, std::string>> list_files(const std::string& dir) {
    std::vector<std::pair<ino_t, std::string>> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) fail(dir, ": opendir: ", std::strerror(errno));
    while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        struct stat st{};
        if (::lstat((dir + "/" + n).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        out.emplace_back(st.st_ino, n);
    }
    ::closedir(d);
    return out;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, ": cannot read");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes path through path.tmp and a rename: a reader sees the old or the new bytes.
void put_atomic(const std::string& path, const std::string& bytes) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) fail(tmp, ": cannot write");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": rename: ", std::strerror(errno));
}

std::string data_path(const std::string& journal, ino_t ino) { return journal + "/data/" + std::to_string(ino); }

// J/dir: one "INODE NAME" line per durable entry of dir.
void record_entries(const std::string& dir, const std::string& journal) {
    std::string body;
    for (const auto& [ino, name] : list_files(dir)) body += std::to_string(ino) + " " + name + "\n";
    put_atomic(journal + "/dir", body);
}

// Hard-links every inode dir names into J/grave, so that none is freed (and its number reused).
void keep_inodes(const std::string& dir, const std::string& journal) {
    for (const auto& [ino, name] : list_files(dir)) {
        const std::string g = journal + "/grave/" + std::to_string(ino);
        if (::access(g.c_str(), F_OK) == 0) continue;
        if (::link((dir + "/" + name).c_str(), g.c_str()) != 0 && errno != EEXIST && errno != ENOENT)
            fail(g, ": link: ", std::strerror(errno));
    }
}

}  // namespace

JournalFs::JournalFs(std::string dir, std::string journal, Hook hook) : dir_(std::move(dir)), journal_(std::move(journal)), hook_(std::move(hook)) {}

void JournalFs::start(const std::string& dir, const std::string& journal) {
    if (std::system(("rm -rf '" + journal + "'").c_str()) != 0) fail(journal, ": cannot remove");
    for (const std::string& d : {journal, journal + "/data", journal + "/grave"})
        if (::mkdir(d.c_str(), 0755) != 0) fail(d, ": mkdir: ", std::strerror(errno));
    for (const auto& [ino, name] : list_files(dir)) put_atomic(data_path(journal, ino), slurp(dir + "/" + name));
    keep_inodes(dir, journal);
    record_entries(dir, journal);
}

void JournalFs::power_cut(const std::string& dir, const std::string& journal) {
    std::vector<std::pair<std::string, std::string>> durable;  // name, bytes
    std::istringstream lines(slurp(journal + "/dir"));
    std::string ino, name;
    while (lines >> ino >> name) {
        const std::string data = journal + "/data/" + ino;
        durable.emplace_back(name, ::access(data.c_str(), F_OK) == 0 ? slurp(data) : std::string());  // never synced: empty
    }
    for (const auto& [i, n] : list_files(dir))
        if (::unlink((dir + "/" + n).c_str()) != 0) fail(dir, "/", n, ": unlink: ", std::strerror(errno));
    for (const auto& [n, bytes] : durable) {
        std::ofstream out(dir + "/" + n, std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) fail(dir, "/", n, ": cannot write");
    }
    start(dir, journal);
}

void JournalFs::before(const char* op, const std::string& path) {
    if (hook_) hook_(op, path);
}

int JournalFs::open(const std::string& path, int flags, mode_t mode) {
    before("open", path);
    keep_inodes(dir_, journal_);  // O_TRUNC keeps the inode; the durable bytes stay in J/data
    return ::open(path.c_str(), flags, mode);
}

ssize_t JournalFs::pwrite(int fd, const void* buf, size_t n, off_t offset) {
    before("pwrite", "");
    return ::pwrite(fd, buf, n, offset);
}

int JournalFs::ftruncate(int fd, off_t length) {
    before("ftruncate", "");
    return ::ftruncate(fd, length);
}

int JournalFs::fsync(int fd) {
    before("fsync", "");
    struct stat st{};
    if (::fstat(fd, &st) != 0) return -1;
    // fd may be write-only: read the file through a descriptor of our own.
    const int rd = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY | O_CLOEXEC);
    if (rd < 0) return -1;
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    for (size_t done = 0; done < bytes.size();) {
        const ssize_t r = ::pread(rd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (r <= 0) {
            ::close(rd);
            errno = EIO;
            return -1;
        }
        done += static_cast<size_t>(r);
    }
    ::close(rd);
    put_atomic(data_path(journal_, st.st_ino), bytes);
    return 0;
}

int JournalFs::close(int fd) {
    before("close", "");
    return ::close(fd);
}

int JournalFs::rename(const std::string& from, const std::string& to) {
    before("rename", to);
    keep_inodes(dir_, journal_);  // the file renamed over stays reachable in J/grave
    return std::rename(from.c_str(), to.c_str());
}

int JournalFs::unlink(const std::string& path) {
    before("unlink", path);
    keep_inodes(dir_, journal_);
    return ::unlink(path.c_str());
}

int JournalFs::fsync_dir(const std::string& dir) {
    before("fsync_dir", dir);
    if (dir != dir_) {
        errno = EXDEV;  // a folder this journal does not track
        return -1;
    }
    record_entries(dir_, journal_);
    return 0;
}

}  // namespace ember::fwtest

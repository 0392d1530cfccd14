// The journaling disk of the power-cut tests (journal_fs.h) against the rules it states: data
// counts as of the file's last fsync, entries as of the folder's last fsync. Each case does
// a few operations, cuts the power, and compares the folder with what the rules leave.
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "firmware/console.h"
#include "firmware/flash.h"
#include "fw_test_util.h"
#include "journal_fs.h"
#include "runtime/model.h"
#include "runtime/sha256.h"

using namespace ember;
using namespace ember::fwtest;

namespace {

// name -> bytes of every file in dir.
std::map<std::string, std::string> files(const std::string& dir) {
    std::map<std::string, std::string> out;
    DIR* d = ::opendir(dir.c_str());
    while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") out[n] = read_file(dir + "/" + n);
    }
    ::closedir(d);
    return out;
}

struct Disk {
    Disk(const Disk&) = delete;
    TempDir tmp;
    std::string dir = tmp.file("d"), journal = tmp.file("j");
    std::vector<std::string> ops;
    JournalFs fs{dir, journal, [this](const char* op, const std::string&) { ops.push_back(op); }};
    explicit Disk(const std::map<std::string, std::string>& start) {
        ::mkdir(dir.c_str(), 0755);
        for (const auto& [n, b] : start) write_file(dir + "/" + n, b);
        JournalFs::start(dir, journal);
    }
    std::string path(const std::string& n) const { return dir + "/" + n; }
    int create(const std::string& n, const std::string& bytes) {
        const int fd = fs.open(path(n), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(fs.pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
        return fd;
    }
};

// A device's models folder on a journaling disk: default.ember (the int8 fixture, "old") is
// installed and named by current; new_bytes (the f16 fixture) is the model a flash offers.
struct DeviceDisk {
    explicit DeviceDisk(const TempDir& tmp)
        : dir(tmp.file("d")), journal(tmp.file("j")), old_bytes(read_file(model_int8())), new_bytes(read_file(model_f16())) {
        ::mkdir(dir.c_str(), 0755);
        write_file(dir + "/default.ember", old_bytes);
        write_file(dir + "/current", "default\n");
        JournalFs::start(dir, journal);
    }
    std::string dir, journal, old_bytes, new_bytes;
};

}  // namespace

TEST_CASE("journal fs: a new file is durable only after an fsync of it and of its folder") {
    for (int synced = 0; synced < 4; ++synced) {  // bit 0: fsync of the file, bit 1: of the folder
        CAPTURE(synced);
        Disk d(std::map<std::string, std::string>{{"old", "OLD"}});
        const int fd = d.create("new", "NEW");
        if (synced & 1) CHECK(d.fs.fsync(fd) == 0);
        if (synced & 2) CHECK(d.fs.fsync_dir(d.dir) == 0);
        CHECK(d.fs.close(fd) == 0);
        CHECK(files(d.dir) == std::map<std::string, std::string>{{"new", "NEW"}, {"old", "OLD"}});  // before the cut: as written
        JournalFs::power_cut(d.dir, d.journal);
        std::map<std::string, std::string> want{{"old", "OLD"}};
        if (synced & 2) want["new"] = synced & 1 ? "NEW" : "";  // the entry without its data: empty
        CHECK(files(d.dir) == want);
    }
}

TEST_CASE("journal fs: a rename counts after the folder's fsync, the file renamed over comes back before") {
    for (bool dir_synced : {false, true}) {
        CAPTURE(dir_synced);
        Disk d(std::map<std::string, std::string>{{"model", "OLD"}});
        const int fd = d.create("part", "NEW");
        CHECK(d.fs.fsync(fd) == 0);
        CHECK(d.fs.close(fd) == 0);
        CHECK(d.fs.rename(d.path("part"), d.path("model")) == 0);
        if (dir_synced) CHECK(d.fs.fsync_dir(d.dir) == 0);
        JournalFs::power_cut(d.dir, d.journal);
        CHECK(files(d.dir) == std::map<std::string, std::string>{{"model", dir_synced ? "NEW" : "OLD"}});
    }
    // Data synced after the rename was made durable: the entry holds the file, its data is lost.
    Disk d(std::map<std::string, std::string>{{"model", "OLD"}});
    const int fd = d.create("part", "NEW");
    CHECK(d.fs.rename(d.path("part"), d.path("model")) == 0);
    CHECK(d.fs.fsync_dir(d.dir) == 0);
    JournalFs::power_cut(d.dir, d.journal);
    CHECK(files(d.dir) == std::map<std::string, std::string>{{"model", ""}});
    d.fs.close(fd);
}

TEST_CASE("journal fs: unsynced writes to an old file, a truncation and an unlink are undone, and the journal restarts after a cut") {
    Disk d(std::map<std::string, std::string>{{"a", "AAAA"}, {"b", "BBBB"}});
    int fd = d.fs.open(d.path("a"), O_RDWR | O_TRUNC | O_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    CHECK(d.fs.pwrite(fd, "x", 1, 0) == 1);
    CHECK(d.fs.ftruncate(fd, 3) == 0);
    CHECK(d.fs.close(fd) == 0);
    CHECK(d.fs.unlink(d.path("b")) == 0);
    CHECK(read_file(d.path("a")) == std::string("x\0\0", 3));
    JournalFs::power_cut(d.dir, d.journal);
    CHECK(files(d.dir) == std::map<std::string, std::string>{{"a", "AAAA"}, {"b", "BBBB"}});
    // After the cut everything on the disk counts as durable again; an fsynced write of "a"
    // survives the next cut, the unlink synced through the folder too.
    fd = d.fs.open(d.path("a"), O_RDWR | O_CLOEXEC, 0);
    CHECK(d.fs.pwrite(fd, "Z", 1, 3) == 1);
    CHECK(d.fs.fsync(fd) == 0);
    CHECK(d.fs.close(fd) == 0);
    CHECK(d.fs.unlink(d.path("b")) == 0);
    CHECK(d.fs.fsync_dir(d.dir) == 0);
    JournalFs::power_cut(d.dir, d.journal);
    CHECK(files(d.dir) == std::map<std::string, std::string>{{"a", "AAAZ"}});
    // A write-only descriptor syncs too (DIR/current is written through one).
    fd = d.fs.open(d.path("w"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(d.fs.pwrite(fd, "W", 1, 0) == 1);
    CHECK(d.fs.fsync(fd) == 0);
    CHECK(d.fs.close(fd) == 0);
    CHECK(d.fs.fsync_dir(d.dir) == 0);
    JournalFs::power_cut(d.dir, d.journal);
    CHECK(files(d.dir) == std::map<std::string, std::string>{{"a", "AAAZ"}, {"w", "W"}});
    // The hook saw every operation, in order; a folder the journal does not track is refused.
    CHECK(d.ops == std::vector<std::string>{"open", "pwrite", "ftruncate", "close", "unlink", "open", "pwrite", "fsync", "close", "unlink", "fsync_dir",
                                             "open", "pwrite", "fsync", "close", "fsync_dir"});
    CHECK(d.fs.fsync_dir(d.tmp.path()) == -1);
}

TEST_CASE("flash on a journaling disk: a power cut before any of its file operations leaves the old or the new model") {
    // One whole flash; before each file operation of the device the disk (folder and journal)
    // is copied aside; each copy then gets the power cut. Every copy must hold the old or the
    // new model and a DIR/current that names one that opens; every copy taken after the
    // install's fsync of the folder, the new model.
    TempDir tmp;
    const DeviceDisk disk(tmp);
    const std::string &dir = disk.dir, &journal = disk.journal, &old_bytes = disk.old_bytes, &new_bytes = disk.new_bytes;
    std::vector<std::string> ops;
    auto hook = [&](const char* op, const std::string&) {
        ops.push_back(op);
        const std::string snap = tmp.file("snap" + std::to_string(ops.size()));
        REQUIRE(std::system(("mkdir '" + snap + "' && cp -a '" + dir + "' '" + journal + "' '" + snap + "/'").c_str()) == 0);
    };
    fw::ConsoleOptions o;
    o.models_dir = dir;
    o.threads = 1;
    o.flash_idle_ms = 2000;
    o.fs = std::make_shared<JournalFs>(dir, journal, hook);
    SocketPair line;
    std::thread device([&] {
        fw::Console c(line.fd[1], line.fd[1], o);
        c.run();
    });
    fw::SenderOptions so;
    so.timeout_ms = 3000;
    const fw::SendResult r = fw::send_file(line.fd[0], line.fd[0], new_bytes, "default", so);
    std::string seen;
    // The console's verdict after BYE: the install, then the load that writes DIR/current.
    const size_t after = expect(line.fd[0], seen, "flash: installed default.ember");
    CHECK(after != std::string::npos);
    CHECK(expect(line.fd[0], seen, "OK loaded default", after) != std::string::npos);
    ::shutdown(line.fd[0], SHUT_RDWR);
    device.join();
    CHECK(r.message.find("installed default.ember") == 0);
    const size_t installed_at = static_cast<size_t>(std::find(ops.begin(), ops.end(), "fsync_dir") - ops.begin());  // 0-based
    std::string op_list;
    for (const auto& op : ops) op_list += op + " ";
    CAPTURE(op_list);
    REQUIRE(installed_at < ops.size());
    // The received file, then DIR/current: each synced, renamed into place, the folder synced.
    CHECK(std::count(ops.begin(), ops.end(), "fsync") == 2);
    CHECK(std::count(ops.begin(), ops.end(), "rename") == 2);
    CHECK(std::count(ops.begin(), ops.end(), "fsync_dir") == 2);
    const std::string old_sha = sha256_hex(old_bytes.data(), old_bytes.size()), new_sha = sha256_hex(new_bytes.data(), new_bytes.size());
    int olds = 0, news = 0;
    for (size_t k = 1; k <= ops.size() + 1; ++k) {  // k = ops + 1: the power goes after the last operation
        CAPTURE(k);
        const std::string snap = tmp.file("snap" + std::to_string(k));
        const std::string d = k <= ops.size() ? snap + "/d" : dir, j = k <= ops.size() ? snap + "/j" : journal;
        const std::string before_op = k <= ops.size() ? ops[k - 1] : "(none: after the last)";
        CAPTURE(before_op);
        JournalFs::power_cut(d, j);
        const std::string sha = sha256_file(d + "/default.ember");
        CHECK((sha == old_sha || sha == new_sha));
        if (k > installed_at + 1) CHECK(sha == new_sha);  // the operation before k made the install durable
        (sha == new_sha ? news : olds) += 1;
        std::string cur = read_file(d + "/current");
        CHECK(cur == "default\n");
        CHECK_NOTHROW(Model::open(d + "/default.ember"));
    }
    CHECK(olds > 0);
    CHECK(news > 0);
}

TEST_CASE("flash on a journaling disk: killed between the install's rename and the folder's fsync, the repeated offer makes the install durable before it says 'already installed' (fault-campaign seed 101432)") {
    // The device dies (SIGKILL: its writes stay in the page cache) just before the fsync of
    // the folder that makes the rename durable. The host runs again: the installed file has
    // the offered SHA-256, "already installed". It used to answer that with the rename still
    // not durable: a power cut then brought the old model back after the host was told
    // installed.
    TempDir tmp;
    const DeviceDisk disk(tmp);
    const std::string &dir = disk.dir, &journal = disk.journal, &new_bytes = disk.new_bytes;
    auto options = [&](JournalFs::Hook hook) {
        fw::ConsoleOptions o;
        o.models_dir = dir;
        o.threads = 1;
        o.flash_idle_ms = 2000;
        o.fs = std::make_shared<JournalFs>(dir, journal, std::move(hook));
        return o;
    };
    fw::SenderOptions so;
    so.timeout_ms = 300;
    so.retries = 3;
    so.reoffers = 0;
    {
        SocketPair line;
        const pid_t dev = ::fork();
        REQUIRE(dev >= 0);
        if (dev == 0) {
            ::close(line.fd[0]);
            fw::Console c(line.fd[1], line.fd[1], options([](const char* op, const std::string&) {
                if (std::string(op) == "fsync_dir") ::raise(SIGKILL);
            }));
            c.run();
            _exit(0);
        }
        ::close(line.fd[1]);
        line.fd[1] = -1;
        CHECK_THROWS_AS(fw::send_file(line.fd[0], line.fd[0], new_bytes, "default", so), fw::FlashError);
        ::close(line.fd[0]);  // a device that is still alive (the kill never came) sees its line end
        line.fd[0] = -1;
        int status = 0;
        REQUIRE(::waitpid(dev, &status, 0) == dev);
        CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    }
    const std::string new_sha = sha256_hex(new_bytes.data(), new_bytes.size());
    CHECK(sha256_file(dir + "/default.ember") == new_sha);  // renamed, in the page cache only
    {
        SocketPair line;
        std::thread device([&] {
            fw::Console c(line.fd[1], line.fd[1], options(nullptr));
            c.run();
        });
        so.timeout_ms = 3000;
        const fw::SendResult r = fw::send_file(line.fd[0], line.fd[0], new_bytes, "default", so);
        CHECK(r.message.find("already installed") == 0);
        ::shutdown(line.fd[0], SHUT_RDWR);
        device.join();
    }
    JournalFs::power_cut(dir, journal);
    CHECK(sha256_file(dir + "/default.ember") == new_sha);
}

#include "runtime/paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember {

namespace {

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
    std::error_code ec;
    const bool same = std::filesystem::equivalent(a, b, ec);
    return !ec && same;
}

}  // namespace

void check_output_not_input(const std::string& out, const std::vector<std::pair<std::string, std::string>>& inputs, const char* option) {
    namespace fs = std::filesystem;
    for (const auto& [role, path] : inputs) {
        if (path.empty()) continue;
        std::error_code ec;
        bool hit = same_file(out, path);
        if (!hit && fs::is_directory(path, ec)) {
            for (const char* name : {"encoder.json", "vocab.bpe", "vocab.json", "merges.txt", "config.json"}) {
                hit = hit || same_file(out, fs::path(path) / name);
            }
        }
        if (hit) {
            fail(option, " ", printable(out, 200), " is the ", role, " (an input): writing it would destroy it; choose another output");
        }
    }
}

std::string output_target(const std::string& out, const char* option) {
    namespace fs = std::filesystem;
    if (out.empty()) fail(option, " needs a file name");
    const std::string what = printable(out, 200);
    std::error_code ec;
    const fs::file_status st = fs::status(out, ec);
    if (!fs::exists(st)) {
        std::error_code lec;
        if (fs::is_symlink(fs::symlink_status(out, lec))) {
            fail(option, " ", what, " is a symbolic link to a file that does not exist: choose the file itself");
        }
        // The file is created beside itself: its folder must be there and writable.
        const fs::path parent = fs::path(out).parent_path();
        const std::string folder = parent.empty() ? std::string(".") : parent.string();
        const fs::file_status pst = fs::status(folder, ec);
        if (!fs::exists(pst)) {
            fail(option, " ", what, ": the folder ", printable(folder, 200), " does not exist (create it first, e.g. mkdir -p ",
                 printable(folder, 200), ")");
        }
        if (!fs::is_directory(pst)) fail(option, " ", what, ": ", printable(folder, 200), " is not a folder");
        if (::access(folder.c_str(), W_OK | X_OK) != 0) {
            fail(option, " ", what, ": the folder ", printable(folder, 200), " may not be written (", std::strerror(errno), ")");
        }
        return out;
    }
    if (!fs::is_regular_file(st)) {
        fail(option, " ", what, " exists and is not a regular file (a device, a FIFO, a folder): the file written would replace it; choose a file");
    }
    // Read-only for everyone (no write bit; root would pass access()), or for this process.
    if ((fs::status(out, ec).permissions() & (fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write)) == fs::perms::none) {
        fail(option, " ", what, " exists and is read-only: choose another file, or make it writable");
    }
    if (::access(out.c_str(), W_OK) != 0) {
        fail(option, " ", what, " exists and may not be written (", std::strerror(errno), "): choose another file, or make it writable");
    }
    const fs::path target = fs::canonical(out, ec);
    if (ec) fail(option, " ", what, ": ", ec.message());
    return target.string();
}

bool write_fully(int fd, const void* p, size_t n) {
    const char* s = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return false;
        if (w == 0) {
            errno = EIO;
            return false;
        }
        s += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

}  // namespace ember

#include "runtime/paths.h"

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

void check_output_replaceable(const std::string& out, const char* option) {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(out, ec);
    if (ec || !std::filesystem::exists(st) || std::filesystem::is_regular_file(st)) return;
    fail(option, " ", printable(out, 200), " exists and is not a regular file (a device, a FIFO, a folder): the file written would replace it; choose a file");
}

}  // namespace ember

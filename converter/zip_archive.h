// A read-only zip archive (libzip), for torch.save checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct zip;

namespace ember::convert {

class ZipArchive {
public:
    // Opens `path`; throws ember::Error naming the file when it is not a readable zip
    // (missing, truncated, damaged).
    explicit ZipArchive(const std::string& path);
    ~ZipArchive();
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;

    const std::string& path() const { return path_; }

    // Every entry name, in archive order.
    const std::vector<std::string>& names() const { return names_; }

    // The uncompressed size of entry `name`, or nullopt when the archive has no such entry.
    std::optional<uint64_t> entry_size(const std::string& name) const;

    // The whole uncompressed entry. Throws when it is missing, larger than max_bytes, or
    // cannot be read completely (truncated data, CRC mismatch).
    std::vector<uint8_t> read(const std::string& name, uint64_t max_bytes) const;

private:
    std::string path_;
    zip* archive_ = nullptr;
    std::vector<std::string> names_;
};

}  // namespace ember::convert

#include "converter/zip_archive.h"

#include <zip.h>

#include "converter/alloc.h"
#include "runtime/utf8.h"
#include "runtime/error.h"

namespace ember::convert {

namespace {
std::string zip_error_text(int code) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string text = zip_error_strerror(&err);
    zip_error_fini(&err);
    return text;
}
}  // namespace

ZipArchive::ZipArchive(const std::string& path) : path_(path) {
    int code = 0;
    archive_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (archive_ == nullptr) {
        if (code == ZIP_ER_OPEN || code == ZIP_ER_NOENT || code == ZIP_ER_READ) {
            fail(path, ": cannot read the file (", zip_error_text(code), ")");
        }
        fail(path, ": truncated or damaged zip archive (", zip_error_text(code), ")");
    }
    const zip_int64_t n = zip_get_num_entries(archive_, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
        const char* name = zip_get_name(archive_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
        names_.push_back(name != nullptr ? name : "");
    }
}

ZipArchive::~ZipArchive() {
    if (archive_ != nullptr) zip_discard(archive_);
}

std::optional<uint64_t> ZipArchive::entry_size(const std::string& name) const {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(archive_, name.c_str(), ZIP_FL_ENC_RAW, &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0) {
        return std::nullopt;
    }
    // No compression method expands more than deflate's ~1032:1; a larger claim is a lie
    // that would only make us allocate.
    if ((st.valid & ZIP_STAT_COMP_SIZE) != 0 && st.size / 1100 > st.comp_size + 1) {
        fail(path_, ": zip entry '", printable(name), "' claims ", st.size, " bytes from ", st.comp_size,
             " compressed; damaged archive");
    }
    return st.size;
}

std::vector<uint8_t> ZipArchive::read(const std::string& name, uint64_t max_bytes) const {
    const std::optional<uint64_t> size = entry_size(name);
    if (!size) fail(path_, ": zip entry '", printable(name), "' is missing");
    if (*size > max_bytes) {
        fail(path_, ": zip entry '", printable(name), "' is ", *size, " bytes, more than the ", max_bytes,
             " allowed");
    }
    zip_file_t* file = zip_fopen(archive_, name.c_str(), ZIP_FL_ENC_RAW);
    if (file == nullptr) {
        fail(path_, ": cannot open zip entry '", printable(name), "' (", zip_strerror(archive_), ")");
    }
    std::vector<uint8_t> bytes;
    resize_or_fail(bytes, static_cast<size_t>(*size), path_ + ": zip entry '" + printable(name) + "'");
    uint64_t got = 0;
    std::string error;
    while (got < *size) {
        const zip_int64_t n = zip_fread(file, bytes.data() + got, *size - got);
        if (n < 0) {
            error = zip_file_strerror(file);
            break;
        }
        if (n == 0) break;
        got += static_cast<uint64_t>(n);
    }
    if (error.empty() && got == *size) {
        // Reading past the end lets libzip check the CRC of the whole entry.
        uint8_t extra;
        const zip_int64_t n = zip_fread(file, &extra, 1);
        if (n < 0) error = zip_file_strerror(file);
        else if (n > 0) error = "entry is longer than its recorded size";
    }
    zip_fclose(file);
    if (!error.empty()) fail(path_, ": cannot read zip entry '", printable(name), "' (", error, ")");
    if (got != *size) {
        fail(path_, ": zip entry '", printable(name), "' is truncated (", got, " of ", *size, " bytes)");
    }
    return bytes;
}

}  // namespace ember::convert

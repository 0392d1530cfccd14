// Shared by the libFuzzer targets: the readers under test take paths, so each input is
// written to a per-process file first.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ember::fuzz {

inline std::string input_file(const uint8_t* data, size_t size, const char* suffix) {
    const std::string path = "/tmp/ember-fuzz-" + std::to_string(::getpid()) + suffix;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return path;
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
    return path;
}

}  // namespace ember::fuzz

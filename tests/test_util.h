// Helpers shared by the test suites: fixture paths, JSON fixtures, temporary folders.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ember::test {

// The repository root: $EMBER_SOURCE_DIR when set (a binary built elsewhere, as on the GPU
// machine of tests/device/run.sh), else the one compiled in.
inline std::string source_dir() {
    const char* env = std::getenv("EMBER_SOURCE_DIR");
    return env && *env ? std::string(env) : std::string(EMBER_SOURCE_DIR);
}
inline std::string fixture(const std::string& rel) { return source_dir() + "/tests/fixtures/" + rel; }
// ../shared beside the repository, or $EMBER_SHARED_DIR.
inline std::string shared_dir() {
    const char* env = std::getenv("EMBER_SHARED_DIR");
    return env && *env ? std::string(env) : source_dir() + "/../shared";
}

inline nlohmann::json load_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open fixture " + path);
    return nlohmann::json::parse(in);
}

// A fresh folder under /tmp, removed with its files at scope exit.
class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/ember-test-XXXXXX";
        const char* d = mkdtemp(tmpl);
        if (!d) throw std::runtime_error("mkdtemp failed");
        path_ = d;
    }
    ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace ember::test

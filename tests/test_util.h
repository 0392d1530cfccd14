// Helpers shared by the test suites: fixture paths, JSON fixtures, temporary folders.
#pragma once

#include <nlohmann/json.hpp>

#include <unistd.h>

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

// The shell command that runs one of the built programs (EMBER_CLI, EMBER_CONSOLE): in a cross
// build, through the emulator ctest runs the tests with (EMBER_EMULATOR, e.g. qemu-aarch64;
// binfmt_misc need not be registered for the target's binaries).
inline std::string program_cmd(const char* path) {
#ifdef EMBER_EMULATOR
    return std::string(EMBER_EMULATOR) + " " + path;
#else
    return path;
#endif
}

// Deadlines that wait on a built program stretch by this under the emulator (qemu-user runs
// the target's code 10 to 50 times slower).
#ifdef EMBER_EMULATOR
inline constexpr int kEmulatorSlowdown = 20;
#else
inline constexpr int kEmulatorSlowdown = 1;
#endif

// The argument vector of a built program for execvp, through EMBER_EMULATOR as program_cmd.
// Made before fork(); the child only calls exec().
class ProgramArgv {
public:
    ProgramArgv(const char* path, const std::vector<std::string>& args) {
#ifdef EMBER_EMULATOR
        strings_.push_back(EMBER_EMULATOR);
#endif
        strings_.push_back(path);
        strings_.insert(strings_.end(), args.begin(), args.end());
        for (std::string& s : strings_) argv_.push_back(s.data());
        argv_.push_back(nullptr);
    }
    // Returns only when exec fails.
    void exec() const { ::execvp(argv_[0], argv_.data()); }

private:
    std::vector<std::string> strings_;
    std::vector<char*> argv_;
};

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

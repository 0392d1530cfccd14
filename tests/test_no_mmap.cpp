// Model::open with LoadOptions (--no-mmap, --mlock): the file read into anonymous memory gives
// the same bytes, the same logits and the same refusals as the mapped file; mlock never fails
// a load; the command line takes both flags.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli_util.h"
#include "converter/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "convert_util.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

std::string convert_fixture(const test::TempDir& dir, convert::WeightDType dt, const std::string& name) {
    return test::convert_gptpy(dir, dt, name);
}

LoadOptions no_mmap(bool mlock = false) {
    LoadOptions l;
    l.mmap = false;
    l.mlock = mlock;
    return l;
}

// Logits [T, V] of one window of T ids, one thread.
std::vector<float> window_logits(const Model& m) {
    SessionOptions so;
    so.threads = 1;
    so.all_logits = true;
    Session s(m, so);
    const int T = m.config().block_size;
    std::vector<int> ids(T);
    for (int i = 0; i < T; ++i) ids[i] = (i * 7 + 3) % m.config().tokenizer_size;
    const float* l = s.forward_window(ids.data(), T);
    return std::vector<float>(l, l + static_cast<size_t>(T) * m.config().vocab_size);
}

// The message open() throws, or "" when it loads.
std::string refusal(const std::string& path, const LoadOptions& load) {
    try {
        Model::open(path, load);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("--no-mmap: the model read into anonymous memory gives bit-identical logits, every dtype") {
    test::TempDir dir;
    for (auto dt : {convert::WeightDType::F32, convert::WeightDType::F16, convert::WeightDType::I8}) {
        const std::string path = convert_fixture(dir, dt, "m.ember");
        auto mapped = Model::open(path);
        auto anon = Model::open(path, no_mmap());
        CHECK(mapped->file_mapped());
        CHECK_FALSE(mapped->anonymous());
        CHECK(anon->anonymous());
        CHECK_FALSE(anon->file_mapped());
        CHECK(anon->file_bytes() == mapped->file_bytes());
        CHECK(anon->checksum() == mapped->checksum());
        CHECK(anon->weight_bytes() == mapped->weight_bytes());
        // The int8 decode hint (kernels/cpu/weights.h): set exactly when the weights fit the
        // last-level cache, however the bytes are held.
        const bool fits = mapped->weight_bytes() <= kernels::last_level_cache_bytes();
        for (const Model* m : {mapped.get(), anon.get()}) {
            CHECK(m->weights().layers[0].qkv.cache_resident == fits);
            CHECK(m->weights().layers.back().fc2.cache_resident == fits);
            CHECK(m->weights().lm_head.cache_resident == fits);
        }
        CHECK(anon->huge_page_bytes() >= 0);  // /proc/self/smaps holds its mapping
        const std::vector<float> a = window_logits(*mapped), b = window_logits(*anon);
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        // Locked (or warned about), the same logits again.
        auto locked = Model::open(path, no_mmap(true));
        const std::vector<float> c = window_logits(*locked);
        CHECK(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("--no-mmap refuses a corrupted or truncated file with the same message as the mapping") {
    test::TempDir dir;
    const std::string good = convert_fixture(dir, convert::WeightDType::I8, "good.ember");
    const std::string bytes = test::read_file(good);
    std::vector<std::string> bad;
    std::string flipped = bytes;
    flipped[flipped.size() - 100] ^= 0x01;
    bad.push_back(flipped);
    for (size_t cut : {size_t(3), size_t(40), bytes.size() / 2, bytes.size() - 1}) bad.push_back(bytes.substr(0, cut));
    bad.push_back(std::string(200, 'x'));
    for (size_t i = 0; i < bad.size(); ++i) {
        CAPTURE(i);
        test::write_file(dir.file("bad.ember"), bad[i]);
        const std::string m = refusal(dir.file("bad.ember"), LoadOptions{}), a = refusal(dir.file("bad.ember"), no_mmap());
        CHECK_FALSE(m.empty());
        CHECK(a == m);
    }
    CHECK(refusal(dir.file("missing.ember"), no_mmap()).find("cannot open") != std::string::npos);
    CHECK(refusal(dir.path(), no_mmap()).find("is a directory, not a file") != std::string::npos);
    // info-style open reports a checksum mismatch instead of throwing, either way.
    test::write_file(dir.file("flip.ember"), flipped);
    CHECK_FALSE(Model::open(dir.file("flip.ember"), no_mmap(), false)->checksum_ok());
}

TEST_CASE("--mlock without the privilege to lock warns, naming RLIMIT_MEMLOCK, and loads") {
#if defined(__SANITIZE_ADDRESS__)
    // ASan intercepts mlock and returns success without locking (it would pin its shadow
    // memory): the refusal this test needs cannot happen in that build.
    MESSAGE("skipped under AddressSanitizer: its mlock interceptor always succeeds");
    return;
#endif
    test::TempDir dir;
    const std::string path = convert_fixture(dir, convert::WeightDType::I8, "m.ember");
    const std::string err = dir.file("stderr");
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // No CAP_IPC_LOCK (root has it) and a lock limit of 0 bytes: every mlock fails.
        __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct caps[2]{};
        bool dropped = false;
        if (syscall(SYS_capget, &hdr, caps) == 0) {
            caps[0].effective &= ~(1u << CAP_IPC_LOCK);
            dropped = syscall(SYS_capset, &hdr, caps) == 0;
        }
        if (!dropped && geteuid() == 0) _exit(77);  // root keeping CAP_IPC_LOCK: cannot be tested here
        struct rlimit rl{0, 0};
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(10);
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0) _exit(11);
        try {
            for (bool mmap : {true, false}) {
                LoadOptions l;
                l.mmap = mmap;
                l.mlock = true;
                auto m = Model::open(path, l);
                if (m->locked()) _exit(12);
                if (window_logits(*m).empty()) _exit(13);
            }
        } catch (...) {
            _exit(14);
        }
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        MESSAGE("skipped: CAP_IPC_LOCK cannot be dropped here");
        return;
    }
    CHECK(WEXITSTATUS(status) == 0);
    const std::string text = test::read_file(err);
    CAPTURE(text);
    CHECK(text.find("ember: warning: ") == 0);
    CHECK(text.find("mlock of ") != std::string::npos);
    CHECK(text.find("RLIMIT_MEMLOCK is 0 bytes") != std::string::npos);
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    CHECK(lines == 2);  // one warning per open
}

TEST_CASE("ember generate, eval, bench and ember-console take --no-mmap and --mlock") {
    test::TempDir dir;
    const std::string model = convert_fixture(dir, convert::WeightDType::I8, "m.ember");
    using test::q;
    const std::string gen = "generate -m " + q(model) + " -p 'To be' -n 20 --seed 3 --temperature 0.8 --threads 1";
    const test::Run base = test::ember_cli(gen, dir);
    REQUIRE(base.status == 0);
    for (const std::string flags : {" --no-mmap", " --mlock", " --no-mmap --mlock"}) {
        CAPTURE(flags);
        const test::Run r = test::ember_cli(gen + flags, dir);
        CHECK(r.status == 0);
        CHECK(r.out == base.out);
        const test::Run e = test::ember_cli("eval -m " + q(model) + " --text " + q(fixture("gptpy/vocab.txt")) + " --split all --threads 1" + flags, dir);
        CHECK(e.status == 0);
        CHECK(e.out.find("loss ") == 0);
    }
    const test::Run j = test::ember_cli("bench -m " + q(model) + " --runs 1 -p 8 -n 4 --threads 1 --backend cpu --json --no-mmap --mlock", dir);
    REQUIRE(j.status == 0);
    const nlohmann::json js = nlohmann::json::parse(j.out);
    CHECK(js["mmap"] == false);
    CHECK(js["mlock"] == true);
    const test::Run jm = test::ember_cli("bench -m " + q(model) + " --runs 1 -p 8 -n 4 --threads 1 --backend cpu --json", dir);
    REQUIRE(jm.status == 0);
    CHECK(nlohmann::json::parse(jm.out)["mmap"] == true);
    CHECK(nlohmann::json::parse(jm.out)["mlock"] == false);
    const test::Run t = test::ember_cli("bench -m " + q(model) + " --runs 1 -p 8 -n 4 --threads 1 --backend cpu --no-mmap", dir);
    REQUIRE(t.status == 0);
    CHECK(t.out.find("weights: anonymous memory (--no-mmap)") != std::string::npos);
    const test::Run tm = test::ember_cli("bench -m " + q(model) + " --runs 1 -p 8 -n 4 --threads 1 --backend cpu", dir);
    CHECK(tm.out.find("weights: mapped file") != std::string::npos);

    // ember-console loads its model with them.
    test::write_file(dir.file("in.txt"), "info\n");
    const std::string cmd = test::program_cmd(EMBER_CONSOLE) + " --stdio --models " + q(dir.path()) +
                            " --load m --backend cpu --no-mmap --mlock <" + q(dir.file("in.txt")) + " >" + q(dir.file("console.out")) + " 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
    const std::string out = test::read_file(dir.file("console.out"));
    CAPTURE(out);
    CHECK(out.find("ERR") == std::string::npos);
    CHECK(out.find("OK") != std::string::npos);
}

TEST_CASE("a mapped model file written over in place is noticed, one replaced by a rename or read with --no-mmap is not") {
    test::TempDir dir;
    const std::string path = convert_fixture(dir, convert::WeightDType::I8, "m.ember");
    const std::string other = convert_fixture(dir, convert::WeightDType::F16, "other.ember");
    const std::string bytes = test::read_file(path);
    auto mapped = Model::open(path);
    CHECK_FALSE(mapped->file_changed_in_place());
    // ember flash's way: a finished file renamed over the path. The mapping keeps the old file.
    REQUIRE(std::rename(other.c_str(), path.c_str()) == 0);
    CHECK_FALSE(mapped->file_changed_in_place());
    mapped.reset();

    auto again = Model::open(path);
    auto copied = Model::open(path, no_mmap());
    CHECK_FALSE(again->file_changed_in_place());
    // cp's way: the same file truncated and written (here shorter than it was, so the size tells).
    test::write_file(path, bytes);
    CHECK(again->file_changed_in_place());
    CHECK_FALSE(copied->file_changed_in_place());  // its bytes are a copy
}

TEST_CASE("report_truncated_model_files: a read past the end of a truncated mapping says so, and the process still dies of SIGBUS") {
    test::TempDir dir;
    const std::string file = dir.file("mapped.bin"), err = dir.file("stderr.txt");
    for (const bool handler : {true, false}) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
            if (e < 0 || fd < 0 || ::dup2(e, STDERR_FILENO) < 0 || ::ftruncate(fd, 2 * 4096) != 0) ::_exit(3);
            // The default action first: the child inherits doctest's crash handler, and under ASan
            // the sanitizer's SIGBUS handler, which would report and abort (SIGABRT) instead; under
            // qemu-user too.
            ::signal(SIGBUS, SIG_DFL);
            if (handler) report_truncated_model_files();
            const auto* p = static_cast<const volatile char*>(::mmap(nullptr, 2 * 4096, PROT_READ, MAP_SHARED, fd, 0));
            if (p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(4);
            const char c = p[4096];  // past the new end: SIGBUS (BUS_ADRERR)
            ::_exit(c == 0 ? 5 : 6);
        }
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CAPTURE(status);
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGBUS);
        const std::string said = test::read_file(err);
        CAPTURE(said);
        CHECK((said.find("ember: error: bus error reading a mapped file: a model file was truncated or written over while in use") !=
               std::string::npos) == handler);
    }
}

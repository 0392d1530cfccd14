// What the programs link: `ember` and `ember-console` carry no CUDA library among their NEEDED
// entries (the CUDA backend is the module libember-cuda.so, opened with dlopen only when asked
// for; nor libgd, opened by `ember attn --png` only), the module itself does (so the check below would see one), and a CPU run never maps
// cuBLAS. Without a GPU, --backend cuda is one clear line and auto runs on the CPU.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli_util.h"
#include "converter/convert.h"
#include "test_util.h"

using ember::test::q;

namespace {

// stdout of a shell command line and its exit status.
std::string shell(const std::string& cmd, int* status = nullptr) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    if (status) *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return out;
}

// The NEEDED entries of an ELF file, as `readelf -d` lists them: "(NEEDED) Shared library: [X]".
std::vector<std::string> needed(const std::string& file) {
    int status = -1;
    const std::string out = shell("readelf -d " + q(file) + " 2>&1", &status);
    INFO(out);
    REQUIRE(status == 0);
    std::vector<std::string> libs;
    size_t at = 0;
    while ((at = out.find("(NEEDED)", at)) != std::string::npos) {
        const size_t open = out.find('[', at), close = out.find(']', open);
        REQUIRE(open != std::string::npos);
        REQUIRE(close != std::string::npos);
        libs.push_back(out.substr(open + 1, close - open - 1));
        at = close;
    }
    return libs;
}

bool has_prefix(const std::vector<std::string>& libs, const std::string& prefix) {
    for (const std::string& l : libs) {
        if (l.rfind(prefix + ".", 0) == 0) return true;  // libcublasLt.so.13, not libcublas for libcublasLt
    }
    return false;
}

const char* const kCudaLibs[] = {"libcuda", "libcudart", "libcublas", "libcublasLt", "libnvrtc", "libnvJitLink"};

bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

// build/lib/libember-cuda.so beside build/cli/ember, where the build puts it (EMBER_CUDA).
std::string cuda_module() {
    const std::string cli = EMBER_CLI;
    return cli.substr(0, cli.rfind('/')) + "/../lib/libember-cuda.so";
}

bool gpu_device_node() {
    for (const char* n : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl"}) {
        if (exists(n)) return true;
    }
    return false;
}

std::string small_model(const ember::test::TempDir& dir) {
    ember::convert::ConvertOptions o;
    o.checkpoint = ember::test::fixture("gptpy/model.pt");
    o.vocab_text = ember::test::fixture("gptpy/vocab.txt");
    o.out = dir.file("m.ember");
    ember::convert::convert(o);
    return o.out;
}

}  // namespace

TEST_CASE("linking: ember and ember-console have no CUDA library among their NEEDED entries") {
    for (const std::string bin : {EMBER_CLI, EMBER_CONSOLE}) {
        CAPTURE(bin);
        const std::vector<std::string> libs = needed(bin);
        std::string all;
        for (const std::string& l : libs) all += l + " ";
        CAPTURE(all);
        CHECK(has_prefix(libs, "libc.so"));  // the entries were parsed: the test cannot pass on nothing
        for (const char* cuda : kCudaLibs) CHECK_FALSE(has_prefix(libs, cuda));
        // libgd (the label font of `ember attn --png`) is opened by --png only: linked, it would
        // bring about 50 libraries (X11, image codecs) into every start of `ember`.
        CHECK_FALSE(has_prefix(libs, "libgd"));
        CHECK_FALSE(has_prefix(libs, "libX11"));
    }
}

TEST_CASE("linking: the CUDA module carries cuBLASLt, without a GPU cuda is one line, auto runs on the CPU and never maps cuBLAS") {
    ember::test::TempDir dir;
    const std::string model = small_model(dir);
    const std::string gen = " generate -m " + q(model) + " -p The -n 20 --seed 1";
    const std::string module = cuda_module();
    if (exists(module)) {
        const std::vector<std::string> libs = needed(module);
        std::string all;
        for (const std::string& l : libs) all += l + " ";
        CAPTURE(all);
        CHECK(has_prefix(libs, "libcublasLt"));  // what the check above would catch in ember
        if (!gpu_device_node()) {
            const ember::test::Run r = ember::test::ember_cli(gen + " --backend cuda", dir);
            CHECK(r.status == 1);
            CHECK(r.err == "ember: error: no CUDA device found (use --backend cpu)\n");
            CHECK(r.out.empty());
            // Started through PATH from another directory, which holds a file of the module's
            // name: the module beside the program is found, the one in the current directory never
            // opened (dladdr names the program "ember" there).
            ember::test::write_file(dir.file("libember-cuda.so"), "not a library");
            const std::string cli = EMBER_CLI;
            int status = -1;
            const std::string err = shell("cd " + q(dir.path()) + " && PATH=" + q(cli.substr(0, cli.rfind('/'))) + ":\"$PATH\" ember" +
                                              gen + " --backend cuda 2>&1 >/dev/null </dev/null",
                                          &status);
            CAPTURE(err);
            CHECK(status == 1);
            CHECK(err == "ember: error: no CUDA device found (use --backend cpu)\n");
        }
    } else {
        MESSAGE("no CUDA module in this build (" << module << "): its NEEDED check skipped");
        ember::test::check_refused(ember::test::ember_cli(gen + " --backend cuda", dir), "the CUDA backend module cannot be loaded");
    }
    {  // a module path that does not exist: one line naming it
        const std::string cmd = "EMBER_CUDA_MODULE=/nonexistent/libember-cuda.so " + ember::test::program_cmd(EMBER_CLI) + gen + " --backend cuda";
        int status = -1;
        const std::string err = shell(cmd + " 2>&1 >/dev/null </dev/null", &status);
        CAPTURE(err);
        CHECK(status == 1);
        CHECK(err ==
              "ember: error: the CUDA backend module cannot be loaded: EMBER_CUDA_MODULE=/nonexistent/libember-cuda.so: no such file; "
              "unset EMBER_CUDA_MODULE or point it at libember-cuda.so; use --backend cpu\n");
    }
    if (!gpu_device_node()) {
        // auto: the CPU, and the dynamic loader never opens a CUDA library (LD_DEBUG goes to stderr).
        int status = -1;
        const std::string log = dir.file("ld_debug");
        const std::string out = shell("LD_DEBUG=libs " + ember::test::program_cmd(EMBER_CLI) + gen + " --backend auto 2>" + q(log) + " </dev/null", &status);
        const std::string debug = ember::test::read_file(log);
        CHECK(status == 0);
        CHECK(out.rfind("The", 0) == 0);
        CHECK(out.size() > 20);
        CHECK(debug.find("libc.so.6") != std::string::npos);  // LD_DEBUG did log the libraries
        for (const char* cuda : {"cublas", "cudart", "libcuda", "nvrtc", "nvJitLink", "ember-cuda"}) {
            CAPTURE(cuda);
            CHECK(debug.find(cuda) == std::string::npos);
        }
        // The same text as --backend cpu.
        const ember::test::Run cpu = ember::test::ember_cli(gen + " --backend cpu", dir);
        CHECK(cpu.status == 0);
        CHECK(cpu.out == out);
    } else {
        MESSAGE("a GPU device node exists: the no-GPU checks are skipped");
    }
}

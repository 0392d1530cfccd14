#include "runtime/cuda_module.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/utf8.h"

#ifndef EMBER_INSTALL_LIBDIR
#define EMBER_INSTALL_LIBDIR "lib"
#endif
#ifndef EMBER_VERSION_STRING
#define EMBER_VERSION_STRING "0"
#endif

namespace ember {

unsigned long cuda_module_abi() {
    // The version and the layout of what crosses: a module of another build is refused.
    unsigned long h = 1469598103u;
    for (const char* p = EMBER_VERSION_STRING; *p; ++p) h = h * 31 + static_cast<unsigned char>(*p);
    for (unsigned long v : {sizeof(SessionOptions), sizeof(ModelConfig), sizeof(ModelWeights), sizeof(LayerWeights),
                            sizeof(kernels::WeightView), sizeof(CudaDeviceInfo), sizeof(CudaModuleApi), sizeof(HostScratch)})
        h = h * 131 + v;
    return h;
}

namespace {

bool exists(const std::string& path) {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0;
}

std::string dir_of(const std::string& path) {
    const size_t k = path.rfind('/');
    return k == std::string::npos ? "." : path.substr(0, k);
}

// The module's table, or nullptr with *why set. Each call asks the loader again (dlopen of an
// open module returns its handle at once).
const CudaModuleApi* load_module(std::string* why) {
    std::vector<std::string> candidates;
    const char* env = std::getenv("EMBER_CUDA_MODULE");
    const bool from_env = env && *env;
    if (from_env) {
        if (!exists(env)) {
            *why = "EMBER_CUDA_MODULE=" + printable(env, 200) + ": no such file";
            return nullptr;
        }
        candidates.push_back(env);
    } else {
        // The file this code was loaded from: libember.so's path as the loader opened it, or, in a
        // program linked with libember statically, the program itself. dladdr names the program
        // by argv[0] ("ember" when started through PATH, which would make the directory "."),
        // so the program is read from /proc/self/exe instead.
        Dl_info info{};
        link_map* map = nullptr;
        std::string self;
        if (dladdr1(reinterpret_cast<void*>(&load_module), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP)) {
            if (map && map->l_name && *map->l_name) {
                self = map->l_name;
            } else {
                char buf[4096];
                const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
                if (n > 0) self.assign(buf, static_cast<size_t>(n));
            }
        }
        if (!self.empty() && self.find('/') != std::string::npos) {
            const std::string d = dir_of(self);
            for (const std::string& c : {d + "/" + kCudaModuleFile, d + "/../lib/" + kCudaModuleFile,
                                         d + "/../" EMBER_INSTALL_LIBDIR "/" + kCudaModuleFile}) {
                if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) candidates.push_back(c);
            }
        }
    }
    std::string tried;
    for (const std::string& c : candidates) {
        if (!exists(c)) {
            tried += (tried.empty() ? "" : ", ") + printable(c, 200);
            continue;
        }
        void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* e = dlerror();
            *why = "cannot load " + printable(c, 200) + ": " + (e ? printable(e, 300) : std::string("unknown error"));
            return nullptr;
        }
        auto fn = reinterpret_cast<EmberCudaModuleFn>(dlsym(h, kCudaModuleSymbol));
        const CudaModuleApi* api = fn ? fn() : nullptr;
        if (!api) {
            *why = printable(c, 200) + " is not ember's CUDA module (no " + kCudaModuleSymbol + ")";
            dlclose(h);  // a foreign library (and the CUDA runtime it drew in) does not stay mapped
            return nullptr;
        }
        if (api->abi != cuda_module_abi()) {
            *why = printable(c, 200) + " was built from another version of ember (rebuild it with this one)";
            dlclose(h);
            return nullptr;
        }
        return api;
    }
    if (!from_env) {
        if (void* h = dlopen(kCudaModuleFile, RTLD_NOW | RTLD_LOCAL)) {  // the loader's search path
            auto fn = reinterpret_cast<EmberCudaModuleFn>(dlsym(h, kCudaModuleSymbol));
            const CudaModuleApi* api = fn ? fn() : nullptr;
            if (api && api->abi == cuda_module_abi()) return api;
            dlclose(h);
            *why = std::string(kCudaModuleFile) + " on the library path is not this ember's CUDA module";
            return nullptr;
        }
        tried += std::string(tried.empty() ? "" : ", ") + "the library path";
    }
    *why = std::string(kCudaModuleFile) + " not found (looked in " + tried + ")";
    return nullptr;
}

const CudaModuleApi& require_module() {
    std::string why;
    const CudaModuleApi* api = load_module(&why);
    if (!api) {
        const char* env = std::getenv("EMBER_CUDA_MODULE");
        fail("the CUDA backend module cannot be loaded: ", why,
             env && *env ? "; unset EMBER_CUDA_MODULE or point it at libember-cuda.so" : "; ember builds it when nvcc is found (-DEMBER_CUDA=ON)",
             "; use --backend cpu");
    }
    return *api;
}

bool gpu_device_node() {
    for (const char* n : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl"}) {
        if (exists(n)) return true;
    }
    return false;
}

}  // namespace

bool cuda_available() {
    if (!gpu_device_node()) return false;
    std::string why;
    const CudaModuleApi* api = load_module(&why);
    return api && api->device_count() > 0;
}

int cuda_device_count() {
    std::string why;
    const CudaModuleApi* api = load_module(&why);
    return api ? api->device_count() : 0;
}

CudaDeviceInfo cuda_device_info() {
    const CudaModuleApi& api = require_module();
    CudaDeviceInfo info;
    std::string error;
    if (!api.device_info(&info, &error)) fail(error);
    return info;
}

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const SessionOptions& opts) {
    const CudaModuleApi& api = require_module();
    if (api.device_count() < 1) fail("no CUDA device found (use --backend cpu)");
    std::string error;
    std::unique_ptr<Backend> b(api.create(model, opts, &error));
    if (!b) fail(error.empty() ? std::string("the CUDA backend could not be created") : error);
    return b;
}

}  // namespace ember

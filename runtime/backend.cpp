#include "runtime/backend.h"

#include "runtime/error.h"

namespace ember {

BackendKind parse_backend(const std::string& s) {
    if (s == "cpu") return BackendKind::Cpu;
    if (s == "cuda") return BackendKind::Cuda;
    if (s == "auto") return BackendKind::Auto;
    fail("backend '", s, "' is unknown (cpu, cuda or auto)");
}

const char* backend_name(BackendKind b) { return b == BackendKind::Cpu ? "cpu" : b == BackendKind::Cuda ? "cuda" : "auto"; }

}  // namespace ember

#include "runtime/backend.h"

#include "runtime/error.h"

namespace ember {

BackendKind parse_backend(const std::string& s) {
    if (s == "cpu") return BackendKind::Cpu;
    if (s == "cuda") return BackendKind::Cuda;
    if (s == "auto") return BackendKind::Auto;
    fail("backend '", s, "' is unknown (cpu, cuda or auto)");
}

void check_forward_span(const char* backend, int T, int pos0, int row0, int n_keys0, bool all_rows, int block_size, int logit_rows) {
    const int S = block_size;
    if (T < 1 || pos0 < 0 || pos0 + T > S || row0 < 0 || row0 + T > S || n_keys0 < 0 || n_keys0 + T - 1 > S)
        fail(backend, " forward: T ", T, ", pos0 ", pos0, ", row0 ", row0, ", n_keys0 ", n_keys0, " outside block_size ", S);
    if (all_rows && T > logit_rows) fail(backend, " forward: ", T, " logit rows, planned ", logit_rows);
}

const char* backend_name(BackendKind b) { return b == BackendKind::Cpu ? "cpu" : b == BackendKind::Cuda ? "cuda" : "auto"; }

}  // namespace ember

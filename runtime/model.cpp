#include "runtime/model.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <new>

#include "ember_generated.h"
#include "runtime/file_dtype.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/tensors.h"
#include "runtime/utf8.h"

namespace ember {

const char* arch_name(Arch a) {
    switch (a) {
    case Arch::GptPy: return "gptpy";
    case Arch::NanoGPT: return "nanogpt";
    case Arch::HfGpt2: return "hf-gpt2";
    }
    return "?";
}

std::string attn_scale_text(const ModelConfig& c) {
    const float head = 1.0f / std::sqrt(static_cast<float>(c.head_size())), embd = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    char buf[96];
    const char* kind = c.attn_scale == head ? "1/sqrt(head_size)" : c.attn_scale == embd ? "1/sqrt(n_embd), the early gpt.py scale" : "custom";
    std::snprintf(buf, sizeof buf, "%.6g (%s)", c.attn_scale, kind);
    return buf;
}

const char* activation_name(kernels::ActivationKind a) {
    switch (a) {
    case kernels::ActivationKind::ReLU: return "relu";
    case kernels::ActivationKind::GeluErf: return "gelu (erf)";
    case kernels::ActivationKind::GeluTanh: return "gelu (tanh)";
    }
    return "?";
}

std::string layer_tensor_name(int layer, const char* suffix) {
    return "h." + std::to_string(layer) + "." + suffix;
}

namespace {

// Limits that keep every size product well inside 64 bits and every element count of one
// tensor inside 31 bits (kernels index rows and columns with int).
constexpr uint64_t kMaxDim = 1u << 24;
constexpr uint64_t kMaxElements = (1ull << 31) - 1;
constexpr uint32_t kMaxLayers = 1024;

size_t dtype_bytes(fb::DType d) { return d == fb::DType::F32 ? 4 : d == fb::DType::F16 ? 2 : 1; }

// The index of the first of n values (bit patterns) with (v & kMask) == kValue, or n when
// there is none: an inf or a NaN (f32 as uint32_t, f16 as uint16_t: the exponent field all
// ones) or an int8 -128 (0x80). Blocks of 4096 are scanned without a branch (the compiler
// vectorizes it), and only a block with one is scanned again for its index: GPT-2 124M's
// weights, 124M values, are checked at every open.
template <typename Bits, Bits kMask, Bits kValue>
uint64_t first_with_bits(const Bits* v, uint64_t n) {
    constexpr uint64_t kBlock = 4096;
    for (uint64_t at = 0; at < n; at += kBlock) {
        const uint64_t end = std::min(n, at + kBlock);
        Bits any = 0;
        for (uint64_t i = at; i < end; ++i) any |= static_cast<Bits>((v[i] & kMask) == kValue);
        if (!any) continue;
        for (uint64_t i = at; i < end; ++i)
            if ((v[i] & kMask) == kValue) return i;
    }
    return n;
}

}  // namespace

std::unique_ptr<Model> Model::open(const std::string& path, bool require_checksum) {
    return open(path, LoadOptions{}, require_checksum);
}

namespace {

// read() all `size` bytes of fd into dst; false (errno set, or 0 when the file ended early)
// with *got the bytes read.
bool read_all(int fd, uint8_t* dst, size_t size, size_t* got) {
    *got = 0;
    while (*got < size) {
        const ssize_t r = ::read(fd, dst + *got, std::min<size_t>(size - *got, size_t(1) << 30));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return false;
        }
        *got += static_cast<size_t>(r);
    }
    return true;
}

}  // namespace

std::unique_ptr<Model> Model::open(const std::string& path, const LoadOptions& load, bool require_checksum) {
    std::unique_ptr<Model> m(new Model());
    m->path_ = path;
    const std::string f = printable(path, 200);
    // O_NONBLOCK: a FIFO is refused below instead of waiting here for a writer.
    if (path.empty()) fail("model path is empty: give an .ember file");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(f, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const bool dir = S_ISDIR(st.st_mode);
        ::close(fd);
        if (dir) fail(f, ": is a directory, not a file (give an .ember file)");
        fail(f, ": not a regular file");
    }
    m->size_ = static_cast<size_t>(st.st_size);
    m->file_dev_ = static_cast<uint64_t>(st.st_dev);
    m->file_ino_ = static_cast<uint64_t>(st.st_ino);
    m->file_mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (m->size_ < 16) {
        ::close(fd);
        fail(f, ": ", m->size_, " bytes is too short for an .ember file");
    }
    if (load.mmap) {
        void* p = mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED) fail(f, ": mmap of ", m->size_, " bytes failed: ", std::strerror(errno));
        m->base_ = static_cast<const uint8_t*>(p);
        m->map_bytes_ = m->size_;
    } else {
        size_t len = 0;
        void* p = map_anonymous(m->size_, &len);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            fail(f, ": cannot allocate ", m->size_, " bytes of anonymous memory to read the model into (--no-mmap): ", std::strerror(e));
        }
        m->base_ = static_cast<const uint8_t*>(p);
        m->map_bytes_ = len;
        m->anonymous_ = true;
        m->mapped_ = true;  // the destructor unmaps it from here on
        size_t got = 0;
        const bool ok = read_all(fd, static_cast<uint8_t*>(p), m->size_, &got);
        const int e = errno;
        ::close(fd);
        if (!ok) {
            if (e) fail(f, ": read failed after ", got, " of ", m->size_, " bytes: ", std::strerror(e));
            fail(f, ": read ", got, " of ", m->size_, " bytes (the file shrank while it was read)");
        }
        mprotect(p, len, PROT_READ);  // read-only, as the mapped file is
    }
    m->mapped_ = true;
    if (load.mlock) {
        if (::mlock(m->base_, m->map_bytes_) == 0) {
            m->locked_ = true;
        } else {
            const int e = errno;
            struct rlimit rl {};
            std::string limit = "unknown";
            if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
                limit = rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_cur) + " bytes";
            }
            std::fprintf(stderr,
                         "ember: warning: %s: mlock of %zu bytes failed: %s (RLIMIT_MEMLOCK is %s; raise it with `ulimit -l` "
                         "or run with CAP_IPC_LOCK); the model stays unlocked\n",
                         f.c_str(), m->map_bytes_, std::strerror(e), limit.c_str());
        }
    }
    m->drop_checked_ = load.drop_checked_pages && load.mmap && !m->locked_;
    m->verify_and_view(require_checksum);
    return m;
}

void Model::drop_pages(const void* p, uint64_t n) const {
    if (!drop_checked_ || n == 0) return;
    // the pages holding [p, p + n) (a read-only private file mapping: dropping them loses nothing)
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

uint64_t Model::hash_data(const uint8_t* data, uint64_t size) const {
    if (!drop_checked_) return XXH64(data, size, 0);
    constexpr uint64_t kChunk = uint64_t{64} << 20;
    XXH64_state_t* st = XXH64_createState();
    if (!st) throw std::bad_alloc();
    XXH64_reset(st, 0);
    for (uint64_t at = 0; at < size; at += kChunk) {
        const uint64_t n = std::min(kChunk, size - at);
        XXH64_update(st, data + at, static_cast<size_t>(n));
        drop_pages(data + at, n);
    }
    const uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

std::unique_ptr<Model> Model::open_memory(const void* data, size_t size, const std::string& name) {
    std::unique_ptr<Model> m(new Model());
    m->path_ = name;
    if (!data) fail(printable(name, 200), ": no bytes (null pointer)");
    if (reinterpret_cast<uintptr_t>(data) % kDataAlignment != 0)
        fail(printable(name, 200), ": the model's bytes at ", data, " are not aligned to ", kDataAlignment, " bytes (tensors are used in place)");
    if (size < 16) fail(printable(name, 200), ": ", size, " bytes is too short for an .ember file");
    m->size_ = size;
    m->base_ = static_cast<const uint8_t*>(data);
    m->verify_and_view(true);
    return m;
}

Model::~Model() {
    // The file's mapping or the anonymous memory it was read into; munmap also unlocks.
    if (base_ && mapped_) munmap(const_cast<uint8_t*>(base_), map_bytes_);
}

bool Model::file_changed_in_place() const {
    if (!file_mapped()) return false;
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return false;  // removed: the mapping keeps the file
    if (static_cast<uint64_t>(st.st_dev) != file_dev_ || static_cast<uint64_t>(st.st_ino) != file_ino_) return false;
    const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    return static_cast<size_t>(st.st_size) != size_ || mtime_ns != file_mtime_ns_;
}

namespace {

// Not extern "C": that gives the name external linkage even in an anonymous namespace, and
// libember.a exported an unprefixed global symbol `on_bus_error` into embedders' programs.
void on_bus_error(int sig, siginfo_t* info, void*) {
    if (info && info->si_code == BUS_ADRERR) {
        static const char kSaid[] =
            "\nember: error: bus error reading a mapped file: a model file was truncated or written over while in use. Install models "
            "by a rename (ember flash, or mv of a finished file), not cp onto the file in use; --no-mmap reads the model into memory\n";
        ssize_t ignored = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
        (void)ignored;
    }
    // SA_RESETHAND restored the default action: a fault repeats on return and kills; a SIGBUS
    // sent by kill() (si_code <= 0) is raised again.
    if (!info || info->si_code <= 0) ::raise(sig);
}

}  // namespace

void report_truncated_model_files() {
    struct sigaction sa {};
    sa.sa_sigaction = on_bus_error;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
}

long long Model::huge_page_bytes() const {
    if (!base_ || !mapped_) return -1;
    std::FILE* in = std::fopen("/proc/self/smaps", "re");
    if (!in) return -1;
    const uintptr_t at = reinterpret_cast<uintptr_t>(base_);
    long long kb = -1;
    bool inside = false;
    char line[512];
    while (std::fgets(line, sizeof line, in)) {
        unsigned long long lo = 0, hi = 0;
        char dash = 0;
        if (std::sscanf(line, "%llx%c%llx ", &lo, &dash, &hi) == 3 && dash == '-') {
            if (inside) break;  // the mapping's block ended
            inside = lo <= at && at < hi;
        } else if (inside && std::sscanf(line, "AnonHugePages: %lld kB", &kb) == 1) {
            break;
        }
    }
    std::fclose(in);
    return kb < 0 ? -1 : kb * 1024;
}

size_t Model::weight_bytes() const {
    size_t n = 0;
    for (const auto& t : tensors_) n += t.bytes;
    return n;
}

std::string Model::checksum_mismatch() const {
    char hex[64];
    std::snprintf(hex, sizeof hex, "stored %016llx, computed %016llx", static_cast<unsigned long long>(stored_checksum_),
                  static_cast<unsigned long long>(checksum_));
    return std::string("checksum mismatch over the data section (file corrupted): ") + hex;
}

std::string Model::provenance() const {
    const auto* fbm = fb::GetSizePrefixedModel(base_);
    const auto* p = fbm->provenance();
    if (!p) return "(none)";
    auto s = [](const flatbuffers::String* x) { return x ? x->str() : std::string("?"); };
    return s(p->source_file()) + " (sha256 " + s(p->source_sha256()) + "), vocabulary " + s(p->vocab_source()) +
           ", " + s(p->converter());
}

void Model::verify_and_view(bool require_checksum) {
    const std::string f = printable(path_, 200);
    const fb::Model* fm = verify_index(f);
    verify_data_section(fm, f, require_checksum);
    read_config(fm, f);
    read_tokenizer(fm, f);
    build_views(read_tensors(fm, f));
}

const fb::Model* Model::verify_index(const std::string& f) {
    uint32_t fb_size = 0;
    std::memcpy(&fb_size, base_, 4);
    if (std::memcmp(base_, "PK\x03\x04", 4) == 0) {
        fail(f, ": this is a PyTorch checkpoint (zip), not an .ember file: convert it first with `ember convert`");
    }
    // The identifier first (bytes 8..11, inside the 16 bytes checked at open): any other file
    // is called what it is, not a truncated model with an absurd index size.
    if (!flatbuffers::BufferHasIdentifier(base_ + 4, fb::ModelIdentifier())) {
        // An adapter (schema/adapter.fbs: "EMBA" at byte 4) given where the model goes.
        if (std::memcmp(base_ + 4, "EMBA", 4) == 0) fail(f, ": is a LoRA adapter (.emba), not a model: give it with --adapter, beside -m MODEL");
        fail(f, ": not an .ember file (identifier is not \"EMBR\")");
    }
    if (fb_size < 8) fail(f, ": header claims a ", fb_size, "-byte index, too small for any model (corrupted file)");
    if (fb_size > size_ - 4) {
        fail(f, ": header claims a ", fb_size, "-byte index but the file holds ", size_, " bytes (truncated?)");
    }
    flatbuffers::Verifier verifier(base_, size_t{fb_size} + 4);  // 64-bit: fb_size + 4 wraps in 32 bits
    if (!fb::VerifySizePrefixedModelBuffer(verifier)) fail(f, ": the model index fails the FlatBuffers verifier (corrupted file)");
    const fb::Model* fm = fb::GetSizePrefixedModel(base_);
    format_version_ = fm->format_version();
    if (format_version_ != kFormatVersionChar && format_version_ != kFormatVersion) {
        fail(f, ": format_version ", format_version_, " is not supported (this ember reads versions ", kFormatVersionChar, " and ",
             kFormatVersion, ")");
    }

    return fm;
}

void Model::verify_data_section(const fb::Model* fm, const std::string& f, bool require_checksum) {
    uint32_t fb_size = 0;
    std::memcpy(&fb_size, base_, 4);  // verify_index checked it
    const uint64_t data_off = fm->data_offset();
    const uint64_t data_size = fm->data_size();
    if (data_off % kDataAlignment != 0) fail(f, ": data_offset ", data_off, " is not a multiple of ", kDataAlignment);
    if (data_off < fb_size + 4ull || data_off > size_ || data_size > size_ - data_off) {
        fail(f, ": header claims a data section of ", data_size, " bytes at offset ", data_off, " but the file holds ", size_,
             " bytes (truncated?)");
    }
    // Between the index and the data section the converter writes zeros (alignment). Neither
    // the index nor the checksum covers them: anything else there was put by something else.
    for (uint64_t at = fb_size + 4ull; at < data_off; ++at) {
        if (base_[at] != 0) {
            fail(f, ": byte ", at, " between the index (which ends at byte ", fb_size + 4ull, ") and the data section (at byte ", data_off,
                 ") is ", static_cast<int>(base_[at]), ", not 0 (the file was changed outside ember)");
        }
    }
    // The converter writes nothing after the data section: bytes there were appended to the file
    // (a log, a second copy, a transfer's junk), which the checksum would not see. Bytes in
    // memory (open_memory) may run past the model, as a flash partition does: they are not
    // part of it, and the model's size is where its data section ends.
    if (!mapped_ && data_size < size_ - data_off) size_ = data_off + data_size;
    if (data_size < size_ - data_off) {
        fail(f, ": ", size_ - data_off - data_size, " bytes follow the data section, which ends at byte ", data_off + data_size,
             " (something was appended to the file)");
    }
    data_ = base_ + data_off;
    data_size_ = data_size;
    checksum_ = hash_data(data_, data_size);
    stored_checksum_ = fm->data_xxh64();
    checksum_ok_ = checksum_ == stored_checksum_;
    if (!checksum_ok_ && require_checksum) fail(f, ": ", checksum_mismatch());

}

void Model::read_config(const fb::Model* fm, const std::string& f) {
    const fb::Config* c = fm->config();
    auto dim = [&](const char* name, uint32_t v, uint64_t max) -> int {
        if (v == 0 || v > max) fail(f, ": config.", name, " = ", v, " is out of range [1, ", max, "]");
        return static_cast<int>(v);
    };
    ModelConfig& cfg = config_;
    const std::optional<Arch> arch = arch_of(c->arch());
    if (!arch) fail(f, ": config.arch ", int(c->arch()), " is unknown");
    cfg.arch = *arch;
    cfg.n_layer = dim("n_layer", c->n_layer(), kMaxLayers);
    cfg.n_head = dim("n_head", c->n_head(), kMaxDim);
    cfg.n_embd = dim("n_embd", c->n_embd(), kMaxDim);
    cfg.block_size = dim("block_size", c->block_size(), kMaxDim);
    cfg.vocab_size = dim("vocab_size", c->vocab_size(), kMaxDim);
    cfg.ffn_hidden = dim("ffn_hidden", c->ffn_hidden(), kMaxDim);
    if (cfg.n_embd % cfg.n_head != 0) fail(f, ": config.n_embd ", cfg.n_embd, " is not divisible by config.n_head ", cfg.n_head);
    const std::optional<kernels::ActivationKind> act = activation_of(c->activation());
    if (!act) fail(f, ": config.activation ", int(c->activation()), " is unknown");
    cfg.activation = *act;
    cfg.ln_eps = c->ln_eps();
    cfg.attn_scale = c->attn_scale();
    if (!(cfg.ln_eps > 0.0f && cfg.ln_eps < 1.0f)) fail(f, ": config.ln_eps ", cfg.ln_eps, " is out of range (0, 1)");
    if (!(cfg.attn_scale >= std::numeric_limits<float>::min() && cfg.attn_scale <= kMaxAttnScale)) {
        fail(f, ": config.attn_scale ", cfg.attn_scale, " is out of range [1.2e-38, ", kMaxAttnScale, "] (the converter writes no other)");
    }
    cfg.tied_lm_head = c->tied_lm_head();
    const uint64_t C = cfg.n_embd, V = cfg.vocab_size, S = cfg.block_size, F = cfg.ffn_hidden, L = cfg.n_layer;
    // Every weight and every buffer of the memory plan holds at most 2^31 - 1 elements, so
    // that no product of these fields overflows a 32-bit index (each factor is below 2^24, so
    // the products themselves fit in 64 bits).
    struct Product {
        const char* fields;
        uint64_t value;
        const char* what;
    };
    for (const Product& p : {Product{"config.vocab_size x config.n_embd", V * C, "wte / lm_head"},
                             Product{"config.block_size x config.n_embd", S * C, "wpe"},
                             Product{"3 x config.n_embd x config.n_embd", 3 * C * C, "qkv.weight"},
                             Product{"config.ffn_hidden x config.n_embd", F * C, "fc.weight"},
                             Product{"config.block_size x 3 x config.n_embd", S * 3 * C, "the qkv activations of a window"},
                             Product{"config.block_size x config.ffn_hidden", S * F, "the FFN activations of a window"},
                             Product{"config.block_size x config.vocab_size", S * V, "the logits of a window"},
                             Product{"config.n_layer x config.block_size x config.n_embd", L * S * C, "the KV cache"}}) {
        if (p.value > kMaxElements) {
            fail(f, ": ", p.fields, " = ", p.value, " elements (", p.what, ") is more than 2^31 - 1 (n_layer ", L, ", n_embd ", C,
                 ", block_size ", S, ", vocab_size ", V, ", ffn_hidden ", F, ")");
        }
    }

}

void Model::read_tokenizer(const fb::Model* fm, const std::string& f) {
    const fb::Config* c = fm->config();
    ModelConfig& cfg = config_;
    const uint64_t V = cfg.vocab_size;
    const fb::Tokenizer* tok = fm->tokenizer();
    const bool v1 = format_version_ == kFormatVersionChar;
    if (v1 && (cfg.arch == Arch::HfGpt2 || tok->kind() != fb::TokenizerKind::Char || c->tokenizer_size() != 0)) {
        fail(f, ": format_version 1 cannot hold a BPE tokenizer, tokenizer_size or the hf-gpt2 architecture");
    }
    if (tok->kind() == fb::TokenizerKind::Char) {
        if (!tok->code_points() || tok->code_points()->size() != V) {
            fail(f, ": tokenizer holds ", tok->code_points() ? tok->code_points()->size() : 0, " entries but config.vocab_size is ", V);
        }
        code_points_.assign(tok->code_points()->begin(), tok->code_points()->end());
        for (size_t i = 0; i < code_points_.size(); ++i) {
            const uint32_t cp = code_points_[i];
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
                char hex[16];
                std::snprintf(hex, sizeof hex, "0x%X", cp);
                fail(f, ": tokenizer.code_points[", i, "] = ", hex, " is not a Unicode scalar value (",
                     cp > 0x10FFFF ? "past U+10FFFF" : "a UTF-16 surrogate", "): a char tokenizer entry is one code point");
            }
            if (i > 0 && cp <= code_points_[i - 1]) {
                fail(f, ": tokenizer.code_points[", i, "] is not above entry ", i - 1, " (entries ascend: sorted(set(text)))");
            }
        }
    } else if (tok->kind() == fb::TokenizerKind::ByteBpe) {
        if (!tok->token_offsets() || !tok->token_bytes() || !tok->merges()) {
            fail(f, ": BPE tokenizer lacks token_offsets, token_bytes or merges");
        }
        bpe_.offsets.assign(tok->token_offsets()->begin(), tok->token_offsets()->end());
        bpe_.bytes.assign(reinterpret_cast<const char*>(tok->token_bytes()->data()), tok->token_bytes()->size());
        bpe_.merges.resize(tok->merges()->size());
        for (size_t r = 0; r < bpe_.merges.size(); ++r) {
            const fb::BpeMerge* m = tok->merges()->Get(static_cast<flatbuffers::uoffset_t>(r));
            bpe_.merges[r] = {m->left(), m->right(), m->result()};
        }
        verify_bpe(bpe_, f);
        has_bpe_ = true;
        if (static_cast<uint64_t>(bpe_.size()) > V) fail(f, ": BPE tokenizer has ", bpe_.size(), " tokens but config.vocab_size is only ", V);
    } else {
        fail(f, ": tokenizer.kind ", int(tok->kind()), " is unknown");
    }
    const uint64_t n_tok = has_bpe_ ? static_cast<uint64_t>(bpe_.size()) : code_points_.size();
    if (c->tokenizer_size() != 0 && c->tokenizer_size() != n_tok) {
        fail(f, ": config.tokenizer_size ", c->tokenizer_size(), " but the tokenizer holds ", n_tok, " entries");
    }
    cfg.tokenizer_size = static_cast<int>(n_tok);
}

std::map<std::string, kernels::WeightView> Model::read_tensors(const fb::Model* fm, const std::string& f) {
    const ModelConfig& cfg = config_;
    const uint8_t* data = data_;
    const uint64_t data_size = data_size_;
    // What the configuration expects (the table of runtime/tensors.h).
    const std::vector<CanonicalEntry> canonical = canonical_tensors(cfg);
    std::map<std::string, const CanonicalEntry*> expected;
    for (const CanonicalEntry& e : canonical) expected[e.name] = &e;
    std::map<std::string, kernels::WeightView> found;
    for (const fb::Tensor* t : *fm->tensors()) {
        const std::string raw_name = t->name()->str();
        const std::string name = printable(raw_name);
        auto it = expected.find(raw_name);
        if (it == expected.end()) fail(f, ": tensor '", name, "' is not part of a ", arch_name(cfg.arch), " model (or is not expected by this configuration)");
        if (found.count(name)) fail(f, ": tensor '", name, "' appears twice");
        const CanonicalEntry& e = *it->second;
        std::vector<int64_t> shape(t->shape()->begin(), t->shape()->end());
        if (shape != e.shape) {
            std::string got, want;
            for (auto d : shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
            for (auto d : e.shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
            fail(f, ": tensor '", name, "' has shape [", got, "] but the configuration needs [", want, "]");
        }
        const fb::DType dt = t->dtype();
        if (dt != fb::DType::F32 && dt != fb::DType::F16 && dt != fb::DType::I8) fail(f, ": tensor '", name, "' has unknown dtype ", int(dt));
        if (e.vector() && dt != fb::DType::F32) fail(f, ": tensor '", name, "' is ", kernels::wtype_name(wtype_of(dt)), " but 1-D tensors are stored as f32");
        const uint64_t rows = e.vector() ? 1 : static_cast<uint64_t>(shape[0]);
        const uint64_t cols = static_cast<uint64_t>(e.vector() ? shape[0] : shape[1]);
        const uint64_t want_bytes = rows * cols * dtype_bytes(dt);
        auto check_range = [&](const char* what, uint64_t off, uint64_t size, uint64_t want) {
            if (size != want) fail(f, ": tensor '", name, "' ", what, "_size is ", size, " bytes but its shape needs ", want);
            if (off % kDataAlignment != 0) fail(f, ": tensor '", name, "' ", what, "_offset ", off, " is not a multiple of ", kDataAlignment);
            if (off > data_size || size > data_size - off) {
                fail(f, ": tensor '", name, "' ", what, "_offset ", off, " + ", what, "_size ", size, " lies past the data section (", data_size,
                     " bytes)");
            }
        };
        check_range("data", t->data_offset(), t->data_size(), want_bytes);
        kernels::WeightView v;
        v.data = data + t->data_offset();
        v.rows = static_cast<int>(rows);
        v.cols = static_cast<int>(cols);
        uint64_t bytes = t->data_size();
        if (dt == fb::DType::I8) {
            const uint32_t g = t->group_size();
            if (g == 0 || g > cols) fail(f, ": tensor '", name, "' group_size ", g, " must be in [1, ", cols, "] (the row length)");
            const uint64_t n_scales = rows * ((cols + g - 1) / g);
            check_range("scales", t->scales_offset(), t->scales_size(), n_scales * 4);
            v.type = kernels::WType::I8;
            v.group_size = static_cast<int>(g);
            v.scales = reinterpret_cast<const float*>(data + t->scales_offset());
            for (uint64_t i = 0; i < n_scales; ++i) {
                if (!(v.scales[i] >= 0.0f && std::isfinite(v.scales[i]))) fail(f, ": tensor '", name, "' scale ", i, " is ", v.scales[i], " (must be finite, >= 0)");
            }
            bytes += t->scales_size();
            // The x86 AVX2 kernels negate W's bytes (linear_avx2.cpp): -128 has no negation.
            const uint64_t n = rows * cols;
            const uint64_t bad = first_with_bits<uint8_t, 0xff, 0x80>(static_cast<const uint8_t*>(v.data), n);
            if (bad < n) fail(f, ": tensor '", name, "' element ", bad, " is -128; int8 weights are -127..127 (scale = max |w| / 127)");
            drop_pages(v.data, t->data_size());
        } else {
            v.type = dt == fb::DType::F32 ? kernels::WType::F32 : kernels::WType::F16;
            const uint64_t n = rows * cols;
            const uint64_t bad = dt == fb::DType::F32
                                     ? first_with_bits<uint32_t, 0x7f800000u, 0x7f800000u>(static_cast<const uint32_t*>(v.data), n)
                                     : first_with_bits<uint16_t, 0x7c00u, 0x7c00u>(static_cast<const uint16_t*>(v.data), n);
            if (bad < n) fail(f, ": tensor '", name, "' element ", bad, " is not a finite number");
            drop_pages(v.data, t->data_size());
        }
        found[name] = v;
        std::vector<uint32_t> shape32(shape.begin(), shape.end());
        tensors_.push_back({name, shape32, wtype_of(dt), dt == fb::DType::I8 ? t->group_size() : 0, bytes});
    }
    for (const CanonicalEntry& e : canonical) {
        if (e.required && !found.count(e.name)) fail(f, ": required tensor '", e.name, "' is missing");
    }

    return found;
}

void Model::build_views(const std::map<std::string, kernels::WeightView>& found) {
    const ModelConfig& cfg = config_;
    // The views, in the table's order; an absent bias stays nullptr, a tied lm_head is wte.
    ModelWeights& w = weights_;
    w.layers.resize(cfg.n_layer);
    for_each_weight(w, cfg, [&](const CanonicalEntry& e, WeightSlot slot) {
        auto it = found.find(e.name);
        if (it == found.end()) return;
        if (slot.mat) *slot.mat = it->second;
        if (slot.vec) *slot.vec = static_cast<const float*>(it->second.data);
    });
    if (cfg.tied_lm_head) w.lm_head = w.wte;
    // Whether decode reads the weights from cache: the int8 kernels' hint (weights.h).
    if (weight_bytes() <= kernels::last_level_cache_bytes()) for_each_linear(w, [](kernels::WeightView& v) { v.cache_resident = true; });
}

}  // namespace ember

// A loaded .ember model: the file mapped read-only (or read into anonymous memory, see
// LoadOptions), verified once, and viewed in place.
//
// Verification at open (the trust boundary: nothing after it re-checks): size prefix within
// the file, FlatBuffers verifier, identifier "EMBR", format_version, configuration bounds
// (every product used to size a buffer is at most 2^31 - 1 elements: the kernels index with int), n_embd divisible by n_head, each
// tensor's name, shape (against the configuration), dtype, group size, and byte ranges inside
// the data section, the data section inside the file, XXH64 of the data section, and the
// tokenizer (char: code points ascending; byte-level BPE: verify_bpe in runtime/bpe.h).
// Any failure throws ember::Error naming the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/weights.h"
#include "runtime/bpe.h"

namespace ember {

namespace fb {
struct Model;  // schema/ember.fbs's root table (ember_generated.h)
}

// The newest .ember format this ember reads; version 1 files (char tokenizer) still load, and
// the converter writes version 1 unless the file needs version 2 (schema/ember.fbs).
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kFormatVersionChar = 1;
constexpr size_t kDataAlignment = 64;

enum class Arch { GptPy, NanoGPT, HfGpt2 };
const char* arch_name(Arch a);                           // "gptpy" | "nanogpt" | "hf-gpt2", as --arch spells them
const char* activation_name(kernels::ActivationKind a);  // "relu" | "gelu (erf)" | "gelu (tanh)", for `info`

struct ModelConfig;
// The attention scale as `ember info` shows it: the value, and "1/sqrt(head_size)" or
// "1/sqrt(n_embd)" (the early gpt.py scale, C**-0.5) when it is one of them, else "custom".
std::string attn_scale_text(const ModelConfig& c);

// Letters used in shape comments: V vocab_size, S block_size, C n_embd, F ffn_hidden,
// H n_head, hs head_size = C / H, L n_layer.
// 1/sqrt(head_size) is at most 1; a larger scale is refused by the converter and the loader:
// q.k times 1e38 overflows f32 and the softmax gives NaN (loss nan measured on
// tests/fixtures/real/oldscale.pt).
constexpr float kMaxAttnScale = 1000.0f;

struct ModelConfig {
    Arch arch = Arch::GptPy;
    int n_layer = 0;
    int n_head = 0;
    int n_embd = 0;
    int block_size = 0;
    int vocab_size = 0;
    int ffn_hidden = 0;
    kernels::ActivationKind activation = kernels::ActivationKind::ReLU;
    float ln_eps = 1e-5f;
    float attn_scale = 0.0f;  // 1/sqrt(head_size); a normal f32 in (0, kMaxAttnScale]
    bool tied_lm_head = false;
    // Ids the tokenizer knows, <= vocab_size: rows of wte / lm_head past it are padding
    // (nanoGPT pads GPT-2's 50257 to 50304) whose logits are never sampled nor scored.
    int tokenizer_size = 0;

    int head_size() const { return n_embd / n_head; }
};

// Null bias pointers mean "no bias" (nanoGPT bias=False, gpt.py's key/query/value).
struct LayerWeights {
    const float* ln_1_w = nullptr;  // [C]
    const float* ln_1_b = nullptr;  // [C]
    kernels::WeightView qkv;        // [3C, C]: q | k | v, heads in order within each
    const float* qkv_b = nullptr;   // [3C]
    kernels::WeightView proj;       // [C, C]
    const float* proj_b = nullptr;  // [C]
    const float* ln_2_w = nullptr;  // [C]
    const float* ln_2_b = nullptr;  // [C]
    kernels::WeightView fc;         // [F, C]
    const float* fc_b = nullptr;    // [F]
    kernels::WeightView fc2;        // [C, F]
    const float* fc2_b = nullptr;   // [C]
};

struct ModelWeights {
    kernels::WeightView wte;          // [V, C]
    kernels::WeightView wpe;          // [S, C]
    std::vector<LayerWeights> layers; // [L]
    const float* ln_f_w = nullptr;    // [C]
    const float* ln_f_b = nullptr;    // [C]
    kernels::WeightView lm_head;      // [V, C] (wte when tied)
    const float* lm_head_b = nullptr; // [V]
};

// f(view) for every linear's weights: each layer's qkv, proj, fc, fc2, then lm_head. W is
// ModelWeights or const ModelWeights.
template <class W, class F>
void for_each_linear(W& w, F&& f) {
    for (auto& l : w.layers) {
        f(l.qkv);
        f(l.proj);
        f(l.fc);
        f(l.fc2);
    }
    f(w.lm_head);
}

struct TensorInfo {
    std::string name;
    std::vector<uint32_t> shape;
    kernels::WType dtype = kernels::WType::F32;
    uint32_t group_size = 0;
    uint64_t bytes = 0;  // data + scales
};

// How open() holds the file's bytes (the command line's --no-mmap and --mlock, as llama.cpp
// spells them). Either way the bytes are verified exactly as described above.
struct LoadOptions {
    // true: the file is mapped read-only (MAP_PRIVATE); pages come from the page cache on first
    // touch, are shared with other processes mapping the file and can be dropped under memory
    // pressure (then read again). Costs no memory beyond the page cache.
    // false: the file is read() into anonymous memory, mmap(MAP_PRIVATE | MAP_ANONYMOUS) of the
    // file size rounded up to the page size, aligned to 2 MiB, madvise(MADV_HUGEPAGE) so that
    // transparent huge pages back its whole 2 MiB pieces where the kernel allows (THP "madvise"
    // or "always"), then made read-only (memory.h, map_anonymous). Costs the file's size in
    // private memory, on top of the page cache the read fills, and a full read of the file at
    // start-up; pages are not
    // shared and can only be swapped, not dropped. Errors: the mapping failing (ENOMEM), a read
    // error, or fewer bytes read than fstat said (the file shrank) throw ember::Error.
    bool mmap = true;
    // mlock() the model's bytes (either way): resident from open() on, never paged out. A
    // failure (RLIMIT_MEMLOCK, `ulimit -l`, too low without CAP_IPC_LOCK) is a warning on
    // stderr naming the limit, and the model loads unlocked; never an error. Locked memory
    // counts against RLIMIT_MEMLOCK; munmap unlocks it.
    bool mlock = false;
    // With mmap and without mlock: the checksum reads the data section in 64 MiB chunks and
    // drops each chunk's pages from this process once hashed, as the value checks (f32 and f16
    // finite, int8 not -128) do each tensor's (madvise MADV_DONTNEED; they stay in the page cache,
    // and a later touch maps them again). For an open that only verifies (the converter's check
    // of the file it wrote): the check does not make the file resident.
    bool drop_checked_pages = false;
};

class Model {
public:
    // Maps and verifies `path`. With require_checksum false a checksum mismatch is recorded
    // (checksum_ok() == false) instead of thrown: `ember info` reports it; nothing runs such
    // a model. Throws ember::Error.
    static std::unique_ptr<Model> open(const std::string& path, bool require_checksum = true);
    // The same, holding the bytes as `load` says (mapped file or anonymous memory, locked).
    static std::unique_ptr<Model> open(const std::string& path, const LoadOptions& load, bool require_checksum = true);
    // Verifies `size` bytes at `data` (64-byte aligned; kept valid and unchanged by the caller
    // while the model lives) and uses them in place; `name` stands for the path in messages.
    // Throws ember::Error, as open().
    static std::unique_ptr<Model> open_memory(const void* data, size_t size, const std::string& name);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    // Char tokenizer: code point of each id, ascending (empty for a BPE model).
    const std::vector<uint32_t>& code_points() const { return code_points_; }
    // Byte-level BPE tokenizer (verified), or nullptr for a char model.
    const BpeData* bpe() const { return has_bpe_ ? &bpe_ : nullptr; }
    uint32_t format_version() const { return format_version_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::string& path() const { return path_; }
    size_t file_bytes() const { return size_; }
    // The model's file_bytes() bytes as held (the mapping, the memory --no-mmap read them
    // into, or open_memory's): what `ember flash` sends after verifying them.
    std::string_view file_bytes_view() const { return {reinterpret_cast<const char*>(base_), size_}; }
    size_t weight_bytes() const;
    bool checksum_ok() const { return checksum_ok_; }
    uint64_t checksum() const { return checksum_; }                // xxh64 of the data section, computed at open
    uint64_t stored_checksum() const { return stored_checksum_; }  // the one the file holds
    // "checksum mismatch over the data section (file corrupted): stored X, computed Y"
    std::string checksum_mismatch() const;
    std::string provenance() const;  // one line: source file, SHA-256, converter
    // How the bytes are held: false for anonymous memory (--no-mmap) and for open_memory.
    bool file_mapped() const { return mapped_ && !anonymous_; }
    bool anonymous() const { return anonymous_; }
    bool locked() const { return locked_; }  // mlock succeeded
    // Length of the memory holding the file: its size mapped, or that rounded up to the page size
    // (--no-mmap); 0 for open_memory.
    size_t held_bytes() const { return mapped_ ? map_bytes_ : 0; }
    // Whether the file this model maps has been written over in place since it was opened:
    // the path names the same file (device and inode), now of another size or modification
    // time (cp onto it, an editor, a truncate). Its pages may then hold other bytes, or none
    // (a read past the new end raises SIGBUS), so the model must not be used again. False for
    // --no-mmap and open_memory (their bytes are a copy) and where the path now names another
    // file (replaced by a rename, as ember flash does: the mapping keeps the old file).
    bool file_changed_in_place() const;
    // Bytes of the model's memory backed by transparent huge pages (AnonHugePages of its
    // mapping in /proc/self/smaps), or -1 when that cannot be read.
    long long huge_page_bytes() const;

private:
    Model() = default;
    // Checks every byte a model's file holds before anything reads it (the trust boundary), in
    // the file's order; each step throws ember::Error naming the file (f, printable) and what.
    void verify_and_view(bool require_checksum);
    // The size prefix, the identifier, the FlatBuffers verifier, format_version: the index.
    const fb::Model* verify_index(const std::string& f);
    // The data section's place, the zeros before it, nothing after it, its checksum.
    void verify_data_section(const fb::Model* fm, const std::string& f, bool require_checksum);
    // config_ from the index: each field's range and the products that size buffers.
    void read_config(const fb::Model* fm, const std::string& f);
    // code_points_ or bpe_, against config_.vocab_size.
    void read_tokenizer(const fb::Model* fm, const std::string& f);
    // Each tensor against the configuration's table (runtime/tensors.h): name, shape, dtype,
    // byte ranges, finite values and scales; fills tensors_, returns the views by name.
    std::map<std::string, kernels::WeightView> read_tensors(const fb::Model* fm, const std::string& f);
    // weights_ from the views, in the table's order; the int8 kernels' cache hint.
    void build_views(const std::map<std::string, kernels::WeightView>& found);
    uint64_t hash_data(const uint8_t* data, uint64_t size) const;  // XXH64, seed 0
    void drop_pages(const void* p, uint64_t n) const;  // drop_checked_: madvise(MADV_DONTNEED)

    std::string path_;
    const uint8_t* base_ = nullptr;
    const uint8_t* data_ = nullptr;  // the data section (verify_data_section)
    uint64_t data_size_ = 0;
    size_t size_ = 0;
    bool mapped_ = false;  // base_ is our mmap (open), not the caller's bytes (open_memory)
    bool anonymous_ = false;  // that mmap is anonymous memory the file was read into
    bool locked_ = false;
    bool drop_checked_ = false;  // LoadOptions::drop_checked_pages, for a file mapping
    size_t map_bytes_ = 0;    // length of our mmap (size_, or size_ rounded up to the page size)
    // The mapped file when it was opened (file_changed_in_place).
    uint64_t file_dev_ = 0, file_ino_ = 0;
    int64_t file_mtime_ns_ = 0;
    ModelConfig config_;
    ModelWeights weights_;
    std::vector<uint32_t> code_points_;
    BpeData bpe_;
    bool has_bpe_ = false;
    uint32_t format_version_ = 0;
    std::vector<TensorInfo> tensors_;
    bool checksum_ok_ = false;
    uint64_t checksum_ = 0, stored_checksum_ = 0;
};

// For commands (ember, ember-console), once at start: a SIGBUS raised by a read past the end
// of a mapped file (si_code BUS_ADRERR: a model file truncated while in use) prints one line to
// stderr saying so and what to do instead, then the process dies of the signal as before
// (status 135). Other bus errors are left as they were. Library code does not call it: an
// embedding program owns its signal handlers.
void report_truncated_model_files();

// Canonical tensor names of layer i, e.g. layer_tensor_name(3, "qkv.weight") == "h.3.qkv.weight".
std::string layer_tensor_name(int layer, const char* suffix);

}  // namespace ember

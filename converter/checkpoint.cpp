// Reading torch.save zip checkpoints, safetensors files and nanoGPT's meta.pkl.
#include "converter/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "converter/alloc.h"
#include "converter/safetensors.h"
#include "converter/source_values.h"
#include "runtime/utf8.h"
#include "converter/unpickler.h"
#include "converter/zip_archive.h"
#include "runtime/error.h"

namespace ember::convert {

namespace {

using pickle::Kind;
using pickle::Value;

constexpr uint64_t kMaxPickleBytes = uint64_t{256} << 20;
constexpr uint64_t kMaxStorageBytes = uint64_t{16} << 30;
constexpr uint64_t kMaxMetaBytes = uint64_t{64} << 20;
constexpr int kMaxJsonDepth = 32;
constexpr size_t kMaxJsonValues = size_t{1} << 16;  // model_args holds a few dozen values
constexpr size_t kMaxJsonBytes = size_t{1} << 20;   // and a few hundred bytes of text
constexpr uint64_t kCap = uint64_t{1} << 62;  // saturation point for element counts

// "U+0041".
std::string code_point_name(uint32_t cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
    return buf;
}

// Only regular files are read: a directory reads as empty, and a device (/dev/zero) or a
// FIFO never ends or cannot be sized, which gave misleading messages or no end at all.
void require_regular_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(path, ": cannot open (", std::strerror(errno), ")");
    if (S_ISDIR(st.st_mode)) fail(path, ": is a directory, not a file");
    if (!S_ISREG(st.st_mode)) fail(path, ": not a regular file");
}

// Reads up to `n` bytes from the start of `path` (fewer when the file is shorter).
std::vector<uint8_t> read_head(const std::string& path, size_t n) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
    std::vector<uint8_t> head(n);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(n));
    head.resize(static_cast<size_t>(in.gcount()));
    return head;
}

// Where tensors' storages come from: a zip archive's entries or a legacy file's raw storages.
class Storages {
public:
    virtual ~Storages() = default;
    virtual const std::vector<uint8_t>& get(const std::string& key, const std::string& tensor) = 0;
    // The storage's size in bytes, without reading it (throws when it is missing).
    virtual uint64_t size(const std::string& key, const std::string& tensor) = 0;
    virtual std::string entry_name(const std::string& key) const = 0;
    // Reads one tensor's storage when called, or nullptr: the storage is read now (get).
    virtual std::function<std::vector<uint8_t>()> reader(const std::string& key, const std::string& tensor) { return nullptr; }
};

// The storages of one archive, each read once (tied tensors share one); lazy: none is read
// here, each tensor's reader reads its entry when called.
class StorageCache final : public Storages {
public:
    StorageCache(std::shared_ptr<const ZipArchive> zip, std::string prefix, bool lazy)
        : zip_(std::move(zip)), prefix_(std::move(prefix)), lazy_(lazy) {}

    const std::vector<uint8_t>& get(const std::string& key, const std::string& tensor) override {
        auto it = cache_.find(key);
        if (it != cache_.end()) return it->second;
        size(key, tensor);
        return cache_.emplace(key, zip_->read(entry_name(key), kMaxStorageBytes)).first->second;
    }

    uint64_t size(const std::string& key, const std::string& tensor) override {
        const auto n = zip_->entry_size(entry_name(key));
        if (!n) {
            fail(zip_->path(), ": tensor '", printable(tensor), "': storage entry '", printable(entry_name(key)),
                 "' is missing from the archive");
        }
        return *n;
    }

    std::string entry_name(const std::string& key) const override { return prefix_ + "data/" + key; }

    std::function<std::vector<uint8_t>()> reader(const std::string& key, const std::string& tensor) override {
        if (!lazy_) return nullptr;
        size(key, tensor);
        return [zip = zip_, entry = entry_name(key)] { return zip->read(entry, kMaxStorageBytes); };
    }

private:
    std::shared_ptr<const ZipArchive> zip_;
    std::string prefix_;
    bool lazy_ = false;
    std::map<std::string, std::vector<uint8_t>> cache_;
};

// A tensor's view of its storage: dtype, shape, strides and offset, checked against the
// storage's size.
struct StorageView {
    SourceDType dtype = SourceDType::F32;
    std::vector<int64_t> shape, stride;
    uint64_t offset = 0, numel = 0;
    uint64_t last = 0;  // the last element it touches (when numel > 0)
};

// The view's values as contiguous f32, row-major (an odometer over the dimensions).
std::vector<float> decode_view(const StorageView& v, const std::vector<uint8_t>& bytes, const std::string& what) {
    std::vector<float> values;
    resize_or_fail(values, static_cast<size_t>(v.numel), what);
    if (v.numel == 0) return values;
    const uint64_t elem = source_dtype_size(v.dtype);
    if ((v.last + 1) * elem > bytes.size()) fail(what, ": the storage holds ", bytes.size(), " bytes, fewer than when it was opened");
    const size_t dims = v.shape.size();
    std::vector<int64_t> index(dims, 0);
    uint64_t src = v.offset;
    for (uint64_t i = 0; i < v.numel; ++i) {
        values[i] = decode_source_value(v.dtype, bytes.data() + src * elem);
        for (size_t d = dims; d-- > 0;) {
            if (++index[d] < v.shape[d]) {
                src += static_cast<uint64_t>(v.stride[d]);
                break;
            }
            src -= static_cast<uint64_t>(v.stride[d]) * static_cast<uint64_t>(v.shape[d] - 1);
            index[d] = 0;
        }
    }
    return values;
}

// A rebuilt tensor as contiguous f32, its storage offset and strides honoured: read now, or,
// when storages gives a reader, when SourceTensor::read is called.
SourceTensor materialize(const std::string& path, const std::string& name, const Value& t, Storages& storages) {
    const Value& storage = *t.storage;
    const std::string where = "tensor '" + printable(name) + "'";
    SourceTensor out;
    StorageView v;
    if (storage.text == "FloatStorage") v.dtype = SourceDType::F32;
    else if (storage.text == "HalfStorage") v.dtype = SourceDType::F16;
    else if (storage.text == "BFloat16Storage") v.dtype = SourceDType::BF16;
    else fail(path, ": ", where, " is a ", storage.text, "; model tensors must be float32, float16 or bfloat16");
    out.dtype = v.dtype;
    out.storage_key = storage.key;
    out.shape = t.shape;

    const uint64_t storage_bytes = storages.size(storage.key, name);
    const uint64_t elem = source_dtype_size(v.dtype);
    const uint64_t available = storage_bytes / elem;  // elements in the storage entry

    // numel and the last element the view touches, in saturating arithmetic (a hostile
    // shape cannot overflow; anything near the cap fails the checks below).
    auto mul = [](uint64_t a, uint64_t b) { return (a != 0 && b > kCap / a) ? kCap : std::min(a * b, kCap); };
    auto add = [](uint64_t a, uint64_t b) { return std::min(a + b, kCap); };  // a, b <= kCap
    uint64_t numel = 1;
    uint64_t last = std::min(static_cast<uint64_t>(t.storage_offset), kCap);
    for (size_t d = 0; d < t.shape.size(); ++d) {
        const auto size = static_cast<uint64_t>(t.shape[d]);
        numel = mul(numel, size);
        if (size > 0) last = add(last, mul(size - 1, static_cast<uint64_t>(t.stride[d])));
    }
    if (numel > 0 && last >= available) {
        fail(path, ": ", where, " needs ", mul(add(last, 1), elem), " bytes of storage '",
             storages.entry_name(storage.key), "' but it holds ", storage_bytes);
    }
    if (numel > available) {
        fail(path, ": ", where, " has more elements (", numel, ") than its storage '", storages.entry_name(storage.key),
             "' holds (", available, "); expanded views are not supported");
    }
    v.shape = t.shape;
    v.stride = t.stride;
    v.offset = static_cast<uint64_t>(t.storage_offset);
    v.numel = numel;
    v.last = last;
    const std::string what = path + ": " + where + " as f32";
    if (auto read = storages.reader(storage.key, name)) {
        out.read = [read = std::move(read), v, what] { return decode_view(v, read(), what); };
        return out;
    }
    out.values = decode_view(v, storages.get(storage.key, name), what);
    return out;
}

// What to_json has converted so far. Shared references (memo) make the pickle a graph whose
// tree can be exponentially larger than the pickle ("billion laughs"), so both are bounded.
struct JsonBudget {
    size_t values = 0;
    size_t bytes = 0;  // of strings and keys
};

nlohmann::ordered_json to_json(const std::string& path, const std::string& key, const Value& v, int depth,
                               JsonBudget& budget) {
    if (depth > kMaxJsonDepth) fail(path, ": model_args entry '", printable(key), "' is nested too deeply");
    budget.bytes += v.text.size() + key.size();
    if (++budget.values > kMaxJsonValues || budget.bytes > kMaxJsonBytes) {
        fail(path, ": model_args holds more than ", kMaxJsonValues, " values or ", kMaxJsonBytes, " bytes of text");
    }
    switch (v.kind) {
        case Kind::None: return nullptr;
        case Kind::Bool: return v.boolean;
        case Kind::Int: return v.integer;
        case Kind::Float: return v.real;
        case Kind::Str: return v.text;
        case Kind::Tuple:
        case Kind::List: {
            nlohmann::ordered_json a = nlohmann::ordered_json::array();
            for (const Value* x : v.items) a.push_back(to_json(path, key, *x, depth + 1, budget));
            return a;
        }
        case Kind::Dict: {
            nlohmann::ordered_json o = nlohmann::ordered_json::object();
            for (const auto& [k, x] : v.entries) {
                if (k->kind != Kind::Str) fail(path, ": model_args entry '", printable(key), "' has a non-string key");
                o[k->text] = to_json(path, k->text, *x, depth + 1, budget);
            }
            return o;
        }
        default:
            fail(path, ": model_args entry '", printable(key), "' is a ", pickle::kind_name(v.kind),
                 ", not a plain value");
    }
}

// The folder that holds data.pkl ("archive/", "ckpt/", ...), found as torch does: the one
// top-level "<folder>/data.pkl".
std::string find_record_prefix(const ZipArchive& zip) {
    for (const std::string& name : zip.names()) {
        const size_t slash = name.find('/');
        if (slash != std::string::npos && slash > 0 && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
            return name.substr(0, slash + 1);
        }
    }
    fail(zip.path(), ": zip archive has no <folder>/data.pkl, so it is not a PyTorch checkpoint");
}

// For "holds no tensors": the dict's first keys and what each holds, a dict's tensors counted
// (a state_dict one level down: Lightning's {"state_dict": ...}, a dict of models), and what
// to save instead.
std::string keys_held(const Value& dict) {
    constexpr size_t kShown = 8;
    std::string s;
    bool nested = false;
    for (size_t i = 0; i < dict.entries.size() && i < kShown; ++i) {
        const auto& [k, v] = dict.entries[i];
        s += i == 0 ? "" : ", ";
        s += k->kind == Kind::Str ? "'" + printable(k->text, 60) + "'" : std::string("(") + pickle::kind_name(k->kind) + " key)";
        if (v->kind == Kind::Dict) {
            size_t tensors = 0;
            for (const auto& e : v->entries) tensors += e.second->kind == Kind::Tensor;
            s += tensors > 0 ? ": dict of " + std::to_string(tensors) + " tensors" : std::string(": dict");
            nested = nested || tensors > 0;
        } else {
            s += std::string(": ") + pickle::kind_name(v->kind);
        }
    }
    if (dict.entries.empty()) return ": it is an empty dict";
    if (dict.entries.size() > kShown) s += ", ... (" + std::to_string(dict.entries.size()) + " keys)";
    s = " at its top level; its keys: " + s;
    if (nested) s += "; save the state_dict itself (torch.save(ckpt[KEY], 'model.pt')) or as nanoGPT does ({\"model\": state_dict, \"model_args\": ...})";
    return s;
}

// The state_dict (or nanoGPT's {"model", "model_args"}) of an unpickled checkpoint. budget:
// the storages' bytes; the tensors may hold at most that many values in all.
Checkpoint checkpoint_from_pickle(const std::string& path, const Value& root, Storages& storages, uint64_t budget) {
    if (root.kind != Kind::Dict) {
        fail(path, ": checkpoint holds a ", pickle::kind_name(root.kind), ", not a state_dict or a dict with \"model\"");
    }

    Checkpoint ckpt;
    const Value* model = root.get("model");
    if (model != nullptr) {
        if (model->kind != Kind::Dict) fail(path, ": checkpoint's \"model\" entry is a ", pickle::kind_name(model->kind), ", not a state_dict");
        if (const Value* args = root.get("model_args")) {
            if (args->kind != Kind::Dict) fail(path, ": checkpoint's \"model_args\" is a ", pickle::kind_name(args->kind), ", not a dict");
            JsonBudget json_budget;
            ckpt.model_args_json = to_json(path, "model_args", *args, 0, json_budget)
                                       .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        }
    } else {
        model = &root;
    }

    uint64_t total = 0;
    for (const auto& [k, v] : model->entries) {
        if (v->kind != Kind::Tensor) continue;  // a state_dict holds only tensors; skip anything else
        if (k->kind != Kind::Str) fail(path, ": a tensor's key is a ", pickle::kind_name(k->kind), ", not a string");
        if ((v->storage->text == "BoolStorage" || v->storage->text == "ByteStorage") && is_attention_mask_key(k->text)) {
            ckpt.skipped.push_back(k->text);
            continue;
        }
        SourceTensor t = materialize(path, k->text, *v, storages);
        uint64_t numel = 1;  // checked against its storage's size by materialize
        for (const int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
        total += numel;
        if (total > budget) {
            fail(path, ": tensors hold more values (", total, ") than the archive's storages have bytes (", budget,
                 "); too many views of the same storage");
        }
        ckpt.tensors[k->text] = std::move(t);
    }
    if (ckpt.tensors.empty()) fail(path, ": checkpoint holds no tensors", keys_held(*model));
    return ckpt;
}

Checkpoint read_torch_zip(const std::string& path, bool lazy) {
    const auto archive = std::make_shared<const ZipArchive>(path);
    const ZipArchive& zip = *archive;
    const std::string prefix = find_record_prefix(zip);

    if (zip.entry_size(prefix + "byteorder")) {
        const std::vector<uint8_t> b = zip.read(prefix + "byteorder", 16);
        std::string order(b.begin(), b.end());
        while (!order.empty() && (order.back() == '\n' || order.back() == '\r' || order.back() == ' ')) order.pop_back();
        if (order == "big") fail(path, ": checkpoint was saved on a big-endian machine (byteorder 'big'); only little-endian is supported");
        if (order != "little") fail(path, ": unknown byteorder '", printable(order), "'");
    }

    const std::vector<uint8_t> pkl = zip.read(prefix + "data.pkl", kMaxPickleBytes);
    const pickle::Pickle p = pickle::unpickle(pkl.data(), pkl.size(), path);
    // Views may share storages (tying), but never by more than this in all: one value per
    // storage byte, 4x the f32 elements, bounds what a hostile pickle can make us allocate.
    uint64_t budget = 0;
    for (const std::string& name : zip.names()) {
        if (name.compare(0, prefix.size() + 5, prefix + "data/") == 0) budget += zip.entry_size(name).value_or(0);
    }
    StorageCache storages(archive, prefix, lazy);
    return checkpoint_from_pickle(path, p.root(), storages, budget);
}

// torch.save's legacy format (torch < 1.6, or _use_new_zipfile_serialization=False): pickles of
// the magic number, the protocol version (1001) and sys_info, then the object's pickle whose
// persistent ids name storages, then a pickle of the storage keys in order, then per key an
// int64 element count and the storage's raw bytes.
class LegacyStorages final : public Storages {
public:
    LegacyStorages(const std::string& path, const std::vector<uint8_t>& file, size_t pos, const pickle::Value& keys,
                   const std::map<std::string, std::string>& types)
        : path_(path) {
        if (keys.kind != Kind::List) fail(path, ": legacy checkpoint: the storage keys are not a list");
        for (const Value* k : keys.items) {
            if (k->kind != Kind::Str) fail(path, ": legacy checkpoint: a storage key is not a string");
            auto t = types.find(k->text);
            if (t == types.end()) fail(path, ": legacy checkpoint: storage '", printable(k->text), "' is listed but no tensor uses it");
            const uint64_t elem = pickle::storage_element_size(t->second);
            if (file.size() - pos < 8) fail(path, ": legacy checkpoint: storage '", printable(k->text), "' is cut short (truncated?)");
            uint64_t numel = 0;
            for (int i = 7; i >= 0; --i) numel = numel << 8 | file[pos + static_cast<size_t>(i)];
            pos += 8;
            if (elem == 0 || numel > (file.size() - pos) / elem) {
                fail(path, ": legacy checkpoint: storage '", printable(k->text), "' claims ", numel, " elements, past the end of the file");
            }
            const size_t bytes = static_cast<size_t>(numel * elem);
            if (!spans_.emplace(k->text, std::make_pair(pos, bytes)).second) {
                fail(path, ": legacy checkpoint: storage '", printable(k->text), "' is listed twice");
            }
            total_ += bytes;
            pos += bytes;
        }
        file_ = &file;
    }
    const std::vector<uint8_t>& get(const std::string& key, const std::string& tensor) override {
        auto c = cache_.find(key);
        if (c != cache_.end()) return c->second;
        auto it = spans_.find(key);
        if (it == spans_.end()) fail(path_, ": tensor '", printable(tensor), "': storage '", printable(key), "' is not in the file");
        const uint8_t* b = file_->data() + it->second.first;
        return cache_.emplace(key, std::vector<uint8_t>(b, b + it->second.second)).first->second;
    }
    uint64_t size(const std::string& key, const std::string& tensor) override {
        auto it = spans_.find(key);
        if (it == spans_.end()) fail(path_, ": tensor '", printable(tensor), "': storage '", printable(key), "' is not in the file");
        return it->second.second;
    }
    std::string entry_name(const std::string& key) const override { return "storage " + key; }
    uint64_t total_bytes() const { return total_; }

private:
    std::string path_;
    const std::vector<uint8_t>* file_ = nullptr;
    std::map<std::string, std::pair<size_t, size_t>> spans_;  // key -> (offset, bytes)
    std::map<std::string, std::vector<uint8_t>> cache_;
    uint64_t total_ = 0;
};

// The storage type of every storage key the tensors under v use. Each value is visited once:
// shared references (memo) make the pickle a graph whose tree can be exponentially larger.
void collect_storage_types(const Value& v, std::map<std::string, std::string>& out, std::set<const Value*>& seen, int depth) {
    if (depth > 64 || !seen.insert(&v).second) return;
    if (v.kind == Kind::Tensor && v.storage) out[v.storage->key] = v.storage->text;
    for (const Value* x : v.items) collect_storage_types(*x, out, seen, depth + 1);
    for (const auto& [k, x] : v.entries) collect_storage_types(*x, out, seen, depth + 1);
}

Checkpoint read_torch_legacy(const std::string& path) {
    std::vector<uint8_t> file;
    {
        std::ifstream in(path, std::ios::binary | std::ios::ate);
        if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
        const std::streamoff size = in.tellg();
        if (size < 0 || static_cast<uint64_t>(size) > kMaxStorageBytes) fail(path, ": legacy checkpoint of implausible size");
        resize_or_fail(file, static_cast<size_t>(size), path + " (the whole legacy checkpoint, read into memory)");
        in.seekg(0);
        if (!in.read(reinterpret_cast<char*>(file.data()), size)) fail(path, ": read failed");
    }
    // pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2): torch's legacy magic number.
    static const uint8_t kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
    if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
        fail(path, ": a bare pickle, not a PyTorch checkpoint (neither the zip format nor torch's legacy format)");
    }
    size_t pos = sizeof kMagic, used = 0;
    auto next = [&](const char* what) {
        pickle::Pickle p = pickle::unpickle(file.data() + pos, file.size() - pos, path + " (" + what + ")", &used);
        pos += used;
        return p;
    };
    const pickle::Pickle version = next("protocol version");
    if (version.root().kind != Kind::Int || version.root().integer != 1001) {
        fail(path, ": legacy checkpoint with protocol version other than 1001");
    }
    const pickle::Pickle sys_info = next("sys_info");
    if (const Value* le = sys_info.root().get("little_endian"); le && le->kind == Kind::Bool && !le->boolean) {
        fail(path, ": checkpoint was saved on a big-endian machine; only little-endian is supported");
    }
    const pickle::Pickle obj = next("data");
    const pickle::Pickle keys = next("storage keys");
    std::map<std::string, std::string> types;
    std::set<const Value*> seen;
    collect_storage_types(obj.root(), types, seen, 0);
    LegacyStorages storages(path, file, pos, keys.root(), types);
    return checkpoint_from_pickle(path, obj.root(), storages, storages.total_bytes());
}

}  // namespace

bool is_attention_mask_key(const std::string& key) {
    for (const char* suffix : {"attn.bias", "attn.masked_bias"}) {
        const std::string s = suffix;
        if (key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0 &&
            (key.size() == s.size() || key[key.size() - s.size() - 1] == '.')) {
            return true;
        }
    }
    return false;
}

const char* source_dtype_name(SourceDType d) {
    switch (d) {
        case SourceDType::F32: return "f32";
        case SourceDType::F16: return "f16";
        case SourceDType::BF16: return "bf16";
    }
    return "?";
}

std::vector<float> values_of(const SourceTensor& s) { return s.read ? s.read() : s.values; }

Checkpoint read_checkpoint(const std::string& path, bool lazy) {
    require_regular_file(path);
    const std::vector<uint8_t> head = read_head(path, 16);
    if (head.size() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) {
        return read_torch_zip(path, lazy);
    }
    if (looks_like_safetensors(head.data(), head.size())) return read_safetensors(path, lazy);
    if (head.size() >= 2 && head[0] == 0x80 && head[1] <= 5) return read_torch_legacy(path);
    fail(path, ": not a PyTorch checkpoint (zip or legacy) or safetensors file");
}

std::vector<uint32_t> read_meta_pkl(const std::string& path) {
    require_regular_file(path);
    std::vector<uint8_t> bytes;
    {
        std::ifstream in(path, std::ios::binary | std::ios::ate);
        if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
        const std::streamoff size = in.tellg();
        if (size < 0 || static_cast<uint64_t>(size) > kMaxMetaBytes) fail(path, ": meta.pkl of implausible size");
        bytes.resize(static_cast<size_t>(size));
        in.seekg(0);
        if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) fail(path, ": read failed");
    }
    if (bytes.empty() || bytes[0] != 0x80) {  // every pickle of protocol >= 2 opens with PROTO
        fail(path, ": not a pickle: --meta expects nanoGPT's meta.pkl (for a training text use --vocab-text)");
    }
    const pickle::Pickle p = pickle::unpickle(bytes.data(), bytes.size(), path);
    const Value& root = p.root();
    if (root.kind != Kind::Dict) fail(path, ": meta.pkl holds a ", pickle::kind_name(root.kind), ", not a dict");
    const Value* itos = root.get("itos");
    if (itos == nullptr || itos->kind != Kind::Dict) fail(path, ": meta.pkl has no \"itos\" dict");

    // id -> code point; a later duplicate key wins, as in Python.
    std::map<int64_t, uint32_t> by_id;
    for (const auto& [k, v] : itos->entries) {
        if (k->kind != Kind::Int) fail(path, ": meta.pkl itos has a ", pickle::kind_name(k->kind), " key, not an int id");
        if (v->kind != Kind::Str) fail(path, ": meta.pkl itos[", k->integer, "] is a ", pickle::kind_name(v->kind), ", not a str");
        uint32_t cp = 0;
        if (!decode_single_code_point(v->text, cp)) {
            fail(path, ": meta.pkl itos[", k->integer, "] = '", printable(v->text),
                 "' is not exactly one Unicode code point");
        }
        by_id[k->integer] = cp;
    }

    int64_t vocab = static_cast<int64_t>(by_id.size());
    if (const Value* vs = root.get("vocab_size")) {
        if (vs->kind != Kind::Int || vs->integer <= 0) fail(path, ": meta.pkl vocab_size is not a positive int");
        vocab = vs->integer;
    }
    if (vocab == 0) fail(path, ": meta.pkl itos is empty");
    if (static_cast<int64_t>(by_id.size()) != vocab) {
        for (int64_t id = 0; id < vocab; ++id) {
            if (by_id.find(id) == by_id.end()) fail(path, ": meta.pkl itos has no entry for id ", id, " (vocab_size ", vocab, ")");
        }
        fail(path, ": meta.pkl itos has ", by_id.size(), " entries but vocab_size is ", vocab);
    }
    std::vector<uint32_t> code_points;
    std::map<uint32_t, int64_t> seen;
    for (int64_t id = 0; id < vocab; ++id) {
        auto it = by_id.find(id);
        if (it == by_id.end()) fail(path, ": meta.pkl itos has no entry for id ", id, " (vocab_size ", vocab, ")");
        auto [prev, fresh] = seen.emplace(it->second, id);
        if (!fresh) fail(path, ": meta.pkl ids ", prev->second, " and ", id, " map to the same character ", code_point_name(it->second));
        if (!code_points.empty() && it->second < code_points.back()) {
            fail(path, ": meta.pkl itos[", id, "] = ", code_point_name(it->second), " is below itos[", id - 1, "] = ",
                 code_point_name(code_points.back()), ": ember's char tokenizer needs ids in code-point order, as nanoGPT's "
                 "prepare.py makes them (sorted(set(text)))");
        }
        code_points.push_back(it->second);
    }
    // stoi, when present, must be the inverse of itos.
    if (const Value* stoi = root.get("stoi"); stoi != nullptr && stoi->kind == Kind::Dict) {
        for (const auto& [k, v] : stoi->entries) {
            uint32_t cp = 0;
            if (k->kind != Kind::Str || v->kind != Kind::Int || !decode_single_code_point(k->text, cp) ||
                v->integer < 0 || v->integer >= vocab || code_points[static_cast<size_t>(v->integer)] != cp) {
                fail(path, ": meta.pkl stoi disagrees with itos at '", printable(k->kind == Kind::Str ? k->text : "?"), "'");
            }
        }
    }
    return code_points;
}

}  // namespace ember::convert

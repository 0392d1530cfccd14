// A restricted unpickler for the pickles inside PyTorch checkpoints (torch.save, protocol 2)
// and nanoGPT's meta.pkl (protocol 4).
//
// It executes nothing. A GLOBAL is accepted only from a fixed allow-list of names a
// checkpoint needs (collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
// _rebuild_parameter, the torch.*Storage types, torch.device); any other global is refused
// by name. REDUCE / NEWOBJ "call" only those names, and only to build a plain value:
// OrderedDict() -> an empty dict, _rebuild_tensor_v2(...) -> a TensorRef value, ...
// BINPERSID understands torch's storage ids ('storage', type, key, location, numel) and
// yields a StorageRef; the storage bytes are not read here.
//
// Trust boundary: the pickle bytes are untrusted. Every length is checked against the bytes
// left, the stack, mark stack and memo are bounded, and a malformed pickle throws
// ember::Error ("<source>: malformed pickle at byte N: ..."), never crashes.
// Values live in an arena owned by the Pickle, so shared references (memo) and even cycles
// are safe to hold and destroy; code walking values must bound its own depth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ember::convert::pickle {

enum class Kind {
    None,
    Bool,
    Int,
    Float,
    Str,         // text (UTF-8 bytes as pickled, not validated here)
    Bytes,
    Tuple,
    List,
    Dict,        // dict or collections.OrderedDict; entries in insertion order
    Global,      // an allow-listed global, name "module.qualname" in `text`
    StorageRef,  // a torch storage named by a persistent id
    Tensor,      // the result of _rebuild_tensor_v2 / _rebuild_parameter
    Object,      // an allow-listed object with no contents we need (torch.device)
};

const char* kind_name(Kind k);

struct Value {
    Kind kind = Kind::None;
    bool boolean = false;             // Bool
    int64_t integer = 0;              // Int; StorageRef: numel
    double real = 0.0;                // Float
    std::string text;                 // Str, Bytes, Global name; StorageRef: storage type
    std::string key;                  // StorageRef: storage key ("0", "1", ...)
    std::vector<Value*> items;        // Tuple, List
    std::vector<std::pair<Value*, Value*>> entries;  // Dict; a later duplicate key wins
    // Tensor: the storage it views, element offset into it, shape and strides (elements).
    const Value* storage = nullptr;
    int64_t storage_offset = 0;
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;

    // Dict lookup by string key (the last entry with that key); nullptr when absent or
    // when this is not a Dict.
    const Value* get(const std::string& k) const;
};

// The result of unpickling: the root value and the arena that owns every value.
class Pickle {
public:
    const Value& root() const { return *root_; }

private:
    friend class Unpickler;
    std::vector<std::unique_ptr<Value>> arena_;
    Value* root_ = nullptr;
};

// Unpickles `size` bytes at `data`. `source` names the input in error messages (a file
// path, or "path (entry)"). With `consumed`, the pickle may be followed by other bytes (torch's
// legacy format holds several pickles and raw storages in a row): *consumed gets the bytes up to
// and including its STOP opcode. Throws ember::Error.
Pickle unpickle(const uint8_t* data, size_t size, const std::string& source, size_t* consumed = nullptr);

// True when "module.name" is one of the globals the unpickler accepts.
bool is_allowed_global(const std::string& module, const std::string& name);

// For a StorageRef's type ("FloatStorage", ...): the element size in bytes.
size_t storage_element_size(const std::string& storage_type);

}  // namespace ember::convert::pickle

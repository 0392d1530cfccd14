// The restricted unpickler: see unpickler.h for what it accepts and why.
#include "converter/unpickler.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "runtime/utf8.h"
#include "runtime/error.h"

namespace ember::convert::pickle {

namespace {

// Bounds on what one pickle may build. Real checkpoints stay far below them: the real nanoGPT
// ckpt.pt's data.pkl (28 weights and their AdamW state, 82 tensors) is 4,059 opcodes, about 50
// per tensor; nanoGPT's GPT-2 XL (580 weights, 1,740 tensors with AdamW) would be about 87,000.
// A value is 200 bytes (x86-64) plus its heap block, so kMaxValues bounds what a hostile
// pickle of a few MB makes the converter hold to about 250 MB.
constexpr size_t kMaxStack = size_t{1} << 20;
constexpr size_t kMaxMarks = size_t{1} << 16;
constexpr size_t kMaxMemo = size_t{1} << 20;
constexpr size_t kMaxValues = size_t{1} << 20;
constexpr size_t kMaxGlobalLine = 256;
constexpr size_t kMaxDims = 16;

struct StorageType {
    const char* name;
    size_t element_size;
};

// torch.<name> storage classes a checkpoint may name in its persistent ids.
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", 4},   {"HalfStorage", 2},         {"BFloat16Storage", 2},
    {"DoubleStorage", 8},  {"LongStorage", 8},         {"IntStorage", 4},
    {"ShortStorage", 2},   {"CharStorage", 1},         {"ByteStorage", 1},
    {"BoolStorage", 1},    {"ComplexFloatStorage", 8}, {"ComplexDoubleStorage", 16},
};

// Globals other than the storage types.
constexpr const char* kAllowedGlobals[] = {
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch.device",
};

bool is_storage_global(const std::string& full) {
    if (full.compare(0, 6, "torch.") != 0) return false;
    return storage_element_size(full.substr(6)) != 0;
}

}  // namespace

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::Str: return "str";
        case Kind::Bytes: return "bytes";
        case Kind::Tuple: return "tuple";
        case Kind::List: return "list";
        case Kind::Dict: return "dict";
        case Kind::Global: return "global";
        case Kind::StorageRef: return "storage";
        case Kind::Tensor: return "tensor";
        case Kind::Object: return "object";
    }
    return "?";
}

const Value* Value::get(const std::string& k) const {
    if (kind != Kind::Dict) return nullptr;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
        if (it->first->kind == Kind::Str && it->first->text == k) return it->second;
    }
    return nullptr;
}

bool is_allowed_global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    for (const char* g : kAllowedGlobals) {
        if (full == g) return true;
    }
    return module == "torch" && is_storage_global(full);
}

size_t storage_element_size(const std::string& storage_type) {
    for (const StorageType& t : kStorageTypes) {
        if (storage_type == t.name) return t.element_size;
    }
    return 0;
}

class Unpickler {
public:
    Unpickler(const uint8_t* data, size_t size, const std::string& source)
        : data_(data), size_(size), source_(source) {}

    Pickle run() {
        while (true) {
            if (pos_ >= size_) bad("it ends without a STOP opcode (truncated?)");
            op_pos_ = pos_;
            const uint8_t op = data_[pos_++];
            if (op == '.') break;  // STOP
            step(op);
        }
        if (stack_.empty()) bad("STOP with an empty stack");
        result_.root_ = stack_.back();
        return std::move(result_);
    }

    size_t position() const { return pos_; }

private:
    [[noreturn]] void bad(const std::string& what) const {
        fail(source_, ": malformed pickle at byte ", op_pos_, ": ", what);
    }

    // ---- reading the byte stream ----
    const uint8_t* take(size_t n) {
        if (n > size_ - pos_) bad("an argument runs past the end of the pickle");
        const uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }
    uint64_t read_le(size_t n) {
        const uint8_t* p = take(n);
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
        return v;
    }
    std::string read_line() {
        const size_t limit = std::min(size_ - pos_, kMaxGlobalLine);
        for (size_t i = 0; i < limit; ++i) {
            if (data_[pos_ + i] == '\n') {
                std::string s(reinterpret_cast<const char*>(data_ + pos_), i);
                pos_ += i + 1;
                return s;
            }
        }
        bad("a GLOBAL name without its newline");
    }
    std::string read_string(uint64_t n) {
        if (n > size_ - pos_) bad("a string of " + std::to_string(n) + " bytes runs past the end of the pickle");
        const uint8_t* p = take(static_cast<size_t>(n));
        return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }

    // ---- values and the stack ----
    Value* make(Kind k) {
        if (result_.arena_.size() >= kMaxValues) bad("more values than any checkpoint holds");
        result_.arena_.push_back(std::make_unique<Value>());
        Value* v = result_.arena_.back().get();
        v->kind = k;
        return v;
    }
    void push(Value* v) {
        if (stack_.size() >= kMaxStack) bad("the stack grows past its limit");
        stack_.push_back(v);
    }
    Value* pop() {
        if (stack_.size() <= stack_floor()) bad("pop from an empty stack");
        Value* v = stack_.back();
        stack_.pop_back();
        return v;
    }
    Value* top() {
        if (stack_.size() <= stack_floor()) bad("the stack is empty");
        return stack_.back();
    }
    size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
    // Pops everything above the newest MARK, and the MARK.
    std::vector<Value*> pop_mark() {
        if (marks_.empty()) bad("no MARK to pop to");
        const size_t m = marks_.back();
        marks_.pop_back();
        std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        return items;
    }
    void memo_put(uint64_t index) {
        if (memo_.size() >= kMaxMemo && memo_.find(index) == memo_.end()) bad("the memo grows past its limit");
        memo_[index] = top();
    }
    Value* memo_get(uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) bad("memo entry " + std::to_string(index) + " was never stored");
        return it->second;
    }

    void push_int(int64_t i) {
        Value* v = make(Kind::Int);
        v->integer = i;
        push(v);
    }
    void push_str(Kind k, uint64_t n) {
        Value* v = make(k);
        v->text = read_string(n);
        push(v);
    }
    void push_tuple(std::vector<Value*> items) {
        Value* v = make(Kind::Tuple);
        v->items = std::move(items);
        push(v);
    }
    void set_items(Value* dict, const std::vector<Value*>& kv) {
        if (dict->kind != Kind::Dict) bad(std::string("SETITEM on a ") + kind_name(dict->kind) + ", not a dict");
        if (kv.size() % 2 != 0) bad("SETITEMS with an odd number of items");
        for (size_t i = 0; i < kv.size(); i += 2) dict->entries.emplace_back(kv[i], kv[i + 1]);
    }
    void append_items(Value* list, const std::vector<Value*>& items) {
        if (list->kind != Kind::List) bad(std::string("APPEND to a ") + kind_name(list->kind) + ", not a list");
        list->items.insert(list->items.end(), items.begin(), items.end());
    }

    void push_global(const std::string& module, const std::string& name) {
        if (!is_allowed_global(module, name)) {
            fail(source_, ": pickle refers to global '", printable(module), ".", printable(name),
                 "', which a checkpoint never needs",
                 module == "__main__" || module.rfind("__main__.", 0) == 0 || module.rfind("torch.nn", 0) == 0
                     ? " (a whole model was saved with torch.save(model): load it in Python, where its class is defined, and save "
                       "its weights with torch.save(model.state_dict(), PATH))"
                     : "");
        }
        Value* v = make(Kind::Global);
        v->text = module + "." + name;
        push(v);
    }

    // The persistent id of a torch storage: ('storage', torch.XStorage, key, location, numel),
    // or in torch's legacy format the same with a sixth entry, view_metadata, which must be None
    // (storage views are not supported).
    Value* persistent_load(const Value* pid) {
        if (pid->kind != Kind::Tuple || (pid->items.size() != 5 && pid->items.size() != 6)) {
            bad(std::string("a persistent id that is not ('storage', type, key, location, numel) (a 5-tuple, or 6 with the legacy "
                            "format's view_metadata) but a ") +
                kind_name(pid->kind) + (pid->kind == Kind::Tuple ? " of " + std::to_string(pid->items.size()) : std::string()));
        }
        const auto& it = pid->items;
        if (it.size() == 6 && it[5]->kind != Kind::None) bad("a legacy storage view (view_metadata), which is not supported");
        if (it[0]->kind != Kind::Str || it[0]->text != "storage") bad("a persistent id that is not ('storage', ...)");
        if (it[1]->kind != Kind::Global || !is_storage_global(it[1]->text)) bad("a persistent id without a storage type");
        if (it[2]->kind != Kind::Str || it[2]->text.empty() || it[2]->text.size() > 64) bad("a storage key that is not a short string");
        for (char c : it[2]->text) {
            const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
            if (!ok) bad("storage key '" + printable(it[2]->text) + "' has characters other than letters, digits and '_'");
        }
        if (it[3]->kind != Kind::Str) bad("a storage location that is not a string");
        if (it[4]->kind != Kind::Int || it[4]->integer < 0) bad("a storage size that is not a non-negative int");
        Value* s = make(Kind::StorageRef);
        s->text = it[1]->text.substr(6);  // drop "torch."
        s->key = it[2]->text;
        s->integer = it[4]->integer;
        return s;
    }

    std::vector<int64_t> int_tuple(const Value* v, const char* what) {
        if (v->kind != Kind::Tuple) bad(std::string("tensor ") + what + " is not a tuple");
        if (v->items.size() > kMaxDims) bad(std::string("tensor ") + what + " has too many dimensions");
        std::vector<int64_t> out;
        for (const Value* x : v->items) {
            if (x->kind != Kind::Int || x->integer < 0) bad(std::string("tensor ") + what + " holds a value that is not a non-negative int");
            out.push_back(x->integer);
        }
        return out;
    }

    // REDUCE / NEWOBJ: "calls" an allow-listed global, building a plain value.
    Value* call(const Value* fn, const Value* args) {
        if (fn->kind != Kind::Global) bad(std::string("REDUCE calls a ") + kind_name(fn->kind) + ", not a global");
        if (args->kind != Kind::Tuple) bad("REDUCE arguments are not a tuple");
        const std::string& f = fn->text;
        const auto& a = args->items;
        if (f == "collections.OrderedDict") {
            if (!a.empty()) bad("OrderedDict called with arguments");
            return make(Kind::Dict);
        }
        if (f == "torch._utils._rebuild_tensor_v2") {
            // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
            if (a.size() != 6 && a.size() != 7) bad("_rebuild_tensor_v2 takes 6 or 7 arguments");
            if (a[0]->kind != Kind::StorageRef) bad("_rebuild_tensor_v2 without a storage");
            if (a[1]->kind != Kind::Int || a[1]->integer < 0) bad("_rebuild_tensor_v2 with a bad storage offset");
            Value* t = make(Kind::Tensor);
            t->storage = a[0];
            t->storage_offset = a[1]->integer;
            t->shape = int_tuple(a[2], "size");
            t->stride = int_tuple(a[3], "stride");
            if (t->shape.size() != t->stride.size()) bad("tensor size and stride differ in length");
            return t;
        }
        if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
            // (data, requires_grad, backward_hooks[, state]): the parameter is its tensor.
            if (a.size() < 3 || a.size() > 4 || a[0]->kind != Kind::Tensor) bad(f + " without a tensor");
            return a[0];
        }
        if (f == "torch.device") {
            Value* d = make(Kind::Object);
            d->text = "torch.device";
            return d;
        }
        bad("global '" + f + "' cannot be called");
    }

    void step(uint8_t op) {
        switch (op) {
            case 0x80: {  // PROTO
                const uint64_t v = read_le(1);
                if (v > 5) bad("unknown pickle protocol " + std::to_string(v));
                break;
            }
            case 0x95: {  // FRAME: a length hint; the bytes follow inline
                const uint64_t n = read_le(8);
                if (n > size_ - pos_) bad("a FRAME runs past the end of the pickle");
                break;
            }
            case '(':  // MARK
                if (marks_.size() >= kMaxMarks) bad("too many nested MARKs");
                marks_.push_back(stack_.size());
                break;
            case '0': pop(); break;        // POP
            case '1': pop_mark(); break;   // POP_MARK
            case '}': push(make(Kind::Dict)); break;
            case ']': push(make(Kind::List)); break;
            case ')': push(make(Kind::Tuple)); break;
            case 't': push_tuple(pop_mark()); break;
            case 0x85: {  // TUPLE1
                Value* a = pop();
                push_tuple({a});
                break;
            }
            case 0x86: {  // TUPLE2
                Value* b = pop();
                Value* a = pop();
                push_tuple({a, b});
                break;
            }
            case 0x87: {  // TUPLE3
                Value* c = pop();
                Value* b = pop();
                Value* a = pop();
                push_tuple({a, b, c});
                break;
            }
            case 'd': {  // DICT
                std::vector<Value*> kv = pop_mark();
                Value* d = make(Kind::Dict);
                set_items(d, kv);
                push(d);
                break;
            }
            case 'l': {  // LIST
                Value* l = make(Kind::List);
                l->items = pop_mark();
                push(l);
                break;
            }
            case 'a': {  // APPEND
                Value* x = pop();
                append_items(top(), {x});
                break;
            }
            case 'e': {  // APPENDS
                std::vector<Value*> items = pop_mark();
                append_items(top(), items);
                break;
            }
            case 's': {  // SETITEM
                Value* v = pop();
                Value* k = pop();
                set_items(top(), {k, v});
                break;
            }
            case 'u': {  // SETITEMS
                std::vector<Value*> kv = pop_mark();
                set_items(top(), kv);
                break;
            }
            case 'J': push_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4)))); break;  // BININT
            case 'K': push_int(static_cast<int64_t>(read_le(1))); break;                         // BININT1
            case 'M': push_int(static_cast<int64_t>(read_le(2))); break;                         // BININT2
            case 0x8a: {  // LONG1: n-byte little-endian two's complement
                const size_t n = static_cast<size_t>(read_le(1));
                if (n > 8) bad("an integer wider than 64 bits");
                uint64_t u = n == 0 ? 0 : read_le(n);
                if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);
                push_int(static_cast<int64_t>(u));
                break;
            }
            case 'G': {  // BINFLOAT: big-endian IEEE double
                const uint8_t* p = take(8);
                uint64_t u = 0;
                for (int i = 0; i < 8; ++i) u = (u << 8) | p[i];
                double d;
                std::memcpy(&d, &u, sizeof d);
                Value* v = make(Kind::Float);
                v->real = d;
                push(v);
                break;
            }
            case 'N': push(make(Kind::None)); break;
            case 0x88:
            case 0x89: {  // NEWTRUE / NEWFALSE
                Value* v = make(Kind::Bool);
                v->boolean = op == 0x88;
                push(v);
                break;
            }
            case 'X': push_str(Kind::Str, read_le(4)); break;     // BINUNICODE
            case 0x8c: push_str(Kind::Str, read_le(1)); break;    // SHORT_BINUNICODE
            case 0x8d: push_str(Kind::Str, read_le(8)); break;    // BINUNICODE8
            case 'B': push_str(Kind::Bytes, read_le(4)); break;   // BINBYTES
            case 'C': push_str(Kind::Bytes, read_le(1)); break;   // SHORT_BINBYTES
            case 0x8e: push_str(Kind::Bytes, read_le(8)); break;  // BINBYTES8
            case 'q': memo_put(read_le(1)); break;                // BINPUT
            case 'r': memo_put(read_le(4)); break;                // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); break;             // MEMOIZE
            case 'h': push(memo_get(read_le(1))); break;          // BINGET
            case 'j': push(memo_get(read_le(4))); break;          // LONG_BINGET
            case 'c': {  // GLOBAL "module\nname\n"
                const std::string module = read_line();
                const std::string name = read_line();
                push_global(module, name);
                break;
            }
            case 0x93: {  // STACK_GLOBAL
                Value* name = pop();
                Value* module = pop();
                if (name->kind != Kind::Str || module->kind != Kind::Str) bad("STACK_GLOBAL without two strings");
                push_global(module->text, name->text);
                break;
            }
            case 'R':      // REDUCE
            case 0x81: {   // NEWOBJ
                Value* args = pop();
                Value* fn = pop();
                push(call(fn, args));
                break;
            }
            case 'b': {  // BUILD: set an object's state; nothing we keep needs it
                Value* state = pop();
                Value* obj = top();
                (void)state;
                if (obj->kind != Kind::Dict && obj->kind != Kind::Tensor && obj->kind != Kind::Object) {
                    bad(std::string("BUILD on a ") + kind_name(obj->kind));
                }
                break;
            }
            case 'Q': {  // BINPERSID
                Value* pid = pop();
                push(persistent_load(pid));
                break;
            }
            default: {
                static const char* hex = "0123456789abcdef";
                bad(std::string("unsupported opcode 0x") + hex[op >> 4] + hex[op & 15]);
            }
        }
    }

    const uint8_t* data_;
    size_t size_;
    const std::string& source_;
    size_t pos_ = 0;
    size_t op_pos_ = 0;
    std::vector<Value*> stack_;
    std::vector<size_t> marks_;  // stack heights at each MARK
    std::unordered_map<uint64_t, Value*> memo_;
    Pickle result_;
};

Pickle unpickle(const uint8_t* data, size_t size, const std::string& source, size_t* consumed) {
    Unpickler u(data, size, source);
    Pickle p = u.run();
    if (consumed) *consumed = u.position();
    return p;
}

}  // namespace ember::convert::pickle

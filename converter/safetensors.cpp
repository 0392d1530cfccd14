#include "converter/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "converter/alloc.h"
#include "converter/source_values.h"
#include "runtime/utf8.h"
#include "runtime/error.h"

namespace ember::convert {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // the format's own limit
constexpr size_t kMaxDims = 16;

uint64_t read_le64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
    return v;
}

uint64_t json_uint(const std::string& path, const std::string& name, const nlohmann::json& v, const char* what) {
    if (!v.is_number_unsigned()) {
        fail(path, ": safetensors tensor '", printable(name), "': ", what, " is not a non-negative integer");
    }
    return v.get<uint64_t>();
}

// One tensor's numel values, stored as `dtype` at byte `at` of the file, as f32. An f32
// tensor's bytes are read into the values' own memory and decoded in place.
std::vector<float> read_tensor(const std::string& path, const std::string& name, SourceDType dtype, uint64_t at, uint64_t numel) {
    const std::string where = "safetensors tensor '" + printable(name) + "'";
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, ": cannot open to read ", where, " (", std::strerror(errno), ")");
    const size_t elem = source_dtype_size(dtype);
    std::vector<float> values;
    resize_or_fail(values, static_cast<size_t>(numel), path + ": tensor '" + printable(name) + "' as f32");
    std::vector<uint8_t> bytes;  // f16 / bf16: the stored bytes
    uint8_t* dst = reinterpret_cast<uint8_t*>(values.data());
    if (dtype != SourceDType::F32) {
        resize_or_fail(bytes, static_cast<size_t>(numel * elem), path + ": tensor '" + printable(name) + "' as stored");
        dst = bytes.data();
    }
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(numel * elem))) fail(path, ": read failed at ", where);
    for (uint64_t i = 0; i < numel; ++i) values[i] = decode_source_value(dtype, dst + i * elem);  // f32: element i in place
    return values;
}

// The 8-byte length and the JSON header after it, checked: the length against the file, the
// JSON for a key given twice (nlohmann keeps the last silently; the format has one entry per
// name, and one dtype, shape and data_offsets per entry).
struct SafetensorsHeader {
    nlohmann::json json;
    uint64_t data_start = 0;  // file offset of the data (8 + the header's length)
    uint64_t data_size = 0;   // bytes from there to the end of the file
};
SafetensorsHeader read_header(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
    const std::streamoff file_size_signed = in.tellg();
    if (file_size_signed < 0) fail(path, ": cannot read its size");
    const uint64_t file_size = static_cast<uint64_t>(file_size_signed);
    if (file_size < 8) fail(path, ": safetensors file shorter than its 8-byte header length");
    uint8_t len_bytes[8];
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(len_bytes), 8)) fail(path, ": read failed");
    const uint64_t header_len = read_le64(len_bytes);
    if (header_len > kMaxHeaderBytes) fail(path, ": safetensors header length ", header_len, " is implausible");
    if (header_len > file_size - 8) {
        fail(path, ": safetensors header of ", header_len, " bytes runs past the end of the file (",
             file_size, " bytes; truncated?)");
    }
    std::string header_text(static_cast<size_t>(header_len), '\0');
    if (!in.read(header_text.data(), static_cast<std::streamsize>(header_len))) fail(path, ": read failed");
    SafetensorsHeader h;
    h.data_start = 8 + header_len;
    h.data_size = file_size - h.data_start;
    nlohmann::json& header = h.json;
    std::set<std::string> names, fields;
    std::string entry, twice, twice_in;
    try {
        header = nlohmann::json::parse(header_text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            if (event != nlohmann::json::parse_event_t::key || !parsed.is_string() || !twice.empty()) return true;
            const std::string key = parsed.get<std::string>();
            if (depth == 1) {
                entry = key;
                fields.clear();
                if (!names.insert(key).second) twice = key;
            } else if (depth == 2 && !fields.insert(key).second) {
                twice = key;
                twice_in = entry;
            }
            return true;
        });
    } catch (const nlohmann::json::exception& e) {
        fail(path, ": safetensors header is not valid JSON (", e.what(), ")");
    }
    if (!header.is_object()) fail(path, ": safetensors header is not a JSON object");
    if (!twice.empty() && twice_in.empty()) {
        fail(path, ": safetensors header has the entry '", printable(twice), "' twice");
    }
    if (!twice.empty()) fail(path, ": safetensors entry '", printable(twice_in), "' has the key '", printable(twice), "' twice");
    return h;
}

// A tensor's [begin, end) in the data.
struct Span {
    uint64_t begin, end;
    std::string name;
};

// The format's rule (huggingface/safetensors): the tensors' bytes follow one another from
// offset 0 to the end of the file, no overlap, no hole, nothing after. Two tensors on the
// same bytes, or bytes no tensor owns, mean a file that was not written as it claims.
void check_spans_tile(const std::string& path, std::vector<Span> spans, uint64_t data_size) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t at = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
        if (spans[i].begin < at) {
            fail(path, ": safetensors tensors '", printable(spans[i - 1].name), "' and '", printable(spans[i].name),
                 "' share data bytes (data_offsets overlap at ", spans[i].begin, ")");
        }
        if (spans[i].begin > at) {
            fail(path, ": safetensors data bytes ", at, " to ", spans[i].begin, " belong to no tensor (a hole before '",
                 printable(spans[i].name), "')");
        }
        at = spans[i].end;
    }
    if (at != data_size) {
        fail(path, ": safetensors data holds ", data_size - at, data_size - at == 1 ? " byte" : " bytes", " after the last tensor (", data_size,
             " data bytes, tensors end at ", at, ")");
    }
}

}  // namespace

bool looks_like_safetensors(const uint8_t* head, size_t head_size) {
    if (head_size < 9) return false;
    const uint64_t n = read_le64(head);
    return n >= 2 && n <= kMaxHeaderBytes && head[8] == '{';
}

// Reads the header, then each tensor's bytes on their own (one tensor's bytes held at a time, not
// the whole file: a 6 GB checkpoint would otherwise sit in memory beside its f32 copies), now
// or, lazy, when the converter asks for them.
Checkpoint read_safetensors(const std::string& path, bool lazy) {
    const SafetensorsHeader h = read_header(path);
    const nlohmann::json& header = h.json;
    const uint64_t data_start = h.data_start, data_size = h.data_size;
    std::vector<Span> spans;  // every tensor's, checked at the end to tile the data exactly

    Checkpoint ckpt;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") continue;
        const std::string where = "safetensors tensor '" + printable(name) + "'";
        if (!info.is_object()) fail(path, ": ", where, " is not a JSON object");
        const auto dtype_it = info.find("dtype");
        const auto shape_it = info.find("shape");
        const auto offsets_it = info.find("data_offsets");
        if (dtype_it == info.end() || !dtype_it->is_string()) fail(path, ": ", where, " has no dtype string");
        if (shape_it == info.end() || !shape_it->is_array()) fail(path, ": ", where, " has no shape array");
        if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
            fail(path, ": ", where, " has no data_offsets [begin, end]");
        }
        const uint64_t begin = json_uint(path, name, (*offsets_it)[0], "data_offsets[0]");
        const uint64_t end = json_uint(path, name, (*offsets_it)[1], "data_offsets[1]");
        if (begin > end || end > data_size) {
            fail(path, ": ", where, " data_offsets [", begin, ", ", end, "] lie outside the ", data_size,
                 " data bytes (truncated file?)");
        }
        spans.push_back({begin, end, name});
        const std::string dtype = dtype_it->get<std::string>();
        if ((dtype == "BOOL" || dtype == "U8") && is_attention_mask_key(name)) {
            ckpt.skipped.push_back(name);  // a GPT-2 attention mask buffer: no weights
            continue;
        }
        SourceTensor t;
        if (dtype == "F32") t.dtype = SourceDType::F32;
        else if (dtype == "F16") t.dtype = SourceDType::F16;
        else if (dtype == "BF16") t.dtype = SourceDType::BF16;
        else fail(path, ": ", where, " has dtype ", printable(dtype), "; only F32, F16 and BF16 are supported");

        if (shape_it->size() > kMaxDims) fail(path, ": ", where, " has too many dimensions");
        uint64_t numel = 1;
        for (const auto& d : *shape_it) {
            const uint64_t dim = json_uint(path, name, d, "a shape entry");
            // Kept as int64_t; beside a 0 the element count below cannot catch it.
            if (dim > static_cast<uint64_t>(INT64_MAX)) fail(path, ": ", where, " has a dimension of ", dim, ", past int64");
            if (dim != 0 && numel > data_size / dim) {
                fail(path, ": ", where, " has more elements than the file has bytes");
            }
            numel *= dim;
            t.shape.push_back(static_cast<int64_t>(dim));
        }
        const size_t elem = source_dtype_size(t.dtype);
        if (end - begin != numel * elem) {
            fail(path, ": ", where, " data_offsets span ", end - begin, " bytes, but shape and dtype need ",
                 numel * elem);
        }
        if (lazy) {
            t.read = [path, name = std::string(name), dtype = t.dtype, at = data_start + begin, numel] { return read_tensor(path, name, dtype, at, numel); };
        } else {
            t.values = read_tensor(path, name, t.dtype, data_start + begin, numel);
        }
        ckpt.tensors.emplace(name, std::move(t));
    }
    if (ckpt.tensors.empty()) fail(path, ": safetensors file holds no tensors");
    check_spans_tile(path, std::move(spans), data_size);
    return ckpt;
}

}  // namespace ember::convert

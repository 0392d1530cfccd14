#include "converter/writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "ember_generated.h"
#include "runtime/file_dtype.h"
#include "kernels/cpu/half.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/model.h"
#include "runtime/paths.h"
#include "runtime/utf8.h"

namespace ember::convert {

WeightDType parse_dtype(const std::string& s) {
    if (s == "f32") return WeightDType::F32;
    if (s == "f16") return WeightDType::F16;
    if (s == "int8") return WeightDType::I8;
    fail("--dtype '", s, "' is unknown (f32, f16 or int8)");
}

namespace {

constexpr const char* kConverter = "ember-convert 0.1.0";

struct Placed {
    fb::DType dtype = fb::DType::F32;
    uint32_t group_size = 0;
    uint64_t data_offset = 0, data_size = 0, scales_offset = 0, scales_size = 0;
};

uint64_t aligned(uint64_t n) { return (n + kDataAlignment - 1) / kDataAlignment * kDataAlignment; }

uint64_t numel(const CanonicalTensor& t) {
    uint64_t n = 1;
    for (const int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    return n;
}

// Each tensor's dtype, group and place in the data section, in order, each 64-byte aligned;
// *data_size: the section's size (its end aligned). int8 groups as quantize_int8 clamps them.
std::vector<Placed> place(const CanonicalModel& m, const WriteOptions& opts, uint64_t* data_size) {
    std::vector<Placed> placed;
    uint64_t end = 0;
    for (const auto& t : m.tensors) {
        Placed p;
        const uint64_t n = numel(t);
        const WeightDType dt = t.shape.size() == 2 ? opts.dtype : WeightDType::F32;
        p.dtype = file_dtype(dt);
        if (dt == WeightDType::F32) {
            p.data_size = n * 4;
        } else if (dt == WeightDType::F16) {
            p.data_size = n * 2;
        } else {
            const int64_t rows = t.shape[0], cols = t.shape[1];
            const int64_t g = (opts.group_size == 0 || opts.group_size > cols) ? cols : opts.group_size;
            p.group_size = static_cast<uint32_t>(g);
            p.data_size = n;
            p.scales_size = g > 0 && rows > 0 ? static_cast<uint64_t>(rows) * static_cast<uint64_t>((cols + g - 1) / g) * 4 : 0;
        }
        p.data_offset = aligned(end);
        end = p.data_offset + p.data_size;
        if (p.dtype == fb::DType::I8) {
            p.scales_offset = aligned(end);
            end = p.scales_offset + p.scales_size;
        }
        placed.push_back(p);
    }
    *data_size = aligned(end);
    return placed;
}

// One tensor, stored as p says through put(offset, bytes, n); its report.
template <class Put>
TensorReport convert_tensor(const CanonicalTensor& t, const std::vector<float>& values, const WriteOptions& opts, const Placed& p, Put& put) {
    TensorReport r;
    r.name = t.name;
    r.shape = t.shape;
    r.source_dtype = source_dtype_name(t.source_dtype);
    const size_t n = values.size();
    if (n != numel(t)) fail("internal: tensor '", t.name, "' has ", n, " values for shape of ", numel(t));
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(values[i])) fail("tensor '", t.name, "' (", t.source, ") element ", i, " is ", values[i], ": weights must be finite");
    }
    // The error of the stored values against these, restored to f32 a piece at a time.
    QuantErrorSum err;
    std::vector<float> restored;
    auto restore = [&](auto&& value_at) {
        restored.resize(std::min<size_t>(n, size_t{1} << 16));
        for (size_t at = 0; at < n; at += restored.size()) {
            const size_t m = std::min(restored.size(), n - at);
            for (size_t i = 0; i < m; ++i) restored[i] = value_at(at + i);
            err.add(values.data() + at, restored.data(), m);
        }
    };
    if (p.dtype == fb::DType::F32) {
        put(p.data_offset, values.data(), p.data_size);
        err.add(values.data(), values.data(), n);  // exact
    } else if (p.dtype == fb::DType::F16) {
        for (size_t i = 0; i < n; ++i) {
            if (std::fabs(values[i]) > 65504.0f) {
                fail("tensor '", t.name, "' element ", i, " is ", values[i], ", past f16's largest value 65504: convert with --dtype f32 or int8");
            }
        }
        const auto h = to_f16(values.data(), n);
        put(p.data_offset, h.data(), p.data_size);
        restore([&](size_t i) { return kernels::half_to_float(h[i]); });
    } else {
        const int rows = static_cast<int>(t.shape[0]), cols = static_cast<int>(t.shape[1]);
        Int8Weights q;
        try {
            q = quantize_int8(values.data(), rows, cols, opts.group_size);
        } catch (const Error& e) {
            fail("tensor '", t.name, "': ", e.what());
        }
        if (static_cast<uint32_t>(q.group_size) != p.group_size || q.scales.size() * 4 != p.scales_size) {
            fail("internal: tensor '", t.name, "' quantized in groups of ", q.group_size, ", placed for ", p.group_size);
        }
        put(p.data_offset, q.q.data(), n);
        put(p.scales_offset, q.scales.data(), p.scales_size);
        const size_t gpr = static_cast<size_t>((cols + q.group_size - 1) / q.group_size);
        restore([&](size_t i) {
            const size_t r0 = i / cols, c0 = i % cols;
            return q.q[i] * q.scales[r0 * gpr + c0 / q.group_size];
        });
    }
    r.dtype = wtype_of(p.dtype);
    r.group_size = static_cast<int>(p.group_size);
    r.bytes = p.data_size + p.scales_size;
    r.error = err.result();
    return r;
}

flatbuffers::DetachedBuffer build_index(const CanonicalModel& m, const TokenizerSpec& ts, const ProvenanceInfo& prov,
                                        const std::vector<Placed>& placed, uint64_t data_offset, uint64_t data_size,
                                        uint64_t data_hash) {
    flatbuffers::FlatBufferBuilder b(1 << 16);
    b.ForceDefaults(true);  // every scalar stored: the index size does not depend on values
    const ModelConfig& c = m.config;
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const auto& t = m.tensors[i];
        std::vector<uint32_t> shape(t.shape.begin(), t.shape.end());
        tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name), b.CreateVector(shape), placed[i].dtype, placed[i].group_size,
                                           placed[i].data_offset, placed[i].data_size, placed[i].scales_offset,
                                           placed[i].scales_size));
    }
    const auto tv = b.CreateVector(tensors);
    const bool bpe = ts.bpe.size() > 0;
    flatbuffers::Offset<fb::Tokenizer> tok;
    if (bpe) {
        std::vector<fb::BpeMerge> merges;
        merges.reserve(ts.bpe.merges.size());
        for (const BpeMerge& x : ts.bpe.merges) merges.emplace_back(x.left, x.right, x.result);
        const auto offsets = b.CreateVector(ts.bpe.offsets);
        const auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(ts.bpe.bytes.data()), ts.bpe.bytes.size());
        const auto mv = b.CreateVectorOfStructs(merges);
        tok = fb::CreateTokenizer(b, fb::TokenizerKind::ByteBpe, 0, offsets, bytes, mv);
    } else {
        tok = fb::CreateTokenizer(b, fb::TokenizerKind::Char, b.CreateVector(ts.code_points));
    }
    const uint32_t n_tok = bpe ? static_cast<uint32_t>(ts.bpe.size()) : static_cast<uint32_t>(ts.code_points.size());
    const bool v2 = bpe || c.arch == Arch::HfGpt2;
    const auto pv = fb::CreateProvenance(b, b.CreateString(prov.source_file), b.CreateString(prov.source_sha256),
                                         b.CreateString(prov.vocab_source), b.CreateString(kConverter));
    const auto cfg = fb::CreateConfig(b, file_arch(c.arch), c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, c.ffn_hidden,
                                      file_activation(c.activation),
                                      c.ln_eps, c.attn_scale, c.tied_lm_head, v2 ? n_tok : 0);
    const auto root = fb::CreateModel(b, v2 ? kFormatVersion : kFormatVersionChar, cfg, tok, pv, tv, data_offset, data_size, data_hash);
    fb::FinishSizePrefixedModelBuffer(b, root);
    return b.Release();
}

void write_all(int fd, const void* p, size_t n, const std::string& path) {
    if (!write_fully(fd, p, n)) fail(path, ": write failed: ", std::strerror(errno));
}

}  // namespace

WriteReport write_ember(const CanonicalModel& model, const std::vector<uint32_t>& code_points, const ProvenanceInfo& provenance,
                        const WriteOptions& opts, const std::string& out_path) {
    TokenizerSpec ts;
    ts.code_points = code_points;
    return write_ember(model, ts, provenance, opts, out_path);
}

WriteReport write_ember(const CanonicalModel& model, const TokenizerSpec& tokenizer, const ProvenanceInfo& provenance,
                        const WriteOptions& opts, const std::string& out_path) {
    if (tokenizer.bpe.size() > 0) {
        verify_bpe(tokenizer.bpe, "tokenizer");
        if (tokenizer.bpe.size() > model.config.vocab_size) {
            fail("the tokenizer has ", tokenizer.bpe.size(), " tokens but the model's wte has only ", model.config.vocab_size, " rows");
        }
    } else if (static_cast<int>(tokenizer.code_points.size()) != model.config.vocab_size) {
        fail("vocabulary has ", tokenizer.code_points.size(), " characters but the model's vocab_size is ", model.config.vocab_size);
    }
    if (opts.group_size < 0) fail("--group-size ", opts.group_size, " must be >= 0 (0 = a whole row)");

    // Where every tensor goes, from the shapes alone, then the index's size (it does not depend
    // on data_offset or the hash: ForceDefaults) and so the data section's offset.
    uint64_t data_size = 0;
    const std::vector<Placed> placed = place(model, opts, &data_size);
    auto probe = build_index(model, tokenizer, provenance, placed, 0, data_size, 0);
    const uint64_t data_offset = (probe.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment;

    const std::string target = output_target(out_path);  // through a link, into its file
    const std::string tmp = target + ".tmp-" + std::to_string(::getpid());
    if (opts.on_temp_file) opts.on_temp_file(tmp.c_str());
    // Whichever way this ends, the hook forgets the path (after the rename or the unlink).
    struct Forget {
        void (*hook)(const char*);
        ~Forget() {
            if (hook) hook(nullptr);
        }
    } forget{opts.on_temp_file};
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(printable(out_path, 200), ": cannot create its temporary file ", printable(tmp, 200), ": ", std::strerror(errno));
    WriteReport report;
    try {
        // The data section, one tensor at a time: read (a lazy tensor from its checkpoint),
        // checked, converted, written at its offset and hashed, then released.
        if (::lseek(fd, static_cast<off_t>(data_offset), SEEK_SET) < 0) fail(tmp, ": seek failed: ", std::strerror(errno));
        std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> hash(XXH64_createState(), XXH64_freeState);
        if (!hash) throw std::bad_alloc();
        XXH64_reset(hash.get(), 0);
        uint64_t pos = 0;  // bytes of the data section written
        const uint8_t zeros[kDataAlignment] = {};
        auto put = [&](uint64_t at, const void* p, size_t n) {  // at: pos rounded up to kDataAlignment
            write_all(fd, zeros, static_cast<size_t>(at - pos), tmp);
            XXH64_update(hash.get(), zeros, static_cast<size_t>(at - pos));
            write_all(fd, p, n, tmp);
            XXH64_update(hash.get(), p, n);
            pos = at + n;
        };
        for (size_t k = 0; k < model.tensors.size(); ++k) {
            const CanonicalTensor& t = model.tensors[k];
            try {
                std::vector<float> read;
                if (t.read) read = t.read();
                const std::vector<float>& values = t.read ? read : t.values;
                report.tensors.push_back(convert_tensor(t, values, opts, placed[k], put));
            } catch (const std::bad_alloc&) {
                // one tensor is held at a time: its f32 values and its stored form
                const uint64_t f32 = numel(t) * sizeof(float), stored = placed[k].data_size + placed[k].scales_size;
                fail("out of memory at tensor '", t.name, "' (", numel(t), " values): holding it as f32 (", memory_size_text(f32), ") and as ",
                     kernels::wtype_name(wtype_of(placed[k].dtype)), " (", memory_size_text(stored), ") needs about ", memory_size_text(f32 + stored),
                     " (std::bad_alloc)");
            }
        }
        put(data_size, nullptr, 0);  // the section's end, padded
        // The index, now that the hash is known, and the zeros up to the data.
        const auto index = build_index(model, tokenizer, provenance, placed, data_offset, data_size, XXH64_digest(hash.get()));
        if (index.size() != probe.size()) fail("internal: the model index changed size between builds");
        std::vector<uint8_t> head(data_offset, 0);
        std::memcpy(head.data(), index.data(), index.size());
        if (::lseek(fd, 0, SEEK_SET) < 0) fail(tmp, ": seek failed: ", std::strerror(errno));
        write_all(fd, head.data(), head.size(), tmp);
        if (::fsync(fd) != 0) fail(tmp, ": fsync failed: ", std::strerror(errno));
        const int closed = ::close(fd);
        fd = -1;
        if (closed != 0) fail(tmp, ": close failed: ", std::strerror(errno));
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (opts.verify) {
        try {
            LoadOptions lo;
            lo.drop_checked_pages = true;  // the check does not keep the file resident
            Model::open(tmp, lo);
        } catch (const Error& e) {
            ::unlink(tmp.c_str());
            // The loader names the file it opened, the temporary one: the reason alone here.
            std::string reason = e.what();
            if (reason.compare(0, tmp.size() + 2, tmp + ": ") == 0) reason.erase(0, tmp.size() + 2);
            fail("the converted model fails the loader's checks, nothing written to ", out_path, ": ", reason);
        } catch (...) {  // std::bad_alloc: the temporary goes too
            ::unlink(tmp.c_str());
            throw;
        }
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(out_path, ": cannot rename the finished file into place: ", std::strerror(err));
    }
    report.file_bytes = data_offset + data_size;
    return report;
}

}  // namespace ember::convert

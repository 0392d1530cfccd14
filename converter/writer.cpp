#include "converter/writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ember_generated.h"
#include "kernels/cpu/half.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/model.h"

namespace ember::convert {

WeightDType parse_dtype(const std::string& s) {
    if (s == "f32") return WeightDType::F32;
    if (s == "f16") return WeightDType::F16;
    if (s == "int8") return WeightDType::Int8;
    fail("--dtype '", s, "' is unknown (f32, f16 or int8)");
}

const char* dtype_name(WeightDType d) { return d == WeightDType::F32 ? "f32" : d == WeightDType::F16 ? "f16" : "int8"; }

namespace {

constexpr const char* kConverter = "ember-convert 0.1.0";

struct Placed {
    fb::DType dtype = fb::DType::F32;
    uint32_t group_size = 0;
    uint64_t data_offset = 0, data_size = 0, scales_offset = 0, scales_size = 0;
};

uint64_t append_aligned(std::vector<uint8_t>& data, const void* p, size_t n) {
    const size_t at = (data.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
    data.resize(at + n);
    if (n) std::memcpy(data.data() + at, p, n);
    return at;
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
    fb::Activation act = c.activation == kernels::ActivationKind::ReLU      ? fb::Activation::ReLU
                         : c.activation == kernels::ActivationKind::GeluErf ? fb::Activation::GeluErf
                                                                             : fb::Activation::GeluTanh;
    const fb::Arch arch = c.arch == Arch::GptPy ? fb::Arch::GptPy : c.arch == Arch::NanoGPT ? fb::Arch::NanoGPT : fb::Arch::HfGpt2;
    const auto cfg = fb::CreateConfig(b, arch, c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, c.ffn_hidden, act,
                                      c.ln_eps, c.attn_scale, c.tied_lm_head, v2 ? n_tok : 0);
    const auto root = fb::CreateModel(b, v2 ? kFormatVersion : kFormatVersionChar, cfg, tok, pv, tv, data_offset, data_size, data_hash);
    fb::FinishSizePrefixedModelBuffer(b, root);
    return b.Release();
}

void write_all(int fd, const void* p, size_t n, const std::string& path) {
    const uint8_t* s = static_cast<const uint8_t*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail(path, ": write failed: ", std::strerror(errno));
        }
        s += w;
        n -= static_cast<size_t>(w);
    }
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
    WriteReport report;
    uint64_t source_bytes = 0;  // the model's tensors as f32, held while the output is built
    for (const auto& t : model.tensors) source_bytes += t.values.size() * sizeof(float);
    std::vector<uint8_t> data;
    std::vector<Placed> placed;
    std::vector<float> restored;
    for (const auto& t : model.tensors) {
        try {
            Placed p;
            TensorReport r;
            r.name = t.name;
            r.shape = t.shape;
            r.source_dtype = source_dtype_name(t.source_dtype);
            const size_t n = t.values.size();
            for (size_t i = 0; i < n; ++i) {
                if (!std::isfinite(t.values[i])) fail("tensor '", t.name, "' (", t.source, ") element ", i, " is ", t.values[i], ": weights must be finite");
            }
            restored.resize(n);
            const bool matrix = t.shape.size() == 2;
            const WeightDType dt = matrix ? opts.dtype : WeightDType::F32;
            if (dt == WeightDType::F32) {
                p.dtype = fb::DType::F32;
                p.data_size = n * 4;
                p.data_offset = append_aligned(data, t.values.data(), p.data_size);
                restored = t.values;
            } else if (dt == WeightDType::F16) {
                for (size_t i = 0; i < n; ++i) {
                    if (std::fabs(t.values[i]) > 65504.0f) {
                        fail("tensor '", t.name, "' element ", i, " is ", t.values[i], ", past f16's largest value 65504: convert with --dtype f32 or int8");
                    }
                }
                const auto h = to_f16(t.values.data(), n);
                p.dtype = fb::DType::F16;
                p.data_size = n * 2;
                p.data_offset = append_aligned(data, h.data(), p.data_size);
                for (size_t i = 0; i < n; ++i) restored[i] = kernels::half_to_float(h[i]);
            } else {
                const int rows = static_cast<int>(t.shape[0]), cols = static_cast<int>(t.shape[1]);
                Int8Weights q;
                try {
                    q = quantize_int8(t.values.data(), rows, cols, opts.group_size);
                } catch (const Error& e) {
                    fail("tensor '", t.name, "': ", e.what());
                }
                p.dtype = fb::DType::I8;
                p.group_size = static_cast<uint32_t>(q.group_size);
                p.data_size = n;
                p.data_offset = append_aligned(data, q.q.data(), n);
                p.scales_size = q.scales.size() * 4;
                p.scales_offset = append_aligned(data, q.scales.data(), p.scales_size);
                const int gpr = (cols + q.group_size - 1) / q.group_size;
                for (size_t i = 0; i < n; ++i) {
                    const size_t r0 = i / cols, c0 = i % cols;
                    restored[i] = q.q[i] * q.scales[r0 * gpr + c0 / q.group_size];
                }
            }
            r.dtype = p.dtype == fb::DType::F32 ? "f32" : p.dtype == fb::DType::F16 ? "f16" : "int8";
            r.group_size = static_cast<int>(p.group_size);
            r.bytes = p.data_size + p.scales_size;
            r.error = quant_error(t.values.data(), restored.data(), n);
            report.tensors.push_back(r);
            placed.push_back(p);
        } catch (const std::bad_alloc&) {
            const uint64_t need = data.size() + t.values.size() * sizeof(float);
            fail("out of memory at tensor '", t.name, "' (", t.values.size(), " values): the output's data would reach about ",
                 memory_size_text(need), " beside the checkpoint's tensors, ", memory_size_text(source_bytes), " as f32 (std::bad_alloc)");
        }
    }
    data.resize((data.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment);
    const uint64_t hash = XXH64(data.data(), data.size(), 0);

    // The index's size does not depend on data_offset (ForceDefaults), so build it once to
    // learn its size, then again with the real offset.
    auto probe = build_index(model, tokenizer, provenance, placed, 0, data.size(), hash);
    const uint64_t data_offset = (probe.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
    auto index = build_index(model, tokenizer, provenance, placed, data_offset, data.size(), hash);
    if (index.size() != probe.size()) fail("internal: the model index changed size between builds");

    const std::string tmp = out_path + ".tmp-" + std::to_string(::getpid());
    if (opts.on_temp_file) opts.on_temp_file(tmp.c_str());
    // Whichever way this ends, the hook forgets the path (after the rename or the unlink).
    struct Forget {
        void (*hook)(const char*);
        ~Forget() {
            if (hook) hook(nullptr);
        }
    } forget{opts.on_temp_file};
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(out_path, ": cannot create: ", std::strerror(errno));
    try {
        write_all(fd, index.data(), index.size(), tmp);
        const std::vector<uint8_t> pad(data_offset - index.size(), 0);
        write_all(fd, pad.data(), pad.size(), tmp);
        write_all(fd, data.data(), data.size(), tmp);
        if (::fsync(fd) != 0) fail(tmp, ": fsync failed: ", std::strerror(errno));
        if (::close(fd) != 0) fail(tmp, ": close failed: ", std::strerror(errno));
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (opts.verify) {
        try {
            Model::open(tmp);
        } catch (const Error& e) {
            ::unlink(tmp.c_str());
            fail("the converted model fails the loader's checks, nothing written to ", out_path, ": ", e.what());
        } catch (...) {  // std::bad_alloc: the temporary goes too
            ::unlink(tmp.c_str());
            throw;
        }
    }
    if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(out_path, ": cannot rename the finished file into place: ", std::strerror(err));
    }
    report.file_bytes = data_offset + data.size();
    return report;
}

}  // namespace ember::convert

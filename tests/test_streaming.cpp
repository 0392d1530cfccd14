// The converter's streaming path: a lazily read checkpoint (read_checkpoint(path, true)) gives
// the eager reader's values, and convert(), which reads lazily and writes one tensor at a time,
// writes the same bytes as write_ember of the eagerly read model. Exact equality, no tolerance:
// both paths run the same decoders and quantizers on the same values.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "converter/arch.h"
#include "converter/checkpoint.h"
#include "converter/convert.h"
#include "converter/gpt2_tokenizer.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"
#include "test_util.h"

namespace ember {
namespace {

using test::fixture;

std::string base_name(const std::string& p) {
    const auto s = p.find_last_of('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

TEST_CASE("a lazily read checkpoint gives the eager reader's shapes, dtypes and values") {
    // zip views (offsets, strides, shared storages), f16 / bf16, safetensors, a legacy torch file
    for (const char* f : {"reader/views.pt", "reader/tiny.safetensors", "gptpy/model.pt", "gptpy/model_bf16.pt", "gptpy/model.safetensors",
                          "nanogpt/ckpt.pt", "gpt2/hf/model.safetensors", "gpt2/hf/pytorch_model.bin", "gpt2/hf_legacy/pytorch_model.bin"}) {
        CAPTURE(f);
        const convert::Checkpoint eager = convert::read_checkpoint(fixture(f));
        const convert::Checkpoint lazy = convert::read_checkpoint(fixture(f), true);
        CHECK(lazy.model_args_json == eager.model_args_json);
        CHECK(lazy.skipped == eager.skipped);
        REQUIRE(lazy.tensors.size() == eager.tensors.size());
        const bool legacy = std::string(f) == "gpt2/hf_legacy/pytorch_model.bin";  // read eagerly either way
        for (const auto& [key, e] : eager.tensors) {
            CAPTURE(key);
            const auto it = lazy.tensors.find(key);
            REQUIRE(it != lazy.tensors.end());
            const convert::SourceTensor& l = it->second;
            CHECK(l.shape == e.shape);
            CHECK(l.dtype == e.dtype);
            CHECK(!e.read);
            CHECK(static_cast<bool>(l.read) == !legacy);
            CHECK(l.values.empty() == !legacy);
            CHECK(convert::values_of(l) == e.values);
            CHECK(convert::values_of(l) == e.values);  // a reader reads again
        }
    }
}

TEST_CASE("convert() writes, tensor by tensor, the bytes write_ember writes from the eagerly read model") {
    struct Case {
        const char* checkpoint;
        const char* vocab_text;  // else the tiny GPT-2 tokenizer
        convert::ArchChoice arch;
    };
    const std::vector<std::string> tiny = {fixture("gpt2/tiny_tokenizer/encoder.json"), fixture("gpt2/tiny_tokenizer/vocab.bpe")};
    for (const Case& c : {Case{"gptpy/model.pt", "gptpy/vocab.txt", convert::ArchChoice::Auto},          // heads stacked into qkv
                          Case{"gptpy/model.safetensors", "gptpy/vocab.txt", convert::ArchChoice::Auto},
                          Case{"gptpy/model_bf16.pt", "gptpy/vocab.txt", convert::ArchChoice::Auto},
                          Case{"nanogpt/ckpt.pt", "nanogpt/vocab.txt", convert::ArchChoice::Auto},       // tied lm_head
                          Case{"gpt2/nanogpt/ckpt.pt", nullptr, convert::ArchChoice::Auto},
                          Case{"gpt2/hf/model.safetensors", nullptr, convert::ArchChoice::Auto},         // Conv1D transposed
                          Case{"gpt2/hf/pytorch_model.bin", nullptr, convert::ArchChoice::Auto}}) {
        for (const auto dtype : {convert::WeightDType::F32, convert::WeightDType::F16, convert::WeightDType::I8}) {
            for (const int group : {64, 0, 5}) {
                if (group != 64 && dtype != convert::WeightDType::I8) continue;
                CAPTURE(c.checkpoint);
                CAPTURE(std::string(kernels::wtype_name(dtype)));
                CAPTURE(group);
                test::TempDir dir;
                convert::ConvertOptions o;
                o.checkpoint = fixture(c.checkpoint);
                if (c.vocab_text) o.vocab_text = fixture(c.vocab_text);
                else o.tokenizer = tiny;
                o.arch = c.arch;
                o.out = dir.file("streamed.ember");
                o.write.dtype = dtype;
                o.write.group_size = group;
                const convert::ConvertResult r = convert::convert(o);

                // The same, read eagerly: every tensor's values held until the file is written.
                convert::TokenizerSpec tok;
                std::string vocab_source;
                if (c.vocab_text) {
                    tok.code_points = convert::vocab_from_text(o.vocab_text);
                    vocab_source = base_name(o.vocab_text) + " (sorted(set(text)))";
                } else {
                    tok.bpe = convert::read_gpt2_tokenizer(tiny);
                    vocab_source = "encoder.json + vocab.bpe (GPT-2 byte-level BPE)";
                }
                CHECK(r.vocab_source == vocab_source);
                const std::string config = r.hf_config;
                convert::CanonicalModel m = convert::to_canonical(convert::read_checkpoint(o.checkpoint), c.arch, printable(o.checkpoint, 200), config);
                for (const auto& t : m.tensors) CHECK(!t.read);
                const convert::ProvenanceInfo prov{base_name(o.checkpoint), sha256_file(o.checkpoint), vocab_source};
                const convert::WriteReport eager = convert::write_ember(m, tok, prov, o.write, dir.file("eager.ember"));

                CHECK(r.report.file_bytes == eager.file_bytes);
                const std::string a = test::read_file(o.out), b = test::read_file(dir.file("eager.ember"));
                CHECK(a.size() == eager.file_bytes);
                CHECK(a == b);
                REQUIRE(r.report.tensors.size() == eager.tensors.size());
                for (size_t i = 0; i < eager.tensors.size(); ++i) {
                    CHECK(r.report.tensors[i].bytes == eager.tensors[i].bytes);
                    CHECK(r.report.tensors[i].error.max_abs == eager.tensors[i].error.max_abs);
                    CHECK(r.report.tensors[i].error.rel_rms == eager.tensors[i].error.rel_rms);
                }
            }
        }
    }
}

}  // namespace ember

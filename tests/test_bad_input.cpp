// The rows of the "Bad input" table (docs/bad-input.md) that no other suite checks: each bad input gets an
// ember::Error (or, in the CLI, one `ember: error:` line and exit 1) whose text names the field
// or the place. The .ember cases start from a good file and change one index field in place
// (the index lies outside the data checksum, so only the field under test is wrong).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "converter/checkpoint.h"
#include "converter/convert.h"
#include "ember_generated.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "cli_util.h"
#include "test_util.h"

using namespace ember;
using doctest::Contains;
using test::fixture;

using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::q;
using ember::test::Run;

namespace {

// A good file converted once per case: the gpt.py fixture (char, int8) or the GPT-2 fixture
// with GPT-2's first 40 merges (BPE, format 2, int8).
std::string good_file(const test::TempDir& dir, bool bpe) {
    convert::ConvertOptions o;
    if (bpe) {
        o.checkpoint = fixture("gpt2/hf/model.safetensors");
        o.tokenizer = {fixture("gpt2/tiny_tokenizer")};
    } else {
        o.checkpoint = fixture("gptpy/model.pt");
        o.vocab_text = fixture("gptpy/vocab.txt");
    }
    o.out = dir.file(bpe ? "good_bpe.ember" : "good.ember");
    o.write.dtype = convert::WeightDType::I8;
    convert::convert(o);
    return test::read_file(o.out);
}

// In-place edits of an .ember held in memory.
struct Edit {
    std::string bytes;

    const fb::Model* model() const { return fb::GetSizePrefixedModel(bytes.data()); }
    // The generated tables derive privately from flatbuffers::Table, at the same address.
    template <class Tab>
    static flatbuffers::Table* table(const Tab* t) { return const_cast<flatbuffers::Table*>(reinterpret_cast<const flatbuffers::Table*>(t)); }
    template <class T, class Tab>
    void set(const Tab* t, flatbuffers::voffset_t field, T v) {
        const bool present = table(t)->template SetField<T>(field, v, T(-1));
        REQUIRE(present);  // the field must be present to change it
    }
    void config(flatbuffers::voffset_t field, uint32_t v) { set<uint32_t>(model()->config(), field, v); }
    const fb::Tensor* tensor(const std::string& name) const {
        for (const fb::Tensor* t : *model()->tensors()) {
            if (t->name()->str() == name) return t;
        }
        FAIL("no tensor " << name);
        return nullptr;
    }
};

void refused(const test::TempDir& dir, const std::string& bytes, const std::string& what) {
    const std::string path = dir.file("bad.ember");
    test::write_file(path, bytes);
    CHECK_THROWS_WITH_AS(Model::open(path), Contains(what.c_str()), Error);
}

}  // namespace

TEST_CASE("bad input: an .ember whose header claims more than the file holds") {
    test::TempDir dir;
    const std::string good = good_file(dir, false);
    {
        Edit e{good};
        const uint32_t huge = 0x7fffffff;
        std::memcpy(&e.bytes[0], &huge, 4);
        refused(dir, e.bytes, "header claims a 2147483647-byte index but the file holds " + std::to_string(good.size()) + " bytes");
    }
    for (uint32_t tiny : {0u, 7u}) {
        // Not a truncation: no file holds a model in under 8 bytes of index (it said "truncated?").
        Edit e{good};
        std::memcpy(&e.bytes[0], &tiny, 4);
        refused(dir, e.bytes, "header claims a " + std::to_string(tiny) + "-byte index, too small for any model (corrupted file)");
    }
    {
        Edit e{good};
        e.set<uint64_t>(e.model(), fb::Model::VT_DATA_SIZE, e.model()->data_size() + 64);
        refused(dir, e.bytes, "header claims a data section of " + std::to_string(e.model()->data_size()) + " bytes at offset");
    }
    {
        Edit e{good};
        const uint64_t past = (e.model()->data_size() + 63) / 64 * 64;
        e.set<uint64_t>(e.tensor("wpe"), fb::Tensor::VT_DATA_OFFSET, past);
        refused(dir, e.bytes, "tensor 'wpe' data_offset " + std::to_string(past) + " + data_size ");
        refused(dir, e.bytes, " lies past the data section (" + std::to_string(e.model()->data_size()) + " bytes)");
    }
    {
        // An offset near 2^64: the message used to print the wrapped end of the range, a number
        // below its start ("[18446744073709547520, 12288)").
        Edit e{good};
        const uint64_t near_max = ~uint64_t{0} / 64 * 64 - 4032;
        e.set<uint64_t>(e.tensor("wpe"), fb::Tensor::VT_DATA_OFFSET, near_max);
        refused(dir, e.bytes, "tensor 'wpe' data_offset " + std::to_string(near_max) + " + data_size ");
    }
    {
        Edit e{good};
        e.set<uint64_t>(e.tensor("wpe"), fb::Tensor::VT_DATA_SIZE, e.tensor("wpe")->data_size() * 2);
        refused(dir, e.bytes, "tensor 'wpe' data_size is");
    }
    {
        Edit e{good};
        e.set<uint64_t>(e.tensor("h.0.fc.weight"), fb::Tensor::VT_SCALES_OFFSET, 3);
        refused(dir, e.bytes, "tensor 'h.0.fc.weight' scales_offset 3 is not a multiple of 64");
    }
}

TEST_CASE("bad input: an .ember with bytes appended after its data section, or an attention scale or ln_eps out of range") {
    test::TempDir dir;
    const std::string good = good_file(dir, false);
    const uint64_t end = Edit{good}.model()->data_offset() + Edit{good}.model()->data_size();
    REQUIRE(end == good.size());  // the converter writes nothing after the data section
    // A console --log line appended to an installed model used to load with "checksum: ok".
    const std::string line = "2026-12-05T07:55:11.196Z ember-console: loaded\n";
    refused(dir, good + line, std::to_string(line.size()) + " bytes follow the data section, which ends at byte " + std::to_string(end));
    {
        Edit e{good};  // the same, said by the header: a data section 64 bytes shorter than the file's
        e.set<uint64_t>(e.model(), fb::Model::VT_DATA_SIZE, e.model()->data_size() - 64);
        refused(dir, e.bytes, "64 bytes follow the data section");
    }
    // The padding between the index and the data section (zeros; covered by neither the index
    // nor the checksum) must stay zeros: a byte changed there used to load.
    int padded = 0;
    for (const bool bpe : {false, true}) {
        const std::string file = good_file(dir, bpe);
        uint32_t fb_size = 0;
        std::memcpy(&fb_size, file.data(), 4);
        const uint64_t index_end = fb_size + 4ull, data_off = Edit{file}.model()->data_offset();
        if (data_off == index_end) continue;
        ++padded;
        for (const uint64_t at : {index_end, data_off - 1}) {
            std::string bad = file;
            bad[at] = 'x';
            refused(dir, bad, "byte " + std::to_string(at) + " between the index (which ends at byte " + std::to_string(index_end) +
                                  ") and the data section (at byte " + std::to_string(data_off) + ") is 120, not 0");
        }
    }
    CHECK(padded > 0);
    // The converter refuses a scale outside [1.2e-38, 1000] (q.k x 1e38 overflows f32); so does the loader.
    for (const float scale : {3e38f, 1001.0f, 1e-45f, 0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        CAPTURE(scale);
        Edit e{good};
        e.set<float>(e.model()->config(), fb::Config::VT_ATTN_SCALE, scale);
        refused(dir, e.bytes, "config.attn_scale");
        refused(dir, e.bytes, "is out of range [1.2e-38, 1000]");
    }
    for (const float eps : {0.0f, -1e-5f, 1.0f, std::numeric_limits<float>::quiet_NaN()}) {
        CAPTURE(eps);
        Edit e{good};
        e.set<float>(e.model()->config(), fb::Config::VT_LN_EPS, eps);
        refused(dir, e.bytes, "config.ln_eps");
    }
    Edit e{good};
    e.set<float>(e.model()->config(), fb::Config::VT_ATTN_SCALE, 1000.0f);  // the largest allowed
    test::write_file(dir.file("edge.ember"), e.bytes);
    CHECK_NOTHROW(Model::open(dir.file("edge.ember"), false));  // (the index is not checksummed)
}

TEST_CASE("bad input: a NaN or infinite f16 or f32 weight, or an int8 -128, in an .ember names its tensor and element, in any block of the scan") {
    // The loader scans blocks of 4096 values without a branch, then the block with one for its
    // index: elements at the start, both ends of a block and in the last, partial block. int8
    // weights are -127..127 (kernels/cpu/weights.h: the AVX2 kernels negate W's bytes).
    test::TempDir dir;
    for (const auto dtype : {convert::WeightDType::F16, convert::WeightDType::F32, convert::WeightDType::I8}) {
        convert::ConvertOptions o;
        o.checkpoint = fixture("gpt2/hf/model.safetensors");
        o.tokenizer = {fixture("gpt2/tiny_tokenizer")};
        o.out = dir.file("wide.ember");
        o.write.dtype = dtype;
        convert::convert(o);
        const std::string good = test::read_file(o.out);
        const Edit e0{good};
        const fb::Tensor* wte = e0.tensor("wte");
        const uint64_t n = uint64_t{wte->shape()->Get(0)} * wte->shape()->Get(1);
        REQUIRE(n > 2 * 4096);  // three blocks
        const bool f16 = dtype == convert::WeightDType::F16, i8 = dtype == convert::WeightDType::I8;
        const size_t at0 = e0.model()->data_offset() + wte->data_offset();
        for (const uint64_t i : {uint64_t{0}, uint64_t{4095}, uint64_t{4096}, uint64_t{8191}, uint64_t{8192}, n - 1}) {
            for (const bool nan : {false, true}) {
                if (i8 && nan) continue;
                CAPTURE(kernels::wtype_name(dtype));
                CAPTURE(i);
                CAPTURE(nan);
                Edit e{good};
                if (i8) {
                    e.bytes[at0 + i] = static_cast<char>(0x80);
                } else if (f16) {
                    const uint16_t v = nan ? 0x7e00 : 0xfc00;  // NaN, -inf
                    std::memcpy(&e.bytes[at0 + i * 2], &v, 2);
                } else {
                    const float v = nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
                    std::memcpy(&e.bytes[at0 + i * 4], &v, 4);
                }
                const std::string path = dir.file("bad.ember");
                test::write_file(path, e.bytes);
                // (the data's checksum no longer matches: opened without requiring it, as a writer's bug would be)
                const std::string want = "tensor 'wte' element " + std::to_string(i) + (i8 ? " is -128; int8 weights are -127..127" : " is not a finite number");
                CHECK_THROWS_WITH_AS(Model::open(path, false), Contains(want.c_str()), Error);
            }
        }
        // The largest finite values load; int8's -127 and 127.
        Edit e{good};
        if (i8) {
            e.bytes[at0 + 4095] = static_cast<char>(-127);
            e.bytes[at0 + 4096] = static_cast<char>(127);
        } else if (f16) {
            const uint16_t v = 0x7bff;  // 65504
            std::memcpy(&e.bytes[at0 + 4096 * 2], &v, 2);
        } else {
            const float v = std::numeric_limits<float>::max();
            std::memcpy(&e.bytes[at0 + 4096 * 4], &v, 4);
        }
        test::write_file(dir.file("edge.ember"), e.bytes);
        CHECK_NOTHROW(Model::open(dir.file("edge.ember"), false));
    }
}

TEST_CASE("bad input: .ember dimensions out of range or overflowing 32-bit products name the fields") {
    test::TempDir dir;
    const std::string good = good_file(dir, false);
    struct Case {
        flatbuffers::voffset_t field;
        uint32_t value;
        flatbuffers::voffset_t field2;
        uint32_t value2;
        std::string what;
    };
    using C = fb::Config;
    for (const Case& c : {
             Case{C::VT_N_LAYER, 0, 0, 0, "config.n_layer = 0 is out of range [1, 1024]"},
             Case{C::VT_N_EMBD, 1u << 25, 0, 0, "config.n_embd = 33554432 is out of range [1, 16777216]"},
             Case{C::VT_VOCAB_SIZE, 1u << 20, C::VT_N_EMBD, 1u << 12,
                  "config.vocab_size x config.n_embd = 4294967296 elements (wte / lm_head) is more than 2^31 - 1"},
             Case{C::VT_BLOCK_SIZE, 1u << 16, C::VT_FFN_HIDDEN, 1u << 16,
                  "config.block_size x config.ffn_hidden = 4294967296 elements (the FFN activations of a window)"},
             Case{C::VT_N_LAYER, 1024, C::VT_BLOCK_SIZE, 1u << 16,
                  "config.n_layer x config.block_size x config.n_embd = 2147483648 elements (the KV cache)"},
             Case{C::VT_BLOCK_SIZE, 1u << 24, C::VT_N_EMBD, 1u << 8,
                  "config.block_size x config.n_embd = 4294967296 elements (wpe)"},
             Case{C::VT_N_HEAD, 5, 0, 0, "config.n_embd 32 is not divisible by config.n_head 5"},
             Case{C::VT_VOCAB_SIZE, 36, 0, 0, "tokenizer holds 37 entries but config.vocab_size is 36"},
         }) {
        CAPTURE(c.what);
        Edit e{good};
        e.config(c.field, c.value);
        if (c.field2) e.config(c.field2, c.value2);
        refused(dir, e.bytes, c.what);
    }
    Edit e{good};
    e.set<uint32_t>(e.model(), fb::Model::VT_FORMAT_VERSION, 3);
    refused(dir, e.bytes, "format_version 3 is not supported (this ember reads versions 1 and 2)");
}

TEST_CASE("bad input: an .ember int8 group size of 0 or larger than the row, a shape or dtype that disagrees") {
    test::TempDir dir;
    const std::string good = good_file(dir, false);
    const Edit g{good};
    const fb::Tensor* fc = g.tensor("h.0.fc.weight");
    const uint32_t cols = fc->shape()->Get(1);
    for (uint32_t bad : {0u, cols + 1}) {
        Edit e{good};
        e.set<uint32_t>(e.tensor("h.0.fc.weight"), fb::Tensor::VT_GROUP_SIZE, bad);
        refused(dir, e.bytes,
                "tensor 'h.0.fc.weight' group_size " + std::to_string(bad) + " must be in [1, " + std::to_string(cols) + "] (the row length)");
    }
    {
        Edit e{good};
        const_cast<flatbuffers::Vector<uint32_t>*>(e.tensor("wpe")->shape())->Mutate(1, 31);
        refused(dir, e.bytes, "tensor 'wpe' has shape [");
        refused(dir, e.bytes, ", 31] but the configuration needs [");
    }
    {
        Edit e{good};
        e.set<int8_t>(e.tensor("wpe"), fb::Tensor::VT_DTYPE, 7);
        refused(dir, e.bytes, "tensor 'wpe' has unknown dtype 7");
    }
    {
        Edit e{good};
        const size_t at = e.bytes.find("wte");
        REQUIRE(at != std::string::npos);
        e.bytes[at + 2] = 'x';
        refused(dir, e.bytes, "tensor 'wtx' is not part of a gptpy model");
    }
}

TEST_CASE("bad input: an .ember char tokenizer entry that is not one Unicode scalar value, or out of order") {
    test::TempDir dir;
    const std::string good = good_file(dir, false);
    const Edit g{good};
    const uint32_t last = g.model()->tokenizer()->code_points()->size() - 1;
    auto with = [&](uint32_t i, uint32_t cp) {
        Edit e{good};
        const_cast<flatbuffers::Vector<uint32_t>*>(e.model()->tokenizer()->code_points())->Mutate(i, cp);
        return e.bytes;
    };
    const std::string at = "tokenizer.code_points[" + std::to_string(last) + "] = ";
    refused(dir, with(last, 0xD800), at + "0xD800 is not a Unicode scalar value (a UTF-16 surrogate)");
    refused(dir, with(last, 0xDFFF), at + "0xDFFF is not a Unicode scalar value (a UTF-16 surrogate)");
    refused(dir, with(last, 0x110000), at + "0x110000 is not a Unicode scalar value (past U+10FFFF)");
    refused(dir, with(last, 0xFFFFFFFF), at + "0xFFFFFFFF is not a Unicode scalar value (past U+10FFFF)");
    refused(dir, with(1, 0), "tokenizer.code_points[1] is not above entry 0");
}

TEST_CASE("bad input: an .ember BPE tokenizer (format 2) with a duplicate token, a wrong size or an old version") {
    test::TempDir dir;
    const std::string good = good_file(dir, true);
    REQUIRE_NOTHROW(Model::open(dir.file("good_bpe.ember")));
    {
        Edit e{good};
        // Token bytes of GPT-2's merges 0 and 1, " t" and " a", stored one after the other.
        const size_t at = e.bytes.find(" t a");
        REQUIRE(at != std::string::npos);
        e.bytes[at + 3] = 't';
        refused(dir, e.bytes, "BPE tokens 256 and 257 have the same bytes");
    }
    {
        Edit e{good};
        e.config(fb::Config::VT_TOKENIZER_SIZE, 300);
        refused(dir, e.bytes, "config.tokenizer_size 300 but the tokenizer holds 297 entries");
    }
    {
        Edit e{good};
        e.set<uint32_t>(e.model(), fb::Model::VT_FORMAT_VERSION, 1);
        refused(dir, e.bytes, "format_version 1 cannot hold a BPE tokenizer");
    }
    {
        Edit e{good};
        const_cast<flatbuffers::Vector<uint32_t>*>(e.model()->tokenizer()->token_offsets())->Mutate(5, 0);
        refused(dir, e.bytes, "BPE token 4 is empty (offsets must ascend)");
    }
}

TEST_CASE("bad input: safetensors headers") {
    test::TempDir dir;
    auto file = [&](const std::string& header, const std::string& data) {
        std::string b(8, '\0');
        const uint64_t n = header.size();
        std::memcpy(&b[0], &n, 8);
        test::write_file(dir.file("m.safetensors"), b + header + data);
        return dir.file("m.safetensors");
    };
    auto refused_st = [&](const std::string& header, const std::string& data, const std::string& what) {
        CHECK_THROWS_WITH_AS(convert::read_checkpoint(file(header, data)), Contains(what.c_str()), Error);
    };
    const std::string data(16, '\0');
    refused_st(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]} )", data, "header is not valid JSON");
    refused_st(R"({"w": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", data,
               "safetensors tensor 'w' has dtype I64; only F32, F16 and BF16 are supported");
    refused_st(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 32]}})", data,
               "safetensors tensor 'w' data_offsets [0, 32] lie outside the 16 data bytes");
    refused_st(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", data,
               "safetensors tensor 'w' data_offsets span 16 bytes, but shape and dtype need 12");
    refused_st(R"({"w": {"dtype": "F32", "shape": [-2, 2], "data_offsets": [0, 16]}})", data,
               "safetensors tensor 'w': a shape entry is not a non-negative integer");
    refused_st(R"({"w": {"dtype": "F32", "shape": [65536, 65536], "data_offsets": [0, 16]}})", data,
               "safetensors tensor 'w' has more elements than the file has bytes");
    // A dimension past int64 beside a 0 (no elements): once kept as the shape entry -1.
    refused_st(R"({"w": {"dtype": "F32", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})", data,
               "safetensors tensor 'w' has a dimension of 18446744073709551615");
    // The format's layout: one entry per name, and the tensors' bytes tile the data exactly
    // (nlohmann kept the last of two entries; overlaps, holes and trailing bytes converted).
    refused_st(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
               data, "safetensors header has the entry 'w' twice");
    refused_st(R"({"w": {"dtype": "F16", "dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", data,
               "safetensors entry 'w' has the key 'dtype' twice");
    refused_st(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]}})",
               data, "safetensors tensors 'a' and 'b' share data bytes (data_offsets overlap at 4)");
    refused_st(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", data,
               "safetensors data bytes 0 to 8 belong to no tensor (a hole before 'a')");
    refused_st(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", data,
               "safetensors data holds 8 bytes after the last tensor (16 data bytes, tensors end at 8)");
    CHECK_NOTHROW(convert::read_checkpoint(file(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", data)));
    // A header length past the end of the file.
    std::string b(8, '\0');
    const uint64_t n = 1000;
    std::memcpy(&b[0], &n, 8);
    test::write_file(dir.file("cut.safetensors"), b + "{\"w\": 1}");
    CHECK_THROWS_WITH_AS(convert::read_checkpoint(dir.file("cut.safetensors")),
                         Contains("safetensors header of 1000 bytes runs past the end of the file (16 bytes; truncated?)"), Error);
}

TEST_CASE("bad input: prompts and text files with unknown characters or invalid UTF-8, through the command") {
    test::TempDir dir;
    const std::string m = q(dir.file("good.ember"));
    good_file(dir, false);
    test::write_file(dir.file("unknown.txt"), "To be, or not to be\n\xe2\x82\xac");
    test::write_file(dir.file("invalid.txt"), "To be\n\xc3\x28");
    check_refused(ember_cli("generate -m " + m + " -n 3 -p \"$(printf 'ab\\377')\"", dir), "prompt: invalid UTF-8 at byte 2");
    check_refused(ember_cli("generate -m " + m + " -n 3 -p '@'", dir), "prompt: character '@' (U+0040) at position 0 is not in the model's vocabulary");
    check_refused(ember_cli("eval -m " + m + " --text " + q(dir.file("unknown.txt")), dir),
                "unknown.txt: 1 character(s) are not in the model's vocabulary: '\xe2\x82\xac' (U+20AC) x1 (--skip-unknown drops them)");
    check_refused(ember_cli("eval -m " + m + " --text " + q(dir.file("invalid.txt")), dir), "invalid.txt: invalid UTF-8 at byte 6");
    // A pipe given by name: refused at once (never opened), pointing to the option's `-` (it said
    // only "not a regular file").
    const std::string fifo = dir.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    check_refused(ember_cli("generate -m " + m + " -n 3 -f " + q(fifo), dir), "pipe: not a regular file (a pipe, a device or a socket): -f - reads standard input");
    check_refused(ember_cli("eval -m " + m + " --text " + q(fifo), dir), "pipe: not a regular file (a pipe, a device or a socket): --text - reads standard input");
    // 60 distinct unknown characters: the list stops near 400 characters and says how many it
    // left out (it stopped without a word: "60 character(s)" and 20 named).
    std::string many = "To be";
    for (uint32_t cp = 0x4E00; cp < 0x4E00 + 60; ++cp) {
        many += static_cast<char>(0xE0 | (cp >> 12));
        many += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        many += static_cast<char>(0x80 | (cp & 0x3F));
    }
    test::write_file(dir.file("many.txt"), many);
    const Run many_r = ember_cli("eval -m " + m + " --text " + q(dir.file("many.txt")), dir);
    check_refused(many_r, "many.txt: 60 character(s) are not in the model's vocabulary: ");
    const size_t and_at = many_r.err.find(", and ");
    REQUIRE(and_at != std::string::npos);
    const int left_out = std::stoi(many_r.err.substr(and_at + 6));
    CHECK(many_r.err.find(std::to_string(left_out) + " more (--skip-unknown drops them)", and_at) != std::string::npos);
    size_t named = 0;
    for (size_t at = many_r.err.find(") x1"); at != std::string::npos; at = many_r.err.find(") x1", at + 1)) ++named;
    CHECK(left_out > 0);
    CHECK(named + static_cast<size_t>(left_out) == 60);
    // Ten characters: the validation split (the last 10%) holds one token, and the refusal
    // points to --split all; the whole text is enough.
    // Only unknown characters: said so, not "N characters skipped" and then a text of 0 tokens.
    test::write_file(dir.file("alien.txt"), "\xe2\x82\xac\xe2\x82\xac@");
    const Run alien = ember_cli("eval -m " + m + " --skip-unknown --split all --text " + q(dir.file("alien.txt")), dir);
    check_refused(alien, "alien.txt: none of its 3 characters is in the vocabulary (--skip-unknown dropped them all)");
    CHECK(alien.out.empty());
    test::write_file(dir.file("short.txt"), "To be, or ");
    check_refused(ember_cli("eval -m " + m + " --text " + q(dir.file("short.txt")), dir),
                  "short.txt: the validation split (last 10%) holds 1 token(s); eval needs at least 2 (--split all scores the whole text)");
    CHECK(ember_cli("eval -m " + m + " --text " + q(dir.file("short.txt")) + " --split all", dir).status == 0);
    check_refused(ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(dir.file("invalid.txt")) + " -o " +
                              q(dir.file("o.ember")),
                          dir),
                "invalid.txt: invalid UTF-8 at byte 6");
}

TEST_CASE("bad input: a Hugging Face config.json that is not JSON, has a bad value, or asks for what ember does not compute") {
    test::TempDir dir;
    std::filesystem::copy_file(fixture("gpt2/hf/model.safetensors"), dir.file("model.safetensors"));
    convert::ConvertOptions o;
    o.checkpoint = dir.file("model.safetensors");
    o.tokenizer = {fixture("gpt2/tiny_tokenizer")};
    o.out = dir.file("o.ember");
    const auto good = test::load_json(fixture("gpt2/hf/config.json"));
    auto refused_cfg = [&](const std::string& text, const std::string& what) {
        test::write_file(dir.file("config.json"), text);
        CHECK_THROWS_WITH_AS(convert::convert(o), Contains(what.c_str()), Error);
        CHECK_FALSE(std::filesystem::exists(o.out));
    };
    refused_cfg("{\"n_head\": ", "config.json is not readable JSON");
    auto with = [&](const char* key, const nlohmann::json& v) {
        auto c = good;
        c[key] = v;
        return c.dump();
    };
    refused_cfg(with("n_head", "four"), "config.json n_head is not a positive integer of at most 2^24");
    refused_cfg(with("n_positions", 128), "config.json n_positions = 128 but the weights give 16");
    refused_cfg(with("scale_attn_by_inverse_layer_idx", true), "config.json scale_attn_by_inverse_layer_idx is not supported");
    // A config.json that is a link to nothing: said so (it was "needs its config.json beside it").
    std::filesystem::remove(dir.file("config.json"));
    std::filesystem::create_symlink(dir.file("nowhere.json"), dir.file("config.json"));
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("config.json: a symbolic link to nothing"), Error);
    // A loop of links is named as the system names it, not as a link to nothing.
    std::filesystem::remove(dir.file("config.json"));
    std::filesystem::create_symlink(dir.file("loop.json"), dir.file("config.json"));
    std::filesystem::create_symlink(dir.file("config.json"), dir.file("loop.json"));
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("config.json: cannot open: Too many levels of symbolic links"), Error);
    std::filesystem::remove(dir.file("loop.json"));
    // Files over their limit say which kind of file has the limit (they all said "a text").
    test::write_file(dir.file("config.json"), "");
    std::filesystem::resize_file(dir.file("config.json"), (size_t{1} << 20) + 1);  // sparse: no MiB written
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("config.json: 1048577 bytes is more than the 1048576 bytes a config.json may have"), Error);
    std::filesystem::remove(dir.file("config.json"));
    const std::string big = dir.file("vocab.json");
    test::write_file(big, "");
    std::filesystem::resize_file(big, (size_t{64} << 20) + 1);
    o.tokenizer = {big, fixture("gpt2/tiny_tokenizer/vocab.bpe")};
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("vocab.json: 67108865 bytes is more than the 67108864 bytes a tokenizer file may have"), Error);
    CHECK_FALSE(std::filesystem::exists(o.out));
}

TEST_CASE("bad input: hostile sizes inside well-formed files: a million-digit block index, a [2^62, 0] tensor, JSON nested 300,000 deep") {
    test::TempDir dir;
    test::write_file(dir.file("vocab.txt"), "a");
    // A gpt.py-shaped safetensors file whose block key carries a million-digit index: the block
    // count used std::regex, which recursed once per digit and overflowed the stack.
    const std::string key = "blocks." + std::string(1000000, '1') + ".x";
    const std::string header = R"({"token_embedding_table.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}, )"
                               R"("position_embedding_table.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [4, 8]}, ")" +
                               key + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
    std::string st(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(&st[0], &n, 8);
    test::write_file(dir.file("long_key.safetensors"), st + header + std::string(12, '\0'));
    convert::ConvertOptions o;
    o.checkpoint = dir.file("long_key.safetensors");
    o.vocab_text = dir.file("vocab.txt");
    o.out = dir.file("o.ember");
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("no transformer blocks (blocks.N.*) found"), Error);
    // Zero-element query weights [2^62, 0] (a pickle allows them): head_size x n_head overflowed int64.
    o.checkpoint = fixture("bad/head_size_overflow.pt");
    test::write_file(dir.file("vocab.txt"), "ab");
    CHECK_THROWS_WITH_AS(convert::convert(o), Contains("n_head 4 x head_size 4611686018427387904 != n_embd 0"), Error);

    // JSON values nested 300,000 deep where a string or a number belongs: printing them in the
    // error (nlohmann's dump() recurses per level) overflowed the stack.
    const std::string deep = std::string(300000, '[') + std::string(300000, ']');
    std::filesystem::copy_file(fixture("gpt2/hf/model.safetensors"), dir.file("model.safetensors"));
    test::write_file(dir.file("config.json"), "{\"model_type\": " + deep + "}");
    convert::ConvertOptions h;
    h.checkpoint = dir.file("model.safetensors");
    h.tokenizer = {fixture("gpt2/tiny_tokenizer")};
    h.out = dir.file("o.ember");
    CHECK_THROWS_WITH_AS(convert::convert(h), Contains("config.json model_type is a JSON array, not \"gpt2\""), Error);
    std::string enc = "{\"!\": " + deep;
    for (int i = 1; i < 256; ++i) enc += ", \"k" + std::to_string(i) + "\": " + std::to_string(i);
    test::write_file(dir.file("encoder.json"), enc + "}");
    test::write_file(dir.file("vocab.bpe"), "#version: 0.2\n");
    h.tokenizer = {dir.file("encoder.json"), dir.file("vocab.bpe")};
    CHECK_THROWS_WITH_AS(convert::convert(h), Contains("token '!' has id a JSON array; ids must be 0..255"), Error);
    CHECK_FALSE(std::filesystem::exists(h.out));
}

TEST_CASE("bad input: an output path that names one of the command's inputs is refused, and the input stays") {
    test::TempDir dir;
    std::filesystem::copy_file(fixture("gptpy/model.pt"), dir.file("model.pt"));
    std::filesystem::copy_file(fixture("gptpy/vocab.txt"), dir.file("vocab.txt"));
    const std::string m = good_file(dir, false), model = dir.file("good.ember");
    test::write_file(dir.file("text.txt"), "To be, or not to be\n");
    test::write_file(dir.file("a.emba"), "not read: the output is checked first");
    const std::string ckpt = test::read_file(dir.file("model.pt")), vocab = test::read_file(dir.file("vocab.txt"));
    const std::string convert = "convert " + q(dir.file("model.pt")) + " --vocab-text " + q(dir.file("vocab.txt")) + " -o ";
    check_refused(ember_cli(convert + q(dir.file("model.pt")), dir), "model.pt is the checkpoint (an input): writing it would destroy it");
    // Another spelling of the same file.
    check_refused(ember_cli(convert + q(dir.path() + "/./vocab.txt"), dir), "vocab.txt is the --vocab-text file (an input)");
    CHECK(test::read_file(dir.file("model.pt")) == ckpt);
    CHECK(test::read_file(dir.file("vocab.txt")) == vocab);
    const std::string ft = "finetune -m " + q(model) + " --text " + q(dir.file("text.txt")) + " --steps 1 -o ";
    check_refused(ember_cli(ft + q(model), dir), "good.ember is the base model (an input)");
    check_refused(ember_cli(ft + q(dir.file("text.txt")), dir), "text.txt is the training text (an input)");
    const std::string merge = "finetune --merge -m " + q(model) + " --adapter " + q(dir.file("a.emba")) + " -o ";
    check_refused(ember_cli(merge + q(dir.file("a.emba")), dir), "a.emba is the adapter (an input)");
    check_refused(ember_cli(merge + q(model), dir), "good.ember is the base model (an input)");
    CHECK(test::read_file(model) == m);
    CHECK_NOTHROW(Model::open(model));
}

TEST_CASE("bad input: nanoGPT model_args whose integers are out of range, or whose vocab_size disagrees with wte, are refused naming the key") {
    const std::string path = fixture("nanogpt/ckpt.pt");
    auto with_args = [&](const char* key, const nlohmann::json& value) {
        convert::Checkpoint ckpt = convert::read_checkpoint(path);
        nlohmann::json args = nlohmann::json::parse(ckpt.model_args_json);
        args[key] = value;
        ckpt.model_args_json = args.dump();
        return ckpt;
    };
    auto refused = [&](const char* key, const nlohmann::json& value, const std::string& message) {
        CAPTURE(key);
        CAPTURE(value.dump());
        CHECK_THROWS_WITH_AS(convert::to_canonical(with_args(key, value), convert::ArchChoice::NanoGPT, "ckpt.pt"), Contains(message.c_str()), Error);
    };
    // n_head -4 used to read as "not given" (then "n_embd 64 is not divisible by n_head 0");
    // 2^32 + 4 and -2^32 + 4 were taken as 4, wrapped by get<int>().
    refused("n_head", -4, "ckpt.pt: model_args.n_head = -4 is not an integer in 1..2147483647");
    refused("n_head", 0, "model_args.n_head = 0 is not an integer in 1..2147483647");
    refused("n_head", (int64_t{1} << 32) + 4, "model_args.n_head = 4294967300 is not an integer in 1..2147483647");
    refused("n_head", -(int64_t{1} << 32) + 4, "model_args.n_head = -4294967292 is not an integer in 1..2147483647");
    refused("n_layer", (int64_t{1} << 32) + 2, "model_args.n_layer = 4294967298 is not an integer in 1..2147483647");
    refused("n_embd", uint64_t{1} << 63, "model_args.n_embd = 9223372036854775808 is not an integer in 1..2147483647");
    // vocab_size is checked as block_size is: it used to be taken without a look.
    const convert::Checkpoint good = convert::read_checkpoint(path);
    const int64_t rows = good.tensors.at("transformer.wte.weight").shape[0];
    refused("vocab_size", rows + 10, "model_args.vocab_size = " + std::to_string(rows + 10) + " but the weights give " + std::to_string(rows) + " (rows of wte)");
    // The fixture's own model_args pass.
    CHECK_NOTHROW(convert::to_canonical(with_args("vocab_size", rows), convert::ArchChoice::NanoGPT, "ckpt.pt"));
}

// Checkpoint readers: torch.save zips, safetensors, meta.pkl, and the restricted unpickler.
// Expected values come from PyTorch (torch.load), not from this C++: the fixtures under
// tests/fixtures/reader and tests/fixtures/bad were written by tools/make_bad_fixtures.py
// (which prints the values torch reads back), and the real nanoGPT numbers were read with
// /usr/bin/python3 (torch 1.13): torch.load('ckpt.pt')['model'][...].
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "converter/checkpoint.h"
#include "runtime/utf8.h"
#include "test_util.h"
#include "converter/unpickler.h"
#include "converter/zip_archive.h"
#include "runtime/error.h"

using ember::convert::Checkpoint;
using ember::convert::read_checkpoint;
using ember::convert::read_meta_pkl;
using ember::convert::SourceDType;
using ember::convert::SourceTensor;

namespace {

std::string real_dir() { return ember::test::shared_dir() + "/data/real-nanogpt/"; }

const std::string kReader = ember::test::fixture("reader/");
const std::string kBad = ember::test::fixture("bad/");

bool exists(const std::string& path) { return std::ifstream(path).good(); }

const SourceTensor& tensor(const Checkpoint& c, const std::string& name) {
    auto it = c.tensors.find(name);
    REQUIRE_MESSAGE(it != c.tensors.end(), "missing tensor " << name);
    return it->second;
}

void unpickle(const std::string& bytes) {
    ember::convert::pickle::unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.pkl");
}

}  // namespace

TEST_CASE("checkpoint: the real nanoGPT ckpt.pt loads with its model_args and tied weights") {
    const std::string path = real_dir() + "ckpt.pt";
    REQUIRE_MESSAGE(exists(path), path << " not found (set EMBER_SHARED_DIR to the shared folder)");
    const Checkpoint c = read_checkpoint(path);

    // 28 keys in torch.load(...)['model'] (4 layers x 6 + wte, wpe, ln_f, lm_head).
    CHECK(c.tensors.size() == 28);
    const SourceTensor& wte = tensor(c, "transformer.wte.weight");
    const SourceTensor& lm_head = tensor(c, "lm_head.weight");
    CHECK(wte.shape == std::vector<int64_t>{62, 64});
    CHECK(wte.dtype == SourceDType::F32);
    CHECK(tensor(c, "transformer.wpe.weight").shape == std::vector<int64_t>{64, 64});
    CHECK(tensor(c, "transformer.h.0.attn.c_attn.weight").shape == std::vector<int64_t>{192, 64});
    CHECK(tensor(c, "transformer.h.3.mlp.c_proj.weight").shape == std::vector<int64_t>{64, 256});
    CHECK(tensor(c, "transformer.ln_f.weight").shape == std::vector<int64_t>{64});

    // torch: w[0,:3] = [-0.12684714794158936, 0.1943351924419403, -0.024607401341199875],
    // w[10,20] = -0.12974050641059875, w[61,63] = -0.2161814421415329 (f32, exact).
    CHECK(wte.values[0] == -0.12684714794158936f);
    CHECK(wte.values[1] == 0.1943351924419403f);
    CHECK(wte.values[2] == -0.024607401341199875f);
    CHECK(wte.values[10 * 64 + 20] == -0.12974050641059875f);
    CHECK(wte.values[61 * 64 + 63] == -0.2161814421415329f);
    // wpe[63,0] = 0.023570628836750984; h.3.mlp.c_proj.weight[63,255] = -0.009983834810554981;
    // ln_f.weight[5] = 1.3766939640045166.
    CHECK(tensor(c, "transformer.wpe.weight").values[63 * 64] == 0.023570628836750984f);
    CHECK(tensor(c, "transformer.h.3.mlp.c_proj.weight").values[63 * 256 + 255] == -0.009983834810554981f);
    CHECK(tensor(c, "transformer.ln_f.weight").values[5] == 1.3766939640045166f);

    // Tied: one storage, two equal copies.
    CHECK(lm_head.storage_key == wte.storage_key);
    CHECK(lm_head.shape == wte.shape);
    CHECK(lm_head.values == wte.values);

    const auto args = c.model_args_json;
    CHECK(args.find("\"n_layer\":4") != std::string::npos);
    CHECK(args.find("\"n_head\":4") != std::string::npos);
    CHECK(args.find("\"n_embd\":64") != std::string::npos);
    CHECK(args.find("\"block_size\":64") != std::string::npos);
    CHECK(args.find("\"bias\":false") != std::string::npos);
    CHECK(args.find("\"vocab_size\":62") != std::string::npos);
}

TEST_CASE("checkpoint: the real meta.pkl gives 62 code points") {
    const std::string path = real_dir() + "meta.pkl";
    REQUIRE_MESSAGE(exists(path), path << " not found (set EMBER_SHARED_DIR to the shared folder)");
    const std::vector<uint32_t> cps = read_meta_pkl(path);
    REQUIRE(cps.size() == 62);
    // pickle.load: itos[0] = '\n', itos[1] = ' ', itos[13] = 'B', itos[61] = 'z'.
    CHECK(cps[0] == '\n');
    CHECK(cps[1] == ' ');
    CHECK(cps[13] == 'B');
    CHECK(cps[61] == 'z');
}

TEST_CASE("checkpoint: views, offsets, f16, bf16, parameters, tying and skipped non-model tensors") {
    const Checkpoint c = read_checkpoint(kReader + "views.pt");
    CHECK(c.tensors.size() == 8);  // model only; optimizer, step (LongStorage), best_val_loss skipped

    // t = arange(12).reshape(3,4).t(): shape (4,3), stride (1,4).
    const SourceTensor& t = tensor(c, "t");
    CHECK(t.shape == std::vector<int64_t>{4, 3});
    CHECK(t.values == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
    // s = arange(20).reshape(5,4)[1:4, 1:3]: storage offset 5, stride (4,1).
    const SourceTensor& s = tensor(c, "s");
    CHECK(s.shape == std::vector<int64_t>{3, 2});
    CHECK(s.values == std::vector<float>{5, 6, 9, 10, 13, 14});

    const SourceTensor& h = tensor(c, "h");
    CHECK(h.dtype == SourceDType::F16);
    CHECK(h.shape == std::vector<int64_t>{2, 3});
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(h.values == std::vector<float>{1.5f, -2.25f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, -inf});

    const SourceTensor& b = tensor(c, "b");
    CHECK(b.dtype == SourceDType::BF16);
    CHECK(b.values == std::vector<float>{1.0f, -3.140625f, 3.3895313892515355e+38f, 0.0078125f});

    CHECK(tensor(c, "p").values == std::vector<float>{0.25f, -0.5f});  // nn.Parameter
    CHECK(tensor(c, "tied_a").values == std::vector<float>{0.5f, -1.0f, 2.0f, 4.5f});
    CHECK(tensor(c, "tied_b").values == tensor(c, "tied_a").values);
    CHECK(tensor(c, "tied_b").storage_key == tensor(c, "tied_a").storage_key);
    const SourceTensor& scalar = tensor(c, "scalar");
    CHECK(scalar.shape.empty());
    CHECK(scalar.values == std::vector<float>{3.25f});

    CHECK(c.model_args_json ==
          R"({"n_layer":1,"n_head":2,"bias":true,"dropout":0.1,"name":"tiny","extra":null})");
}

TEST_CASE("checkpoint: safetensors F32, F16, BF16") {
    const Checkpoint c = read_checkpoint(kReader + "tiny.safetensors");
    CHECK(c.tensors.size() == 3);
    CHECK(c.model_args_json.empty());
    CHECK(tensor(c, "w").shape == std::vector<int64_t>{2, 3});
    CHECK(tensor(c, "w").values == std::vector<float>{1.0f, -2.0f, 0.5f, 3.25f, 0.0f, -0.125f});
    CHECK(tensor(c, "h").dtype == SourceDType::F16);
    CHECK(tensor(c, "h").values == std::vector<float>{0.333251953125f, -1024.0f});
    CHECK(tensor(c, "b").dtype == SourceDType::BF16);
    CHECK(tensor(c, "b").values == std::vector<float>{2.5f, -0.01171875f});
}

TEST_CASE("checkpoint: meta.pkl with multi-byte characters") {
    // chars = ['\n', ' ', 'a', U+00E9, U+20AC, U+1F600] (tools/make_bad_fixtures.py).
    CHECK(read_meta_pkl(kReader + "meta.pkl") == std::vector<uint32_t>{10, 32, 97, 0xe9, 0x20ac, 0x1f600});
}

TEST_CASE("checkpoint: bad inputs are refused with a message naming the file and the problem") {
    using doctest::Contains;
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "truncated.pt"), Contains("truncated.pt: truncated or damaged zip"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "text.txt"),
                         Contains("text.txt: not a PyTorch checkpoint (zip or legacy) or safetensors file"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "random.bin"),
                         Contains("random.bin: not a PyTorch checkpoint (zip or legacy) or safetensors file"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "missing-file.pt"), Contains("missing-file.pt: cannot open"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "evil_global.pt"),
                         Contains("evil_global.pt: pickle refers to global 'os.system', which a checkpoint never needs"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "whole_module.pt"),
                         Contains("global 'torch.nn.modules.linear.Linear'"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "short_storage.pt"),
                         Contains("tensor 'w' needs 64 bytes of storage 'archive/data/0' but it holds 32"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "missing_storage.pt"),
                         Contains("storage entry 'archive/data/0' is missing"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "big_endian.pt"), Contains("byteorder 'big'"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "cut_pickle.pt"), Contains("cut_pickle.pt: malformed pickle"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "long_model.pt"),
                         Contains("tensor 'idx' is a LongStorage; model tensors must be float32"), ember::Error);
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "bad_offsets.safetensors"),
                         Contains("tensor 'late' data_offsets [16, 80] lie outside the 16 data bytes"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_meta_pkl(kBad + "meta_missing.pkl"), Contains("itos has no entry for id 1"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_meta_pkl(kBad + "meta_two_chars.pkl"),
                         Contains("itos[1] = 'bc' is not exactly one Unicode code point"), ember::Error);
    CHECK_THROWS_WITH_AS(read_meta_pkl(kBad + "meta_unsorted.pkl"),
                         Contains("meta_unsorted.pkl: meta.pkl itos[1] = U+0061 is below itos[0] = U+0062: ember's "
                                  "char tokenizer needs ids in code-point order"),
                         ember::Error);
    // A checkpoint is not a meta.pkl.
    CHECK_THROWS_AS(read_meta_pkl(kReader + "views.pt"), ember::Error);
    // Only regular files: a directory used to read as "not a checkpoint" or a meta.pkl "of
    // implausible size", and /dev/zero as a pickle without STOP.
    CHECK_THROWS_WITH_AS(read_checkpoint(ember::test::fixture("bad")), Contains("tests/fixtures/bad: is a directory"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_meta_pkl(ember::test::fixture("bad")), Contains("tests/fixtures/bad: is a directory"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(read_meta_pkl("/dev/zero"), Contains("/dev/zero: not a regular file"), ember::Error);
    // model_args whose memo references make a tree of 2^31 values from 554 bytes: refused
    // at once, not expanded until memory runs out.
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "model_args_laughs.pt"),
                         Contains("model_args_laughs.pt: model_args holds more than 65536 values"), ember::Error);
    // A state_dict one level down (Lightning's {"state_dict": ...}): its keys and what they hold
    // are named, not only "checkpoint holds no tensors".
    CHECK_THROWS_WITH_AS(read_checkpoint(kBad + "nested_state_dict.pt"),
                         Contains("nested_state_dict.pt: checkpoint holds no tensors at its top level; its keys: 'state_dict': dict of 2 "
                                  "tensors, 'epoch': int; save the state_dict itself (torch.save(ckpt[KEY], 'model.pt'))"),
                         ember::Error);
}

TEST_CASE("unpickler: malformed pickles give errors, never crashes") {
    using doctest::Contains;
    using namespace std::string_literals;
    CHECK_THROWS_WITH_AS(unpickle(""), Contains("test.pkl: malformed pickle at byte 0"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("\x80\x02"), Contains("without a STOP"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle(std::string("X\xff\xff\xff\x7f" "abc.", 9)), Contains("runs past the end"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("h\x05."), Contains("memo entry 5 was never stored"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("t."), Contains("no MARK"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("a."), Contains("empty stack"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("K\x01K\x02s."), Contains("test.pkl: malformed pickle at byte 4"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("]Nb."), Contains("BUILD on a list"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("i__main__\nX\n."), Contains("unsupported opcode 0x69"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("cbuiltins\neval\n."), Contains("global 'builtins.eval'"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("\x8c\x08" "builtins\x8c\x04" "exec\x93."), Contains("global 'builtins.exec'"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("ctorch\nFloatStorage\n)R."), Contains("cannot be called"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("(X\x07\x00\x00\x00storageNX\x01\x00\x00\x00" "0NK\x01tQ."s),
                         Contains("without a storage type"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x04\x00\x00\x00../xNK\x01tQ."s),
                         Contains("storage key '../x'"), ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("\x8a\x09" "123456789."), Contains("wider than 64 bits"), ember::Error);
    // A persistent id of the wrong shape names what it is (it said "not a 5-tuple" of a 6-tuple's
    // neighbours too): a 3-tuple, a str.
    CHECK_THROWS_WITH_AS(unpickle("(NNNtQ."), Contains("(a 5-tuple, or 6 with the legacy format's view_metadata) but a tuple of 3"),
                         ember::Error);
    CHECK_THROWS_WITH_AS(unpickle("X\x01\x00\x00\x00sQ."s), Contains("but a str"), ember::Error);
    // Cycles and deep nesting are held in the arena and destroyed flat.
    CHECK_NOTHROW(unpickle("]q\x00h\x00" "a."s));
    CHECK_NOTHROW(unpickle(std::string(100000, ']') + std::string(99999, 'a') + "."));
    CHECK_THROWS_WITH_AS(unpickle(std::string(70000, '(') + "."), Contains("too many nested MARKs"), ember::Error);
    // 2 MB of None-and-POP pairs: at most 2^20 values, not 230 bytes for each of them.
    std::string many;
    for (int i = 0; i <= (1 << 20); ++i) many += "N0";
    CHECK_THROWS_WITH_AS(unpickle(many + "N."), Contains("more values than any checkpoint holds"), ember::Error);
    // One value memoized 2^20 + 1 times (MEMOIZE): the memo stops at 2^20 entries.
    CHECK_THROWS_WITH_AS(unpickle("N" + std::string((1 << 20) + 1, '\x94') + "."), Contains("the memo grows past its limit"),
                         ember::Error);
}

TEST_CASE("unpickler: every truncation and many byte flips of the real data.pkl fail cleanly") {
    const std::string path = real_dir() + "ckpt.pt";
    REQUIRE_MESSAGE(exists(path), path << " not found (set EMBER_SHARED_DIR to the shared folder)");
    const ember::convert::ZipArchive zip(path);
    const std::vector<uint8_t> pkl = zip.read("ckpt/data.pkl", 1 << 20);
    CHECK_NOTHROW(ember::convert::pickle::unpickle(pkl.data(), pkl.size(), "data.pkl"));
    int failures = 0;
    for (size_t n = 0; n < pkl.size(); n += 3) {
        try {
            ember::convert::pickle::unpickle(pkl.data(), n, "data.pkl");
        } catch (const ember::Error&) {
            ++failures;
        }
    }
    CHECK(failures == static_cast<int>((pkl.size() + 2) / 3));  // every proper prefix lacks STOP
    uint32_t rng = 12345;
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> mutated = pkl;
        for (int k = 0; k < 3; ++k) {
            rng = rng * 1664525u + 1013904223u;
            mutated[(rng >> 8) % mutated.size()] = static_cast<uint8_t>(rng >> 24);
        }
        try {
            ember::convert::pickle::unpickle(mutated.data(), mutated.size(), "data.pkl");
        } catch (const ember::Error&) {
        }
    }
}

TEST_CASE("utf8: strict UTF-8 single code points") {
    using ember::decode_single_code_point;
    uint32_t cp = 0;
    CHECK((decode_single_code_point("a", cp) && cp == 'a'));
    CHECK((decode_single_code_point("\xc3\xa9", cp) && cp == 0xe9));
    CHECK((decode_single_code_point("\xf0\x9f\x98\x80", cp) && cp == 0x1f600));
    CHECK_FALSE(decode_single_code_point("", cp));
    CHECK_FALSE(decode_single_code_point("ab", cp));
    CHECK_FALSE(decode_single_code_point("\xc0\xaf", cp));          // overlong '/'
    CHECK_FALSE(decode_single_code_point("\xed\xa0\x80", cp));      // surrogate U+D800
    CHECK_FALSE(decode_single_code_point("\xf4\x90\x80\x80", cp));  // > U+10FFFF
    CHECK_FALSE(decode_single_code_point("\x80", cp));
    CHECK_FALSE(decode_single_code_point("\xc3", cp));
    CHECK(ember::printable("a\nb") == "a\\x0ab");
    // displayable: UTF-8 kept whole; C0, DEL, C1 (U+009B), invalid bytes, the backslash escaped.
    CHECK(ember::displayable("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");
    CHECK(ember::displayable(std::string("\x1b[H\x7f\xc2\x9b\xff\\\0z", 10)) == "\\x1b[H\\x7f\\xc2\\x9b\\xff\\x5c\\x00z");
    // A right-to-left override (U+202E) would turn the rest of the message around: escaped, and
    // named by its code point alone; so is a zero-width space.
    CHECK(ember::displayable("a\xe2\x80\xae" "b\xe2\x80\x8b") == "a\\xe2\\x80\\xaeb\\xe2\\x80\\x8b");
    CHECK(ember::describe_code_point(0x202E) == "U+202E");
    CHECK(ember::describe_code_point(0xFEFF) == "U+FEFF");
    CHECK(ember::describe_code_point(0x20AC) == "'\xe2\x82\xac' (U+20AC)");
}

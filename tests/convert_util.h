// Fixtures converted into .ember files for the suites (converter/convert.h): one place for the
// ConvertOptions that a test's model needs, so that each suite states only what it varies.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "converter/convert.h"
#include "runtime/model.h"
#include "test_util.h"

namespace ember::test {

// Converts the checkpoint `ckpt` into dir/name and returns that path. vocab_flag says what
// `vocab` is, named as the converter's options: "text" (--vocab-text, a text file), "meta"
// (--meta, nanoGPT's meta.pkl) or "tokenizer" (--tokenizer, a folder holding GPT-2's
// encoder.json and vocab.bpe); another name throws std::invalid_argument. dtype and group: the
// stored weights (group: int8 values per scale). Throws ember::Error as convert::convert does.
inline std::string convert_to(const TempDir& dir, const std::string& ckpt, const std::string& vocab_flag, const std::string& vocab,
                              convert::WeightDType dtype, const std::string& name = "m.ember", int group = 64) {
    convert::ConvertOptions o;
    o.checkpoint = ckpt;
    if (vocab_flag == "text") o.vocab_text = vocab;
    else if (vocab_flag == "meta") o.meta = vocab;
    else if (vocab_flag == "tokenizer") o.tokenizer = {vocab + "/encoder.json", vocab + "/vocab.bpe"};
    else throw std::invalid_argument("convert_to: vocab_flag \"" + vocab_flag + "\" is none of text, meta, tokenizer");
    o.out = dir.file(name);
    o.write.dtype = dtype;
    o.write.group_size = group;
    convert::convert(o);
    return o.out;
}

// The gpt.py fixture (tests/fixtures/gptpy: model.pt, vocab.txt) in dir/name.
inline std::string convert_gptpy(const TempDir& dir, convert::WeightDType dtype = convert::WeightDType::I8,
                                 const std::string& name = "m.ember", int group = 64) {
    return convert_to(dir, fixture("gptpy/model.pt"), "text", fixture("gptpy/vocab.txt"), dtype, name, group);
}

// Where tensor `name`'s data starts in the bytes of a safetensors file (an 8-byte header length,
// the JSON header, the data); *cols (may be null) gets its shape's second dimension.
inline size_t safetensors_data_at(const std::string& bytes, const char* name, int* cols = nullptr) {
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
    if (cols) *cols = header[name]["shape"][1].get<int>();
    return 8 + header_len + header[name]["data_offsets"][0].get<size_t>();
}

// gptpy/model.safetensors with block 0's first FFN weight's first 32 rows set to +-3e38 (signs
// from a fixed pseudo-random sequence), written to path: int8 keeps them (scale 3e38 / 127).
// Each such hidden unit is 3e38 times a +-1 projection of the LayerNorm's output, which passes
// 1.13 (and overflows f32 to +inf, kept by ReLU) for one of 32 independent projections at every
// position but with a chance of about 0.58^32; the next linear quantizes the inf, so every
// logit is NaN, at every kernel level. (One sign pattern shared by 4 rows left a single
// projection, finite at about 1 position in 6: NEON's decode of "The" stayed finite.)
// Vocabulary: gptpy/vocab.txt.
inline void write_overflowing_ffn_checkpoint(const std::string& path) {
    std::string bytes = read_file(fixture("gptpy/model.safetensors"));
    int C = 0;
    const size_t at = safetensors_data_at(bytes, "blocks.0.ffwd.net.0.weight", &C);
    uint32_t state = 12345;  // a fixed linear congruential sequence: the same file everywhere
    for (int c = 0; c < 32 * C; ++c) {
        state = state * 1664525u + 1013904223u;
        const float v = (state >> 31) ? 3e38f : -3e38f;
        std::memcpy(&bytes[at + 4 * static_cast<size_t>(c)], &v, 4);
    }
    write_file(path, bytes);
}

// A converted model, open, with the temporary folder that holds its file (removed with it).
struct ConvertedModel {
    TempDir dir;
    std::string path;
    std::unique_ptr<Model> model;
};

// convert_to() into a folder of its own (file m.ember), then Model::open.
inline std::unique_ptr<ConvertedModel> open_converted(const std::string& ckpt, const std::string& vocab_flag, const std::string& vocab,
                                                      convert::WeightDType dtype, int group = 64) {
    auto c = std::make_unique<ConvertedModel>();
    c->path = convert_to(c->dir, ckpt, vocab_flag, vocab, dtype, "m.ember", group);
    c->model = Model::open(c->path);
    return c;
}

}  // namespace ember::test

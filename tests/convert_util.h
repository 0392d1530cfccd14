// Fixtures converted into .ember files for the suites (converter/convert.h): one place for the
// ConvertOptions that a test's model needs, so that each suite states only what it varies.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

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

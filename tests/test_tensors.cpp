// The table of canonical tensors (runtime/tensors.h) against converted fixture models: every
// tensor of a file is in canonical_tensors with the same shape and in the same order, the
// counts agree for tied and untied, bias and bias-free models, and for_each_weight walks the
// loaded views in that order.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "converter/checkpoint.h"
#include "converter/convert.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/tensors.h"
#include "test_util.h"

using namespace ember;
using ember::test::fixture;

namespace {

// What a fixture holds besides the required tensors.
struct Expect {
    bool tied;
    int biases_per_layer;  // of ln_1, qkv, proj, ln_2, fc, fc2
    int global_biases;     // of ln_f, lm_head
};

// Checks a loaded model against the table.
void check_against_table(const Model& model, const Expect& x) {
    const ModelConfig& c = model.config();
    const std::vector<CanonicalEntry> canon = canonical_tensors(c);
    const int L = c.n_layer;
    CHECK(c.tied_lm_head == x.tied);
    CHECK(canon.size() == static_cast<size_t>(12 * L + (x.tied ? 5 : 6)));
    const auto required = std::count_if(canon.begin(), canon.end(), [](const CanonicalEntry& e) { return e.required; });
    CHECK(required == 6 * L + (x.tied ? 3 : 4));
    CHECK(model.tensors().size() == static_cast<size_t>(required + L * x.biases_per_layer + x.global_biases));

    // The file's tensors are a subsequence of the canonical list, shapes equal, holding every
    // required entry.
    size_t i = 0;
    for (const CanonicalEntry& e : canon) {
        CAPTURE(e.name);
        const bool here = i < model.tensors().size() && model.tensors()[i].name == e.name;
        if (!here) {
            CHECK_FALSE(e.required);
            continue;
        }
        const TensorInfo& t = model.tensors()[i++];
        CHECK(std::vector<int64_t>(t.shape.begin(), t.shape.end()) == e.shape);
    }
    CHECK(i == model.tensors().size());

    // The walk: canonical order, views of the right shape, absent biases null, lm_head tied.
    const ModelWeights& w = model.weights();
    size_t n = 0, file_i = 0;
    for_each_weight(w, c, [&](const CanonicalEntry& e, ConstWeightSlot s) {
        CAPTURE(e.name);
        REQUIRE(n < canon.size());
        CHECK(e.name == canon[n++].name);
        CHECK((s.mat != nullptr) != (s.vec != nullptr));
        CHECK((s.mat != nullptr) == !e.vector());
        const bool in_file = file_i < model.tensors().size() && model.tensors()[file_i].name == e.name;
        if (in_file) ++file_i;
        if (s.mat) {
            CHECK(s.mat->data != nullptr);
            CHECK(s.mat->rows == e.shape[0]);
            CHECK(s.mat->cols == e.shape[1]);
        } else {
            CHECK((*s.vec != nullptr) == in_file);
        }
    });
    CHECK(n == canon.size());
    CHECK(file_i == model.tensors().size());
    CHECK((w.lm_head.data == w.wte.data) == x.tied);
}

std::unique_ptr<Model> convert_fixture(const test::TempDir& dir, const std::string& ckpt, const std::string& vocab_flag,
                                       const std::string& vocab) {
    convert::ConvertOptions o;
    o.checkpoint = fixture(ckpt);
    o.out = dir.file("m.ember");
    if (vocab_flag == "text") o.vocab_text = fixture(vocab);
    if (vocab_flag == "meta") o.meta = fixture(vocab);
    if (vocab_flag == "bpe") o.tokenizer = {fixture(vocab)};
    o.write.dtype = convert::WeightDType::I8;
    convert::convert(o);
    return Model::open(o.out);
}

}  // namespace

TEST_CASE("tensor table: gpt.py (untied, biases but qkv's), nanoGPT and GPT-2 (tied, biases) files hold its tensors") {
    test::TempDir dir;
    // gpt.py: lm_head.weight and lm_head.bias of its own; its heads have no bias.
    check_against_table(*convert_fixture(dir, "gptpy/model.pt", "text", "gptpy/vocab.txt"), {false, 5, 2});
    // nanoGPT (bias=True): lm_head tied to wte and without bias.
    check_against_table(*convert_fixture(dir, "nanogpt/ckpt.pt", "meta", "nanogpt/meta.pkl"), {true, 6, 1});
    // Hugging Face GPT-2 safetensors: tied (stored once), no lm_head.bias.
    check_against_table(*convert_fixture(dir, "gpt2/hf/model.safetensors", "bpe", "gpt2/tiny_tokenizer"), {true, 6, 1});
}

TEST_CASE("tensor table: a bias-free nanoGPT (bias=False) holds exactly the required tensors") {
    test::TempDir dir;
    convert::Checkpoint ckpt = convert::read_checkpoint(fixture("nanogpt/ckpt.pt"));
    for (auto it = ckpt.tensors.begin(); it != ckpt.tensors.end();) {
        const std::string& k = it->first;
        const bool bias = k.size() > 5 && k.compare(k.size() - 5, 5, ".bias") == 0 && !convert::is_attention_mask_key(k);
        it = bias ? ckpt.tensors.erase(it) : std::next(it);
    }
    const convert::CanonicalModel cm = convert::to_canonical(std::move(ckpt), convert::ArchChoice::NanoGPT, "bias-free ckpt.pt");
    const std::string out = dir.file("nobias.ember");
    convert::write_ember(cm, convert::read_meta_pkl(fixture("nanogpt/meta.pkl")), {}, {}, out);
    auto model = Model::open(out);
    check_against_table(*model, {true, 0, 0});
    for (const LayerWeights& l : model->weights().layers) {
        for (const float* b : {l.ln_1_b, l.qkv_b, l.proj_b, l.ln_2_b, l.fc_b, l.fc2_b}) CHECK(b == nullptr);
    }
    CHECK(model->weights().ln_f_b == nullptr);
}

TEST_CASE("tensor table: names, shapes and order of a small configuration") {
    ModelConfig c;
    c.n_layer = 2;
    c.n_embd = 8;
    c.block_size = 4;
    c.vocab_size = 5;
    c.ffn_hidden = 32;
    const std::vector<CanonicalEntry> untied = canonical_tensors(c);
    REQUIRE(untied.size() == 30);
    CHECK(untied[0].name == "wte");
    CHECK(untied[0].shape == std::vector<int64_t>{5, 8});
    CHECK(untied[1].shape == std::vector<int64_t>{4, 8});
    CHECK(untied[4].name == "h.0.qkv.weight");
    CHECK(untied[4].shape == std::vector<int64_t>{24, 8});
    CHECK(untied[5].name == "h.0.qkv.bias");
    CHECK_FALSE(untied[5].required);
    CHECK(untied[12].name == "h.0.fc2.weight");
    CHECK(untied[12].shape == std::vector<int64_t>{8, 32});
    CHECK(untied[14].name == "h.1.ln_1.weight");
    CHECK(untied[14].layer == 1);
    CHECK(untied[28].name == "lm_head.weight");
    CHECK(untied[28].required);
    CHECK(untied[29].name == "lm_head.bias");
    CHECK(untied[29].shape == std::vector<int64_t>{5});
    c.tied_lm_head = true;
    const std::vector<CanonicalEntry> tied = canonical_tensors(c);
    REQUIRE(tied.size() == 29);
    CHECK(tied[28].name == "lm_head.bias");
    ModelWeights w;  // one layer short of the configuration
    w.layers.resize(1);
    CHECK_THROWS_AS(for_each_weight(w, c, [](const CanonicalEntry&, WeightSlot) {}), Error);
}

// The shipped model (models/shakespeare_char.pt): its f32 conversion reproduces the
// validation loss PyTorch measured at the end of training (tools/train_char_gpt.py writes it
// to models/shakespeare_char.pt.json), and int8 stays within 0.02 of f32.
#include <doctest/doctest.h>

#include "converter/convert.h"
#include "runtime/eval.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"
#include "test_util.h"

using namespace ember;

namespace {

EvalResult val_loss(const std::string& ember_path, const std::string& text_path) {
    auto model = Model::open(ember_path);
    const CharTokenizer tok(model->code_points());
    const auto ids = tok.encode(test::read_file(text_path), text_path);
    SessionOptions so;
    so.threads = 2;
    so.all_logits = true;
    Session s(*model, so);
    const int64_t start = val_split_start(static_cast<int64_t>(ids.size()));
    return evaluate(s, ids.data() + start, static_cast<int64_t>(ids.size()) - start, model->config().block_size,
                    model->config().vocab_size);
}

}  // namespace

TEST_CASE("default model: f32 eval loss equals PyTorch's, int8 within 0.02 of f32") {
#ifdef EMBER_EMULATOR
    // Two evaluations over the whole validation split: under qemu-aarch64 it had not finished
    // after 8 minutes. The fixtures' eval losses against PyTorch (test_end_to_end.cpp) run there.
    MESSAGE("SKIPPED under " EMBER_EMULATOR ": the default model's full validation loss (too slow emulated)");
    return;
#endif
    const std::string root = test::source_dir() + "/models/";
    const auto report = test::load_json(root + "shakespeare_char.pt.json");
    const std::string text = test::shared_dir() + "/data/tinyshakespeare.txt";
    test::TempDir dir;
    EvalResult loss[2];
    const convert::WeightDType dtypes[2] = {convert::WeightDType::F32, convert::WeightDType::I8};
    for (int i = 0; i < 2; ++i) {
        convert::ConvertOptions o;
        o.checkpoint = root + "shakespeare_char.pt";
        o.vocab_text = root + "shakespeare_char.vocab.txt";
        o.out = dir.file("m.ember");
        o.write.dtype = dtypes[i];
        convert::convert(o);
        loss[i] = val_loss(o.out, text);
    }
    CHECK(loss[0].tokens == report["val_tokens"].get<int64_t>());
    CHECK(loss[0].loss == doctest::Approx(report["val_loss"].get<double>()).epsilon(1e-3));
    CHECK(std::fabs(loss[1].loss - loss[0].loss) < 0.02);
    MESSAGE("val loss: f32 ", loss[0].loss, ", int8 ", loss[1].loss, " (PyTorch ", report["val_loss"].get<double>(), ")");
}

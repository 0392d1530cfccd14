// The runtime on the device's CPU (these tests also run for aarch64 under qemu, where linear()
// runs its NEON or dotprod kernels): the committed f16 and int8 conversions of the gpt.py fixture model
// give PyTorch's logits (tests/fixtures/gptpy/expected.json, written by tools/make_fixtures.py)
// within the tolerances tests/test_end_to_end.cpp uses on the build machine, with the f32 KV
// cache (the exact run) and with the default f16 one.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "fw_test_util.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace ember;

namespace {

double logits_error(const std::string& path, const nlohmann::json& ex, KvDType kv) {
    auto m = Model::open(path);
    SessionOptions so;
    so.threads = 2;
    so.kv_cache = kv;
    so.all_logits = true;
    Session s(*m, so);
    const auto ids = ex["ids"].get<std::vector<int>>();
    const auto want = ex["logits"].get<std::vector<double>>();
    REQUIRE(m->config().vocab_size == ex["config"]["vocab_size"].get<int>());
    REQUIRE(want.size() == ids.size() * static_cast<size_t>(m->config().vocab_size));
    const float* got = s.forward_window(ids.data(), static_cast<int>(ids.size()));
    double err = 0.0;
    for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
    return err;
}

}  // namespace

TEST_CASE("device runtime: f16 and int8 .ember files give PyTorch's logits on this CPU") {
    std::ifstream in(fwtest::source_dir() + "/tests/fixtures/gptpy/expected.json");
    REQUIRE(in);
    const nlohmann::json ex = nlohmann::json::parse(in);
    // f32 cache: test_end_to_end's bounds for these weights (f16 5e-3, int8 groups of 64 0.1)
    const double f16 = logits_error(fwtest::model_f16(), ex, KvDType::F32);
    const double i8 = logits_error(fwtest::model_int8(), ex, KvDType::F32);
    CHECK(f16 < 5e-3);
    CHECK(i8 < 0.1);
    // the default f16 cache: K and V rounded to binary16 change the int8 activations' rounding
    // too, so int8 gets the 0.15 test_end_to_end allows its other groupings
    const double f16_kv16 = logits_error(fwtest::model_f16(), ex, KvDType::F16);
    const double i8_kv16 = logits_error(fwtest::model_int8(), ex, KvDType::F16);
    CHECK(f16_kv16 < 5e-3);
    CHECK(i8_kv16 < 0.15);
    MESSAGE("max abs logit error against PyTorch: f32 cache: f16 ", f16, ", int8 ", i8, "; f16 cache: f16 ", f16_kv16, ", int8 ", i8_kv16);
}

// The console's `attn`: its parse branch, and the text it answers, which is the attention
// probe's (runtime/attention_probe.h, the same text `ember attn` prints) for the loaded model.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include "firmware/console.h"
#include "firmware/console_parser.h"
#include "fw_test_util.h"
#include "runtime/attention_probe.h"
#include "runtime/model.h"
#include "runtime/tokenizer.h"

using namespace ember;
using namespace ember::fw;
using namespace ember::fwtest;

TEST_CASE("console parser: attn options, text and refusals") {
    ParseResult r = parse_command("attn --layer 1 --head 2 --top 5 to be\\n");
    REQUIRE(r.ok);
    CHECK(r.cmd.kind == CommandKind::Attn);
    CHECK(r.cmd.attn.layer == 1);
    CHECK(r.cmd.attn.head == 2);
    CHECK(r.cmd.attn.top == 5);
    CHECK(r.cmd.text == "to be\n");
    r = parse_command("attn -- --layer");
    REQUIRE(r.ok);
    CHECK(r.cmd.attn.layer == 0);
    CHECK(r.cmd.attn.head == -1);
    CHECK(r.cmd.attn.top == 3);
    CHECK(r.cmd.text == "--layer");
    const std::pair<const char*, const char*> bad[] = {
        {"attn", "attn: usage: attn [--layer L] [--head H] [--top K] [--] TEXT"},
        {"attn --layer 1", "attn: usage: attn"},
        {"attn --layer", "attn: option --layer needs a value"},
        {"attn --head -1 x", "--head -1 not in 0..65536"},
        {"attn --top 0 x", "--top 0 not in 1..1048576"},  // ember attn's range (it was 1..65536 here)
        {"attn --top 1048577 x", "--top 1048577 not in 1..1048576"},
        {"attn --layer 0 --layer 1 x", "attn: --layer given 2 times: give it once"},  // it took the last, ember attn refuses
        {"attn --top 0x10 x", "--top: '0x10' is not an integer"},
        {"attn --layer x y", "--layer: 'x' is not an integer"},
        {"attn -n 3 x", "attn: unknown option '-n' (--layer --head --top"},
    };
    for (const auto& [line, why] : bad) {
        r = parse_command(line);
        CAPTURE(std::string(line));
        CAPTURE(r.error);
        CHECK_FALSE(r.ok);
        CHECK(r.error.find(why) == 0);
    }
}

TEST_CASE("console: attn answers the probe's text for each head, then OK, and errors are one ERR line") {
    TempDir dir;
    write_file(dir.file("tiny.ember"), read_file(model_int8()));
    const std::string prompt = "The lazy dog";
    write_file(dir.file("in"), "load tiny\nattn --layer 1 --head 3 " + prompt + "\nattn --layer 1 a\nattn --layer 9 a\nattn --head 4 a\n"
                               "attn a\xe2\x82\xac\n");
    const int in = ::open(dir.file("in").c_str(), O_RDONLY);
    const int out = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(in >= 0);
    REQUIRE(out >= 0);
    ConsoleOptions o;
    o.models_dir = dir.path();
    o.threads = 1;
    {
        Console c(in, out, o);
        CHECK(c.run() == 0);
    }
    ::close(in);
    ::close(out);
    const std::string got = read_file(dir.file("out"));
    CAPTURE(got);

    auto m = Model::open(dir.file("tiny.ember"));
    const auto tok = make_tokenizer(*m);
    const auto ids = tok->encode(prompt, "prompt");
    std::vector<std::string> labels;
    for (int id : ids) labels.push_back(token_label(*tok, id));
    const AttentionWeights w = attention_weights(*m, ids, 1);
    const std::string want = attention_text(w, labels, 3, 3) + "OK attn layer 1, 12 tokens\n";
    CHECK(got.find(want) != std::string::npos);
    // Without --head: every head (4) of the layer, one token.
    const size_t one = got.find("layer 1 head 0: 1 tokens");
    REQUIRE(one != std::string::npos);
    CHECK(got.find("layer 1 head 3: 1 tokens", one) != std::string::npos);
    CHECK(got.find("ERR attention: layer 9 is outside [0, 2)") != std::string::npos);
    CHECK(got.find("ERR attention: head 4 is outside [0, 4)") != std::string::npos);
    CHECK(got.find("ERR prompt: character") != std::string::npos);
}

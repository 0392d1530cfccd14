// What `ember` records for a person or a script: `info --json`, `bench --runs R` with min,
// median and max, and `finetune --log FILE` (CSV).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "runtime/adapter.h"
#include "runtime/model.h"
#include "test_util.h"

using ember::test::check_refused;
using ember::test::ember_cli;
using ember::test::fixture;
using ember::test::q;
using ember::test::Run;

namespace {

std::string convert_fixture(const ember::test::TempDir& dir) {
    const std::string out = dir.file("m.ember");
    const Run r = ember_cli("convert " + q(fixture("gptpy/model.pt")) + " --vocab-text " + q(fixture("gptpy/vocab.txt")) + " -o " + q(out), dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(s);
    while (std::getline(in, part, sep)) parts.push_back(part);
    if (!s.empty() && s.back() == sep) parts.push_back("");
    return parts;
}

// The number after `key` in text (e.g. "min "), or NaN.
double number_after(const std::string& text, const std::string& key, size_t from = 0) {
    const size_t at = text.find(key, from);
    return at == std::string::npos ? std::nan("") : std::stod(text.substr(at + key.size()));
}

}  // namespace

TEST_CASE("ember info --json holds the facts the text prints") {
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir);
    const Run text = ember_cli("info " + q(model), dir);
    const Run js = ember_cli("info --json " + q(model), dir);
    REQUIRE(text.status == 0);
    REQUIRE(js.status == 0);
    const nlohmann::json j = nlohmann::json::parse(js.out);  // one object, nothing else on stdout
    CHECK(j["config"]["n_layer"] == 2);
    CHECK(j["config"]["n_head"] == 4);
    CHECK(j["config"]["n_embd"] == 32);
    CHECK(j["config"]["head_size"] == 8);
    CHECK(j["config"]["ln_eps"].get<double>() == 1e-5);  // the float, printed as its shortest decimal
    CHECK(j["architecture"] == "gptpy");
    CHECK(j["checksum"]["ok"] == true);
    CHECK(text.out.find(j["checksum"]["xxh64"].get<std::string>()) != std::string::npos);
    CHECK(text.out.find("(" + std::to_string(j["file_bytes"].get<uint64_t>()) + " bytes)") != std::string::npos);
    // The vocabulary is sorted(set(text)) of the training text, as gpt.py builds it.
    const std::string vocab_text = ember::test::read_file(fixture("gptpy/vocab.txt"));
    std::set<std::string> chars;  // UTF-8 sequences: their byte order is code point order
    for (size_t i = 0; i < vocab_text.size();) {
        const unsigned char lead = static_cast<unsigned char>(vocab_text[i]);
        const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        chars.insert(vocab_text.substr(i, len));
        i += len;
    }
    std::string all;
    for (const std::string& c : chars) all += c;
    CHECK(j["tokenizer"]["kind"] == "char");
    CHECK(j["tokenizer"]["characters"] == all);
    CHECK(j["config"]["vocab_size"] == chars.size());
    // Every tensor of the text table, with its bytes; the sum is the weights' total.
    uint64_t bytes = 0;
    for (const auto& t : j["tensors"]) {
        CHECK(text.out.find(t["name"].get<std::string>()) != std::string::npos);
        bytes += t["bytes"].get<uint64_t>();
    }
    CHECK(j["tensors"].size() >= 2 * 4u);
    CHECK(text.out.find("weights: " + std::to_string(j["weight_bytes"].get<uint64_t>()) + " bytes") != std::string::npos);
    CHECK(j["arena"]["generate_bytes"].get<uint64_t>() > 0);
    CHECK(bytes <= j["file_bytes"].get<uint64_t>());

    // A corrupted file: the object says so, and the exit status is 1 with one line on stderr.
    std::string flipped = ember::test::read_file(model);
    flipped[flipped.size() - 70] ^= 0x10;
    ember::test::write_file(dir.file("flip.ember"), flipped);
    const Run bad = ember_cli("info --json " + q(dir.file("flip.ember")), dir);
    CHECK(bad.status == 1);
    const auto bad_j = nlohmann::json::parse(bad.out);
    CHECK(bad_j["checksum"]["ok"] == false);
    // Both hashes, as the error line gives them (only the computed one was there).
    CHECK(bad.err.find("stored " + bad_j["checksum"]["stored"].get<std::string>() + ", computed " + bad_j["checksum"]["xxh64"].get<std::string>()) !=
          std::string::npos);
    CHECK(bad.err.find("checksum mismatch") != std::string::npos);
}

TEST_CASE("ember info on a crafted provenance: no control byte reaches the terminal, nothing is cut at a NUL, and a FIFO is refused at once") {
    ember::test::TempDir dir;
    std::string bytes = ember::test::read_file(convert_fixture(dir));
    // The provenance lies in the index, outside the checksummed data section: the same length
    // of other bytes keeps the file valid. ESC [2J clears a screen; CSI (U+009B) in UTF-8; NUL.
    const std::string name = "model.pt", evil = std::string("\x1b[2\xc2\x9b\xff\n\0", 8);
    const size_t at = bytes.find(name);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, name.size(), evil);
    ember::test::write_file(dir.file("evil.ember"), bytes);
    const Run r = ember_cli("info " + q(dir.file("evil.ember")), dir);
    REQUIRE(r.status == 0);
    const size_t line = r.out.find("source: ");
    REQUIRE(line != std::string::npos);
    CHECK(r.out.substr(line, r.out.find('\n', line) - line).rfind("source: \\x1b[2\\xc2\\x9b\\xff\\x0a\\x00 (sha256 ", 0) == 0);
    for (char c : r.out) CHECK((c == '\n' || static_cast<unsigned char>(c) >= 0x20));
    CHECK(r.out.find("\xc2\x9b") == std::string::npos);
    const Run js = ember_cli("info --json " + q(dir.file("evil.ember")), dir);
    REQUIRE(js.status == 0);
    CHECK(nlohmann::json::parse(js.out)["source"].get<std::string>().find(" (sha256 ") != std::string::npos);

    const std::string fifo = dir.file("fifo.ember");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    check_refused(ember::test::ember_cli_in_shell("timeout 20", "info " + q(fifo), dir), "not a regular file");
}

TEST_CASE("ember bench --runs R prints min, median and max, in text and JSON") {
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir);
    const Run js = ember_cli("bench -m " + q(model) + " -p 8 -n 6 --runs 3 --backend cpu --json", dir);
    REQUIRE(js.status == 0);
    const nlohmann::json j = nlohmann::json::parse(js.out);
    CHECK(j["runs"] == 3);
    CHECK(j["prefill_tokens"] == 8);
    CHECK(j["decode_tokens"] == 6);
    for (const char* f : {"prefill_tok_s", "decode_tok_s"}) {
        CAPTURE(f);
        const double lo = j[std::string(f) + "_min"], mid = j[f], hi = j[std::string(f) + "_max"];
        CHECK(lo > 0);
        CHECK(lo <= mid);
        CHECK(mid <= hi);
    }
    const Run text = ember_cli("bench -m " + q(model) + " -p 8 -n 6 --runs 3 --backend cpu", dir);
    REQUIRE(text.status == 0);
    for (const char* line : {"prefill: ", "decode:  "}) {
        CAPTURE(line);
        const size_t at = text.out.find(line);
        REQUIRE(at != std::string::npos);
        const double mid = number_after(text.out, line), lo = number_after(text.out, "min ", at), hi = number_after(text.out, "max ", at);
        CHECK(text.out.find("median of 3 runs", at) != std::string::npos);
        CHECK(lo > 0);
        CHECK(lo <= mid + 0.5);  // the text rounds to whole tokens/s
        CHECK(mid <= hi + 0.5);
    }
    check_refused(ember_cli("bench -m " + q(model) + " --runs 0", dir), "--runs");

    // The thread pool's dispatches over the timed runs: none with one thread (no workers), some
    // with two (every linear of the decode steps splits its rows), of which the share run on
    // the caller alone can be anything from none to all.
    for (const int threads : {1, 2}) {
        CAPTURE(threads);
        const Run r = ember_cli("bench -m " + q(model) + " -p 8 -n 6 --runs 2 --backend cpu --json --threads " + std::to_string(threads), dir);
        REQUIRE(r.status == 0);
        const nlohmann::json b = nlohmann::json::parse(r.out);
        for (const char* phase : {"prefill", "decode"}) {
            CAPTURE(phase);
            const long all = b.at(std::string(phase) + "_dispatches"), solo = b.at(std::string(phase) + "_solo_dispatches");
            CHECK(solo >= 0);
            CHECK(solo <= all);
            if (threads == 1) CHECK(all == 0);
        }
        if (threads == 2) CHECK(b.at("decode_dispatches").get<long>() >= 2 * 6);
    }
}

TEST_CASE("ember bench on a block_size 1 model: no decode figure (null), not 0 tokens/s") {
    ember::test::TempDir dir;
    // The GPT-2-shaped fixture cut to one position: wpe's first row, n_positions 1.
    const std::string st = ember::test::read_file(fixture("gpt2/hf/model.safetensors"));
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(st[i]);
    nlohmann::json header = nlohmann::json::parse(st.substr(8, n));
    const std::string data = st.substr(8 + n);
    std::string body;
    for (auto& [name, t] : header.items()) {
        if (name == "__metadata__") continue;
        const uint64_t begin = t["data_offsets"][0], end = t["data_offsets"][1];
        std::string bytes = data.substr(begin, end - begin);
        if (name.find("wpe.weight") != std::string::npos) {
            bytes.resize(t["shape"][1].get<size_t>() * 4);
            t["shape"][0] = 1;
        }
        t["data_offsets"] = {body.size(), body.size() + bytes.size()};
        body += bytes;
    }
    const std::string h = header.dump();
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
    ember::test::write_file(dir.file("model.safetensors"), file + h + body);
    nlohmann::json config = ember::test::load_json(fixture("gpt2/hf/config.json"));
    config["n_positions"] = 1;
    config["n_ctx"] = 1;
    ember::test::write_file(dir.file("config.json"), config.dump());
    const std::string model = dir.file("bs1.ember");
    const Run conv = ember_cli("convert " + q(dir.file("model.safetensors")) + " --tokenizer " + q(fixture("gpt2/tiny_tokenizer")) + " -o " + q(model), dir);
    CAPTURE(conv.err);
    REQUIRE(conv.status == 0);

    const Run js = ember_cli("bench -m " + q(model) + " --runs 2 --json", dir);
    REQUIRE(js.status == 0);
    const nlohmann::json j = nlohmann::json::parse(js.out);
    CHECK(j["block_size"] == 1);
    CHECK(j["decode_tokens"] == 0);
    CHECK(j["decode_tok_s"].is_null());
    CHECK(j["decode_tok_s_min"].is_null());
    CHECK(j["prefill_tok_s"].get<double>() > 0);
    const Run text = ember_cli("bench -m " + q(model) + " --runs 1", dir);
    REQUIRE(text.status == 0);
    CHECK(text.out.find("decode:  none (block_size 1 leaves no token to decode") != std::string::npos);
}

TEST_CASE("ember finetune --log FILE writes a CSV row per step, appended on --resume") {
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir), text = fixture("gptpy/eval.txt"), a = dir.file("a.emba"), log = dir.file("log.csv");
    const std::string common = "finetune -m " + q(model) + " --text " + q(text) + " --threads 2 --log " + q(log);
    const Run r = ember_cli(common + " --batch 2 --seq 16 --rank 4 --lr 0.01 --steps 6 --eval-every 3 -o " + q(a), dir);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::vector<std::string> lines = split(ember::test::read_file(log), '\n');
    REQUIRE(lines.size() == 1 + 7 + 1);  // header, steps 0..6, the empty string after the last newline
    CHECK(lines.front() == "step,loss,val_loss,lr,tokens_per_s");
    CHECK(lines.back().empty());
    for (int step = 0; step <= 6; ++step) {
        CAPTURE(step);
        const std::vector<std::string> f = split(lines[1 + step], ',');
        REQUIRE(f.size() == 5);
        CHECK(std::stoi(f[0]) == step);
        CHECK(std::stod(f[3]) == doctest::Approx(0.01));
        if (step == 0) {
            // Before training: no step loss; the validation loss the console line shows.
            CHECK(f[1].empty());
            CHECK(std::stod(f[2]) == doctest::Approx(number_after(r.out, "step 0: val loss ")).epsilon(1e-4));
            continue;
        }
        const double loss = std::stod(f[1]);
        CHECK(std::isfinite(loss));
        CHECK(loss > 0);
        CHECK(std::stod(f[4]) > 0);
        CHECK(f[2].empty() == (step % 3 != 0));  // validation at steps 3 and 6 only
        // The row's loss is the one the progress line printed (to its 4 decimals).
        const std::string shown = "step " + std::to_string(step) + "/6  loss ";
        if (r.out.find(shown) != std::string::npos) CHECK(loss == doctest::Approx(number_after(r.out, shown)).epsilon(1e-4));
        if (step % 3 == 0) CHECK(std::stod(f[2]) == doctest::Approx(number_after(r.out, "val ", r.out.find(shown))).epsilon(1e-4));
    }
    // --resume goes on in the same log: rows 7 and 8, no second header.
    const Run again = ember_cli(common + " --resume " + q(a) + " --steps 8 -o " + q(a), dir);
    REQUIRE(again.status == 0);
    lines = split(ember::test::read_file(log), '\n');
    REQUIRE(lines.size() == 1 + 9 + 1);
    CHECK(std::count(lines.begin(), lines.end(), "step,loss,val_loss,lr,tokens_per_s") == 1);
    CHECK(lines[8].rfind("7,", 0) == 0);
    CHECK(lines[9].rfind("8,", 0) == 0);

    check_refused(ember_cli(common.substr(0, common.find(" --log")) + " --log " + q(dir.file("no/such/dir/log.csv")) + " --steps 1 -o " +
                                q(dir.file("b.emba")),
                            dir),
                  "--log");
}

TEST_CASE("ember finetune --log on a full disk stops the run after that step, writes the adapter, says both and exits 1, and --resume's rows start on a line of their own") {
    // The log's write threw through the training step: the run ended at once, the CSV with a row
    // cut short that --resume then appended to, and nothing said which step the adapter held.
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir), text = fixture("gptpy/eval.txt"), a = dir.file("a.emba"), log = dir.file("log.csv");
    const std::string common = "finetune -m " + q(model) + " --text " + q(text) + " --threads 1 --log " + q(log) + " -o " + q(a);
    // 32 blocks (16 or 32 KiB, by the shell): room for the adapter of rank 1 (12 KiB), and the log
    // fills it after some hundreds of rows.
    const Run r = ember::test::ember_cli_in_shell("ulimit -f 32; exec", common + " --rank 1 --batch 1 --seq 8 --steps 100000 --eval-every 100000", dir);
    CAPTURE(r.out);
    CAPTURE(r.err);
    REQUIRE(r.status == 1);
    const std::string said = "ember: error: --log " + log + ": cannot write: File too large: the run stopped after step ";
    REQUIRE(r.err.find(said) != std::string::npos);
    const int step = std::stoi(r.err.substr(r.err.find(said) + said.size()));
    CHECK(step > 10);
    CHECK(r.err.find(", written to " + a + " (--resume goes on from it)") != std::string::npos);
    CHECK(r.out.find("wrote " + a + " at step " + std::to_string(step) + ": val loss ") != std::string::npos);
    CHECK(r.out.find("interrupted") == std::string::npos);
    auto m = ember::Model::open(model);
    CHECK(ember::LoraAdapter::load(a, *m)->train.step == static_cast<uint64_t>(step));
    const std::string cut = ember::test::read_file(log);
    REQUIRE(!cut.empty());
    CHECK(cut.back() != '\n');  // the row the disk cut short
    // --resume without the limit: its rows start after the cut one, each whole.
    const Run again = ember_cli(common.substr(0, common.find(" -o ")) + " --resume " + q(a) + " --steps " + std::to_string(step + 2) + " -o " + q(a), dir);
    CAPTURE(again.err);
    REQUIRE(again.status == 0);
    const std::vector<std::string> lines = split(ember::test::read_file(log), '\n');
    REQUIRE(lines.size() >= 4);
    CHECK(lines.back().empty());
    CHECK(lines[lines.size() - 3].rfind(std::to_string(step + 1) + ",", 0) == 0);
    CHECK(lines[lines.size() - 2].rfind(std::to_string(step + 2) + ",", 0) == 0);
    CHECK(split(lines[lines.size() - 2], ',').size() == 5);
    CHECK(cut + "\n" == ember::test::read_file(log).substr(0, cut.size() + 1));  // the cut row kept as it was, alone
}

TEST_CASE("ember finetune --log refuses a file that is not a log, the adapter's own path and a FIFO no one reads, spoiling nothing") {
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir), a = dir.file("a.emba");
    const std::string text = dir.file("train.txt");
    ember::test::write_file(text, ember::test::read_file(fixture("gptpy/eval.txt")));
    const std::string run = "finetune -m " + q(model) + " --text " + q(text) + " --threads 2 --batch 2 --steps 1 -o " + q(a) + " --log ";
    // The training text, the model, any other file: refused, the bytes as they were.
    for (const std::string& victim : {text, model}) {
        const std::string before = ember::test::read_file(victim);
        check_refused(ember_cli(run + q(victim), dir), "exists and is not a finetune log");
        CHECK(ember::test::read_file(victim) == before);
    }
    // -o itself, spelled otherwise: the checkpoint's rename would drop the rows.
    check_refused(ember_cli(run + q(dir.path() + "/./a.emba"), dir), "is also -o");
    // A FIFO with no reader: an error at once, not a wait.
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    check_refused(ember::test::ember_cli_in_shell("timeout 20", run + q(fifo), dir), "--log");
    // A log this command wrote is appended to: the header once.
    const std::string log = dir.file("log.csv");
    REQUIRE(ember_cli(run + q(log), dir).status == 0);
    const Run resumed = ember_cli("finetune -m " + q(model) + " --text " + q(text) + " --threads 2 --steps 2 -o " + q(a) + " --resume " + q(a) +
                                  " --log " + q(log), dir);
    CAPTURE(resumed.err);
    REQUIRE(resumed.status == 0);
    const std::vector<std::string> lines = split(ember::test::read_file(log), '\n');
    CHECK(std::count(lines.begin(), lines.end(), "step,loss,val_loss,lr,tokens_per_s") == 1);
    CHECK(lines.size() == 1 + 3 + 1);
}

TEST_CASE("ember finetune that diverges (an lr far too high) exits 1, writes no adapter whose loss is not finite, and leaves an older one whole") {
    ember::test::TempDir dir;
    const std::string model = convert_fixture(dir), text = fixture("gptpy/eval.txt"), a = dir.file("a.emba");
    const std::string common = "finetune -m " + q(model) + " --text " + q(text) + " --threads 1 --batch 2 --seq 16 --rank 4 ";
    // With lr 1e30 the first step's update is finite but huge, and every later loss is NaN. It
    // used to run all its steps, write an adapter that only gives NaN, and exit 0.
    const Run r = ember_cli(common + "--lr 1e30 --steps 200 --eval-every 100 -o " + q(dir.file("b.emba")), dir);
    CAPTURE(r.out);
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("training diverged: steps ") != std::string::npos);
    CHECK(r.err.find(" each gave a non-finite loss or gradient (lr 1e+30 or alpha / rank 4 is likely too high; lr x weight decay 0.01 = "
                     "1e+28 >= 1 scales the adapter by 1 - that each step); ") != std::string::npos);
    CHECK(r.err.find("b.emba was not created (no checkpoint of it was written)") != std::string::npos);
    // A weight decay far too high names itself (it used to blame the lr or alpha / rank alone).
    const Run wd = ember_cli(common + "--weight-decay 1e30 --steps 200 --eval-every 100 -o " + q(dir.file("w.emba")), dir);
    CAPTURE(wd.err);
    CHECK(wd.status == 1);
    CHECK(wd.err.find("; lr x weight decay 1e+30 = 2e+27 >= 1 scales the adapter by 1 - that each step)") != std::string::npos);
    CHECK(!std::filesystem::exists(dir.file("b.emba")));
    // A huge alpha with the clip as huge: the loss may stay finite while a gradient squared
    // overflows the AdamW second moment. It used to end in "the adapter holds non-finite
    // values; not written", naming neither the divergence nor its cause.
    const Run al = ember_cli(common + "--alpha 3e38 --clip 3e38 --steps 40 --eval-every 1 -o " + q(dir.file("al.emba")), dir);
    CAPTURE(al.err);
    CHECK(al.status == 1);
    CHECK(al.err.find("training diverged") != std::string::npos);
    CHECK(al.err.find("or alpha / rank 7.5e+37 is likely too high") != std::string::npos);
    CHECK(al.err.find("not written") == std::string::npos);
    CHECK(!std::filesystem::exists(dir.file("al.emba")));
    // An adapter already at -o (a good run's) stays whole: the diverging run used to replace it
    // with the untrained adapter it wrote before its first step.
    const Run good = ember_cli(common + "--steps 2 -o " + q(a), dir);
    CAPTURE(good.err);
    REQUIRE(good.status == 0);
    const std::string before = ember::test::read_file(a);
    // With a checkpoint due before the 20 skipped steps: its validation loss is NaN, so it is not written.
    const Run c = ember_cli(common + "--lr 1e30 --steps 200 --eval-every 2 -o " + q(a), dir);
    CAPTURE(c.err);
    CHECK(c.status == 1);
    CHECK(c.err.find("training diverged at step 2: the validation loss is nan") != std::string::npos);
    CHECK(c.err.find("a.emba is as it was before this run") != std::string::npos);
    CHECK(ember::test::read_file(a) == before);
    // A checkpoint written before the divergence is what -o keeps, and it scores finitely
    // (lr 10 on this fixture, on the AVX-512 EPYC: steps 1 and 2 finite, the validation loss
    // NaN at step 3; the step may differ with another CPU's rounding).
    const Run k = ember_cli(common + "--lr 10 --steps 60 --eval-every 1 -o " + q(a), dir);
    CAPTURE(k.err);
    CHECK(k.status == 1);
    CHECK(k.err.find("training diverged at step ") != std::string::npos);
    CHECK(k.err.find("a.emba keeps the adapter of step ") != std::string::npos);
    const Run e = ember_cli("eval -m " + q(model) + " --adapter " + q(a) + " --text " + q(text) + " --threads 1", dir);
    CAPTURE(e.out);
    CAPTURE(e.err);
    CHECK(e.status == 0);
    CHECK(e.out.find("loss nan") == std::string::npos);
    CHECK(e.out.find("loss ") == 0);
}

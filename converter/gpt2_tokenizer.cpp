#include "converter/gpt2_tokenizer.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <map>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember::convert {

uint32_t gpt2_byte_to_code_point(uint8_t b) {
    // Printable Latin-1 bytes stand for themselves; the others, in byte order, for 256, 257, ...
    auto printable_byte = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF); };
    if (printable_byte(b)) return b;
    uint32_t n = 0;
    for (int x = 0; x < b; ++x) n += printable_byte(x) ? 0 : 1;
    return 256 + n;
}

namespace {

constexpr size_t kMaxFileBytes = size_t{64} << 20;

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

// The bytes a token string of encoder.json stands for.
std::string token_bytes(const std::string& s, const std::unordered_map<uint32_t, uint8_t>& byte_of, const std::string& what) {
    std::string out;
    size_t pos = 0;
    while (pos < s.size()) {
        uint32_t cp = 0;
        if (!utf8_next(s, pos, cp)) fail(what, ": token '", printable(s), "' is not valid UTF-8");
        auto it = byte_of.find(cp);
        if (it == byte_of.end()) {
            fail(what, ": token '", printable(s), "' holds ", describe_code_point(cp), ", which is not in GPT-2's byte alphabet");
        }
        out.push_back(static_cast<char>(it->second));
    }
    if (out.empty()) fail(what, ": an empty token");
    return out;
}

}  // namespace

BpeData read_gpt2_tokenizer(const std::vector<std::string>& files) {
    std::string vocab_path, merges_path;
    if (files.size() == 1 && is_dir(files[0])) {
        const std::string d = files[0] + "/";
        if (exists(d + "encoder.json") && exists(d + "vocab.bpe")) {
            vocab_path = d + "encoder.json";
            merges_path = d + "vocab.bpe";
        } else if (exists(d + "vocab.json") && exists(d + "merges.txt")) {
            vocab_path = d + "vocab.json";
            merges_path = d + "merges.txt";
        } else {
            fail(printable(files[0], 200), ": holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt");
        }
    } else if (files.size() == 2) {
        for (const std::string& f : files) {
            const std::string head = read_text_file(f, kMaxFileBytes).substr(0, 64);
            const size_t first = head.find_first_not_of(" \t\r\n");
            (first != std::string::npos && head[first] == '{' ? vocab_path : merges_path) = f;
        }
        if (vocab_path.empty() || merges_path.empty()) {
            fail("--tokenizer: give GPT-2's encoder.json (a JSON object) and vocab.bpe (the merges), or a folder holding them");
        }
    } else {
        fail("--tokenizer: give GPT-2's encoder.json and vocab.bpe (or vocab.json and merges.txt), or a folder holding them");
    }
    const std::string vw = printable(vocab_path, 200), mw = printable(merges_path, 200);

    std::unordered_map<uint32_t, uint8_t> byte_of;
    for (int b = 0; b < 256; ++b) byte_of[gpt2_byte_to_code_point(static_cast<uint8_t>(b))] = static_cast<uint8_t>(b);

    nlohmann::json enc;
    try {
        enc = nlohmann::json::parse(read_text_file(vocab_path, kMaxFileBytes));
    } catch (const nlohmann::json::exception& e) {
        fail(vw, ": not valid JSON (", e.what(), ")");
    }
    if (!enc.is_object()) fail(vw, ": not a JSON object {token: id}");
    const size_t n = enc.size();
    if (n < 256 || n > static_cast<size_t>(kMaxBpeTokens)) fail(vw, ": holds ", n, " tokens; a byte-level BPE has 256 to ", kMaxBpeTokens);
    std::vector<std::string> tokens(n);
    std::vector<char> have(n, 0);
    std::unordered_map<std::string, uint32_t> id_of;  // token string (GPT-2 alphabet) -> id
    id_of.reserve(n);
    for (const auto& [key, value] : enc.items()) {
        if (!value.is_number_unsigned() || value.get<uint64_t>() >= n) {
            // dump() only for numbers: it recurses per nesting level of a hostile value.
            fail(vw, ": token '", printable(key), "' has id ", value.is_number() ? value.dump() : std::string("a JSON ") + value.type_name(),
                 "; ids must be 0..", n - 1);
        }
        const auto id = value.get<uint32_t>();
        if (have[id]) fail(vw, ": id ", id, " is given to two tokens");
        have[id] = 1;
        tokens[id] = token_bytes(key, byte_of, vw);
        id_of.emplace(key, id);
    }

    BpeData d;
    d.offsets.reserve(n + 1);
    d.offsets.push_back(0);
    for (const std::string& t : tokens) {
        d.bytes += t;
        if (d.bytes.size() > UINT32_MAX) fail(vw, ": the tokens hold more than 4 GiB");
        d.offsets.push_back(static_cast<uint32_t>(d.bytes.size()));
    }

    const std::string text = read_text_file(merges_path, kMaxFileBytes);
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        const size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos) {
            fail(mw, ":", line_no, ": not a merge \"A B\": '", printable(line), "'");
        }
        const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
        auto ia = id_of.find(a), ib = id_of.find(b), ic = id_of.find(a + b);
        if (ia == id_of.end() || ib == id_of.end() || ic == id_of.end()) {
            fail(mw, ":", line_no, ": merge '", printable(line), "' uses or makes a token that ", vw, " lacks");
        }
        d.merges.push_back({ia->second, ib->second, ic->second});
    }
    verify_bpe(d, vw + " + " + mw);
    return d;
}

}  // namespace ember::convert

#include "converter/gpt2_tokenizer.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
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

namespace {

struct Merge {
    std::string a, b;
    std::string where;  // FILE:LINE or FILE: model.merges[i]
};

// The BPE of a {token: id} vocabulary (GPT-2's byte alphabet), tokens added past it (raw
// bytes; tokenizer.json's added_tokens that the vocabulary lacks) and the merges in rank order.
BpeData build_bpe(const nlohmann::json& enc, const std::vector<std::string>& added, const std::vector<Merge>& merges,
                  const std::string& vw, const std::string& both) {
    std::unordered_map<uint32_t, uint8_t> byte_of;
    for (int b = 0; b < 256; ++b) byte_of[gpt2_byte_to_code_point(static_cast<uint8_t>(b))] = static_cast<uint8_t>(b);
    if (!enc.is_object()) fail(vw, ": not a JSON object {token: id}");
    const size_t n = enc.size();
    if (n < 256 || n + added.size() > static_cast<size_t>(kMaxBpeTokens)) fail(vw, ": holds ", n + added.size(), " tokens; a byte-level BPE has 256 to ", kMaxBpeTokens);
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
    tokens.insert(tokens.end(), added.begin(), added.end());

    BpeData d;
    d.offsets.reserve(tokens.size() + 1);
    d.offsets.push_back(0);
    for (const std::string& t : tokens) {
        d.bytes += t;
        if (d.bytes.size() > UINT32_MAX) fail(vw, ": the tokens hold more than 4 GiB");
        d.offsets.push_back(static_cast<uint32_t>(d.bytes.size()));
    }
    for (const Merge& m : merges) {
        auto ia = id_of.find(m.a), ib = id_of.find(m.b), ic = id_of.find(m.a + m.b);
        if (ia == id_of.end() || ib == id_of.end() || ic == id_of.end()) {
            const std::string& missing = ia == id_of.end() ? m.a : ib == id_of.end() ? m.b : m.a + m.b;
            fail(m.where, ": merge '", printable(m.a + " " + m.b), "' ", ic == id_of.end() && ia != id_of.end() && ib != id_of.end() ? "makes" : "uses",
                 " token '", printable(missing), "', which ", vw, " lacks");
        }
        d.merges.push_back({ia->second, ib->second, ic->second});
    }
    verify_bpe(d, both);
    return d;
}

nlohmann::json parse_json_text(const std::string& text, const std::string& what) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail(what, ": not valid JSON (", e.what(), ")");
    }
}

nlohmann::json parse_json(const std::string& path, const std::string& what) {
    return parse_json_text(read_text_file(path, kMaxFileBytes, "a tokenizer file"), what);
}

// The first byte of text that is not JSON whitespace (after a UTF-8 byte-order mark, which
// the JSON parser skips too), or 0 where there is none.
char first_non_space(const std::string& text) {
    const size_t from = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    const size_t first = text.find_first_not_of(" \t\r\n", from);
    return first == std::string::npos ? '\0' : text[first];
}

// "A B" (a merges.txt line, or a merge string of tokenizers < 0.20): A and B, non-empty and
// without spaces. False for anything else.
bool split_merge(const std::string& line, std::string* a, std::string* b) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos) return false;
    *a = line.substr(0, sp);
    *b = line.substr(sp + 1);
    return true;
}

// The "type" of a tokenizer.json component, for messages: "null" when absent.
std::string type_of(const nlohmann::json& j, const char* key) {
    if (!j.contains(key) || j[key].is_null()) return "null";
    const auto& v = j[key];
    if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) return std::string("a JSON ") + v.type_name() + " without a type";
    return printable(v["type"].get<std::string>());
}

// Hugging Face tokenizers' tokenizer.json: a BPE model with GPT-2's byte-level pre-tokenizer
// and decoder; anything else is refused, naming what it is.
BpeData read_tokenizer_json(const nlohmann::json& j, const std::string& w) {
    const std::string gpt2 = " (ember reads GPT-2's byte-level BPE only)";
    const std::string only = ", and ember reads that BPE only";
    if (!j.contains("model") || !j["model"].is_object()) fail(w, ": no \"model\" object: not a tokenizers tokenizer.json");
    const nlohmann::json& m = j["model"];
    const std::string mt = type_of(j, "model");
    if (mt != "BPE") fail(w, ": model.type is ", mt, gpt2, ": a WordPiece, Unigram or WordLevel vocabulary is another tokenizer");
    if (const std::string pre = type_of(j, "pre_tokenizer"); pre != "ByteLevel") fail(w, ": pre_tokenizer is ", pre, ", not ByteLevel", gpt2);
    const auto& pre = j["pre_tokenizer"];
    // Flags are booleans when present (json::value would throw a type_error naming no file).
    auto flag = [&](const nlohmann::json& o, const char* part, const char* key, bool absent) {
        if (!o.contains(key) || o[key].is_null()) return absent;
        if (!o[key].is_boolean()) fail(w, ": ", part, ".", key, " is a JSON ", o[key].type_name(), ", not true or false");
        return o[key].get<bool>();
    };
    if (flag(pre, "pre_tokenizer", "add_prefix_space", false)) fail(w, ": pre_tokenizer ByteLevel has add_prefix_space true; GPT-2's byte-level BPE adds no space before the text", only);
    if (!flag(pre, "pre_tokenizer", "use_regex", true)) fail(w, ": pre_tokenizer ByteLevel has use_regex false; GPT-2's byte-level BPE splits the text with its pattern", only);
    if (const std::string dec = type_of(j, "decoder"); dec != "ByteLevel") fail(w, ": decoder is ", dec, ", not ByteLevel", gpt2);
    if (const std::string norm = type_of(j, "normalizer"); norm != "null") fail(w, ": normalizer is ", norm, "; GPT-2's byte-level BPE has no normalizer", only);
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (m.contains(k) && !m[k].is_null() && m[k] != "") fail(w, ": model.", k, " is set; GPT-2's byte-level BPE has none", only);
    }
    if (flag(m, "model", "byte_fallback", false)) fail(w, ": model.byte_fallback is true", gpt2);
    if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") || !m["merges"].is_array()) {
        fail(w, ": model needs a vocab object {token: id} and a merges array");
    }
    std::vector<Merge> merges;
    merges.reserve(m["merges"].size());
    for (size_t i = 0; i < m["merges"].size(); ++i) {
        const auto& e = m["merges"][i];
        const std::string where = w + ": model.merges[" + std::to_string(i) + "]";
        if (e.is_string()) {  // "a b" (tokenizers < 0.20)
            const std::string line = e.get<std::string>();
            std::string a, b;
            if (!split_merge(line, &a, &b)) fail(where, ": not a merge \"A B\": '", printable(line), "'");
            merges.push_back({a, b, where});
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"] (tokenizers >= 0.20)
            merges.push_back({e[0].get<std::string>(), e[1].get<std::string>(), where});
        } else {
            fail(where, ": a merge is \"A B\" or [\"A\", \"B\"], not a JSON ", e.type_name());
        }
    }
    if (merges.empty() && m["vocab"].size() > 256) {
        fail(w, ": model.merges is empty, but model.vocab has ", m["vocab"].size(), " tokens: those past the 256 bytes could never be made");
    }
    // added_tokens: already in the vocabulary under the same id, or the next ids (raw text).
    std::vector<std::string> added;
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
        if (!j["added_tokens"].is_array()) fail(w, ": added_tokens is not an array");
        const size_t n = m["vocab"].size();
        for (const auto& a : j["added_tokens"]) {
            if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") || !a["content"].is_string()) {
                fail(w, ": an added_tokens entry without an integer id and a string content");
            }
            const std::string content = a["content"].get<std::string>();
            const uint64_t id = a["id"].get<uint64_t>();
            if (m["vocab"].contains(content)) {
                const auto& v = m["vocab"][content];
                // dump() only for numbers: it recurses per nesting level of a hostile value.
                if (v != id) fail(w, ": added token '", printable(content), "' has id ", id, " but model.vocab gives it ", v.is_number() ? v.dump() : std::string("a JSON ") + v.type_name());
            } else if (id == n + added.size()) {
                if (content.empty()) fail(w, ": an empty added token");
                added.push_back(content);
            } else {
                fail(w, ": added token '", printable(content), "' has id ", id, "; an added token outside model.vocab must take the next id, ", n + added.size());
            }
        }
    }
    return build_bpe(m["vocab"], added, merges, w + ": model.vocab", w);
}

// A file's bytes (read once, at most kMaxFileBytes) and, where they are a JSON object, its
// parse; tokenizer: that object is a tokenizers tokenizer.json (an object "model": GPT-2's
// encoder.json maps tokens, "model" among them, to ids).
struct TokenizerFile {
    std::string text;
    std::optional<nlohmann::json> json;
    bool tokenizer = false;
};

TokenizerFile read_tokenizer_file(const std::string& path) {
    TokenizerFile t;
    t.text = read_text_file(path, kMaxFileBytes, "a tokenizer file");
    if (first_non_space(t.text) != '{') return t;
    t.json = parse_json_text(t.text, printable(path, 200));
    t.tokenizer = t.json->is_object() && t.json->contains("model") && (*t.json)["model"].is_object();
    return t;
}

}  // namespace

BpeData read_gpt2_tokenizer(const std::vector<std::string>& files) {
    std::string vocab_path, merges_path;
    std::optional<nlohmann::json> vocab_json;  // the vocabulary's JSON where sniffing parsed it
    std::optional<std::string> merges_text;    // the merges file's bytes where sniffing read them
    if (files.size() == 1 && !is_dir(files[0])) {
        const TokenizerFile t = read_tokenizer_file(files[0]);
        if (t.tokenizer) return read_tokenizer_json(*t.json, printable(files[0], 200));
        const char first = first_non_space(t.text);
        const char* what = t.text.empty()                            ? ": an empty file"
                           : first == '\0'                           ? ": only whitespace"
                           : first == '{'                            ? ": a JSON object without a \"model\" object"
                           : nlohmann::json::accept(t.text)          ? ": JSON, but not an object"
                                                                     : ": not JSON";
        fail(printable(files[0], 200), what, ", not a tokenizers tokenizer.json; --tokenizer takes a tokenizer.json, GPT-2's encoder.json and vocab.bpe (or vocab.json and merges.txt) together, or a folder holding them");
    }
    if (files.size() == 1) {  // a folder
        const std::string d = files[0] + "/";
        if (exists(d + "encoder.json") && exists(d + "vocab.bpe")) {
            vocab_path = d + "encoder.json";
            merges_path = d + "vocab.bpe";
        } else if (exists(d + "vocab.json") && exists(d + "merges.txt")) {
            vocab_path = d + "vocab.json";
            merges_path = d + "merges.txt";
        } else if (exists(d + "tokenizer.json")) {
            const std::string w = printable(d + "tokenizer.json", 200);
            return read_tokenizer_json(parse_json(d + "tokenizer.json", w), w);
        } else {
            fail(printable(files[0], 200), ": holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt nor tokenizer.json");
        }
    } else if (files.size() == 2) {
        for (const std::string& f : files) {
            if (is_dir(f)) fail(printable(f, 200), ": is a directory: with two --tokenizer files give the vocabulary and the merges, or the folder alone");
            TokenizerFile t = read_tokenizer_file(f);
            if (t.tokenizer) {
                fail(printable(f, 200), ": a tokenizers tokenizer.json holds the vocabulary and the merges: give it to --tokenizer alone");
            }
            if (t.json) {
                vocab_path = f;
                vocab_json = std::move(t.json);
            } else {
                merges_path = f;
                merges_text = std::move(t.text);
            }
        }
        if (vocab_path.empty() || merges_path.empty()) {
            fail("--tokenizer: give GPT-2's encoder.json (a JSON object) and vocab.bpe (the merges), or a folder holding them");
        }
    } else {
        fail("--tokenizer: give GPT-2's encoder.json and vocab.bpe (or vocab.json and merges.txt), a tokenizer.json, or a folder holding them");
    }
    const std::string vw = printable(vocab_path, 200), mw = printable(merges_path, 200);
    const nlohmann::json enc = vocab_json ? std::move(*vocab_json) : parse_json(vocab_path, vw);

    const std::string text = merges_text ? std::move(*merges_text) : read_text_file(merges_path, kMaxFileBytes, "a merges file");
    std::vector<Merge> merges;
    size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0, line_no = 0;  // after a UTF-8 byte-order mark
    while (pos < text.size()) {
        // A line ends at \n, \r\n or a lone \r (a file saved with old Mac line ends was one
        // line, skipped as the #version line: a tokenizer of no merges, converted silently).
        size_t end = text.find_first_of("\r\n", pos);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(pos, end - pos);
        pos = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
        ++line_no;
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        std::string a, b;
        if (!split_merge(line, &a, &b)) fail(mw, ":", line_no, ": not a merge \"A B\": '", printable(line), "'");
        merges.push_back({a, b, mw + ":" + std::to_string(line_no)});
    }
    // Tokens past the 256 bytes that no merge makes could never come out of the encoder.
    if (merges.empty() && enc.is_object() && enc.size() > 256) {
        fail(mw, ": holds no merges, but ", vw, " has ", enc.size(), " tokens: a GPT-2 merges file (vocab.bpe, merges.txt) holds one \"A B\" per line");
    }
    return build_bpe(enc, {}, merges, vw, vw + " + " + mw);
}

}  // namespace ember::convert

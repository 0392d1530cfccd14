#include "runtime/tokenizer.h"

#include <algorithm>

#include "runtime/bpe.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/text_stream.h"
#include "runtime/utf8.h"

namespace ember {

CharTokenizer::CharTokenizer(std::vector<uint32_t> code_points) : code_points_(std::move(code_points)) {}

int CharTokenizer::find(uint32_t cp) const {
    auto it = std::lower_bound(code_points_.begin(), code_points_.end(), cp);
    return it != code_points_.end() && *it == cp ? static_cast<int>(it - code_points_.begin()) : -1;
}

std::vector<int> CharTokenizer::encode(std::string_view text, const std::string& what) const {
    std::vector<int> ids;
    ids.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        uint32_t cp = 0;
        if (!utf8_next(text, pos, cp)) fail(what, ": invalid UTF-8 at byte ", pos);
        const int id = find(cp);
        if (id < 0) {
            fail(what, ": character ", describe_code_point(cp), " at position ", ids.size(),
                 " is not in the model's vocabulary");
        }
        ids.push_back(id);
    }
    return ids;
}

int CharTokenizer::decode(int id, char out[4]) const { return utf8_encode(code_points_[id], out); }

std::string CharTokenizer::decode(const std::vector<int>& ids) const {
    std::string s;
    char buf[4];
    for (int id : ids) s.append(buf, decode(id, buf));
    return s;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
    std::string bytes;
    for (int id : ids) bytes += token_bytes(id);
    return utf8_decode_replace(bytes);
}

namespace {

class CharAdapter final : public Tokenizer {
public:
    explicit CharAdapter(const std::vector<uint32_t>& cps) : tok_(cps) {
        offsets_.push_back(0);
        char buf[4];
        for (uint32_t cp : cps) {
            utf8_.append(buf, static_cast<size_t>(utf8_encode(cp, buf)));
            offsets_.push_back(utf8_.size());
        }
    }
    const char* kind() const override { return "char"; }
    int size() const override { return tok_.vocab_size(); }
    std::vector<int> encode(std::string_view text, const std::string& what) const override { return tok_.encode(text, what); }
    std::string_view token_bytes(int id) const override {
        return std::string_view(utf8_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
    }
    int start_id() const override { return 0; }

private:
    CharTokenizer tok_;
    std::string utf8_;
    std::vector<size_t> offsets_;
};

class BpeAdapter final : public Tokenizer {
public:
    explicit BpeAdapter(const BpeData& d) : tok_(d) {
        max_token_bytes_ = tok_.max_token_bytes();
        start_ = std::max(0, tok_.find("<|endoftext|>"));
    }
    const char* kind() const override { return "byte-level BPE"; }
    int size() const override { return tok_.size(); }
    std::vector<int> encode(std::string_view text, const std::string& what) const override { return tok_.encode(text, what); }
    std::string_view token_bytes(int id) const override { return tok_.token_bytes(id); }
    int start_id() const override { return start_; }

private:
    BpeTokenizer tok_;
    int start_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const Model& model) {
    if (model.bpe()) return std::make_unique<BpeAdapter>(*model.bpe());
    return std::make_unique<CharAdapter>(model.code_points());
}

}  // namespace ember

#include "converter/convert.h"

#include <unistd.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"

namespace ember::convert {

namespace {

std::string base_name(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

std::vector<uint32_t> vocab_from_text(const std::string& path) {
    const std::string text = read_text_file(path);
    if (text.empty()) fail(printable(path, 200), ": the vocabulary text is empty");
    const auto cps = utf8_decode(text, path);
    const std::set<uint32_t> uniq(cps.begin(), cps.end());
    return {uniq.begin(), uniq.end()};
}

ConvertResult convert(const ConvertOptions& opts) {
    if (opts.vocab_text.empty() == opts.meta.empty()) {
        fail("a vocabulary is needed: give exactly one of --vocab-text FILE or --meta META.pkl");
    }
    ConvertResult r;
    std::vector<uint32_t> vocab;
    if (!opts.vocab_text.empty()) {
        vocab = vocab_from_text(opts.vocab_text);
        r.vocab_source = base_name(opts.vocab_text) + " (sorted(set(text)))";
    } else {
        vocab = read_meta_pkl(opts.meta);
        r.vocab_source = base_name(opts.meta) + " (meta.pkl)";
    }
    Checkpoint ckpt = read_checkpoint(opts.checkpoint);
    CanonicalModel model = to_canonical(std::move(ckpt), opts.arch, printable(opts.checkpoint, 200));
    if (static_cast<int>(vocab.size()) != model.config.vocab_size) {
        fail("vocabulary from ", opts.vocab_text.empty() ? opts.meta : opts.vocab_text, " has ", vocab.size(),
             " characters but the checkpoint's wte has ", model.config.vocab_size, " rows: it is not the vocabulary this model was trained with");
    }
    ProvenanceInfo prov{base_name(opts.checkpoint), sha256_file(opts.checkpoint), r.vocab_source};
    r.report = write_ember(model, vocab, prov, opts.write, opts.out);
    try {
        Model::open(opts.out);
    } catch (const Error& e) {
        ::unlink(opts.out.c_str());
        fail("the written file does not load, removed it: ", e.what());
    }
    r.config = model.config;
    r.stripped_prefix = model.stripped_prefix;
    r.dropped = model.dropped;
    return r;
}

std::string format_summary(const ConvertResult& r) {
    const ModelConfig& c = r.config;
    std::ostringstream os;
    os << "architecture: " << arch_name(c.arch) << " (" << activation_name(c.activation) << ", lm_head "
       << (c.tied_lm_head ? "tied to wte" : "own weights") << ")\n";
    os << "config: n_layer " << c.n_layer << ", n_head " << c.n_head << ", n_embd " << c.n_embd << ", block_size "
       << c.block_size << ", vocab_size " << c.vocab_size << ", ffn_hidden " << c.ffn_hidden << "\n";
    os << "vocabulary: " << r.vocab_source << "\n";
    if (!r.stripped_prefix.empty()) os << "stripped key prefix: " << r.stripped_prefix << "\n";
    if (!r.dropped.empty()) os << "dropped buffers: " << r.dropped.size() << " (" << r.dropped.front() << ", ...)\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-22s %-14s %-5s %-5s %6s %10s %11s %9s\n", "tensor", "shape", "src", "dtype", "group",
                  "bytes", "max|err|", "rel rms");
    os << line;
    for (const auto& t : r.report.tensors) {
        std::string shape = "[";
        for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
        shape += "]";
        std::snprintf(line, sizeof line, "%-22s %-14s %-5s %-5s %6s %10llu %11.3e %9.2e\n", t.name.c_str(), shape.c_str(),
                      t.source_dtype.c_str(), t.dtype.c_str(), t.group_size ? std::to_string(t.group_size).c_str() : "-",
                      static_cast<unsigned long long>(t.bytes), t.error.max_abs, t.error.rel_rms);
        os << line;
    }
    os << "file: " << r.report.file_bytes << " bytes\n";
    return os.str();
}

}  // namespace ember::convert

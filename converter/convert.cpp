#include "converter/convert.h"

#include <unistd.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "converter/gpt2_tokenizer.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/paths.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"

namespace ember::convert {

namespace {

std::string base_name(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// The config.json in the checkpoint's folder, or "" when there is none.
std::string read_beside_config(const std::string& checkpoint) {
    const auto slash = checkpoint.find_last_of('/');
    const std::string path = (slash == std::string::npos ? std::string() : checkpoint.substr(0, slash + 1)) + "config.json";
    if (::access(path.c_str(), F_OK) != 0) return "";
    return read_text_file(path, size_t{1} << 20);
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
    const int n_vocab_sources = !opts.vocab_text.empty() + !opts.meta.empty() + !opts.tokenizer.empty();
    if (n_vocab_sources != 1) {
        fail("a vocabulary is needed: give exactly one of --vocab-text FILE or --meta META.pkl (char models) or "
             "--tokenizer encoder.json --tokenizer vocab.bpe (GPT-2)");
    }
    {
        const size_t slash = opts.checkpoint.rfind('/');
        std::vector<std::pair<std::string, std::string>> inputs = {
            {"checkpoint", opts.checkpoint}, {"--vocab-text file", opts.vocab_text}, {"--meta file", opts.meta},
            {"config.json beside the checkpoint", (slash == std::string::npos ? std::string() : opts.checkpoint.substr(0, slash + 1)) + "config.json"}};
        for (const auto& t : opts.tokenizer) inputs.push_back({"--tokenizer file", t});
        check_output_not_input(opts.out, inputs);
    }
    ConvertResult r;
    TokenizerSpec tok;
    if (!opts.vocab_text.empty()) {
        tok.code_points = vocab_from_text(opts.vocab_text);
        r.vocab_source = base_name(opts.vocab_text) + " (sorted(set(text)))";
    } else if (!opts.meta.empty()) {
        tok.code_points = read_meta_pkl(opts.meta);
        r.vocab_source = base_name(opts.meta) + " (meta.pkl)";
    } else {
        tok.bpe = read_gpt2_tokenizer(opts.tokenizer);
        r.vocab_source.clear();
        for (const auto& f : opts.tokenizer) r.vocab_source += (r.vocab_source.empty() ? "" : " + ") + base_name(f);
        r.vocab_source += " (GPT-2 byte-level BPE)";
        r.bpe_merges = static_cast<int>(tok.bpe.merges.size());
    }
    r.tokenizer_size = tok.bpe.size() > 0 ? tok.bpe.size() : static_cast<int>(tok.code_points.size());
    if (opts.arch == ArchChoice::Auto || opts.arch == ArchChoice::HfGpt2) r.hf_config = read_beside_config(opts.checkpoint);
    Checkpoint ckpt = read_checkpoint(opts.checkpoint);
    CanonicalModel model = to_canonical(std::move(ckpt), opts.arch, printable(opts.checkpoint, 200), r.hf_config);
    if (model.config.arch != Arch::HfGpt2) r.hf_config.clear();
    if (tok.bpe.size() > 0) {
        if (tok.bpe.size() > model.config.vocab_size) {
            fail("the tokenizer has ", tok.bpe.size(), " tokens but the checkpoint's wte has only ", model.config.vocab_size,
                 " rows: it is not the tokenizer this model was trained with");
        }
    } else if (static_cast<int>(tok.code_points.size()) != model.config.vocab_size) {
        fail("vocabulary from ", opts.vocab_text.empty() ? opts.meta : opts.vocab_text, " has ", tok.code_points.size(),
             " characters but the checkpoint's wte has ", model.config.vocab_size, " rows: it is not the vocabulary this model was trained with");
    }
    ProvenanceInfo prov{base_name(opts.checkpoint), sha256_file(opts.checkpoint), r.vocab_source};
    r.report = write_ember(model, tok, prov, opts.write, opts.out);  // checked by Model::open before it replaces anything
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
    if (r.bpe_merges >= 0) {
        os << "tokenizer: byte-level BPE, " << r.tokenizer_size << " tokens, " << r.bpe_merges << " merges";
        if (r.tokenizer_size < c.vocab_size) os << "; wte rows " << r.tokenizer_size << ".." << c.vocab_size - 1 << " are padding, never sampled";
        os << "\n";
    }
    if (c.arch == Arch::HfGpt2) {
        os << "config.json beside the checkpoint; Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) transposed from [in, out]\n";
    }
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

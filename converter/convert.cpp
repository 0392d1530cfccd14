#include "converter/convert.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
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

AttentionScaleChoice parse_attention_scale(const std::string& s) {
    if (s == "head") return {ScaleKind::Head, 0.0f};
    if (s == "embd") return {ScaleKind::Embd, 0.0f};
    char* end = nullptr;
    const float v = std::strtof(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0.0f) {
        fail("--attention-scale '", printable(s), "': expected head (1/sqrt(head_size)), embd (1/sqrt(n_embd)) or a number > 0");
    }
    return {ScaleKind::Value, v};
}

kernels::ActivationKind parse_activation(const std::string& s) {
    if (s == "relu") return kernels::ActivationKind::ReLU;
    if (s == "gelu") return kernels::ActivationKind::GeluErf;
    if (s == "gelu-tanh") return kernels::ActivationKind::GeluTanh;
    fail("--activation '", printable(s), "': expected relu, gelu (erf, nn.GELU()) or gelu-tanh (tanh approximation, GPT-2's gelu_new)");
}

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
             "--tokenizer encoder.json --tokenizer vocab.bpe or --tokenizer tokenizer.json (GPT-2)");
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
    CanonicalModel model = to_canonical(std::move(ckpt), opts.arch, printable(opts.checkpoint, 200), r.hf_config, opts.overrides);
    ModelConfig& c = model.config;
    if (opts.activation) c.activation = *opts.activation;
    switch (opts.attention_scale.kind) {
    case ScaleKind::Default: break;
    case ScaleKind::Head: c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_size())); break;
    case ScaleKind::Embd: c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd)); break;
    case ScaleKind::Value: c.attn_scale = opts.attention_scale.value; break;
    }
    r.activation_given = opts.activation.has_value();
    r.scale_given = opts.attention_scale.kind != ScaleKind::Default;
    r.renamed_keys = model.renamed_keys;
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
    os << "attention scale: " << attn_scale_text(c) << (r.scale_given ? ", from --attention-scale" : "") << "; activation "
       << activation_name(c.activation) << (r.activation_given ? ", from --activation" : "") << "\n";
    if (r.renamed_keys > 0) os << "renamed keys: " << r.renamed_keys << " (--rename)\n";
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

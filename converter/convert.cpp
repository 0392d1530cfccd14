#include "converter/convert.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include "converter/gpt2_tokenizer.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"
#include "runtime/paths.h"
#include "runtime/sha256.h"
#include "runtime/utf8.h"

namespace ember::convert {

namespace {

// The checkpoint is looked at before anything else is asked of the command line: a missing
// file, or an ember file given to convert again, is the mistake to name first. Throws
// ember::Error.
void check_checkpoint_file(const std::string& path) {
    const std::string f = printable(path, 200);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(f, ": cannot open the checkpoint (", std::strerror(errno), ")");
    if (!S_ISREG(st.st_mode)) return;  // the checkpoint reader says what it is
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(f, ": cannot open the checkpoint (", std::strerror(errno), ")");
    char head[12] = {};
    const ssize_t n = ::read(fd, head, sizeof head);
    ::close(fd);
    // FlatBuffers file identifiers: a model is size-prefixed (bytes 8..11), an adapter not (4..7).
    if (n == static_cast<ssize_t>(sizeof head) && std::memcmp(head + 8, "EMBR", 4) == 0) {
        fail(f, ": is already an .ember model, not a PyTorch checkpoint: use it as it is (ember generate -m ", f, ")");
    }
    if (n >= 8 && std::memcmp(head + 4, "EMBA", 4) == 0) {
        fail(f, ": is an ember LoRA adapter, not a PyTorch checkpoint: fold it into its model with ember finetune --merge");
    }
}

std::string base_name(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// The config.json in the checkpoint's folder, or "" when there is none.
std::string read_beside_config(const std::string& checkpoint) {
    const auto slash = checkpoint.find_last_of('/');
    const std::string path = (slash == std::string::npos ? std::string() : checkpoint.substr(0, slash + 1)) + "config.json";
    if (::access(path.c_str(), F_OK) != 0) {
        // A link to nothing is there but unreadable: said so, not "needs its config.json".
        // Other failures through a link (a loop, a folder it may not search) are read below,
        // which names them.
        const int e = errno;
        struct stat st {};
        const bool link = ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
        if (!link) return "";
        if (e == ENOENT) fail(printable(path, 200), ": a symbolic link to nothing");
    }
    return read_text_file(path, size_t{1} << 20, "a config.json");
}


// Mean loss of the windows ids under model as it is (f32 weights): written beside the output,
// opened, removed (the mapping stays valid), scored by the CPU backend.
double score_windows(const CanonicalModel& model, const TokenizerSpec& tok, const ProvenanceInfo& prov, const ConvertOptions& opts,
                     const std::vector<int>& ids) {
    WriteOptions w = opts.write;
    w.dtype = WeightDType::F32;
    const std::string probe = opts.out + ".scale-check-" + std::to_string(::getpid());
    // The probe is a whole file until unlinked: told to the temporary-file hook (SIGINT / SIGTERM)
    // before write_ember tells its own temporary file, forgotten after the unlink.
    if (w.on_temp_file) w.on_temp_file(probe.c_str());
    try {
        write_ember(model, tok, prov, w, probe);
    } catch (const Error& e) {
        if (w.on_temp_file) w.on_temp_file(nullptr);
        // Said of the output the user named, not of the probe's name.
        std::string m = e.what();
        for (size_t at = m.find(probe); at != std::string::npos; at = m.find(probe, at + opts.out.size())) m.replace(at, probe.size(), opts.out);
        fail(m);
    } catch (...) {
        if (w.on_temp_file) w.on_temp_file(nullptr);
        throw;
    }
    auto remove_probe = [&] {
        ::unlink(probe.c_str());
        if (w.on_temp_file) w.on_temp_file(nullptr);
    };
    std::unique_ptr<Model> m;
    try {
        m = Model::open(probe);
    } catch (...) {
        remove_probe();
        throw;
    }
    remove_probe();
    SessionOptions so;
    so.all_logits = true;
    so.kv_cache = KvDType::F32;
    Session s(*m, so);
    return evaluate(s, ids.data(), static_cast<int64_t>(ids.size()), m->config().block_size, m->config().vocab_size).loss;
}

// convert()'s scale check (convert.h): sets r's losses and note, and the scale to write.
void check_scale(CanonicalModel& model, const TokenizerSpec& tok, const ProvenanceInfo& prov, const ConvertOptions& opts, ConvertResult& r) {
    ModelConfig& c = model.config;
    const std::string text = read_text_file(opts.vocab_text);
    std::vector<int> ids = CharTokenizer(tok.code_points).encode(text, printable(opts.vocab_text, 200));
    const size_t n = std::min(ids.size(), static_cast<size_t>(kScaleCheckWindows) * static_cast<size_t>(c.block_size) + 1);
    const float head = 1.0f / std::sqrt(static_cast<float>(c.head_size())), embd = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    if (head == embd) return;  // one head: the scales agree
    if (n < static_cast<size_t>(c.block_size) + 1) {  // not one whole window: a score would say nothing
        const std::string what = printable(base_name(opts.vocab_text), 200) + " has " + std::to_string(ids.size()) +
                                 " tokens, fewer than one window of block_size " + std::to_string(c.block_size) + " + 1";
        if (opts.attention_scale.kind == ScaleKind::Auto) fail("--attention-scale auto scores windows of the training text, but ", what);
        r.scale_note = "note: the attention scale was not checked: " + what +
                       " (1/sqrt(head_size) written; --attention-scale embd for a model trained with the early gpt.py scale)";
        return;
    }
    ids.resize(n);
    c.attn_scale = head;
    r.loss_head = score_windows(model, tok, prov, opts, ids);
    c.attn_scale = embd;
    r.loss_embd = score_windows(model, tok, prov, opts, ids);
    r.scale_checked = true;
    r.scale_check_tokens = static_cast<int64_t>(n) - 1;
    const bool embd_better = r.loss_embd < r.loss_head;
    char buf[512];
    if (opts.attention_scale.kind == ScaleKind::Auto) {
        c.attn_scale = embd_better ? embd : head;
        std::snprintf(buf, sizeof buf, "--attention-scale auto chose %s: loss %.4f with 1/sqrt(n_embd), %.4f with 1/sqrt(head_size) over %lld tokens of %s",
                      embd_better ? "embd (1/sqrt(n_embd), the early gpt.py scale)" : "head (1/sqrt(head_size))", r.loss_embd, r.loss_head,
                      static_cast<long long>(r.scale_check_tokens), base_name(opts.vocab_text).c_str());
        r.scale_note = buf;
        r.scale_given = true;
        return;
    }
    c.attn_scale = head;  // the default
    if (r.loss_head - r.loss_embd > kScaleCheckMargin) {
        std::snprintf(buf, sizeof buf,
                      "warning: the text fits the early gpt.py attention scale better: loss %.4f with 1/sqrt(n_embd) against %.4f with "
                      "1/sqrt(head_size) (written) over %lld tokens of %s; if the model was trained with C**-0.5 (C = n_embd), "
                      "convert with --attention-scale embd (or auto)",
                      r.loss_embd, r.loss_head, static_cast<long long>(r.scale_check_tokens), base_name(opts.vocab_text).c_str());
        r.scale_note = buf;
    }
}
}  // namespace

AttentionScaleChoice parse_attention_scale(const std::string& s) {
    if (s == "head") return {ScaleKind::Head, 0.0f};
    if (s == "embd") return {ScaleKind::Embd, 0.0f};
    if (s == "auto") return {ScaleKind::Auto, 0.0f};
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(s.c_str(), &end);
    // Refused: below f32's normal range (strtof's ERANGE: 1e-40), above kMaxAttentionScale
    // (scores times 1e38 overflow f32 and the softmax gives NaN), leading blanks.
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0])) || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) ||
        v <= 0.0f || v > kMaxAttentionScale) {
        fail("--attention-scale '", printable(s), "': expected head (1/sqrt(head_size)), embd (1/sqrt(n_embd)), auto or a number in [1.2e-38, ",
             kMaxAttentionScale, "]");
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
    check_checkpoint_file(opts.checkpoint);
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
        output_target(opts.out);  // refused before the checkpoint is read
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
    Checkpoint ckpt = read_checkpoint(opts.checkpoint, true);  // lazy: the writer reads one tensor at a time
    CanonicalModel model = to_canonical(std::move(ckpt), opts.arch, printable(opts.checkpoint, 200), r.hf_config, opts.overrides);
    ModelConfig& c = model.config;
    if (opts.activation) c.activation = *opts.activation;
    switch (opts.attention_scale.kind) {
    case ScaleKind::Default: break;
    case ScaleKind::Auto: break;  // chosen below, from the text
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
        // A text with CRLF line ends read byte for byte holds '\r', which Python's text mode
        // (the lecture's open(...).read()) turned into '\n': one character more than trained on.
        const bool cr = !opts.vocab_text.empty() && std::find(tok.code_points.begin(), tok.code_points.end(), 0x0Du) != tok.code_points.end();
        fail("vocabulary from ", opts.vocab_text.empty() ? opts.meta : opts.vocab_text, " has ", tok.code_points.size(),
             " characters but the checkpoint's wte has ", model.config.vocab_size, " rows: it is not the vocabulary this model was trained with",
             cr ? " (among them '\\r', U+000D: the text has CRLF line ends, read here byte for byte; Python's text mode reads them as "
                  "'\\n', one character fewer)"
                : "");
    }
    ProvenanceInfo prov{base_name(opts.checkpoint), sha256_file(opts.checkpoint), r.vocab_source};
    const bool check = c.arch == Arch::GptPy && !opts.vocab_text.empty() &&
                       (opts.attention_scale.kind == ScaleKind::Default || opts.attention_scale.kind == ScaleKind::Auto);
    if (opts.attention_scale.kind == ScaleKind::Auto && !check) {
        fail("--attention-scale auto scores the training text: it needs a gpt.py checkpoint and --vocab-text (this is ", arch_name(c.arch),
             opts.vocab_text.empty() ? " without --vocab-text)" : ")");
    }
    if (check) check_scale(model, tok, prov, opts, r);
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
    if (r.scale_checked && r.scale_note.empty()) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "attention scale checked on %lld tokens of the text: loss %.4f with 1/sqrt(head_size), %.4f with 1/sqrt(n_embd)\n",
                      static_cast<long long>(r.scale_check_tokens), r.loss_head, r.loss_embd);
        os << buf;
    }
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
                      t.source_dtype.c_str(), kernels::wtype_name(t.dtype), t.group_size ? std::to_string(t.group_size).c_str() : "-",
                      static_cast<unsigned long long>(t.bytes), t.error.max_abs, t.error.rel_rms);
        os << line;
    }
    os << "file: " << r.report.file_bytes << " bytes\n";
    return os.str();
}

}  // namespace ember::convert

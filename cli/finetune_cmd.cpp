#include "cli/finetune_cmd.h"
#include "cli/signals.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "converter/merge.h"
#include "runtime/error.h"
#include "runtime/finetune_options.h"
#include "runtime/model.h"
#include "runtime/paths.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"

namespace ember::cli {

namespace {

// Ctrl-C, SIGTERM (kill's default) or SIGHUP (the terminal or ssh session closed: cli/signals.h)
// asks the run to stop after the current step (then the adapter is written): a kill in the
// middle of a checkpoint left its temporary file behind. A signal handler can reach only static
// storage, hence this one file-local flag.
std::atomic<bool> g_interrupted{false};
extern "C" void on_stop_signal(int) { g_interrupted.store(true); }

int merge(const FinetuneArgs& a) {
    if (a.adapter.empty()) fail("--merge needs --adapter ADAPTER (the adapter to fold into the weights)");
    if (!a.text.empty() || !a.resume.empty()) fail("--merge folds an existing adapter; it takes no --text or --resume");
    if (!a.training_option.empty()) fail("--merge folds an existing adapter; it takes no ", a.training_option, " (an option of training)");
    check_output_not_input(a.out, {{"base model", a.model}, {"adapter", a.adapter}});
    output_target(a.out);  // refused before the model and adapter are read
    auto model = Model::open(a.model);
    auto adapter = LoraAdapter::load(a.adapter, *model);
    TempFileSignals signals;  // a kill while OUT.tmp-PID is written removes it (it was left behind)
    const convert::WriteReport r = convert::merge_adapter(*model, *adapter, a.adapter, a.out, remember_temp);
    std::printf("merged %s (rank %d, alpha %g) into %s: %llu bytes, weights as %s\n", printable(a.adapter, 200).c_str(),
                adapter->rank(), adapter->alpha(), printable(a.out, 200).c_str(), static_cast<unsigned long long>(r.file_bytes),
                r.tensors.empty() ? "?" : kernels::wtype_name(r.tensors.front().dtype));
    return 0;
}

constexpr const char* kHeader = "step,loss,val_loss,lr,tokens_per_s\n";

// --log FILE: one CSV row per step, flushed at once (a killed run keeps its rows). A row the
// file cannot take (a full disk) is not an exception thrown through the training step: failed()
// says so, and the caller stops the run after that step, as Ctrl-C does.
class CsvLog {
public:
    CsvLog() = default;
    // Appends to path. Refused: a FIFO no one reads (at once, not a wait) and a non-empty file
    // whose first line is not the header (a text, a model: rows appended would spoil it).
    explicit CsvLog(const std::string& path) : path_(printable(path, 200)) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
        if (fd < 0) fail("--log ", path_, ": cannot open for appending: ", std::strerror(errno));
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        f_ = ::fdopen(fd, "a");
        if (!f_) {
            ::close(fd);
            fail("--log ", path_, ": cannot open for appending: ", std::strerror(errno));
        }
        struct stat st {};
        const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
        bool ends_mid_row = false;
        if (regular && st.st_size > 0) {
            std::ifstream in(path, std::ios::binary);
            std::string first;
            std::getline(in, first);
            // A row an earlier run's full disk cut short: ours then start on their own line.
            char last = '\n';
            ends_mid_row = in.seekg(st.st_size - 1) && in.get(last) && last != '\n';
            if (first + "\n" != kHeader) {
                std::fclose(f_);
                f_ = nullptr;
                fail("--log ", path_, ": exists and is not a finetune log (its first line is not the header 'step,loss,...'); "
                     "rows appended would spoil it: choose another file");
            }
        }
        if (!regular || st.st_size == 0) {
            write_line(kHeader);
        } else if (ends_mid_row) {
            write_line("\n");
        }
        if (!error_.empty()) fail("--log ", path_, ": cannot write: ", error_);
    }
    ~CsvLog() {
        if (f_) std::fclose(f_);
    }
    CsvLog(const CsvLog&) = delete;
    CsvLog& operator=(const CsvLog&) = delete;
    // val_loss < 0: not evaluated at this step (an empty field); loss < 0 likewise.
    void row(int64_t step, double loss, double val_loss, double lr, double tokens_per_s) {
        if (!f_) return;
        char buf[160];
        std::string line = std::to_string(step) + ",";
        if (loss >= 0 || !std::isfinite(loss)) line += (std::snprintf(buf, sizeof buf, "%.6g", loss), buf);
        line += ",";
        if (val_loss >= 0) line += (std::snprintf(buf, sizeof buf, "%.6g", val_loss), buf);
        std::snprintf(buf, sizeof buf, ",%.6g,%.1f\n", lr, tokens_per_s);
        write_line(line + buf);
    }
    // The reason of the first row the file did not take whole ("" while every row went in).
    const std::string& failed() const { return error_; }
    const std::string& path() const { return path_; }

private:
    void write_line(const std::string& line) {
        if (!error_.empty()) return;  // one failure stops the log; the run stops after its step
        if (std::fputs(line.c_str(), f_) < 0 || std::fflush(f_) != 0) error_ = std::strerror(errno);
    }
    std::FILE* f_ = nullptr;
    std::string path_;
    std::string error_;
};

}  // namespace

int cmd_finetune(const FinetuneArgs& a) {
    if (a.merge) return merge(a);
    if (!a.adapter.empty()) fail("--adapter is for --merge; to go on training an adapter use --resume");
    if (a.text.empty()) fail("finetune needs --text FILE (the last 10% is held out for validation)");
    // -o may be the --resume adapter (training goes on in the same file), never the model or the text.
    check_output_not_input(a.out, {{"base model", a.model}, {"training text", a.text}});
    output_target(a.out);  // refused before the training, not at its first checkpoint
    if (!a.log.empty()) {
        // The adapter is renamed over -o at each checkpoint: a log there would be lost.
        namespace fs = std::filesystem;
        std::error_code ec1, ec2;
        const fs::path log = fs::weakly_canonical(fs::absolute(a.log), ec1), out = fs::weakly_canonical(fs::absolute(a.out), ec2);
        if (!ec1 && !ec2 && log == out) fail("--log ", printable(a.log, 200), " is also -o (the adapter replaces it at each checkpoint); choose another file");
    }
    auto model = Model::open(a.model);
    const ModelConfig& c = model->config();
    int64_t skipped = 0;  // a BPE model encodes any text: nothing to skip
    std::vector<int> ids = encode_training_text(*model, read_text_file(a.text), printable(a.text, 200), a.skip_unknown, &skipped);
    std::unique_ptr<LoraAdapter> adapter;
    if (!a.resume.empty()) {
        adapter = LoraAdapter::load(a.resume, *model);
        if (!adapter->train.present) fail(printable(a.resume, 200), ": holds no training state to resume from");
        if (a.settings_given) {
            fail("--resume takes ", finetune_settings_text(), " from ", printable(a.resume, 200),
                 "; besides -m, --text and -o, give only --steps, --eval-every, --threads, --skip-unknown, --log-every and --log");
        }
    } else {
        adapter = std::make_unique<LoraAdapter>(*model, a.opts.rank, a.opts.alpha);
    }
    FinetuneRun run(*model, *adapter, std::move(ids), a.opts, printable(a.text, 200));
    const FinetuneOptions& o = run.options();
    std::printf("model: %s (n_layer %d, n_embd %d, block_size %d, vocab_size %d)\n", printable(a.model, 200).c_str(), c.n_layer,
                c.n_embd, c.block_size, c.vocab_size);
    std::printf("text: %s: %lld training tokens, %lld held out (last 10%%)", printable(a.text, 200).c_str(),
                static_cast<long long>(run.train_tokens()), static_cast<long long>(run.val_tokens()));
    if (skipped) std::printf(", %lld characters outside the vocabulary skipped", static_cast<long long>(skipped));
    std::printf("\n");
    std::printf("LoRA: rank %d, alpha %g on qkv, proj, fc, fc2 (%zu values); batch %d x seq %d, lr %g, weight decay %g, clip %g, "
                "seed %llu; %d threads; training arena %zu bytes\n",
                adapter->rank(), adapter->alpha(), adapter->size(), o.batch, o.seq, o.lr, o.weight_decay, o.clip,
                static_cast<unsigned long long>(o.seed), run.trainer().threads(), run.trainer().plan().total);
    const int64_t first = run.step();
    if (first >= o.steps) {
        // Nothing trained, nothing written: -o keeps what it holds (it used to get the adapter as
        // it came, an untrained one over a trained adapter for `--steps 0` without --resume).
        std::printf("step %lld: already at --steps %lld, nothing to do; %s not written\n", static_cast<long long>(first),
                    static_cast<long long>(o.steps), printable(a.out, 200).c_str());
        return 0;
    }
    std::unique_ptr<CsvLog> log;
    if (!a.log.empty()) log = std::make_unique<CsvLog>(a.log);
    const double val0 = run.validation_loss();
    std::printf("step %lld: val loss %.4f%s\n", static_cast<long long>(first), val0, first ? " (resumed)" : " (before)");
    if (const std::string note = run.long_step_note(); !note.empty()) std::printf("%s; Ctrl-C stops after it\n", note.c_str());
    if (log && first == 0) log->row(0, -1.0, val0, o.lr, 0.0);
    std::fflush(stdout);
    g_interrupted.store(false);
    int64_t skipped_steps = 0;
    double last_val = -1.0, last_tps = 0.0;
    {
        const ScopedSignals stop_signals(on_stop_signal);  // the previous handlers back at the end, thrown or not
        run.run(a.out, [&](const FinetuneProgress& p) {
            last_tps = p.tokens_per_s;
            if (p.result.skipped) {
                ++skipped_steps;
                std::printf("step %lld: non-finite %s (%g); step skipped, nothing updated\n", static_cast<long long>(p.step),
                            std::isfinite(p.result.loss) ? "gradient" : "loss",
                            std::isfinite(p.result.loss) ? p.result.grad_norm : p.result.loss);
            }
            if (p.val_loss >= 0) last_val = p.val_loss;
            if (log) {
                log->row(p.step, p.result.loss, p.val_loss, o.lr, p.tokens_per_s);
                if (!log->failed().empty()) g_interrupted.store(true);  // stop after this step; the adapter is written
            }
            if (p.val_loss >= 0 || p.step % a.log_every == 0 || p.step == first + 1) {
                std::printf("step %lld/%lld  loss %.4f", static_cast<long long>(p.step), static_cast<long long>(p.steps), p.result.loss);
                if (p.val_loss >= 0) std::printf("  val %.4f", p.val_loss);
                std::printf("  %.0f tokens/s%s\n", p.tokens_per_s, p.saved ? "  (saved)" : "");
            }
            std::fflush(stdout);
        }, &g_interrupted);
    }
    const bool log_failed = log && !log->failed().empty();
    if (g_interrupted.load() && !log_failed) std::printf("interrupted at step %lld\n", static_cast<long long>(run.step()));
    if (last_val < 0 || g_interrupted.load()) last_val = run.validation_loss();
    std::printf("wrote %s at step %lld: val loss %.4f, %.0f tokens/s%s\n", printable(a.out, 200).c_str(),
                static_cast<long long>(run.step()), last_val, last_tps,
                skipped_steps ? (", " + std::to_string(skipped_steps) + " step(s) skipped").c_str() : "");
    // A log that stopped taking rows stopped the run after that step, the adapter written there:
    // exit 1, saying both (it threw through the step, and the adapter kept its last checkpoint unsaid).
    if (log_failed) {
        fail("--log ", log->path(), ": cannot write: ", log->failed(), ": the run stopped after step ", run.step(), ", written to ",
             printable(a.out, 200), " (--resume goes on from it)");
    }
    return 0;
}

}  // namespace ember::cli

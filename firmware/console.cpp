#include "firmware/console.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "firmware/serial_port.h"
#include "runtime/attention_probe.h"
#include "runtime/error.h"
#include "runtime/eval.h"
#include "runtime/finetune.h"
#include "runtime/stop_strings.h"
#include "runtime/utf8.h"

namespace ember::fw {

namespace {

std::string one_line(std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    std::replace(s.begin(), s.end(), '\r', ' ');
    return s;
}

std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// The time this machine booted (/proc/stat's btime), in seconds since the epoch; 0 if unknown.
time_t boot_time() {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return 0;
    char line[256];
    long long t = 0;
    while (std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "btime %lld", &t) == 1) break;
    }
    std::fclose(f);
    return static_cast<time_t>(t);
}

// DIR/NAME.ember.tmp-PID, DIR/NAME.emba.tmp-PID and DIR/current.tmp-PID whose writer, process PID, is gone (no
// such process, or the file is older than this boot, so PID is another process's now): an
// adapter or model save that a signal, a kill or a power cut ended before its rename (the
// finished file was never touched). Removed through fs; returns the names removed.
std::vector<std::string> remove_dead_temporaries(DeviceFs& fs, const std::string& dir) {
    const time_t booted = boot_time();
    std::vector<std::string> removed;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return removed;
    while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        const size_t at = n.rfind(".tmp-");
        if (at == std::string::npos || at + 5 == n.size() || n.size() - at - 5 > 9) continue;
        const std::string stem = n.substr(0, at), digits = n.substr(at + 5);
        const bool ours = (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".emba") == 0) ||
                          (stem.size() > 6 && stem.compare(stem.size() - 6, 6, ".ember") == 0) || stem == "current";
        if (!ours || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(digits));
        if (pid <= 0) continue;
        struct stat st {};
        const bool before_boot = booted > 0 && ::lstat((dir + "/" + n).c_str(), &st) == 0 && st.st_mtime < booted;
        if (!before_boot && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // its writer may be running: kept
        if (fs.unlink(dir + "/" + n) == 0) removed.push_back(n);
    }
    ::closedir(d);
    std::sort(removed.begin(), removed.end());
    return removed;
}

}  // namespace

Console::Console(int in_fd, int out_fd, ConsoleOptions opts)
    : in_(in_fd), out_(out_fd), opts_(std::move(opts)), echo_(opts_.echo), log_(opts_.log_fd, opts_.log_file) {}

std::string Console::banner() const { return "ember-console 0.1.0: models in " + printable(opts_.models_dir, 200) + "; type help\n"; }

void Console::err(const std::string& s) {
    write("ERR " + s + "\n");
    log_.log("ERR " + s + (line_.empty() ? std::string() : " (for: " + printable(line_, 120) + ")"));
}

void Console::on_editor_event(LineEditor::Event ev) {
    if (ev == LineEditor::Event::Interrupt) {  // Ctrl-C at the prompt: the line was dropped
        write("^C\n");
        write(kPrompt);
        return;
    }
    if (ev != LineEditor::Event::Line) return;
    const std::string& line = editor_.line();
    if (editor_.overflow()) err("line too long: more than " + std::to_string(kMaxLine) + " bytes, refused (nothing was run)");
    else if (editor_.invalid_at() >= 0) err("line is not valid UTF-8 (byte " + std::to_string(editor_.invalid_at()) + ")");
    else if (line.empty()) write(banner());  // a bare Enter: who is this (a person who just connected)
    else on_line(line);
    line_.clear();
    write(kPrompt);
}

Console::~Console() = default;

void Console::write(std::string_view s) {
    if (!opts_.crlf) {
        write_all(out_, s.data(), s.size());
        return;
    }
    // "\n" -> "\r\n", a run at a time (nothing allocated: gen writes every token through here).
    size_t from = 0;
    for (size_t k; (k = s.find('\n', from)) != std::string_view::npos; from = k + 1) {
        write_all(out_, s.data() + from, k - from);
        write_all(out_, "\r\n", 2);
    }
    write_all(out_, s.data() + from, s.size() - from);
}

int Console::run() {
    try {
        std::string start = opts_.load;
        std::string current_note;  // why DIR/current was not used, for the log
        if (start.empty()) {
            // DIR/current names the model flashed or loaded last.
            std::string cur;
            const std::string current = opts_.models_dir + "/current";
            struct stat st {};
            if (::lstat(current.c_str(), &st) == 0) {  // there but unusable: said in the log, then no model
                try {
                    cur = read_text_file(current, 256, "the current-model file");
                    // Trailing blanks and line ends, CRLF too (a file written on Windows or by `echo` over a serial line).
                    while (!cur.empty() && (cur.back() == '\n' || cur.back() == '\r' || cur.back() == ' ' || cur.back() == '\t')) cur.pop_back();
                    cur.erase(0, cur.find_first_not_of(" \t"));  // and leading blanks (find npos: all blank, erased)
                    if (const std::string bad = check_model_name(cur); !bad.empty()) {
                        current_note = printable(current, 200) + " ignored: " + bad;
                        cur.clear();
                    }
                } catch (const Error& e) {
                    current_note = printable(current, 200) + " ignored: " + one_line(e.what());
                    cur.clear();
                }
            }
            start = cur;
        }
        write(banner());
        log_.log("start: models in " + printable(opts_.models_dir, 200));
        if (!current_note.empty()) log_.log(current_note);
        for (const std::string& n : remove_dead_temporaries(*opts_.fs, opts_.models_dir)) {
            log_.log("removed " + printable(n, 200) + ": a save that its process never finished");
        }
        if (!start.empty()) {
            try {
                cmd_load(start, false);
            } catch (const Error& e) {
                err("load " + start + ": " + one_line(e.what()));  // as the typed command says it
            }
        } else {
            write("no model loaded: flash one with `ember flash` on the host, or load NAME\n");
        }
        write(kPrompt);
        // The editor keeps the line and says what to draw (firmware/line_editor.h).
        std::string screen;
        auto feed = [&](char byte) {
            screen.clear();
            const LineEditor::Event ev = editor_.feed(byte, echo_, screen);
            if (!screen.empty()) write(screen);
            return ev;
        };
        for (;;) {
            if (inbox_pos_ >= inbox_.size()) {
                inbox_.clear();
                inbox_pos_ = 0;
                if (in_closed_) break;
                char buf[4096];
                const long got = read_some(in_, buf, sizeof buf, -1);
                if (got < 0) break;  // the line is gone
                inbox_.assign(buf, static_cast<size_t>(got));
            }
            // What follows a command (type-ahead, flash frames) stays in inbox_ until it is done.
            const LineEditor::Event ev = feed(inbox_[inbox_pos_++]);
            if (ev == LineEditor::Event::EndOfInput && opts_.ctrl_d_ends) {
                write("\n");
                break;
            }
            on_editor_event(ev);
        }
        // Input that ends without a newline (a pipe, a file) runs its last line, as sh does; a
        // terminal or serial line that closes drops the line being typed.
        if (!editor_.text().empty() && ::isatty(in_) == 0) on_editor_event(feed('\n'));
        log_.log("the line closed: exiting");
        return 0;
    } catch (const Error& e) {
        log_.log(std::string("the line failed: exiting (") + e.what() + ")");
        return 0;  // a write to the line failed: it is gone
    }
}

void Console::on_line(const std::string& line) {
    line_ = line;
    const ParseResult r = parse_command(line);
    if (!r.ok) {
        err(r.error);
        return;
    }
    try {
        dispatch(r.cmd);
    } catch (const Error& e) {
        err(one_line(e.what()));
    } catch (const std::exception& e) {
        err(one_line(e.what()));
    }
}

void Console::drop_model_written_over() {
    if (!model_ || !model_->file_changed_in_place()) return;
    const std::string name = name_;
    session_.reset();  // the session and adapter go before the model they use
    adapter_.reset();
    adapter_name_.clear();
    tok_.reset();
    stream_.reset();
    model_.reset();
    name_.clear();
    fail("model ", name, ": its file was written over since it was loaded (install models with flash, or by a rename, not cp onto ",
         "the file in use); unloaded: load ", name, " to verify and use it again");
}

void Console::dispatch(const Command& c) {
    switch (c.kind) {
        case CommandKind::Gen:
        case CommandKind::Set:
        case CommandKind::Info:
        case CommandKind::Eval:
        case CommandKind::Finetune:
        case CommandKind::Adapter:
        case CommandKind::Attn: drop_model_written_over(); break;
        default: break;
    }
    switch (c.kind) {
        case CommandKind::Empty: return;
        case CommandKind::Help:
            write(console_help(c.name));
            ok(c.name.empty() ? "help" : "help " + c.name);
            return;
        case CommandKind::Gen: return cmd_gen(c);
        case CommandKind::Set: return cmd_set(c);
        case CommandKind::Info: return cmd_info();
        case CommandKind::Models: return cmd_models();
        case CommandKind::Load:
            try {
                return cmd_load(c.name, true);
            } catch (const Error& e) {  // as at start-up: every refusal names the command and the model
                fail("load ", c.name, ": ", e.what());
            }
        case CommandKind::Eval: return cmd_eval(c);
        case CommandKind::Flash: return cmd_flash();
        case CommandKind::Finetune: return cmd_finetune(c);
        case CommandKind::Adapter: return cmd_adapter(c);
        case CommandKind::Attn: return cmd_attn(c);
    }
}

bool Console::poll_interrupt() {
    const size_t k = inbox_.find('\x03', inbox_pos_);
    if (k != std::string::npos) {
        inbox_pos_ = k + 1;  // the Ctrl-C and what was typed before it are used up
        return true;
    }
    char buf[4096];
    // The input may end (a pipe into --stdio); the output may still be read: go on. A line
    // that is really gone fails the next write instead.
    const long got = in_closed_ ? 0 : read_some(in_, buf, sizeof buf, 0);
    if (got < 0) in_closed_ = true;
    if (got <= 0) return false;
    const std::string_view chunk(buf, static_cast<size_t>(got));
    if (const size_t c = chunk.find('\x03'); c != std::string_view::npos) {
        inbox_.assign(chunk.substr(c + 1));  // what came before the Ctrl-C is used up with it
        inbox_pos_ = 0;
        drop_to_eol_ = false;
        return true;
    }
    keep_type_ahead(chunk);
    return false;
}

// Type-ahead is kept up to kMaxTypeAhead bytes; the rest is dropped (and reported), and with it
// the whole of any line the cut falls in: what was kept of it, and what comes after up to its
// end of line (drop_to_eol_), so that a cut line never runs as a shorter command ("set
// temperature 0.5" as "set temperature 0"), as a line too long is refused whole.
void Console::keep_type_ahead(std::string_view chunk) {
    auto is_eol = [](char ch) { return ch == '\n' || ch == '\r'; };
    if (drop_to_eol_) {
        const size_t e = chunk.find_first_of("\r\n");
        const size_t n = e == std::string_view::npos ? chunk.size() : e + 1;
        dropped_ += n;
        chunk.remove_prefix(n);
        drop_to_eol_ = e == std::string_view::npos;
    }
    if (inbox_pos_ > 0 && inbox_pos_ >= inbox_.size() / 2) {
        inbox_.erase(0, inbox_pos_);
        inbox_pos_ = 0;
    }
    const size_t held = inbox_.size() - inbox_pos_;
    const size_t keep = held >= kMaxTypeAhead ? 0 : std::min(chunk.size(), kMaxTypeAhead - held);
    inbox_.append(chunk.substr(0, keep));
    if (keep == chunk.size()) return;
    dropped_ += chunk.size() - keep;
    // The last kept line, unless it ended before the cut, is part of a cut line.
    size_t from = inbox_.size();
    while (from > inbox_pos_ && !is_eol(inbox_[from - 1])) --from;
    dropped_ += inbox_.size() - from;
    inbox_.resize(from);
    drop_to_eol_ = !is_eol(chunk.back());
}

void Console::report_dropped() {
    if (dropped_ == 0) return;
    const std::string m = "type-ahead: " + std::to_string(dropped_) + " bytes dropped (at most " + std::to_string(kMaxTypeAhead) +
                          " are kept while a command runs)";
    dropped_ = 0;
    write(m + "\n");
    log_.log(m);
}

void Console::cmd_gen(const Command& c) {
    if (!model_) {
        err("no model loaded: flash one (ember flash on the host) or load NAME");
        return;
    }
    SamplerOptions so = sampler_;
    int n = n_;
    const SettingsDelta& d = c.settings;
    d.gen.apply(so, n);
    so.validate();
    // gen's --stop strings replace the set ones for this run.
    const std::vector<std::string>& stop_list = d.gen.stops.empty() ? stops_ : d.gen.stops;
    std::unique_ptr<StopStrings> stops;
    if (!stop_list.empty()) stops = std::make_unique<StopStrings>(stop_list, 3 * static_cast<size_t>(tok_->max_token_bytes() + 4));
    // As `ember generate`: no text starts from the tokenizer's start id.
    int64_t skipped = 0;
    std::vector<int> ids{tok_->start_id()};
    if (!c.text.empty()) ids = c.skip_unknown ? encode_training_text(*model_, c.text, "prompt", true, &skipped) : tok_->encode(c.text, "prompt");
    // (a text whose every character --skip-unknown dropped is refused by encode_training_text)
    session_->reset();
    stream_->finish();  // empty (a gen that failed mid-way may have left bytes)
    if (!c.text.empty()) write(skipped > 0 ? tok_->decode(ids) : c.text);  // the text the model reads
    const auto t0 = std::chrono::steady_clock::now();
    session_->append(ids);
    // The runtime's generate loop; Ctrl-C (0x03) is polled before each token.
    const GenerateResult r = session_->generate(n, so, *tok_, *stream_, [this](std::string_view text) { write(text); },
                                                [this] { return poll_interrupt(); }, stops.get());
    const int made = r.tokens;
    const bool stopped = r.stopped;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write("\n");
    report_dropped();
    const std::string notes = (r.stop >= 0 ? "; stop string \"" + printable(stop_list[r.stop], 40) + "\"" : std::string()) +
                              (skipped > 0 ? "; " + std::to_string(skipped) + " prompt characters outside the vocabulary skipped" : std::string());
    if (stopped) {
        write("^C\n");
        ok("gen interrupted after " + std::to_string(made) + " tokens" + notes);
    } else {
        ok("gen " + std::to_string(made) + " tokens in " + fmt("%.2f", s) + " s (" + fmt("%.1f", s > 0 ? made / s : 0.0) + " tokens/s)" + notes);
    }
}

void Console::cmd_set(const Command& c) {
    const SettingsDelta& d = c.settings;
    SamplerOptions so = sampler_;
    int n = n_;
    d.gen.apply(so, n);
    so.validate();
    if ((d.clear_stops ? 0 : stops_.size()) + d.gen.stops.size() > kMaxStopStrings)
        fail("set stop: at most ", kMaxStopStrings, " stop strings (set stop off clears them)");
    sampler_ = so;
    n_ = n;
    if (d.clear_stops) stops_.clear();
    stops_.insert(stops_.end(), d.gen.stops.begin(), d.gen.stops.end());
    if (d.echo) echo_ = *d.echo;
    if (d.context && *d.context != context_) {
        context_ = *d.context;
        if (model_) new_session();
    }
    ok(settings_text() + ", echo " + (echo_ ? "on" : "off"));
}

std::string Console::settings_text() const {
    std::string stops;
    for (const std::string& s : stops_) stops += (stops.empty() ? "\"" : " \"") + printable(s, 40) + "\"";
    return "n " + std::to_string(n_) + ", temperature " + fmt("%g", sampler_.temperature) + ", top-k " + std::to_string(sampler_.top_k) +
           ", top-p " + fmt("%g", sampler_.top_p) + ", seed " + std::to_string(sampler_.seed) + ", repeat-penalty " +
           fmt("%g", sampler_.repeat_penalty) + ", repeat-last-n " + std::to_string(sampler_.repeat_last_n) + ", stop " +
           (stops.empty() ? std::string("none") : stops) + ", context " + context_;
}

void Console::cmd_info() {
    if (model_) {
        const ModelConfig& c = model_->config();
        write("model: " + name_ + " (" + printable(model_->path(), 200) + ", " + std::to_string(model_->file_bytes()) + " bytes)\n");
        write(std::string("architecture: ") + arch_name(c.arch) + ", activation " + activation_name(c.activation) + "\n");
        write("config: n_layer " + std::to_string(c.n_layer) + ", n_head " + std::to_string(c.n_head) + ", n_embd " + std::to_string(c.n_embd) +
              ", block_size " + std::to_string(c.block_size) + ", vocab_size " + std::to_string(c.vocab_size) + "\n");
        write(std::string("tokenizer: ") + tok_->kind() + ", " + std::to_string(tok_->size()) + " tokens\n");
        write("adapter: " + (adapter_ ? adapter_name_ + " (rank " + std::to_string(adapter_->rank()) + ", alpha " + fmt("%g", adapter_->alpha()) + ")" : std::string("none")) + "\n");
        write("source: " + displayable(model_->provenance()) + "\n");  // the file's bytes: no escape sequence reaches the terminal
        const Backend& b = session_->backend();
        write(std::string("backend: ") + b.name() + (b.threads() ? ", threads " + std::to_string(b.threads()) : std::string()) + ", arena " +
              std::to_string(b.arena_bytes()) + " bytes" + (b.describe().empty() ? std::string() : "; " + b.describe()) + "\n");
    } else {
        write("model: none loaded\n");
    }
    write("settings: " + settings_text() + "\n");
    ok("info");
}

void Console::cmd_models() {
    DIR* d = ::opendir(opts_.models_dir.c_str());
    if (!d) {
        err(printable(opts_.models_dir, 200) + ": cannot list: " + std::strerror(errno));
        return;
    }
    std::vector<std::string> names;
    // NAME.ember files that load could open: regular files (through a link too); a folder, a
    // FIFO or a link to nothing of that name is no model.
    std::vector<std::pair<std::string, long long>> models;
    while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() <= 6 || n.compare(n.size() - 6, 6, ".ember") != 0 || !check_model_name(n.substr(0, n.size() - 6)).empty()) continue;
        struct stat st {};
        if (::stat((opts_.models_dir + "/" + n).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        models.emplace_back(n.substr(0, n.size() - 6), static_cast<long long>(st.st_size));
    }
    ::closedir(d);
    std::sort(models.begin(), models.end());
    for (const auto& [n, size] : models) write((n == name_ && model_ ? "* " : "  ") + n + "  " + std::to_string(size) + " bytes\n");
    ok(std::to_string(models.size()) + " models");
}

void Console::cmd_load(const std::string& name, bool remember) {
    if (const std::string bad = check_model_name(name); !bad.empty()) fail(bad);
    const std::string path = opts_.models_dir + "/" + name + ".ember";
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) {
        // A link loop, a folder that cannot be searched: said as such, not "no model file".
        if (errno != ENOENT) fail("cannot read ", printable(path, 200), ": ", std::strerror(errno));
        // "load good.ember": the name without its suffix is what models lists and load takes.
        struct stat bare {};
        const bool suffixed = name.size() > 6 && name.compare(name.size() - 6, 6, ".ember") == 0 &&
                              ::stat((opts_.models_dir + "/" + name.substr(0, name.size() - 6) + ".ember").c_str(), &bare) == 0;
        fail("no model file ", printable(path, 200), suffixed ? "; give the name without .ember (load " + printable(name.substr(0, name.size() - 6), 200) + ")" : "",
             "; see models");
    }
    auto m = Model::open(path, opts_.holding);  // verifies everything; on failure the old model stays
    auto t = make_tokenizer(*m);
    auto ts = std::make_unique<Utf8Stream>(static_cast<size_t>(t->max_token_bytes()));
    auto s = session_for(*m, nullptr);
    session_ = std::move(s);  // the old session goes before the model and adapter it used
    adapter_.reset();         // an adapter belongs to one base model
    adapter_name_.clear();
    tok_ = std::move(t);
    stream_ = std::move(ts);
    model_ = std::move(m);
    name_ = name;
    std::string not_remembered;
    if (remember) {
        // DIR/current: the model to load at the next start (written atomically: the data
        // synced before the rename, the folder synced after it, so a power cut leaves the
        // old name or the new one). A failure leaves the old pointer, and the answer says so
        // (a read-only models folder used to answer a plain OK, and the next start loaded the
        // old model).
        // The temporary is this process's own (current.tmp-PID): two consoles on one models
        // folder shared current.tmp, and one's rename could install the other's file while it
        // was empty or half rewritten ("m\nnger_name\n"), so that the next start loaded nothing.
        const std::string cur = opts_.models_dir + "/current", tmp = cur + ".tmp-" + std::to_string(::getpid());
        DeviceFs& fs = *opts_.fs;
        const int fd = fs.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        std::string step = "cannot create " + printable(tmp, 200);
        int why = errno;
        if (fd >= 0) {
            const std::string body = name + "\n";
            bool good = fs.pwrite(fd, body.data(), body.size(), 0) == static_cast<ssize_t>(body.size());
            step = good ? "fsync" : "write";
            good = good && fs.fsync(fd) == 0;
            why = errno;
            fs.close(fd);
            if (good && fs.rename(tmp, cur) == 0) {
                fs.fsync_dir(opts_.models_dir);
                step.clear();
            } else {
                if (good) step = "rename", why = errno;
                fs.unlink(tmp);
            }
        }
        if (!step.empty()) {
            not_remembered = "; warning: " + printable(cur, 200) + " not updated (" + step + ": " + std::strerror(why) +
                             "): the next start loads the model it named before";
        }
    }
    const ModelConfig& c = model_->config();
    const std::string said = "loaded " + name + ": n_layer " + std::to_string(c.n_layer) + ", n_embd " + std::to_string(c.n_embd) + ", vocab_size " +
       std::to_string(c.vocab_size) + ", " + tok_->kind() + " tokenizer, " + std::to_string(model_->file_bytes()) + " bytes";
    ok(said + not_remembered);
    log_.log(said + not_remembered + (remember ? "" : " (at start)"));
}

std::unique_ptr<Session> Console::session_for(const Model& model, const LoraAdapter* adapter, bool all_logits) const {
    SessionOptions o;
    o.threads = opts_.threads;
    o.policy = parse_context_policy(context_);
    o.adapter = adapter;
    o.all_logits = all_logits;
    o.kv_cache = opts_.kv_cache;
    // An adapter runs on the CPU: auto then means the CPU; --backend cuda refuses it.
    return make_session(model, o, opts_.backend);
}

void Console::new_session() { session_ = session_for(*model_, adapter_.get()); }

void Console::use_adapter(const std::string& name) {
    const std::string path = opts_.models_dir + "/" + name + ".emba";
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) fail("adapter: cannot read ", printable(path, 200), ": ", std::strerror(errno));
        // "adapter a.emba": the name without its suffix, as load says of .ember.
        const bool suffixed = name.size() > 5 && name.compare(name.size() - 5, 5, ".emba") == 0;
        fail("adapter: no adapter ", name, " (", printable(path, 200), ")",
             suffixed ? "; give the name without .emba (adapter " + printable(name.substr(0, name.size() - 5), 200) + ")" : "; finetune writes one");
    }
    auto a = LoraAdapter::load(path, *model_);  // checks it belongs to this model; on failure the old one stays
    session_ = session_for(*model_, a.get());  // the old session goes before the adapter it used
    adapter_ = std::move(a);
    adapter_name_ = name;
}

void Console::cmd_adapter(const Command& c) {
    if (!model_) {
        err("no model loaded: flash one (ember flash on the host) or load NAME");
        return;
    }
    if (c.adapter_off) {
        const std::string was = adapter_name_;
        session_ = session_for(*model_, nullptr);  // the old session goes before the adapter it used
        adapter_.reset();
        adapter_name_.clear();
        ok(was.empty() ? "no adapter" : "adapter " + was + " off");
        return;
    }
    use_adapter(c.name);
    ok("adapter " + c.name + ": rank " + std::to_string(adapter_->rank()) + ", alpha " + fmt("%g", adapter_->alpha()) + ", step " +
       std::to_string(adapter_->train.step));
}

// As `ember attn`'s text: the probe on the CPU, with the loaded adapter.
void Console::cmd_attn(const Command& c) {
    if (!model_) {
        err("no model loaded: flash one (ember flash on the host) or load NAME");
        return;
    }
    const int H = model_->config().n_head;
    if (c.attn.head >= H) fail("attention: head ", c.attn.head, " is outside [0, ", H, ") (n_head ", H, ")");
    const std::vector<int> ids = tok_->encode(c.text, "prompt");
    SessionOptions o;
    o.threads = opts_.threads;
    o.adapter = adapter_.get();
    const AttentionWeights w = attention_weights(*model_, ids, c.attn.layer, o);
    std::vector<std::string> labels;
    for (int id : ids) labels.push_back(token_label(*tok_, id));
    for (int h = 0; h < H; ++h)
        if (c.attn.head < 0 || h == c.attn.head) write(attention_text(w, labels, h, c.attn.top));
    ok("attn layer " + std::to_string(c.attn.layer) + ", " + std::to_string(ids.size()) + " tokens");
}

void Console::cmd_eval(const Command& c) {
    if (!model_) {
        err("no model loaded: flash one (ember flash on the host) or load NAME");
        return;
    }
    int64_t skipped = 0;  // --skip-unknown: characters outside a char model's vocabulary, dropped
    const std::string text = read_text_file(c.file, size_t(256) << 20);
    const std::vector<int> ids = encode_training_text(*model_, text, printable(c.file, 200), c.skip_unknown, &skipped);
    const int64_t start = c.eval_all ? 0 : val_split_start(static_cast<int64_t>(ids.size()));
    if (static_cast<int64_t>(ids.size()) - start < 2) {
        // As `ember eval` says it, naming the split.
        fail(printable(c.file, 200), ": the ", c.eval_all ? "text" : "validation split (last 10%)", " holds ", ids.size() - start,
             " token(s); eval needs at least 2", c.eval_all ? "" : " (--split all scores the whole text)");
    }
    auto s = session_for(*model_, adapter_.get(), true);
    const ModelConfig& mc = model_->config();
    const EvalResult r = evaluate(*s, ids.data() + start, static_cast<int64_t>(ids.size()) - start, mc.block_size, mc.vocab_size,
                                  mc.tokenizer_size);
    eval_loss_check(r);
    ok("loss " + fmt("%.4f", r.loss) + " over " + std::to_string(r.tokens) + " tokens" +
       (skipped > 0 ? "; " + std::to_string(skipped) + " characters outside the vocabulary skipped" : std::string()));
}

void Console::cmd_finetune(const Command& c) {
    if (!model_) {
        err("no model loaded: flash one (ember flash on the host) or load NAME");
        return;
    }
    const FinetuneRequest& f = c.finetune;
    const std::string out_name = !f.name.empty() ? f.name : !f.resume.empty() ? f.resume : name_;
    const std::string out = opts_.models_dir + "/" + out_name + ".emba";
    int64_t skipped = 0;  // a BPE model encodes any text: nothing to skip
    std::vector<int> ids = encode_training_text(*model_, read_text_file(c.file, size_t(256) << 20), printable(c.file, 200), f.skip_unknown, &skipped);
    FinetuneOptions o;
    f.options.apply(o);
    o.threads = opts_.threads;
    std::unique_ptr<LoraAdapter> adapter;
    if (!f.resume.empty()) {
        if (f.options.settings_given()) fail("finetune: --resume takes ", finetune_settings_text(), " from ", f.resume, ".emba; give only --steps, --eval-every");
        const std::string from = opts_.models_dir + "/" + f.resume + ".emba";
        struct stat st{};
        if (::stat(from.c_str(), &st) != 0) fail("finetune: --resume: no adapter ", f.resume, " (", printable(from, 200), ")");
        adapter = LoraAdapter::load(from, *model_);
        if (!adapter->train.present) fail("finetune: ", f.resume, ".emba holds no training state to resume from");
    } else {
        adapter = std::make_unique<LoraAdapter>(*model_, o.rank, o.alpha);
    }
    FinetuneRun run(*model_, *adapter, std::move(ids), o, printable(c.file, 200));
    const FinetuneOptions& ro = run.options();
    write("finetune: " + std::to_string(run.train_tokens()) + " training tokens, " + std::to_string(run.val_tokens()) + " held out" +
          (skipped ? ", " + std::to_string(skipped) + " characters outside the vocabulary skipped" : std::string()) + "; rank " +
          std::to_string(adapter->rank()) + ", alpha " + fmt("%g", adapter->alpha()) + ", batch " + std::to_string(ro.batch) + " x seq " +
          std::to_string(ro.seq) + ", lr " + fmt("%g", ro.lr) + ", weight decay " + fmt("%g", ro.weight_decay) + ", clip " +
          fmt("%g", ro.clip) + ", to " + out_name + ".emba\n");
    const int64_t first = run.step();
    if (first >= ro.steps) {
        // Nothing trained, nothing written (an untrained adapter used to replace a trained one).
        ok("finetune " + out_name + ".emba: already at step " + std::to_string(first) + " (--steps " + std::to_string(ro.steps) +
           "), nothing written");
        return;
    }
    write("step " + std::to_string(first) + ": val loss " + fmt("%.4f", run.validation_loss()) + (first ? " (resumed)\n" : " (before)\n"));
    if (const std::string note = run.long_step_note(); !note.empty()) write(note + "; Ctrl-C stops after it\n");
    // Ctrl-C (0x03) is polled after every step; the run then writes the adapter and returns.
    std::atomic<bool> stop{false};
    double last_val = -1.0, last_tps = 0.0;
    run.run(out, [&](const FinetuneProgress& p) {
        last_tps = p.tokens_per_s;
        if (p.val_loss >= 0) last_val = p.val_loss;
        if (p.val_loss >= 0 || p.step % 10 == 0 || p.step == first + 1 || p.result.skipped) {
            std::string line = "step " + std::to_string(p.step) + "/" + std::to_string(p.steps) + "  loss " + fmt("%.4f", p.result.loss);
            if (p.val_loss >= 0) line += "  val " + fmt("%.4f", p.val_loss);
            line += "  " + fmt("%.0f", p.tokens_per_s) + " tokens/s";
            if (p.result.skipped) line += "  (non-finite: step skipped)";
            if (p.saved) line += "  (saved)";
            write(line + "\n");
        }
        if (poll_interrupt()) stop.store(true);
    }, &stop);
    report_dropped();
    // The adapter in use, when it is the one just written, is reloaded: gen and eval see the new values.
    const bool reload = out_name == adapter_name_;
    if (stop.load()) {
        write("^C\n");
        const double val = run.validation_loss();
        if (reload) use_adapter(out_name);
        ok("finetune interrupted at step " + std::to_string(run.step()) + ": wrote " + out_name + ".emba (val loss " + fmt("%.4f", val) +
           "); finetune --resume " + out_name + " FILE goes on" + (reload ? "; adapter " + out_name + " reloaded" : std::string()));
        return;
    }
    if (last_val < 0) last_val = run.validation_loss();
    if (reload) use_adapter(out_name);
    ok("finetune " + out_name + ".emba at step " + std::to_string(run.step()) + ": val loss " + fmt("%.4f", last_val) + ", " +
       fmt("%.0f", last_tps) + " tokens/s" + (reload ? " (adapter " + out_name + " reloaded)" : std::string()));
}

void Console::cmd_flash() {
    write("flash: binary mode, waiting for frames (firmware/PROTOCOL.md)\n");
    ReceiverOptions ro;
    ro.models_dir = opts_.models_dir;
    ro.idle_timeout_ms = opts_.flash_idle_ms;
    ro.first_frame_timeout_ms = std::min(kFlashFirstFrameMs, opts_.flash_idle_ms);
    ro.kill_before_rename = opts_.kill_before_rename;
    ro.fail_dir_fsync = opts_.fail_dir_fsync;
    ro.memory_limit = opts_.flash_memory_limit;
    ro.fs = opts_.fs;
    const std::string pending = inbox_.substr(inbox_pos_);
    inbox_.clear();
    inbox_pos_ = 0;
    const FlashOutcome o = run_receiver(in_, out_, ro, pending);
    inbox_ = o.leftover;  // what the host sent after its BYE
    if (!o.got_frame && !o.installed) {
        err("flash: no frame came in " + fmt("%g", ro.first_frame_timeout_ms / 1000.0) +
            " s: flash takes a model from `ember flash MODEL.ember --port DEV` on the host, not from the keyboard; back to the console");
        return;
    }
    if (!o.installed) {
        err("flash: " + one_line(o.message));
        return;
    }
    write("flash: " + one_line(o.message) + "\n");
    log_.log("flash: " + one_line(o.message));
    cmd_load(o.name, true);  // its OK (or ERR) line ends the command
}

}  // namespace ember::fw

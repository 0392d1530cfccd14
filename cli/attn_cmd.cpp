#include "cli/attn_cmd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/attn_png.h"
#include "cli/option_checks.h"
#include "runtime/adapter.h"
#include "runtime/attention_probe.h"
#include "runtime/error.h"
#include "runtime/paths.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"

namespace ember::cli {

CLI::App* add_attn_command(CLI::App& app, AttnArgs& a) {
    auto* c = app.add_subcommand("attn", "softmax attention weights of a layer's heads for a prompt (text, --json, --png)");
    c->add_option("-m,--model", a.model, ".ember file")->required()->check(file_name_check());
    c->add_option("-p,--prompt", a.prompt, "prompt text, at most block_size tokens")->required();
    add_int_option_once(c, "--layer", a.layer, 0, 1 << 16, "layer, from 0");
    add_int_option_once(c, "--head", a.head, 0, 1 << 16, "head, from 0 (default: every head of the layer)")->default_str("");
    add_int_option_once(c, "--top", a.top, 1, 1 << 20, "text: the strongest keys shown per query");
    c->add_flag("--json", a.json, "print the T x T weights as JSON instead of the text");
    c->add_option("--png", a.png, "write a heatmap to FILE (every head in a grid without --head)")
        ->type_name("FILE")
        ->check(file_name_check());
    add_int_option_once(c, "--threads", a.threads, 0, 256, "0 = all cores");
    c->add_option("--adapter", a.adapter, "LoRA adapter file (ember finetune), applied unmerged")->check(file_name_check());
    c->add_flag_callback("--no-mmap", [&a] { a.load.mmap = false; }, "read the model into anonymous memory instead of mapping the file");
    c->add_flag("--mlock", a.load.mlock, "lock the model's memory");
    return c;
}

namespace {

std::vector<std::vector<float>> matrix(const AttentionWeights& w, int h) {
    std::vector<std::vector<float>> m(static_cast<size_t>(w.T));
    for (int t = 0; t < w.T; ++t) m[t].assign(w.head(h) + static_cast<size_t>(t) * w.T, w.head(h) + static_cast<size_t>(t + 1) * w.T);
    return m;
}

// Whether path names the file that descriptor fd writes to (/dev/stdout, /proc/self/fd/1, or
// the file `> F` sent it to, for fd 1): false when either cannot be looked at.
bool is_fd(const std::string& path, int fd) {
    struct stat file {}, out {};
    return ::stat(path.c_str(), &file) == 0 && ::fstat(fd, &out) == 0 && file.st_dev == out.st_dev && file.st_ino == out.st_ino;
}

// Whether path is a terminal (/dev/tty, /dev/pts/N, a console): opened without becoming the
// controlling terminal, and closed.
bool is_terminal(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool tty = ::isatty(fd) == 1;
    ::close(fd);
    return tty;
}

}  // namespace

int cmd_attn(const AttnArgs& a) {
    // The picture replaces FILE: never the model or the adapter it reads.
    if (!a.png.empty()) {
        check_output_not_input(a.png, {{"model", a.model}, {"adapter", a.adapter}}, "--png");
        // Before any work: a folder, or a new file in a missing or read-only folder, is refused
        // as -o is. A device or a FIFO that exists is written in place (write_attention_png).
        struct stat st {};
        if (::stat(a.png.c_str(), &st) != 0) {
            output_target(a.png, "--png");  // a new file: its folder must be there and writable
        } else if (S_ISDIR(st.st_mode)) {
            fail("--png ", printable(a.png, 200), " is a folder: choose a file");
        } else if (S_ISREG(st.st_mode) && !is_fd(a.png, STDOUT_FILENO)) {
            output_target(a.png, "--png");  // a read-only file: refused as -o is (standard output is written as it is)
        } else if (S_ISCHR(st.st_mode) && is_terminal(a.png)) {
            fail("--png ", printable(a.png, 200), " is a terminal: a PNG is binary; give a file, or pipe it (--png /dev/stdout | display)");
        }
        // A picture sent to standard output is the output: JSON after it would spoil it.
        if (a.json && is_fd(a.png, STDOUT_FILENO))
            fail("--png ", printable(a.png, 200), " is standard output, where --json goes too: give --png a file, or drop --json");
    }
    auto model = Model::open(a.model, a.load);
    const ModelConfig& c = model->config();
    if (a.head >= c.n_head) fail("attention: head ", a.head, " is outside [0, ", c.n_head, ") (n_head ", c.n_head, ")");
    const auto tok = make_tokenizer(*model);
    const std::vector<int> ids = tok->encode(a.prompt, "prompt");
    SessionOptions so;
    so.threads = a.threads;
    const auto adapter = a.adapter.empty() ? nullptr : LoraAdapter::load(a.adapter, *model);
    so.adapter = adapter.get();
    const AttentionWeights w = attention_weights(*model, ids, a.layer, so);

    std::vector<std::string> labels;
    for (int id : ids) labels.push_back(token_label(*tok, id));
    std::vector<int> heads;
    for (int h = 0; h < c.n_head; ++h)
        if (a.head < 0 || h == a.head) heads.push_back(h);

    if (!a.png.empty()) {
        // Standard output gets the bytes through descriptor 1 itself (`>>` appends, a socket
        // takes them), and then nothing else; standard error, no `wrote` line after them.
        const bool png_is_stdout = is_fd(a.png, STDOUT_FILENO), png_is_stderr = is_fd(a.png, STDERR_FILENO);
        write_attention_png(a.png, w, heads, labels, png_is_stdout);
        if (!png_is_stderr) {
            std::fprintf(stderr, "wrote %s%s\n", printable(a.png, 200).c_str(),
                         png_is_stdout ? " (standard output: the text is not printed after the picture)" : "");
        }
        if (png_is_stdout) return 0;
    }
    if (a.json) {
        nlohmann::json j;
        j["layer"] = w.layer;
        j["ids"] = ids;
        nlohmann::json tokens = nlohmann::json::array();
        for (int id : ids) tokens.push_back(std::string(tok->token_bytes(id)));
        j["tokens"] = tokens;
        if (a.head >= 0) {
            j["head"] = a.head;
            j["weights"] = matrix(w, a.head);
        } else {
            j["heads"] = nlohmann::json::array();
            for (int h : heads) j["heads"].push_back({{"head", h}, {"weights", matrix(w, h)}});
        }
        const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fputc('\n', stdout);
        return 0;
    }
    for (size_t i = 0; i < heads.size(); ++i) {
        const std::string s = (i ? "\n" : "") + attention_text(w, labels, heads[i], a.top);
        std::fwrite(s.data(), 1, s.size(), stdout);
    }
    return 0;
}

}  // namespace ember::cli

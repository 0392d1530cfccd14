// ember-console: the line console a person (or `ember flash`) reaches over a serial line.
// It reads bytes from in_fd and writes UTF-8 to out_fd; every command answers with output,
// then one line "OK ..." or "ERR <reason>", then the prompt. Nothing a line holds stops it.
#pragma once

#include <memory>
#include <string>

#include "firmware/console_parser.h"
#include "firmware/flash.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"

namespace ember::fw {

constexpr size_t kMaxLine = 1024;  // bytes; longer lines are refused whole
constexpr char kPrompt[] = "> ";

struct ConsoleOptions {
    std::string models_dir = ".";  // DIR: DIR/NAME.ember, DIR/current names the model loaded at start
    std::string load;              // model to load at start (default: DIR/current, if any)
    int threads = 0;               // 0 = all cores
    bool echo = false;             // echo typed characters (a person on a terminal)
    bool crlf = false;             // write "\r\n" for "\n" (serial terminals)
    int flash_idle_ms = 30000;     // binary mode ends after this long without a frame
    bool kill_before_rename = false;  // test hook, see ReceiverOptions
};

// Streams generated tokens as UTF-8. The one place token ids become bytes: a byte-level
// (BPE) tokenizer would hold back an incomplete character here until its last byte.
class TokenWriter {
public:
    explicit TokenWriter(const CharTokenizer& tok) : tok_(tok) {}
    // The bytes of `id`, complete characters only; returns how many were written to out.
    int put(int id, char out[8]) const { return tok_.decode(id, out); }

private:
    const CharTokenizer& tok_;
};

class Console {
public:
    Console(int in_fd, int out_fd, ConsoleOptions opts);
    ~Console();
    // Runs until the input ends (EOF or hang-up). Returns 0.
    int run();

private:
    void on_line(const std::string& line);
    void dispatch(const Command& c);
    void cmd_gen(const Command& c);
    void cmd_set(const Command& c);
    void cmd_info();
    void cmd_models();
    void cmd_load(const std::string& name, bool remember);
    void cmd_eval(const Command& c);
    void cmd_flash();
    bool poll_interrupt();  // non-blocking: true when a Ctrl-C (0x03) has arrived
    void write(const std::string& s);
    void ok(const std::string& s) { write("OK " + s + "\n"); }
    void err(const std::string& s) { write("ERR " + s + "\n"); }

    int in_, out_;
    ConsoleOptions opts_;
    // The settings gen starts from (set changes them).
    int n_ = 200;
    SamplerOptions sampler_;
    std::string context_ = "exact";
    bool echo_;
    // The loaded model.
    std::string name_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<CharTokenizer> tok_;
    std::unique_ptr<Session> session_;
    // Bytes read but not yet handled (type-ahead during a generation; what follows "flash").
    std::string inbox_;
    size_t inbox_pos_ = 0;
    bool in_closed_ = false;  // the input ended during a generation
};

}  // namespace ember::fw

// ember-console: the line console a person (or `ember flash`) reaches over a serial line.
// It reads bytes from in_fd and writes UTF-8 to out_fd; every command answers with output,
// then one line "OK ..." or "ERR <reason>", then the prompt. Nothing a line holds stops it.
// Any model's tokenizer (char or byte-level BPE); generated text is streamed in whole
// characters only. `finetune` trains a LoRA adapter on the device, `adapter` uses one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "firmware/console_parser.h"
#include "firmware/device_fs.h"
#include "firmware/event_log.h"
#include "firmware/flash.h"
#include "firmware/line_editor.h"
#include "runtime/adapter.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"

namespace ember::fw {

constexpr size_t kMaxLine = 1024;  // bytes; longer lines are refused whole
constexpr char kPrompt[] = "> ";
// Bytes of type-ahead kept while gen or finetune runs (a few lines); more is dropped, and the
// command says how much before its OK line.
constexpr size_t kMaxTypeAhead = 4 * kMaxLine;
// `flash` leaves binary mode when no frame comes this soon (the host sends its offer at once).
constexpr int kFlashFirstFrameMs = 3000;

struct ConsoleOptions {
    std::string models_dir = ".";  // DIR: DIR/NAME.ember, DIR/NAME.emba adapters, DIR/current the model loaded at start
    std::string load;              // model to load at start (default: DIR/current, if any)
    int threads = 0;               // 0 = all cores
    BackendKind backend = BackendKind::Auto;  // --backend cpu|cuda|auto (auto: CUDA when a GPU is present)
    KvDType kv_cache = KvDType::F16;  // --kv-cache f16|f32: the CPU backend's KV cache
    bool echo = false;             // echo typed characters and edits (a person on a terminal)
    bool crlf = false;             // write "\r\n" for "\n" (serial terminals)
    int flash_idle_ms = 30000;     // binary mode ends after this long without a frame
    bool kill_before_rename = false;  // test hook, see ReceiverOptions
    bool fail_dir_fsync = false;      // test hook, see ReceiverOptions
    uint64_t flash_memory_limit = 0;  // see ReceiverOptions::memory_limit
    LoadOptions holding;           // --no-mmap, --mlock: how models are held (runtime/model.h)
    bool ctrl_d_ends = false;      // Ctrl-D on an empty line ends the console (--stdio on a terminal)
    int log_fd = -1;               // events (firmware/event_log.h) go here too (ember-console: stderr); -1: none
    std::string log_file;          // --log FILE: events appended here; "": none
    // Every change to models_dir (flash, DIR/current) goes through this; tests journal it.
    std::shared_ptr<DeviceFs> fs = std::make_shared<PosixFs>();
};

class Console {
public:
    Console(int in_fd, int out_fd, ConsoleOptions opts);
    ~Console();
    // Runs until the input ends (EOF or hang-up). Returns 0. The constructor throws
    // ember::Error when the log file cannot be opened.
    int run();

private:
    void on_line(const std::string& line);
    void on_editor_event(LineEditor::Event ev);
    std::string banner() const;
    void report_dropped();  // says (and logs) how much type-ahead a command dropped
    void dispatch(const Command& c);
    // Before a command that reads the model: a model whose file was written over in place
    // (Model::file_changed_in_place: cp onto it rather than flash) is dropped, and the command
    // refused (ember::Error), since its mapped pages may hold other bytes now, or none (SIGBUS).
    void drop_model_written_over();
    void cmd_gen(const Command& c);
    void cmd_set(const Command& c);
    std::string settings_text() const;  // the settings, one line
    void cmd_info();
    void cmd_models();
    void cmd_load(const std::string& name, bool remember);
    void use_adapter(const std::string& name);  // loads DIR/NAME.emba for gen and eval; on failure nothing changes
    void cmd_eval(const Command& c);
    void cmd_flash();
    void cmd_finetune(const Command& c);
    void cmd_adapter(const Command& c);
    void cmd_attn(const Command& c);
    std::unique_ptr<Session> session_for(const Model& model, const LoraAdapter* adapter, bool all_logits = false) const;  // policy, backend; adapter may be null
    void new_session();  // for the loaded model, context policy and adapter
    bool poll_interrupt();  // non-blocking: true when a Ctrl-C (0x03) has arrived
    void keep_type_ahead(std::string_view chunk);  // appends to inbox_ within kMaxTypeAhead
    void write(std::string_view s);
    void ok(const std::string& s) { write("OK " + s + "\n"); }
    void err(const std::string& s);  // the ERR line, also logged

    int in_, out_;
    ConsoleOptions opts_;
    // The settings gen starts from (set changes them).
    int n_ = 200;
    SamplerOptions sampler_;
    std::vector<std::string> stops_;  // set stop STR: the stop strings of every gen that gives none
    std::string context_ = "exact";
    bool echo_;
    // The loaded model.
    std::string name_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<Tokenizer> tok_;
    // Token bytes -> whole characters: a BPE token may end inside one (runtime/text_stream.h).
    std::unique_ptr<Utf8Stream> stream_;
    std::string adapter_name_;  // the adapter gen and eval use (DIR/NAME.emba), if any
    std::unique_ptr<LoraAdapter> adapter_;
    std::unique_ptr<Session> session_;
    // Bytes read but not yet handled (type-ahead during a generation; what follows "flash").
    // While a command runs at most kMaxTypeAhead are kept past inbox_pos_; dropped_ counts the rest.
    std::string inbox_;
    size_t inbox_pos_ = 0;
    uint64_t dropped_ = 0;
    // A drop cut a line: what follows, up to its end of line, is dropped too, so that no part
    // of a cut line runs as a command of its own.
    bool drop_to_eol_ = false;
    LineEditor editor_{kMaxLine};
    EventLog log_;
    std::string line_;  // the command line being run (named in the log)
    bool in_closed_ = false;  // the input ended during a generation
};

}  // namespace ember::fw

// ember: convert PyTorch GPT checkpoints to .ember files and run them on the CPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/attn_cmd.h"
#include "cli/commands.h"
#include "cli/finetune_cmd.h"
#include "cli/help_format.h"
#include "cli/option_checks.h"
#include "runtime/error.h"
#include "runtime/finetune_options.h"
#include "runtime/gen_options.h"
#include "runtime/model.h"
#include "runtime/suggest.h"

using namespace ember;

namespace {
constexpr int kMaxThreads = 256;

// Every name of cmd's options ("--top-k", "-n"), for suggestions.
std::vector<std::string> option_names(const CLI::App* cmd) {
    std::vector<std::string> names;
    for (const CLI::Option* o : cmd->get_options()) {
        for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
        for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    }
    return names;
}

// The first argument a given subcommand did not take (subcommands allow extras, so that a
// mistyped option is named with the nearest one before any missing option is): "" if none.
std::string unknown_argument(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands()) {
        const std::vector<std::string> rest = sub->remaining();
        if (rest.empty()) continue;
        const std::string& w = rest.front();
        if (w.size() > 1 && w[0] == '-')
            return sub->get_name() + ": unknown option " + w + did_you_mean(w.substr(0, w.find('=')), option_names(sub));
        return sub->get_name() + ": unexpected argument '" + w + "'";
    }
    return "";
}

// A first argument that is no subcommand: "unknown command X; did you mean Y?", or "".
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '\0') return "";
    if (argv[1][0] == '-') {  // before any subcommand: --help, -h or --version only
        const std::string w = argv[1];
        const std::vector<std::string> names = option_names(&app);
        if (w.size() < 2 || std::find(names.begin(), names.end(), w.substr(0, w.find('='))) != names.end()) return "";
        return "unknown option " + w + did_you_mean(w.substr(0, w.find('=')), names);
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == argv[1]) return "";
        names.push_back(sub->get_name());
    }
    return std::string("unknown command ") + argv[1] + did_you_mean(argv[1], names);
}

// --no-mmap and --mlock (runtime/model.h, LoadOptions), as llama.cpp spells them.
void add_load_flags(CLI::App* cmd, LoadOptions& load) {
    cmd->add_flag_callback("--no-mmap", [&load] { load.mmap = false; },
                           "read the model into anonymous memory (2 MiB aligned, huge pages advised) instead of mapping the file");
    cmd->add_flag("--mlock", load.mlock, "lock the model's memory (a failure, e.g. RLIMIT_MEMLOCK, is a warning)");
}

// rc, or 1 when standard output could not be written (a full disk, /dev/full): the command
// fails, not only its text (--help and --version included).
int output_written(int rc) {
    const bool flushed = std::fflush(stdout) == 0;
    if (rc == 0 && (!flushed || std::ferror(stdout))) {
        std::fprintf(stderr, "ember: error: cannot write the output%s%s\n", flushed ? "" : ": ", flushed ? "" : std::strerror(errno));
        return 1;
    }
    return rc;
}

// --help or --version: CLI11's text through stdout's own buffer, so that output_written's
// flush is the write that fails on a full disk and its errno says why (std::cout flushed
// the short --version text itself, and the reason was lost).
int help_written(const CLI::App& app, const CLI::Error& e) {
    std::ostringstream text;
    const int rc = app.exit(e, text, std::cerr);
    const std::string s = text.str();
    std::fwrite(s.data(), 1, s.size(), stdout);
    return output_written(rc);
}

// A subcommand: its CLI11 app and what runs it once the command line is parsed. The options'
// values live in the state the runner holds (a shared_ptr: CLI11 writes them during parse).
struct Command {
    CLI::App* app;
    std::function<int()> run;
};

// convert: PyTorch checkpoint (+ vocabulary) -> .ember.
Command add_convert(CLI::App& app) {
    struct State {
        convert::ConvertOptions conv;
        std::string dtype = "int8", arch = "auto", attention_scale, activation;
        std::vector<std::string> renames;
        CLI::Option *scale_opt = nullptr, *act_opt = nullptr;
    };
    auto st = std::make_shared<State>();
    convert::ConvertOptions& conv = st->conv;
    auto* c = app.add_subcommand("convert", "PyTorch checkpoint (+ vocabulary) -> .ember");
    c->add_option("checkpoint", conv.checkpoint,
                  "gpt.py state_dict, nanoGPT ckpt.pt, Hugging Face GPT-2 pytorch_model.bin / model.safetensors, or .safetensors")
        ->required()
        ->check(cli::file_name_check());
    c->add_option("-o,--out", conv.out, "output .ember file")->required();
    c->add_option("--dtype", st->dtype, "weight dtype: f32 | f16 | int8")->capture_default_str();
    cli::add_int_option(c, "--group-size", conv.write.group_size, 0, 1 << 24, "int8 group along a row (0 = a whole row)");
    auto* vt = c->add_option("--vocab-text", conv.vocab_text, "training text: vocabulary = sorted(set(text))")->check(cli::file_name_check());
    auto* mt = c->add_option("--meta", conv.meta, "nanoGPT meta.pkl")->check(cli::file_name_check());
    auto* tk = c->add_option("--tokenizer", conv.tokenizer,
                             "GPT-2 BPE: encoder.json and vocab.bpe (or vocab.json and merges.txt; the option twice), a Hugging Face tokenizer.json, or their folder")
                   ->check(cli::file_name_check());
    vt->excludes(mt);
    tk->excludes(vt)->excludes(mt);
    c->add_option("--arch", st->arch, "auto | gptpy | nanogpt | hf-gpt2")->capture_default_str();
    st->scale_opt = c->add_option("--attention-scale", st->attention_scale,
                  "head = 1/sqrt(head_size) (today's gpt.py, the default), embd = 1/sqrt(n_embd) (the early gpt.py's C**-0.5), auto (the better on --vocab-text), or a number");
    st->act_opt = c->add_option("--activation", st->activation, "relu | gelu | gelu-tanh: replaces the architecture's (gpt.py relu, nanoGPT gelu, GPT-2 gelu-tanh)");
    cli::add_int_option_once(c, "--n-head", conv.overrides.n_head, 1, 1 << 16, "attention heads, for a checkpoint without model_args or config.json")->default_str("");
    c->add_option("--rename", st->renames, "OLD=NEW: replace the substring OLD by NEW in every key before mapping (repeatable, in order)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

    return {c, [st] {
        st->conv.write.dtype = convert::parse_dtype(st->dtype);
        st->conv.arch = convert::parse_arch(st->arch);
        // Given at all, even as "": parsed (an empty value is refused, not the default).
        if (st->scale_opt->count() > 0) st->conv.attention_scale = convert::parse_attention_scale(st->attention_scale);
        if (st->act_opt->count() > 0) st->conv.activation = convert::parse_activation(st->activation);
        for (const std::string& r : st->renames) st->conv.overrides.renames.push_back(convert::parse_rename(r));
        return cli::cmd_convert(st->conv);
    }};
}

// info: a model's configuration, tokenizer, tensors, checksum.
Command add_info(CLI::App& app) {
    struct State {
        std::string model;
        int threads = 0;
        bool json = false;
    };
    auto st = std::make_shared<State>();
    auto* i = app.add_subcommand("info", "print a model's configuration, tokenizer, tensors, checksum");
    i->add_option("model,-m,--model", st->model, ".ember file, given once: as MODEL or as -m MODEL (as the other subcommands take it)")
        ->required()
        ->check(cli::file_name_check());
    cli::add_int_option_once(i, "--threads", st->threads, 0, 256, "threads the arena is planned for (0 = all cores)");
    i->add_flag("--json", st->json, "print one JSON object (the same facts)");

    return {i, [st] { return cli::cmd_info(st->model, st->threads, st->json); }};
}

// generate: text streamed to stdout.
Command add_generate(CLI::App& app) {
    struct State {
        cli::GenerateArgs gen;
        GenOverrides over;
    };
    auto st = std::make_shared<State>();
    cli::GenerateArgs& gen = st->gen;
    auto* g = app.add_subcommand("generate", "generate text, streamed to stdout");
    g->add_option("-m,--model", gen.model, ".ember file")->required()->check(cli::file_name_check());
    auto* prompt_opt = g->add_option("-p,--prompt", gen.prompt, "prompt text (default: start from the tokenizer's start id, as the lecture does)");
    g->add_option("-f,--prompt-file", gen.prompt_file, "prompt from FILE, byte for byte (- = standard input)")->excludes(prompt_opt)->check(cli::file_name_check());
    g->add_flag("-e,--escape", gen.escape, "turn \\n, \\t, \\s (a space) and \\\\ in -p and --stop into their characters");
    g->add_flag("--skip-unknown", gen.skip_unknown, "drop prompt characters outside the model's vocabulary (and say how many on stderr)");
    g->add_flag("--stats", gen.stats, "print prefill and decode tokens/s and the time to first token on stderr");
    // The sampling options: runtime/gen_options.h's table, which the console's gen and set use too.
    for (const GenOptionSpec& spec : kGenOptions) {
        const GenOptionSpec* sp = &spec;
        GenOverrides* over = &st->over;
        auto* o = g->add_option(spec.names, [sp, over](const CLI::results_t& values) {
            for (const std::string& v : values) {
                const std::string bad = parse_gen_option(sp->id, v, *over);
                if (!bad.empty()) throw CLI::ValidationError(bad);
            }
            return true;
        }, spec.help);
        o->type_name(spec.value)->expected(1);
        // Every value reaches the callback (TakeLast would hand it the last alone): each is
        // checked, the last one kept, every --stop appended.
        o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
    g->add_option("--context", gen.context, "exact | shift | ring")->capture_default_str()->check(CLI::IsMember({"exact", "shift", "ring"}));
    cli::add_int_option_once(g, "--threads", gen.threads, 0, kMaxThreads, "0 = all cores");
    g->add_option("--backend", gen.backend, "cpu | cuda | auto (CUDA when a GPU is present)")->capture_default_str();
    g->add_option("--kv-cache", gen.kv_cache, "the CPU backend's KV cache: f16 | f32")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
    g->add_option("--adapter", gen.adapter, "LoRA adapter file (ember finetune), applied unmerged")->check(cli::file_name_check());
    add_load_flags(g, gen.load);

    return {g, [st] {
        st->over.apply(st->gen.sampler, st->gen.n);
        st->gen.stops = st->over.stops;
        return cli::cmd_generate(st->gen);
    }};
}

// eval: mean cross-entropy on a text.
Command add_eval(CLI::App& app) {
    auto st = std::make_shared<cli::EvalArgs>();
    cli::EvalArgs& ev = *st;
    auto* e = app.add_subcommand("eval", "mean cross-entropy (nats/token) on a text");
    e->add_option("-m,--model", ev.model, ".ember file")->required()->check(cli::file_name_check());
    e->add_option("--text", ev.text, "UTF-8 text file (- = standard input)")->required()->check(cli::file_name_check());
    e->add_option("--split", ev.split, "val (last 10% of tokens) | all")->capture_default_str()->check(CLI::IsMember({"val", "all"}));
    cli::add_int_option_once(e, "--threads", ev.threads, 0, kMaxThreads, "0 = all cores");
    e->add_option("--backend", ev.backend, "cpu | cuda | auto (CUDA when a GPU is present)")->capture_default_str();
    e->add_option("--kv-cache", ev.kv_cache, "the CPU backend's KV cache: f16 | f32")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
    e->add_option("--adapter", ev.adapter, "LoRA adapter file (ember finetune), applied unmerged")->check(cli::file_name_check());
    e->add_flag("--skip-unknown", ev.skip_unknown, "drop (and count) characters outside the model's vocabulary, as ember finetune does");
    add_load_flags(e, ev.load);

    return {e, [st] { return cli::cmd_eval(*st); }};
}

// finetune: LoRA fine-tuning on a text, or --merge an adapter.
Command add_finetune(CLI::App& app) {
    struct State {
        cli::FinetuneArgs ft;
        FinetuneOverrides over;
        std::vector<CLI::Option*> training;  // the options only training uses (--merge refuses them)
    };
    auto st = std::make_shared<State>();
    cli::FinetuneArgs& ft = st->ft;
    auto* ftc = app.add_subcommand("finetune", "LoRA fine-tuning on a text (the last 10% held out), or --merge an adapter");
    ftc->add_option("-m,--model", ft.model, ".ember file (frozen base)")->required()->check(cli::file_name_check());
    ftc->add_option("--text", ft.text, "UTF-8 training text")->check(cli::file_name_check());
    ftc->add_option("-o,--out", ft.out, "adapter file to write (with --merge: the new .ember)")->required();
    // The run's options: runtime/finetune_options.h's table, which the console's finetune uses too.
    std::vector<CLI::Option*> settings, run_options;
    for (const FinetuneOptionSpec& spec : kFinetuneOptions) {
        const FinetuneOptionSpec* sp = &spec;
        FinetuneOverrides* over = &st->over;
        auto* o = ftc->add_option(spec.name, [sp, over](const CLI::results_t& values) {
            for (const std::string& v : values) {  // each value checked, the last one kept (as the console does)
                const std::string bad = parse_finetune_option(sp->id, v, *over);
                if (!bad.empty()) throw CLI::ValidationError(bad);
            }
            return true;
        }, spec.help);
        // TakeAll: CLI11 hands a TakeLast callback the last value alone; each must be checked.
        o->type_name(spec.value)->expected(1)->default_str(finetune_option_default(spec.id))->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        (spec.setting ? settings : run_options).push_back(o);
    }
    ftc->add_option("--resume", ft.resume, "adapter file of an interrupted run: go on from its step")->check(cli::file_name_check());
    cli::add_int_option(ftc, "--threads", ft.opts.threads, 0, kMaxThreads, "0 = all cores");
    ftc->add_flag("--skip-unknown", ft.skip_unknown, "drop (and count) characters outside a char model's vocabulary (a BPE model has none: no-op)");
    cli::add_int_option(ftc, "--log-every", ft.log_every, 1, 1 << 30, "progress line every N steps, 1..2^30")->type_name("N");
    ftc->add_option("--log", ft.log, "CSV log: step,loss,val_loss,lr,tokens_per_s, a row per step (appended)")->check(cli::file_name_check());
    ftc->add_flag("--merge", ft.merge, "fold --adapter into the weights, requantized to the base's dtype, written to -o");
    ftc->add_option("--adapter", ft.adapter, "with --merge: the adapter to fold in")->check(cli::file_name_check());

    st->training.assign(settings.begin(), settings.end());
    st->training.insert(st->training.end(), run_options.begin(), run_options.end());
    for (const char* name : {"--skip-unknown", "--log-every", "--log"}) st->training.push_back(ftc->get_option(name));
    return {ftc, [st] {
        st->over.apply(st->ft.opts);
        st->ft.settings_given = st->over.settings_given();
        for (const CLI::Option* o : st->training) {
            if (o->count() > 0 && st->ft.training_option.empty()) st->ft.training_option = o->get_name();
        }
        return cli::cmd_finetune(st->ft);
    }};
}

// bench: prefill and decode tokens/s.
Command add_bench(CLI::App& app) {
    auto st = std::make_shared<cli::BenchArgs>();
    cli::BenchArgs& be = *st;
    auto* b = app.add_subcommand("bench", "prefill and decode tokens/s");
    b->add_option("-m,--model", be.model, ".ember file")->required()->check(cli::file_name_check());
    cli::add_int_option_once(b, "--threads", be.threads, 0, kMaxThreads, "0 = all cores");
    cli::add_int_option_once(b, "--runs", be.runs, 1, 1000, "runs per figure (min, median, max; after one warm-up run)");
    cli::add_int_option_once(b, "-p,--prompt-tokens", be.prompt, 0, 1 << 30, "tokens to prefill, at most block_size (0 = block_size)");
    cli::add_int_option_once(b, "-n,--tokens", be.tokens, 0, 1 << 30, "tokens to decode, at most block_size - 1 (0 = block_size - 1)");
    b->add_flag("--json", be.json, "print one JSON line");
    b->add_option("--backend", be.backend, "cpu | cuda | auto (CUDA when a GPU is present)")->capture_default_str();
    b->add_option("--kv-cache", be.kv_cache, "the CPU backend's KV cache: f16 | f32")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
    b->add_option("--prefill-logits", be.prefill_logits,
                  "CPU prefill: all = every row's logits (forward_window, as eval runs it), "
                  "last = the last row's only (a prompt, and the exact context policy's re-run window)")
        ->capture_default_str()
        ->check(CLI::IsMember({"all", "last"}));
    add_load_flags(b, be.load);

    return {b, [st] { return cli::cmd_bench(*st); }};
}

// flash: send a model to ember-console over a serial line.
Command add_flash(CLI::App& app) {
    auto st = std::make_shared<cli::FlashArgs>();
    cli::FlashArgs& fl = *st;
    auto* f = app.add_subcommand("flash", "send a model to ember-console over a serial line");
    f->add_option("model,-m,--model", fl.model, ".ember file, given once: as MODEL or as -m MODEL (as the other subcommands take it)")
        ->required()
        ->check(cli::file_name_check());
    f->add_option("--port", fl.port, "serial device, e.g. /dev/ttyUSB0")->required();
    cli::add_int_option_once(f, "--baud", fl.baud, 50, 4000000, "line rate (a standard rate up to 4000000)");
    f->add_flag("--rtscts", fl.rtscts, "RTS/CTS hardware flow control");
    f->add_option("--name", fl.name, "install as NAME.ember on the device (default: the file's name)")
        ->type_name("NAME")
        ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("needs a name") : std::string(); }, "NAME"));
    cli::add_int_option_once(f, "--timeout", fl.timeout_ms, 0, 600000, "ms to wait for an answer before sending again (0: from the baud rate)");
    cli::add_int_option_once(f, "--retries", fl.retries, 1, 1000, "sends of one frame before the link counts as lost");
    f->add_flag("--no-verify", fl.no_verify, "send without checking the file here first (the device still verifies)");

    return {f, [st] { return cli::cmd_flash(*st); }};
}

// attn: a layer's attention weights (cli/attn_cmd.h).
Command add_attn(CLI::App& app) {
    auto st = std::make_shared<cli::AttnArgs>();
    return {cli::add_attn_command(app, *st), [st] { return cli::cmd_attn(*st); }};
}

}  // namespace

int main(int argc, char** argv) {
    ember::report_truncated_model_files();  // a model file truncated under its mapping: said, not only "Bus error"
    // A file past `ulimit -f` is a failed write (EFBIG), said and cleaned up as a full disk
    // is, not a kill by SIGXFSZ that left OUT.tmp-PID behind.
    std::signal(SIGXFSZ, SIG_IGN);
    cli::warn_bad_kernel_env("ember");
    CLI::App app{"ember: small GPT language models on the edge"};
    app.formatter(std::make_shared<cli::HelpFormatter>());
    app.footer("Each subcommand's options: ember SUBCOMMAND --help. The device program, a serial console: ember-console --help.\n"
               "The README has the whole reference.");
    app.require_subcommand(1);
    app.set_version_flag("--version", "ember " EMBER_VERSION_STRING " (.ember format versions 1 and 2)");

    // In --help's order.
    const std::vector<Command> commands = {add_convert(app), add_info(app),     add_generate(app), add_eval(app),
                                           add_finetune(app), add_bench(app), add_flash(app),    add_attn(app)};

    for (CLI::App* sub : app.get_subcommands({})) sub->allow_extras();
    // The help to see: the subcommand's, when one was given.
    auto parse_error = [&app](const std::string& msg) {
        std::string help = "ember --help", name;
        for (const CLI::App* sub : app.get_subcommands()) help = "ember " + sub->get_name() + " --help", name = sub->get_name();
        std::string said = cli::plain_parse_error(msg);
        // info and flash take the model as MODEL or -m MODEL: a bare `ember info` names both.
        if ((name == "info" || name == "flash") && said == "--model is required") said = "a model is required: ember " + name + " MODEL (or -m MODEL)";
        std::fprintf(stderr, "ember: error: %s (see %s)\n", said.c_str(), help.c_str());
        return 1;
    };
    if (const std::string bad = unknown_command(app, argc, argv); !bad.empty()) return parse_error(bad);
    try {
        app.parse(argc, argv);
        if (const std::string bad = unknown_argument(app); !bad.empty()) return parse_error(bad);
    } catch (const CLI::CallForHelp& e) {
        return help_written(app, e);
    } catch (const CLI::CallForAllHelp& e) {
        return help_written(app, e);
    } catch (const CLI::CallForVersion& e) {
        return help_written(app, e);
    } catch (const CLI::ParseError& e) {
        // A mistyped option first (it may be why a required one is missing); else one line,
        // as every other error: the first line of CLI11's message.
        if (const std::string bad = unknown_argument(app); !bad.empty()) return parse_error(bad);
        std::string msg = e.what();
        return parse_error(msg.substr(0, msg.find('\n')));
    }
    auto run = [&]() -> int {
        try {
            for (const Command& cmd : commands) {
                if (*cmd.app) return cmd.run();
            }
        } catch (const Error& err) {
            std::fflush(stdout);
            std::fprintf(stderr, "ember: error: %s\n", err.what());
            return 1;
        } catch (const std::exception& err) {
            std::fflush(stdout);
            std::fprintf(stderr, "ember: error: %s\n", err.what());
            return 1;
        }
        return 2;
    };
    return output_written(run());
}

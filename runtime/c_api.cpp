// The C API (include/ember/ember.h) over the C++ runtime: every entry point catches what the
// runtime throws and turns it into EMBER_ERROR and one line in the caller's buffer.
#include "ember/ember.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "runtime/tokenizer.h"

#ifndef EMBER_VERSION_STRING
#define EMBER_VERSION_STRING "0"
#endif

// A caller's arena [begin, begin + bytes) in use by one live session of a model (addresses as
// integers: < between pointers into different objects is unspecified).
struct ArenaInUse {
    uintptr_t begin;
    size_t bytes;
};

struct ember_model {
    std::unique_ptr<ember::Model> model;
    std::unique_ptr<ember::Tokenizer> tok;
    // The caller arenas of this model's live sessions: a second session given an arena that
    // overlaps one of them is refused (its create zeroes the arena, under the first's KV cache).
    // Sessions are created and destroyed one call at a time per model (ember.h), so no lock.
    mutable std::vector<ArenaInUse> arenas;
};

struct ember_session {
    const ember_model* m = nullptr;
    std::unique_ptr<ember::Session> s;
    std::unique_ptr<ember::Utf8Stream> stream;
    uintptr_t arena = 0;  // the caller's, or 0
    bool started = false;
    bool generating = false;       // inside ember_generate (its callback may not use this session)
    bool destroy_pending = false;  // ember_session_destroy from the callback: done when generate returns
};

namespace {

// A call on a session that ember_generate is running on: its callback's (refused by ember.h),
// or another thread's (not allowed: this flag is no lock, so it is caught only by chance).
constexpr const char* kBusy =
    "ember_generate is running on this session (a call from its callback, or from another thread: one thread at a time)";

// One line: a line break inside a message (a file name holding one) becomes a space.
void put_error(char* err, size_t err_size, const char* what) {
    if (!err || err_size == 0) return;
    const size_t n = std::min(std::strlen(what), err_size - 1);
    for (size_t i = 0; i < n; ++i) err[i] = what[i] == '\n' || what[i] == '\r' ? ' ' : what[i];
    err[n] = '\0';
}

// Runs f, mapping every exception to EMBER_ERROR and its message.
template <typename F>
int guarded(char* err, size_t err_size, F&& f) {
    try {
        f();
        if (err && err_size) err[0] = '\0';
        return EMBER_OK;
    } catch (const std::bad_alloc&) {
        put_error(err, err_size, "out of memory");
    } catch (const std::exception& e) {
        put_error(err, err_size, e.what());
    } catch (...) {
        put_error(err, err_size, "unknown error");
    }
    return EMBER_ERROR;
}

ember::SessionOptions session_options(const ember_session_options* o) {
    ember_session_options d;
    ember_session_options_default(&d);
    if (!o) o = &d;
    if (o->context < EMBER_CONTEXT_EXACT || o->context > EMBER_CONTEXT_RING)
        ember::fail("context ", o->context, " is not EMBER_CONTEXT_EXACT, _SHIFT or _RING");
    ember::SessionOptions so;
    so.threads = o->threads;
    so.policy = o->context == EMBER_CONTEXT_SHIFT ? ember::ContextPolicy::Shift
                : o->context == EMBER_CONTEXT_RING ? ember::ContextPolicy::Ring
                                                   : ember::ContextPolicy::Exact;
    return so;
}

int open_model(const char* fn, std::unique_ptr<ember::Model> (*open)(const void*, size_t, const char*), const void* a, size_t b,
               const char* c, ember_model** out, char* err, size_t err_size) {
    return guarded(err, err_size, [&] {
        if (!out) ember::fail(fn, ": out is NULL");
        *out = nullptr;
        auto m = std::make_unique<ember_model>();
        m->model = open(a, b, c);
        m->tok = ember::make_tokenizer(*m->model);
        *out = m.release();
    });
}

}  // namespace

extern "C" {

const char* ember_version(void) { return EMBER_VERSION_STRING; }

int ember_model_open(const char* path, ember_model** out, char* err, size_t err_size) {
    return open_model("ember_model_open", [](const void* p, size_t, const char*) {
        if (!p) ember::fail("ember_model_open: path is NULL");
        return ember::Model::open(static_cast<const char*>(p));
    }, path, 0, nullptr, out, err, err_size);
}

int ember_model_open_memory(const void* data, size_t size, const char* name, ember_model** out, char* err, size_t err_size) {
    return open_model("ember_model_open_memory", [](const void* d, size_t n, const char* nm) { return ember::Model::open_memory(d, n, nm ? nm : "(model in memory)"); },
                      data, size, name, out, err, err_size);
}

void ember_model_close(ember_model* model) { delete model; }

int ember_model_get_info(const ember_model* model, ember_model_info* out, char* err, size_t err_size) {
    return guarded(err, err_size, [&] {
        if (!model || !out) ember::fail("ember_model_get_info: model or out is NULL");
        const ember::ModelConfig& c = model->model->config();
        out->n_layer = c.n_layer;
        out->n_head = c.n_head;
        out->n_embd = c.n_embd;
        out->block_size = c.block_size;
        out->vocab_size = c.vocab_size;
        out->tokenizer_size = c.tokenizer_size;
        out->bpe = model->model->bpe() ? 1 : 0;
    });
}

void ember_session_options_default(ember_session_options* opts) {
    if (!opts) return;
    opts->threads = 0;
    opts->context = EMBER_CONTEXT_EXACT;
}

void ember_sampling_default(ember_sampling* s) {
    if (!s) return;
    const ember::SamplerOptions d;
    s->temperature = d.temperature;
    s->top_k = d.top_k;
    s->top_p = d.top_p;
    s->seed = d.seed;
}

int ember_session_arena_bytes(const ember_model* model, const ember_session_options* opts, size_t* out, char* err, size_t err_size) {
    return guarded(err, err_size, [&] {
        if (!model || !out) ember::fail("ember_session_arena_bytes: model or out is NULL");
        const ember::SessionOptions so = session_options(opts);
        *out = ember::plan_memory(*model->model, ember::resolve_threads(so.threads), false).total;
    });
}

int ember_session_create(const ember_model* model, const ember_session_options* opts, void* arena, size_t arena_size,
                         ember_session** out, char* err, size_t err_size) {
    return guarded(err, err_size, [&] {
        if (!model || !out) ember::fail("ember_session_create: model or out is NULL");
        *out = nullptr;
        ember::SessionOptions so = session_options(opts);
        so.arena = arena;
        so.arena_bytes = arena ? arena_size : 0;
        const uintptr_t a = reinterpret_cast<uintptr_t>(arena);
        if (a) {
            for (const ArenaInUse& u : model->arenas) {
                if (a < u.begin + u.bytes && u.begin < a + arena_size)
                    ember::fail("ember_session_create: the arena overlaps the one a live session of this model uses (", u.bytes,
                                " bytes): each session needs its own until ember_session_destroy");
            }
        }
        auto s = std::make_unique<ember_session>();
        s->m = model;
        s->s = std::make_unique<ember::Session>(*model->model, so);
        s->stream = std::make_unique<ember::Utf8Stream>(static_cast<size_t>(model->tok->max_token_bytes()));
        if (a) {
            model->arenas.push_back(ArenaInUse{a, arena_size});
            s->arena = a;
        }
        *out = s.release();
    });
}

void ember_session_destroy(ember_session* session) {
    if (!session) return;
    if (session->generating) {  // from its own callback: ember_generate stops and destroys it on return
        session->destroy_pending = true;
        return;
    }
    std::vector<ArenaInUse>& in_use = session->m->arenas;
    for (size_t i = 0; i < in_use.size(); ++i) {
        if (in_use[i].begin == session->arena) {
            in_use.erase(in_use.begin() + static_cast<std::ptrdiff_t>(i));
            break;
        }
    }
    delete session;
}

int ember_prefill(ember_session* session, const char* prompt, char* err, size_t err_size) {
    return guarded(err, err_size, [&] {
        if (!session) ember::fail("ember_prefill: session is NULL");
        if (session->generating) ember::fail("ember_prefill: ", kBusy);
        // A failed prefill (a character outside the vocabulary) leaves no sequence, not the last one.
        session->started = false;
        const ember::Tokenizer& tok = *session->m->tok;
        const std::vector<int> ids = !prompt || !*prompt ? std::vector<int>{tok.start_id()} : tok.encode(prompt, "prompt");
        session->s->reset();
        session->stream->finish();  // empty
        session->s->append(ids);
        session->started = true;
    });
}

int ember_generate(ember_session* session, int n_tokens, const ember_sampling* sampling, ember_token_callback on_token, void* user,
                   int* made, char* err, size_t err_size) {
    if (made) *made = 0;
    bool ran = false;  // past the checks: the session's count of sampled tokens is this call's
    const int rc = guarded(err, err_size, [&] {
        if (!session) ember::fail("ember_generate: session is NULL");
        if (session->generating) ember::fail("ember_generate: ", kBusy);
        if (!session->started) ember::fail("ember_generate: no sequence: call ember_prefill first");
        if (n_tokens < 0) ember::fail("ember_generate: n_tokens ", n_tokens, " is negative");
        ember::SamplerOptions so;
        if (sampling) {
            so.temperature = sampling->temperature;
            so.top_k = sampling->top_k;
            so.top_p = sampling->top_p;
            so.seed = sampling->seed;
        }
        try {
            so.validate();
        } catch (const ember::Error& e) {
            ember::fail("ember_generate: ", e.what());  // as its other refusals are worded
        }
        // Refusals above leave the sequence to generate from; from here it is used up.
        session->started = false;
        bool stop = false;
        struct Busy {  // cleared however generate ends
            bool& flag;
            explicit Busy(bool& f) : flag(f) { flag = true; }
            ~Busy() { flag = false; }
        } busy(session->generating);
        ran = true;
        try {
            session->s->generate(
                n_tokens, so, *session->m->tok, *session->stream,
                [&](std::string_view text) {
                    if (session->destroy_pending) return;  // destroyed by the callback: no more calls
                    if (on_token && on_token(text.data(), text.size(), user) != 0) stop = true;
                    if (session->destroy_pending) stop = true;
                },
                [&] { return stop; });
        } catch (const ember::Error& e) {
            // "generate: new token K of N: ..." as this API's other refusals are worded
            const std::string what = e.what();
            if (what.rfind("generate: ", 0) == 0) ember::fail("ember_", what);
            throw;
        }
    });
    if (!session || session->generating) return rc;  // refused: a NULL session, or a call from the callback
    // The tokens sampled, also when generation failed part way (their text went out).
    if (ran && made) *made = session->s->tokens_generated();
    if (session->destroy_pending) ember_session_destroy(session);
    return rc;
}

}  // extern "C"

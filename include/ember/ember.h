/* ember: run a small GPT model (.ember file) from C or C++.
 *
 * The embeddable API of the ember runtime, in the manner of TensorFlow Lite Micro: the caller
 * can own every large buffer. A model is opened from a path (mapped read-only) or from bytes
 * already in memory (a model linked into the program, read from flash); it is verified once,
 * completely (FlatBuffers verifier, checksum, shapes), before anything runs. A session asks how
 * many arena bytes it needs (KV cache of block_size slots per layer, activations, logits,
 * sampler scratch) and runs in a buffer the caller passes (a static array on a device), or in
 * one it allocates itself. Generating a token allocates nothing.
 *
 * Errors: every function that can fail returns EMBER_OK (0) or EMBER_ERROR and, when `err` is
 * not NULL, writes one line saying what and where into err[err_size] (always NUL-terminated,
 * cut to fit). No C++ exception crosses this API. Threads: a session is used by one thread at
 * a time; sessions on distinct threads may share one model (a session only reads it: tested
 * with ember_prefill and ember_generate on four threads at once). Opening and closing models
 * and creating and destroying sessions are not claimed safe beside other calls on the same
 * model. Each session runs its own thread pool: give each of N concurrent sessions threads =
 * cores / N, since threads 0 in every one oversubscribes the CPU.
 *
 * Link with `pkg-config --cflags --libs ember` or CMake's `find_package(ember)` and
 * `target_link_libraries(app PRIVATE ember::ember)`.
 */
#ifndef EMBER_EMBER_H
#define EMBER_EMBER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_OK 0
#define EMBER_ERROR 1

/* The caller's arena must be aligned to this many bytes (alignas(EMBER_ARENA_ALIGNMENT)), and
 * so must the model bytes given to ember_model_open_memory (its tensors are used in place). */
#define EMBER_ARENA_ALIGNMENT 64

typedef struct ember_model ember_model;
typedef struct ember_session ember_session;

/* The library's version, e.g. "0.1.0". */
const char* ember_version(void);

/* Opens and verifies the .ember file at `path` (mapped read-only). The file must not change
 * while the model is open (a mapping shows the change; a truncated file ends the program with
 * SIGBUS): replace a model by writing a new file and renaming it over the old one, as
 * `ember convert` and `ember flash` do. */
int ember_model_open(const char* path, ember_model** out, char* err, size_t err_size);
/* Verifies and uses `size` bytes at `data` in place: they must stay valid and unchanged until
 * ember_model_close, and be aligned to EMBER_ARENA_ALIGNMENT. `size` may exceed the file (bytes
 * past the model's data section are ignored, as in a flash partition); less is refused as
 * truncated. `name` (may be NULL) names the model in error messages. */
int ember_model_open_memory(const void* data, size_t size, const char* name, ember_model** out, char* err, size_t err_size);
/* Closes a model (NULL is ignored). Its sessions must be destroyed first. */
void ember_model_close(ember_model* model);

/* What the file's configuration says (the names of nanoGPT's GPTConfig). */
typedef struct ember_model_info {
    int n_layer, n_head, n_embd, block_size;
    int vocab_size;      /* rows of wte (padding included) */
    int tokenizer_size;  /* ids the tokenizer knows, <= vocab_size */
    int bpe;             /* 1: byte-level BPE (GPT-2), 0: one Unicode code point per id */
} ember_model_info;
int ember_model_get_info(const ember_model* model, ember_model_info* out, char* err, size_t err_size);

/* Context policies, for a sequence longer than block_size: */
#define EMBER_CONTEXT_EXACT 0 /* recompute the last block_size tokens each step: gpt.py's generate */
#define EMBER_CONTEXT_SHIFT 1 /* keep the newest half, recompute it, go on appending */
#define EMBER_CONTEXT_RING 2  /* overwrite the oldest KV slot, keep stale K/V (approximate, O(1)) */

typedef struct ember_session_options {
    int threads; /* CPU threads; 0 = all cores, at most 256 */
    int context; /* EMBER_CONTEXT_* */
} ember_session_options;
void ember_session_options_default(ember_session_options* opts); /* threads 0, exact */

/* Bytes of arena a session of `model` with `opts` needs (the CPU backend): pass a buffer of at
 * least this many bytes, itself aligned to EMBER_ARENA_ALIGNMENT, to ember_session_create (the
 * figure is a multiple of the alignment, so no padding is to be added). It grows with the thread
 * count (each thread has a row of attention scores, block_size floats): threads 0 means this
 * machine's cores, so a static arena sized on one machine is sized with an explicit count.
 * `ember info MODEL --threads N` prints the same figure ("arena: N bytes to generate"). */
int ember_session_arena_bytes(const ember_model* model, const ember_session_options* opts, size_t* out, char* err, size_t err_size);

/* Creates a session on the CPU backend. arena NULL: the session allocates its arena itself
 * (arena_size ignored). Otherwise arena[arena_size] is used and nothing is written outside it;
 * a buffer too small or misaligned is refused before anything is written. The session keeps
 * using the arena until ember_session_destroy: an arena that overlaps one a live session of the
 * same model uses is refused (sessions of two models cannot see each other's: give each session
 * its own). opts NULL: the defaults. */
int ember_session_create(const ember_model* model, const ember_session_options* opts, void* arena, size_t arena_size,
                         ember_session** out, char* err, size_t err_size);
/* NULL is ignored. From the session's own ember_generate callback: generation stops there (no
 * more callbacks) and the session is destroyed as ember_generate returns. */
void ember_session_destroy(ember_session* session);

/* Sampling (torch.multinomial over softmax(logits / temperature), filtered): */
typedef struct ember_sampling {
    float temperature; /* 0 = greedy (first maximal logit) */
    int top_k;         /* keep logits >= the k-th largest; 0 = off */
    float top_p;       /* keep the smallest most-probable set of mass >= top_p; 1 = off */
    uint64_t seed;     /* the same seed gives the same text */
} ember_sampling;
void ember_sampling_default(ember_sampling* s); /* temperature 1, top_k 0, top_p 1, seed 1337 */

/* Starts a new sequence from `prompt` (UTF-8; NULL or "" starts from the tokenizer's start id,
 * as `ember generate` without -p). The prompt's text is not passed to the callback of
 * ember_generate: print it yourself if it is to be seen (ember generate prints it first). Fails on text the tokenizer cannot encode (a character
 * outside a char model's vocabulary is named); a failed prefill leaves no sequence. */
int ember_prefill(ember_session* session, const char* prompt, char* err, size_t err_size);

/* The callback must not call ember_prefill or ember_generate on the same session (refused with
 * EMBER_ERROR); it may destroy it (ember_session_destroy); other sessions are free. It must
 * return (nonzero to stop): a longjmp out of it leaves the session refusing every later call,
 * and leaks. A C++ callback that throws: EMBER_ERROR with the exception's message.
 * Called with the text of each generated token, in whole UTF-8 characters: a BPE token that
 * ends inside a character is held back and passed with the token that completes it (so there
 * may be fewer calls than tokens; at the end an incomplete tail is passed as U+FFFD).
 * Return 0 to go on, nonzero to stop. */
typedef int (*ember_token_callback)(const char* text, size_t len, void* user);

/* Samples up to n_tokens tokens after the sequence ember_prefill started, each from the
 * logits after the one before, and calls on_token (may be NULL) with their text. *made (may be NULL)
 * receives the number sampled, also when generation fails part way (their text went to
 * on_token): a logit that is not finite, a model whose activations overflow ("ember_generate:
 * new token K of N: logit I of V is nan: ..."; *made is K - 1), or a callback that throws. One ember_generate per ember_prefill: the next text starts
 * with ember_prefill again: after any ember_generate that got past its checks (n_tokens 0
 * included, or stopped by the callback) the sequence is used up, and another call is refused
 * ("no sequence: call ember_prefill first"), as is a call with no ember_prefill before it.
 * sampling NULL: the defaults of ember_sampling_default. *made counts tokens sampled, not
 * callbacks: a BPE model may call on_token fewer times, and when on_token stops generation
 * the token whose text it was given is counted. Invalid arguments (temperature negative,
 * infinite or NaN; top_k < 0; top_p outside (0, 1] or NaN; n_tokens < 0) are refused before
 * anything runs and leave the sequence to generate from. */
int ember_generate(ember_session* session, int n_tokens, const ember_sampling* sampling, ember_token_callback on_token, void* user,
                   int* made, char* err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_EMBER_H */

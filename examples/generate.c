/* generate: the smallest program embedding ember through its C API.
 *
 *   generate MODEL.ember [PROMPT [N]]
 *
 * Opens MODEL, allocates the session's arena itself (aligned_alloc, EMBER_ARENA_ALIGNMENT),
 * starts a sequence from PROMPT (default: none, the tokenizer's start id) and prints the prompt
 * and N generated tokens (default 100) as they are made. Exit 0 on success, 1 on any error
 * (the error line goes to stderr). */
#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>

static int print_text(const char* text, size_t len, void* user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* go on */
}

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.ember [PROMPT [N]]\n", argv[0]);
        return 2;
    }
    const char* path = argv[1];
    const char* prompt = argc > 2 ? argv[2] : NULL;
    const int n_tokens = argc > 3 ? atoi(argv[3]) : 100;
    char err[512];
    int rc = 1;
    ember_model* model = NULL;
    ember_session* session = NULL;
    void* arena = NULL;

    if (ember_model_open(path, &model, err, sizeof err) != EMBER_OK) {
        fprintf(stderr, "ember_model_open: %s\n", err);
        goto done;
    }
    ember_session_options opts;
    ember_session_options_default(&opts);
    size_t arena_bytes = 0;
    if (ember_session_arena_bytes(model, &opts, &arena_bytes, err, sizeof err) != EMBER_OK) {
        fprintf(stderr, "ember_session_arena_bytes: %s\n", err);
        goto done;
    }
    /* ember.h makes arena_bytes a multiple of the alignment already; aligned_alloc (C11) wants
     * one, so the size is rounded anyway, which costs nothing when it is one. */
    const size_t arena_size = round_up(arena_bytes, EMBER_ARENA_ALIGNMENT);
    arena = aligned_alloc(EMBER_ARENA_ALIGNMENT, arena_size);
    if (!arena) {
        fprintf(stderr, "aligned_alloc: cannot allocate %zu bytes\n", arena_size);
        goto done;
    }
    if (ember_session_create(model, &opts, arena, arena_size, &session, err, sizeof err) != EMBER_OK) {
        fprintf(stderr, "ember_session_create: %s\n", err);
        goto done;
    }
    if (ember_prefill(session, prompt, err, sizeof err) != EMBER_OK) {
        fprintf(stderr, "ember_prefill: %s\n", err);
        goto done;
    }
    if (prompt) fputs(prompt, stdout);
    ember_sampling sampling;
    ember_sampling_default(&sampling);
    int made = 0;
    if (ember_generate(session, n_tokens, &sampling, print_text, NULL, &made, err, sizeof err) != EMBER_OK) {
        fprintf(stderr, "\nember_generate: %s\n", err);
        goto done;
    }
    printf("\n");
    fprintf(stderr, "ember %s: %d tokens, arena %zu bytes\n", ember_version(), made, arena_size);
    rc = 0;
done:
    ember_session_destroy(session); /* before its model and its arena */
    ember_model_close(model);
    free(arena);
    return rc;
}

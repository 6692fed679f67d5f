/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz share: a check that turns a broken promise of
 * the API into a crash libFuzzer records (with the input that caused it), and the limits every
 * target runs under.
 *
 * A target may only crash for a bug: an input ampc rejects must come back as a status with a
 * non-empty message, never as an abort, a leak, a hang or an allocation the input did not
 * justify. scripts/fuzz.sh runs every target with -rss_limit_mb / -malloc_limit_mb and -timeout,
 * so those three are findings too.
 */
#ifndef AMPC_FUZZ_H
#define AMPC_FUZZ_H

#include "ampc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aborts with the broken promise: libFuzzer saves the input as a crash artifact. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n  ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A failed call must say why: a status other than AMPC_OK and a message that is not empty. */
static inline void fuzz_check_failure(ampc_status st, const char *msg, const char *what) {
    FUZZ_CHECK(st > AMPC_OK && st < AMPC_STATUS_COUNT, "%s: status %d out of range", what, st);
    FUZZ_CHECK(st != AMPC_E_INTERNAL, "%s: internal error: %s", what, msg ? msg : "(none)");
    FUZZ_CHECK(msg && *msg, "%s failed (%s) without a message", what, ampc_status_str(st));
}

/* Parses IR text that the printer wrote and checks that it prints back to the same text: the
 * printer/parser pair is what golden tests and `--emit ir` rely on. */
static inline void fuzz_check_text_round_trip(const char *text, const char *what) {
    ampc_graph *g2 = NULL;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(text, strlen(text), &g2, &err);
    FUZZ_CHECK(st == AMPC_OK, "%s: the printed IR does not parse back: %s\n--- text ---\n%s", what,
               err ? err : ampc_status_str(st), text);
    char *again = ampc_graph_to_text(g2, true);
    FUZZ_CHECK(again && !strcmp(again, text),
               "%s: printing the parsed IR gives other text\n--- first ---\n%s\n--- second ---\n%s",
               what, text, again ? again : "(null)");
    free(again);
    ampc_graph_destroy(g2);
}

#endif /* AMPC_FUZZ_H */

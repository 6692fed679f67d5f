/*
 * diag.h — diagnostics: the user-facing error channel.
 *
 * Anything a user can cause (a bad model, an unsupported op, a bad shape) is reported by
 * returning an ampc_status and recording a message here. A message names the node it concerns
 * (index, op, name) and says what was expected and what was found. Library code never prints.
 */
#ifndef AMPC_DIAG_H
#define AMPC_DIAG_H

#include "ampc.h"

#include <stdarg.h>

typedef struct ampc_node ampc_node;

typedef struct ampc_diag_entry {
    ampc_status code;
    int32_t node;  /* node id, or -1 when the message concerns no node */
    char *msg;     /* complete message, context included (malloc'ed) */
} ampc_diag_entry;

typedef struct ampc_diag {
    ampc_diag_entry *entries;
    int32_t n, cap;
    int32_t dropped; /* messages past the cap that were counted but not kept */
} ampc_diag;

enum { AMPC_DIAG_MAX = 200 };

void ampc_diag_free(ampc_diag *d);
void ampc_diag_clear(ampc_diag *d);
/* Records an error about node `n` (NULL: none) and returns `code`. The message is prefixed with
 * the node's context: "node 3 (MatMul 'fc1'): ". */
ampc_status ampc_diag_error(ampc_diag *d, const ampc_node *n, ampc_status code, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
ampc_status ampc_diag_verror(ampc_diag *d, const ampc_node *n, ampc_status code, const char *fmt,
                             va_list ap);
/* Forgets the messages recorded after the first n (a pass that tried something and took it
 * back). */
void ampc_diag_truncate(ampc_diag *d, int32_t n);
/* The first recorded status, or AMPC_OK. */
ampc_status ampc_diag_status(const ampc_diag *d);
/* All messages joined by newlines (malloc'ed). */
char *ampc_diag_join(const ampc_diag *d);

/* Shorthand for errors in graph code: records against g->diag. */
#define AMPC_FAIL(g, node, code, ...) ampc_diag_error(&(g)->diag, (node), (code), __VA_ARGS__)

#endif /* AMPC_DIAG_H */

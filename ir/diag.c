/*
 * diag.c — recording and joining diagnostics (see diag.h).
 */
#include "diag.h"

#include "base.h"
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const char *const status_names[AMPC_STATUS_COUNT] = {
    [AMPC_OK] = "ok",
    [AMPC_E_INVALID_ARG] = "invalid argument",
    [AMPC_E_PARSE] = "parse error",
    [AMPC_E_SHAPE] = "shape error",
    [AMPC_E_DTYPE] = "dtype error",
    [AMPC_E_ATTR] = "attribute error",
    [AMPC_E_UNSUPPORTED] = "unsupported",
    [AMPC_E_OVERFLOW] = "size overflow",
    [AMPC_E_VERIFY] = "invalid graph",
    [AMPC_E_EVAL] = "evaluation error",
    [AMPC_E_IO] = "I/O error",
    [AMPC_E_OOM] = "out of memory",
    [AMPC_E_NO_DEVICE] = "no CUDA device",
    [AMPC_E_CUDA] = "CUDA error",
    [AMPC_E_NVRTC] = "NVRTC error",
    [AMPC_E_INTERNAL] = "internal error",
};

const char *ampc_status_str(ampc_status s) {
    return (unsigned)s < AMPC_STATUS_COUNT ? status_names[s] : "unknown status";
}

void ampc_diag_clear(ampc_diag *d) {
    for (int32_t i = 0; i < d->n; i++) free(d->entries[i].msg);
    d->n = 0;
    d->dropped = 0;
}

void ampc_diag_truncate(ampc_diag *d, int32_t n) {
    for (int32_t i = n; i < d->n; i++) free(d->entries[i].msg);
    if (n < d->n) d->n = n;
}

void ampc_diag_free(ampc_diag *d) {
    ampc_diag_clear(d);
    free(d->entries);
    memset(d, 0, sizeof *d);
}

ampc_status ampc_diag_verror(ampc_diag *d, const ampc_node *n, ampc_status code, const char *fmt,
                             va_list ap) {
    AMPC_ASSERT(code != AMPC_OK);
    if (d->n >= AMPC_DIAG_MAX) {
        d->dropped++;
        return code;
    }
    ampc_strbuf sb = {0};
    if (n)
        ampc_sb_printf(&sb, "node %d (%s '%s'): ", n->id, ampc_op_get(n->op)->onnx, n->name);
    ampc_sb_vprintf(&sb, fmt, ap);
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->entries = ampc_xrealloc(d->entries, (size_t)d->cap * sizeof *d->entries);
    }
    d->entries[d->n++] = (ampc_diag_entry){code, n ? n->id : -1, ampc_sb_take(&sb)};
    return code;
}

ampc_status ampc_diag_error(ampc_diag *d, const ampc_node *n, ampc_status code, const char *fmt,
                            ...) {
    va_list ap;
    va_start(ap, fmt);
    ampc_status s = ampc_diag_verror(d, n, code, fmt, ap);
    va_end(ap);
    return s;
}

ampc_status ampc_diag_status(const ampc_diag *d) {
    return d->n ? d->entries[0].code : (d->dropped ? AMPC_E_INTERNAL : AMPC_OK);
}

char *ampc_diag_join(const ampc_diag *d) {
    ampc_strbuf sb = {0};
    for (int32_t i = 0; i < d->n; i++) {
        if (i) ampc_sb_putc(&sb, '\n');
        ampc_sb_puts(&sb, d->entries[i].msg);
    }
    if (d->dropped) ampc_sb_printf(&sb, "\n(%d more messages not shown)", d->dropped);
    return ampc_sb_take(&sb);
}

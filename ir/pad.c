/*
 * pad.c — Pad's modes and geometry (pad.h).
 */
#include "ir/pad.h"

#include <string.h>

ampc_pad_mode ampc_pad_mode_of(ampc_graph *g, const ampc_node *n) {
    const char *m = ampc_ir_attr_string(g, n, "mode", "constant");
    return !strcmp(m, "reflect") ? AMPC_PAD_REFLECT
           : !strcmp(m, "edge")  ? AMPC_PAD_EDGE
           : !strcmp(m, "wrap")  ? AMPC_PAD_WRAP
                                 : AMPC_PAD_CONSTANT;
}

void ampc_pad_geometry(int32_t r, const int64_t *dims, const int64_t *pads, int32_t np,
                       const int64_t *axes, int64_t *lo, int64_t *len, int64_t *shift) {
    const int32_t na = np / 2;
    for (int32_t i = 0; i < r; i++) lo[i] = 0, len[i] = dims[i], shift[i] = 0;
    for (int32_t i = 0; i < na; i++) {
        int32_t a = axes ? (int32_t)(axes[i] < 0 ? axes[i] + r : axes[i]) : i;
        int64_t pb = pads[i], pe = pads[na + i];
        lo[a] = pb < 0 ? -pb : 0;
        len[a] = dims[a] - lo[a] - (pe < 0 ? -pe : 0);
        shift[a] = pb > 0 ? pb : 0;
    }
}

int64_t ampc_pad_source(int64_t j, int64_t len, ampc_pad_mode mode) {
    if (j >= 0 && j < len) return j;
    switch (mode) {
    case AMPC_PAD_EDGE: return j < 0 ? 0 : len - 1;
    case AMPC_PAD_WRAP: return ((j % len) + len) % len;
    case AMPC_PAD_REFLECT: {
        if (len == 1) return 0;
        int64_t period = 2 * (len - 1), m = ((j % period) + period) % period;
        return m < len ? m : period - m;
    }
    default: return -1; /* constant */
    }
}

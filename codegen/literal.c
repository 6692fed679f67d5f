/*
 * literal.c — float constants written into generated CUDA (codegen.h, "float constants").
 *
 * One routine writes them all, so that no attribute, scale or table entry can produce text
 * NVRTC rejects: finite values as decimal literals that read back exactly (%.17g for double,
 * %.9g for float), NaN and the infinities as __builtin_bit_cast of their bits (a constant
 * expression since CUDA 11.3, so it also fits static initializers, where __int_as_float does
 * not).
 */
#include "codegen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Writes the literal of v (f32: of (float)v) into buf. */
static void put(char *buf, size_t len, double v, bool f32) {
    if (!isfinite(v)) {
        if (f32) {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            snprintf(buf, len, "__builtin_bit_cast(float, 0x%08xU)", (unsigned)bits);
        } else {
            uint64_t bits;
            memcpy(&bits, &v, sizeof bits);
            snprintf(buf, len, "__builtin_bit_cast(double, 0x%016llxULL)",
                     (unsigned long long)bits);
        }
        return;
    }
    if (!f32) {
        snprintf(buf, len, "%.17g", v);
        return;
    }
    int n = snprintf(buf, len, "%.9g", v);
    /* "1" + "f" is no literal: a float literal needs a point or an exponent. */
    const char *tail = strpbrk(buf, ".e") ? "f" : ".0f";
    snprintf(buf + n, len - (size_t)n, "%s", tail);
}

ampc_cg_literal ampc_cg_f64(double v) {
    ampc_cg_literal l;
    put(l.s, sizeof l.s, v, false);
    return l;
}

ampc_cg_literal ampc_cg_f32(float v) {
    ampc_cg_literal l;
    put(l.s, sizeof l.s, (double)v, true);
    return l;
}

void ampc_cg_put_f64(ampc_strbuf *sb, double v) { ampc_sb_puts(sb, ampc_cg_f64(v).s); }

void ampc_cg_put_f32(ampc_strbuf *sb, float v) { ampc_sb_puts(sb, ampc_cg_f32(v).s); }

void ampc_cg_put_typed(ampc_strbuf *sb, const char *ct, double v) {
    bool dbl = !strcmp(ct, "double");
    if (isfinite(v) || dbl) ampc_sb_printf(sb, "((%s)%s)", ct, ampc_cg_f64(v).s);
    else if (!strcmp(ct, "float")) ampc_sb_puts(sb, ampc_cg_f32((float)v).s);
    else ampc_sb_printf(sb, "((%s)%s)", ct, ampc_cg_f32((float)v).s);
}

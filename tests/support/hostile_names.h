/*
 * hostile_names.h — what the Criterion suites and the fuzz targets share to check that a model's
 * names never change generated code: a C-lexer-level stripper that removes comments and string
 * and character literals from generated sources, a renamer that gives every name of a graph
 * (the graph's, each value's, each node's) from a function of its position, the generated
 * sources of a module as one text (every CUDA unit, the host C, model.h), and a comparison that
 * names the first difference.
 *
 * The promise checked: the sources of a model with hostile names, stripped, are byte-identical
 * to those of the same model with its names replaced by n0, n1, ... in the same order. Header
 * only (static inline), as the fuzz targets link ampc_core and not the test support library.
 */
#ifndef AMPC_TEST_HOSTILE_NAMES_H
#define AMPC_TEST_HOSTILE_NAMES_H

#include "compiler/artifact.h"
#include "compiler/module.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* C or CUDA source without comments and literals: line splices (backslash-newline) removed
 * first, as the compiler's phase 2 does; each comment becomes one space, each string literal ""
 * and each character literal '' (escapes inside them skipped). Malloc'ed. */
static inline char *hn_strip(const char *src) {
    size_t n = strlen(src);
    char *spliced = malloc(n + 1), *out = malloc(n + 1);
    size_t m = 0, o = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\\' && src[i + 1] == '\n') {
            i++;
            continue;
        }
        spliced[m++] = src[i];
    }
    spliced[m] = 0;
    for (size_t i = 0; i < m;) {
        char c = spliced[i];
        if (c == '/' && spliced[i + 1] == '/') {
            while (i < m && spliced[i] != '\n') i++;
            out[o++] = ' ';
        } else if (c == '/' && spliced[i + 1] == '*') {
            const char *end = strstr(spliced + i + 2, "*/");
            i = end ? (size_t)(end - spliced) + 2 : m;
            out[o++] = ' ';
        } else if (c == '"' || c == '\'') {
            for (i++; i < m && spliced[i] != c && spliced[i] != '\n'; i++)
                if (spliced[i] == '\\' && i + 1 < m) i++;
            if (i < m && spliced[i] == c) i++;
            out[o++] = c;
            out[o++] = c;
        } else {
            out[o++] = c;
            i++;
        }
    }
    out[o] = 0;
    free(spliced);
    return out;
}

/* Writes name number i (0-based, in the renamer's order) into buf. */
typedef void (*hn_namer)(char *buf, size_t cap, int32_t i, void *ctx);

/* n0, n1, ... */
static inline void hn_plain(char *buf, size_t cap, int32_t i, void *ctx) {
    (void)ctx;
    snprintf(buf, cap, "n%d", i);
}

/* Names that try to end a comment or a literal, splice a line, start a directive, define code,
 * send a terminal escape sequence, climb folders, or are not UTF-8. */
static const char *const hn_fragments[] = {
    "a\nb",
    "x*/ int evil; /*",
    "// c\n#error injected",
    "q\"uote'",
    "back\\",
    "splice\\\n#error spliced",
    "tri?\?/ ?\?= ?\?(",
    "esc\x1b[2J\x1b]0;title\x07",
    "../../etc/passwd",
    "#error boom",
    "*/ __attribute__((constructor)) static void f(void) { system(\"id\"); } /*",
    "\r\n#define float int\n",
    "\xc3\xa9t\xc3\xa9 \xe2\x88\x80 \xf0\x9f\x98\x80",
    "\x9b\xc2\x9b\xff\xfe\xc0\xaf",
    "\x7f\x01\x02\x1f",
    "/blk.0/Relu",
    "input.1",
    "logits:0",
    "\"); system(\"id\"); (\"",
    "%s%n%x",
};

/* The bytes a fuzz input gives the hostile names (NULL: the fragments alone). */
typedef struct hn_bytes {
    const unsigned char *data;
    size_t size;
} hn_bytes;

/* A hostile name: a fragment (chosen by i, or by a byte of ctx's input), up to 24 bytes of the
 * input (NUL bytes as 0x01) for a fuzz run, a very long tail every seventh name, and #i so that
 * names stay unique. ctx: a hn_bytes or NULL. */
static inline void hn_hostile(char *buf, size_t cap, int32_t i, void *ctx) {
    const hn_bytes *in = ctx;
    int nf = (int)(sizeof hn_fragments / sizeof *hn_fragments);
    size_t at = 0;
    int f = i % nf;
    if (in && in->size) f = (int)(in->data[(size_t)i % in->size] % (unsigned)nf);
    at += (size_t)snprintf(buf + at, cap - at, "%s", hn_fragments[f]);
    if (in && in->size) {
        size_t from = ((size_t)i * 7) % in->size;
        for (size_t k = 0; k < 24 && from + k < in->size && at + 1 < cap; k++)
            buf[at++] = in->data[from + k] ? (char)in->data[from + k] : '\x01';
        buf[at] = 0;
    }
    if (i % 7 == 3)
        for (int k = 0; k < 300 && at + 1 < cap; k++) buf[at++] = k % 50 == 49 ? '/' : 'L';
    if (at < cap) snprintf(buf + at, cap - at, "#%d", i);
}

/* Renames every name of g in a fixed order: the graph's (0), then each value's in value order,
 * then each node's in node order. Value names must come out unique (a namer puts i in each).
 * A graph with subgraphs is left alone (their bodies name values of the enclosing graph) and
 * false is returned; also false when a rename fails. */
static inline bool hn_rename(ampc_graph *g, hn_namer namer, void *ctx) {
    if (g->n_subgraphs > 0) return false;
    char buf[4096];
    int32_t k = 0;
    namer(buf, sizeof buf, k++, ctx);
    g->name = ampc_arena_strdup(&g->arena, buf);
    /* first out of the way of every new name, then the new names */
    for (int32_t i = 0; i < g->n_values; i++) {
        snprintf(buf, sizeof buf, "\x01%d", i);
        if (ampc_ir_value_rename(g, g->values[i], buf) != AMPC_OK) return false;
    }
    for (int32_t i = 0; i < g->n_values; i++) {
        namer(buf, sizeof buf, k++, ctx);
        if (ampc_ir_value_rename(g, g->values[i], buf) != AMPC_OK) return false;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        namer(buf, sizeof buf, k++, ctx);
        g->nodes[i]->name = ampc_arena_strdup(&g->arena, buf);
    }
    return g->name != NULL;
}

/* What a module generates, as `ampc --emit cuda`, `--emit c` and `-o` write it: every CUDA
 * unit, the host C and model.h of library `model` built from `source`, one after another.
 * Malloc'ed. */
static inline char *hn_sources(const ampc_module *m, const char *source) {
    ampc_strbuf sb = {0};
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        ampc_sb_printf(&sb, "// ---- unit %d ----\n", u);
        ampc_sb_puts(&sb, ampc_module_cuda(m, u));
    }
    ampc_artifact_layout layout = {.sidecar = NULL};
    char *c = ampc_artifact_host_c(m, "model", &layout);
    char *h = ampc_artifact_header(m, "model", source);
    ampc_sb_puts(&sb, "// ---- host C ----\n");
    ampc_sb_puts(&sb, c);
    ampc_sb_puts(&sb, "// ---- model.h ----\n");
    ampc_sb_puts(&sb, h);
    free(c);
    free(h);
    return ampc_sb_take(&sb);
}

/* NULL when a and b, stripped, are the same; else a malloc'ed description of the first
 * difference: its line in each, stripped. */
static inline char *hn_compare(const char *a, const char *b) {
    char *sa = hn_strip(a), *sb = hn_strip(b);
    size_t i = 0;
    while (sa[i] && sa[i] == sb[i]) i++;
    char *diff = NULL;
    if (sa[i] || sb[i]) {
        size_t start = i;
        while (start > 0 && sa[start - 1] != '\n') start--;
        int la = (int)strcspn(sa + start, "\n"), lb = (int)strcspn(sb + start, "\n");
        ampc_strbuf d = {0};
        ampc_sb_printf(&d, "the stripped sources differ at byte %zu:\n  hostile: %.*s\n  plain:   %.*s",
                       i, la > 300 ? 300 : la, sa + start, lb > 300 ? 300 : lb, sb + start);
        diff = ampc_sb_take(&d);
    }
    free(sa);
    free(sb);
    return diff;
}

#endif /* AMPC_TEST_HOSTILE_NAMES_H */

/*
 * check.c — the FileCheck-like matcher of the golden tests (see check.h). Directives are read
 * from the spec in order; a cursor walks the text. CHECK-NOT patterns wait until the next
 * positive match (or the end), then must be absent from the stretch of text skipped over.
 */
#include "check.h"

#include <criterion/criterion.h>

#include "ir/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CHK_PLAIN, CHK_NEXT, CHK_NOT } chk_kind;

typedef struct directive {
    chk_kind kind;
    char *pat;
    int line; /* in the spec, 1-based */
} directive;

/* 1-based line of offset `off` in text. */
static int line_of(const char *text, size_t off) {
    int line = 1;
    for (size_t i = 0; i < off; i++) line += text[i] == '\n';
    return line;
}

/* Finds pat in text[from, to); returns the offset or -1. */
static long find_in(const char *text, size_t from, size_t to, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = from; i + m <= to; i++)
        if (!memcmp(text + i, pat, m)) return (long)i;
    return -1;
}

static char *trimmed(const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    char *r = ampc_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* Reads the directives of spec; on a malformed one returns -1 with *err set. */
static int parse_spec(const char *spec, const char *name, directive **out, char **err) {
    int n = 0, cap = 0, line = 1;
    directive *d = NULL;
    for (const char *p = spec; *p; line++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *c = p, *end = p + len;
        while (c < end && (*c == ' ' || *c == '\t')) c++;
        if (end - c >= 2 && c[0] == '/' && c[1] == '/') {
            c += 2;
            while (c < end && (*c == ' ' || *c == '\t')) c++;
            if (end - c >= 5 && !strncmp(c, "CHECK", 5)) {
                chk_kind k;
                const char *colon = memchr(c, ':', (size_t)(end - c));
                size_t klen = colon ? (size_t)(colon - c) : 0;
                if (klen == 5)
                    k = CHK_PLAIN;
                else if (klen == 10 && !strncmp(c, "CHECK-NEXT", 10))
                    k = CHK_NEXT;
                else if (klen == 9 && !strncmp(c, "CHECK-NOT", 9))
                    k = CHK_NOT;
                else {
                    ampc_strbuf sb = {0};
                    ampc_sb_printf(&sb,
                                   "%s:%d: unknown directive '%.*s' (expected CHECK:, "
                                   "CHECK-NEXT: or CHECK-NOT:)",
                                   name, line, (int)(colon ? klen : (size_t)(end - c)), c);
                    *err = ampc_sb_take(&sb);
                    for (int i = 0; i < n; i++) free(d[i].pat);
                    free(d);
                    return -1;
                }
                if (n == cap) d = ampc_xrealloc(d, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *d);
                d[n++] = (directive){k, trimmed(colon + 1, (size_t)(end - colon - 1)), line};
            }
        }
        p = eol ? eol + 1 : p + len;
    }
    *out = d;
    return n;
}

char *t_check_match(const char *spec, const char *text, const char *name) {
    directive *d = NULL;
    char *err = NULL;
    int n = parse_spec(spec, name, &d, &err);
    if (n < 0) return err;
    ampc_strbuf sb = {0};
    size_t len = strlen(text), pos = 0;
    long last = -1;     /* start of the previous positive match */
    int first_not = -1; /* first CHECK-NOT waiting for the next positive match */
    int positives = 0;
    for (int i = 0; i <= n && !sb.len; i++) {
        if (i < n && d[i].kind == CHK_NOT) {
            if (first_not < 0) first_not = i;
            continue;
        }
        size_t stop = len; /* where the stretch guarded by pending CHECK-NOTs ends */
        if (i < n) {
            const directive *c = &d[i];
            long at;
            positives++;
            if (c->kind == CHK_PLAIN) {
                at = find_in(text, pos, len, c->pat);
                if (at < 0)
                    ampc_sb_printf(&sb, "%s:%d: CHECK: '%s' not found in the output after line %d",
                                   name, c->line, c->pat, line_of(text, pos));
            } else {
                if (last < 0) {
                    ampc_sb_printf(&sb, "%s:%d: CHECK-NEXT: '%s' has no previous match to follow",
                                   name, c->line, c->pat);
                    break;
                }
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t from = nl ? (size_t)(nl - text) + 1 : len;
                const char *nl2 = memchr(text + from, '\n', len - from);
                size_t to = nl2 ? (size_t)(nl2 - text) : len;
                at = find_in(text, from, to, c->pat);
                if (at < 0)
                    ampc_sb_printf(&sb,
                                   "%s:%d: CHECK-NEXT: '%s' not found on output line %d, which "
                                   "is '%.*s'",
                                   name, c->line, c->pat, line_of(text, from), (int)(to - from),
                                   text + from);
            }
            if (at < 0) break;
            stop = (size_t)at;
            last = at;
        }
        for (int k = first_not; k >= 0 && k < i; k++) {
            long bad = find_in(text, pos, stop, d[k].pat);
            if (bad >= 0) {
                ampc_sb_printf(&sb, "%s:%d: CHECK-NOT: '%s' found on output line %d", name,
                               d[k].line, d[k].pat, line_of(text, (size_t)bad));
                break;
            }
        }
        first_not = -1;
        if (i < n) pos = (size_t)last + strlen(d[i].pat);
    }
    if (!sb.len && !positives)
        ampc_sb_printf(&sb, "%s: no CHECK or CHECK-NEXT directive: the test would check nothing",
                       name);
    for (int i = 0; i < n; i++) free(d[i].pat);
    free(d);
    return sb.len ? ampc_sb_take(&sb) : (ampc_sb_free(&sb), NULL);
}

void t_expect_check(const char *spec, const char *text, const char *spec_name) {
    char *msg = t_check_match(spec, text, spec_name);
    if (!msg) return;
    char buf[1024]; /* the assert does not return: keep a copy, free the original */
    snprintf(buf, sizeof buf, "%s", msg);
    free(msg);
    cr_log_error("%s\n--- output ---\n%s--------------", buf, text);
    cr_assert_fail("%s", buf);
}

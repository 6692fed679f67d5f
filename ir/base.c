/*
 * base.c — assert, allocation wrappers, arena, string buffer, string map and half-precision
 * conversions (see base.h).
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Noreturn void ampc_assert_fail(const char *file, int line, const char *cond) {
    fprintf(stderr, "ampc: internal error at %s:%d: assertion failed: %s\n", file, line, cond);
    abort();
}

static _Noreturn void oom(size_t n) {
    fprintf(stderr, "ampc: out of host memory allocating %zu bytes\n", n);
    abort();
}

void *ampc_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *ampc_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

int64_t ampc_host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return INT64_MAX;
    return (int64_t)pages > INT64_MAX / page ? INT64_MAX : (int64_t)pages * page;
}

void *ampc_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *ampc_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(ampc_xmalloc(n), s, n);
}

/* ---- arena ---------------------------------------------------------------------------------- */

enum { ARENA_ALIGN = 64, ARENA_MIN_BLOCK = 64 * 1024 };

struct ampc_arena_block {
    ampc_arena_block *next;
    size_t cap, used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

void ampc_arena_init(ampc_arena *a) { memset(a, 0, sizeof *a); }

void ampc_arena_free(ampc_arena *a) {
    for (ampc_arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(a, 0, sizeof *a);
}

void *ampc_arena_alloc(ampc_arena *a, size_t n) {
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need < n) return NULL; /* n near SIZE_MAX */
    ampc_arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = b ? b->cap * 2 : ARENA_MIN_BLOCK;
        if (cap > 16u << 20) cap = 16u << 20;
        if (cap < need) cap = need;
        if (cap > SIZE_MAX - sizeof *b) return NULL;
        ampc_arena_block *nb = aligned_alloc(ARENA_ALIGN, (sizeof *nb + cap + ARENA_ALIGN - 1) &
                                                              ~(size_t)(ARENA_ALIGN - 1));
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        if (b && need > b->cap / 2) {
            /* A big one-off allocation: keep the current block as the bump target. */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_bytes += n;
    memset(p, 0, n);
    return p;
}

char *ampc_arena_strdup(ampc_arena *a, const char *s) {
    return s ? ampc_arena_memdup(a, s, strlen(s) + 1) : NULL;
}

void *ampc_arena_memdup(ampc_arena *a, const void *p, size_t n) {
    void *q = ampc_arena_alloc(a, n);
    if (q && n && p) memcpy(q, p, n); /* NULL p: zeroed memory */
    return q;
}

/* ---- string buffer -------------------------------------------------------------------------- */

static void sb_reserve(ampc_strbuf *sb, size_t extra) {
    if (sb->len + extra + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1) cap *= 2;
    sb->data = ampc_xrealloc(sb->data, cap);
    sb->cap = cap;
}

void ampc_sb_putc(ampc_strbuf *sb, char c) {
    sb_reserve(sb, 1);
    sb->data[sb->len++] = c;
    sb->data[sb->len] = 0;
}

void ampc_sb_puts(ampc_strbuf *sb, const char *s) {
    size_t n = strlen(s);
    sb_reserve(sb, n);
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

void ampc_sb_vprintf(ampc_strbuf *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    sb_reserve(sb, (size_t)n);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void ampc_sb_printf(ampc_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampc_sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *ampc_sb_take(ampc_strbuf *sb) {
    char *s = sb->data ? sb->data : ampc_xstrdup("");
    memset(sb, 0, sizeof *sb);
    return s;
}

void ampc_sb_free(ampc_strbuf *sb) {
    free(sb->data);
    memset(sb, 0, sizeof *sb);
}

/* ---- text from a model --------------------------------------------------------------------- */

int ampc_utf8_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    /* the second byte's range excludes overlong forms, surrogates and code points past U+10FFFF */
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

void ampc_sb_put_comment_text(ampc_strbuf *sb, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    unsigned char prev = 0;
    size_t i = 0;
    for (; p[i] && i < AMPC_COMMENT_TEXT_MAX; i++) {
        unsigned char c = p[i];
        bool escape = c < 0x20 || c > 0x7e || c == '\\' || (c == '/' && prev == '*') ||
                      (c == '*' && prev == '/') || (c == '?' && prev == '?');
        if (escape) ampc_sb_printf(sb, "\\x%02x", c);
        else ampc_sb_putc(sb, (char)c);
        prev = escape ? 0 : c;
    }
    if (p[i]) ampc_sb_puts(sb, "...");
}

void ampc_sb_put_json_str(ampc_strbuf *sb, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    ampc_sb_putc(sb, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        int len = ampc_utf8_len(p + i, n - i);
        if (c == '"' || c == '\\') {
            ampc_sb_printf(sb, "\\%c", c);
        } else if (c < 0x20 || c == 0x7f) {
            ampc_sb_printf(sb, "\\u%04x", c);
        } else if (len == 2 && c == 0xc2 && p[i + 1] < 0xa0) {
            ampc_sb_printf(sb, "\\u%04x", p[i + 1]); /* a C1 control */
        } else if (len == 0) {
            ampc_sb_puts(sb, "\\ufffd");
            len = 1;
        } else {
            for (int k = 0; k < len; k++) ampc_sb_putc(sb, (char)p[i + k]);
        }
        i += (size_t)len;
    }
    ampc_sb_putc(sb, '"');
}

size_t ampc_sb_put_terminal_text(ampc_strbuf *sb, const char *s, size_t n, bool final) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c >= 0x80) {
            int len = ampc_utf8_len(p + i, n - i);
            if (len == 0 && !final && n - i < 4) {
                /* a sequence the next bytes may complete: its prefix so far is well formed */
                unsigned char tail[4] = {0};
                memcpy(tail, p + i, n - i);
                for (size_t k = n - i; k < 4; k++)
                    tail[k] = k == 1 && (c == 0xed || c == 0xf4) ? 0x80 : 0xbf;
                if (ampc_utf8_len(tail, 4) > (int)(n - i)) return i;
            }
            bool c1 = len == 2 && c == 0xc2 && p[i + 1] < 0xa0;
            if (len > 0 && !c1) {
                for (int k = 0; k < len; k++) ampc_sb_putc(sb, (char)p[i + k]);
                i += (size_t)len;
                continue;
            }
            int bytes = c1 ? 2 : 1;
            for (int k = 0; k < bytes; k++) ampc_sb_printf(sb, "\\x%02x", p[i + k]);
            i += (size_t)bytes;
            continue;
        }
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) ampc_sb_printf(sb, "\\x%02x", c);
        else ampc_sb_putc(sb, (char)c);
        i++;
    }
    return n;
}

/* ---- string map ----------------------------------------------------------------------------- */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t map_slot(const ampc_strmap *m, const char *key) {
    size_t mask = m->cap - 1, i = (size_t)hash_str(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
    return i;
}

void ampc_strmap_free(ampc_strmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void *ampc_strmap_get(const ampc_strmap *m, const char *key) {
    if (!m->cap) return NULL;
    size_t i = map_slot(m, key);
    return m->keys[i] ? m->vals[i] : NULL;
}

static void map_grow(ampc_strmap *m) {
    ampc_strmap old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->len = 0;
    m->keys = ampc_xcalloc(m->cap, sizeof *m->keys);
    m->vals = ampc_xcalloc(m->cap, sizeof *m->vals);
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i]) ampc_strmap_put(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
}

void ampc_strmap_put(ampc_strmap *m, const char *key, void *val) {
    if ((m->len + 1) * 2 > m->cap) map_grow(m);
    size_t i = map_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->len++;
    }
    m->vals[i] = val;
}

void ampc_strmap_del(ampc_strmap *m, const char *key) {
    if (!m->cap) return;
    size_t mask = m->cap - 1, i = map_slot(m, key);
    if (!m->keys[i]) return;
    m->keys[i] = NULL;
    m->len--;
    /* Re-insert the rest of the probe run so lookups past the hole still succeed. */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        const char *k = m->keys[j];
        void *v = m->vals[j];
        m->keys[j] = NULL;
        m->len--;
        ampc_strmap_put(m, k, v);
    }
}

/* ---- half precision ------------------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float ampc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        float f = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ampc_f32_to_f16(float f) {
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
    uint32_t exp = (u >> 23) & 0xff, man = u & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign; /* underflows to zero */
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e), half = 1u << (shift - 1);
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++; /* may carry into inf: correct */
    return (uint16_t)(sign | r);
}

float ampc_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ampc_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffff)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

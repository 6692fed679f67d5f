/*
 * base.h — the small utilities every layer of ampc uses: the internal-invariant assert, the bump
 * arena that owns a graph's objects, a growable string buffer, checked size arithmetic, a string
 * map, and the f16/bf16 conversions.
 */
#ifndef AMPC_BASE_H
#define AMPC_BASE_H

#include "ampc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Our own invariant broken: abort with file, line and the condition (never for user input). */
#define AMPC_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) ampc_assert_fail(__FILE__, __LINE__, #cond);                                  \
    } while (0)
_Noreturn void ampc_assert_fail(const char *file, int line, const char *cond);

#define AMPC_ARRAY_LEN(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))
#define AMPC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define AMPC_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Calls malloc/calloc/realloc and aborts on exhaustion. Used only for ampc's own small
 * bookkeeping; tensor-sized allocations use the checked variants and report AMPC_E_OOM. */
void *ampc_xmalloc(size_t n);
void *ampc_xcalloc(size_t n, size_t size);
void *ampc_xrealloc(void *p, size_t n);
char *ampc_xstrdup(const char *s);

/* The machine's physical memory in bytes (INT64_MAX when it cannot be told). A tensor larger than
 * this cannot be held in host memory at all: it is refused before allocating, naming it. */
int64_t ampc_host_memory_bytes(void);

/* ---- arena ---------------------------------------------------------------------------------- */

/* A bump allocator: allocations live until the arena is freed. Blocks grow geometrically; an
 * allocation larger than the block size gets a block of its own. */
typedef struct ampc_arena_block ampc_arena_block;
typedef struct ampc_arena {
    ampc_arena_block *head;
    size_t used_bytes; /* sum of all allocations, for reporting */
} ampc_arena;

void ampc_arena_init(ampc_arena *a);
void ampc_arena_free(ampc_arena *a);
/* Zeroed memory aligned to 64 bytes, or NULL when the host is out of memory. */
void *ampc_arena_alloc(ampc_arena *a, size_t n);
char *ampc_arena_strdup(ampc_arena *a, const char *s);
void *ampc_arena_memdup(ampc_arena *a, const void *p, size_t n);

/* ---- checked arithmetic --------------------------------------------------------------------- */

/* a*b and a+b on non-negative int64; false when the result overflows. */
static inline bool ampc_mul_ok(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool ampc_add_ok(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ---- string buffer -------------------------------------------------------------------------- */

/* A growable NUL-terminated string. Zero-initialise to start. */
typedef struct ampc_strbuf {
    char *data;
    size_t len, cap;
} ampc_strbuf;

void ampc_sb_putc(ampc_strbuf *sb, char c);
void ampc_sb_puts(ampc_strbuf *sb, const char *s);
void ampc_sb_printf(ampc_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ampc_sb_vprintf(ampc_strbuf *sb, const char *fmt, va_list ap);
/* Returns the string (never NULL) and leaves the buffer empty; the caller frees it. */
char *ampc_sb_take(ampc_strbuf *sb);
void ampc_sb_free(ampc_strbuf *sb);

/* ---- text from a model --------------------------------------------------------------------- */

/* A model file is untrusted: its names and strings reach generated C and CUDA, the header, JSON
 * reports and the terminal only through these (or a sink's own quoting). */

/* The length (1 to 4) of the well-formed UTF-8 sequence at s (n bytes available), or 0 when the
 * bytes there are not one: a stray continuation byte, an overlong form, a surrogate, a code
 * point above U+10FFFF or a sequence cut short by the end. */
int ampc_utf8_len(const unsigned char *s, size_t n);

/* Longest text of a model (in bytes) a generated comment quotes; longer text ends in "...". */
enum { AMPC_COMMENT_TEXT_MAX = 80 };

/* Appends model text s for inside a C or CUDA comment (block or line) where it can neither end
 * the comment nor continue it onto the next line: printable ASCII as it is, except '\\', a '/'
 * after '*', a '*' after '/' and a '?' after '?' (a trigraph), which are written as \xHH like
 * every byte below 0x20 or above 0x7e. At most AMPC_COMMENT_TEXT_MAX bytes of s are written,
 * then "...". The caller places it between characters other than '*', '/' and '?'. */
void ampc_sb_put_comment_text(ampc_strbuf *sb, const char *s);

/* Appends s as a JSON string, quotes included: '"', '\\', the C0 and C1 controls and DEL
 * escaped (\\uXXXX), well-formed UTF-8 as it is, and each byte that is not UTF-8 as U+FFFD, so
 * that the result is valid JSON whatever bytes s holds. NULL is "". */
void ampc_sb_put_json_str(ampc_strbuf *sb, const char *s);

/* Appends the n bytes at s for a terminal or a log, where they can send no control sequence:
 * well-formed UTF-8, '\n' and '\t' as they are; other C0 controls, DEL, the C1 controls
 * (U+0080 to U+009F) and bytes that are not UTF-8 as \xHH. Returns how many bytes were used:
 * all of them when `final`, else all but a UTF-8 sequence cut short by the end, which the caller
 * passes again with the bytes that follow. */
size_t ampc_sb_put_terminal_text(ampc_strbuf *sb, const char *s, size_t n, bool final);

/* ---- string map ----------------------------------------------------------------------------- */

/* Open-addressing map from NUL-terminated keys (not copied: they must outlive the map) to
 * pointers. */
typedef struct ampc_strmap {
    const char **keys;
    void **vals;
    size_t cap, len;
} ampc_strmap;

void ampc_strmap_free(ampc_strmap *m);
void *ampc_strmap_get(const ampc_strmap *m, const char *key);
/* Inserts or replaces. */
void ampc_strmap_put(ampc_strmap *m, const char *key, void *val);
void ampc_strmap_del(ampc_strmap *m, const char *key);

/* ---- half precision ------------------------------------------------------------------------- */

/* IEEE binary16 and bfloat16 to and from f32, rounding to nearest even, NaN preserved. */
float ampc_f16_to_f32(uint16_t h);
uint16_t ampc_f32_to_f16(float f);
float ampc_bf16_to_f32(uint16_t h);
uint16_t ampc_f32_to_bf16(float f);

#endif /* AMPC_BASE_H */

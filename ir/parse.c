/*
 * parse.c — reads the textual IR written by print.c back into a graph.
 *
 * A hand-written recursive-descent parser over a small lexer. Grammar (whitespace and `//`
 * comments to the end of a line are skipped, so golden files parse whole):
 *
 *     file   := graph EOF
 *     graph  := 'graph' STRING ['opset' INT] ['batch_split' INT] '{' stmt* '}'
 *     stmt   := 'input' VALUE ':' type ['=' data]
 *             | 'const' VALUE ':' type '=' data
 *             | 'output' VALUE {',' VALUE}
 *             | VALUE [':' type] {',' VALUE [':' type]} '=' OP '(' [arg {',' arg}] ')'
 *               ['{' [attr {',' attr}] '}'] [NODE]
 *     arg    := VALUE | '_'                      (_ = an absent optional input)
 *     type   := DTYPE '[' [INT {',' INT}] ']'
 *     data   := '[' [num {',' num}] ']' | num    (flat, row-major; '[...]' is elided data)
 *     attr   := (IDENT | STRING) '=' (INT | FLOAT | STRING | '[' elems ']' | ('ints' | 'floats' |
 *               'strings') '[' elems ']' | 'tensor' '<' type '>' data | graph)
 *
 * VALUE is %name or %"quoted", NODE is @name or @"quoted". Nodes are rebuilt through
 * ampc_ir_node_build, so arity checks, inference and eager folding run exactly as for the other
 * front ends; a printed result type that disagrees with inference is an error naming its line.
 * Result types may be omitted in hand-written text (inference then decides). Every error carries
 * line:column and says what was expected and what was found.
 */
#include "ir.h"
#include "ref/ref.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum tok_kind {
    TK_EOF,
    TK_IDENT,    /* keywords, op names, dtypes, attribute names, true/false/nan/inf */
    TK_INT,      /* -?[0-9]+ */
    TK_FLOAT,    /* a number with '.', an exponent, or -inf / -nan */
    TK_STRING,   /* "..." (decoded into parser.text) */
    TK_VALUE,    /* %name (the name decoded into parser.text) */
    TK_NODE,     /* @name */
    TK_PUNCT,    /* one of { } ( ) [ ] , : = < > */
    TK_ELLIPSIS, /* ... */
    TK_ERROR,    /* the lexer failed (parser.err is set) */
} tok_kind;

typedef struct tok {
    tok_kind kind;
    const char *start; /* raw text in the source */
    size_t len;
    int line, col;
} tok;

typedef struct parser {
    const char *p, *end;    /* lexer position and end of the text */
    int line;               /* line of p (1-based) */
    const char *line_start; /* first byte of that line */
    tok t;                  /* the current token */
    ampc_strbuf text;       /* decoded text of the current IDENT/STRING/VALUE/NODE token */
    char *err;              /* the first error ("line:col: message"), malloc'ed */
    ampc_status status;     /* its status */
    ampc_graph *g;          /* the graph being filled (a subgraph while inside one) */
    ampc_strmap *defs;      /* value name -> line of its definition, for g */
} parser;

/* ---- errors --------------------------------------------------------------------------------- */

static bool fail_at(parser *P, int line, int col, ampc_status st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static bool fail_at(parser *P, int line, int col, ampc_status st, const char *fmt, ...) {
    if (P->err) return false; /* keep the first error: later ones follow from it */
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%d:%d: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    ampc_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    P->err = ampc_sb_take(&sb);
    P->status = st;
    return false;
}

#define FAIL_TOK(P, tk, ...) fail_at((P), (tk)->line, (tk)->col, AMPC_E_PARSE, __VA_ARGS__)

/* A token as an error message shows it: 'text', "string", or end of input. */
static const char *describe(const tok *t, char *buf, size_t n) {
    switch (t->kind) {
    case TK_EOF: return "end of input";
    case TK_ERROR: return "an invalid token";
    case TK_STRING:
        snprintf(buf, n, "string \"%.*s%s\"", (int)AMPC_MIN(t->len - 2, 24), t->start + 1,
                 t->len - 2 > 24 ? "..." : "");
        return buf;
    default:
        snprintf(buf, n, "'%.*s%s'", (int)AMPC_MIN(t->len, 32), t->start, t->len > 32 ? "..." : "");
        return buf;
    }
}

/* "expected <what>, found <current token>". */
static bool expected(parser *P, const char *what) {
    char buf[80];
    return FAIL_TOK(P, &P->t, "expected %s, found %s", what, describe(&P->t, buf, sizeof buf));
}

/* ---- lexer ---------------------------------------------------------------------------------- */

static bool plain_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int col_of(const parser *P, const char *at) { return (int)(at - P->line_start) + 1; }

/* Empties the decoded-text buffer, keeping it a valid (NUL-terminated, non-NULL) string. */
static void text_reset(parser *P) {
    P->text.len = 0;
    if (!P->text.data) ampc_sb_puts(&P->text, "");
    P->text.data[0] = 0;
}

static bool lex_error(parser *P, const char *at, const char *fmt, const char *arg) {
    P->t.kind = TK_ERROR;
    return fail_at(P, P->line, col_of(P, at), AMPC_E_PARSE, fmt, arg);
}

/* Decodes a quoted string starting at P->p (the opening quote) into P->text. */
static bool lex_string(parser *P) {
    const char *q = P->p + 1;
    text_reset(P);
    for (;;) {
        if (q >= P->end || *q == '\n')
            return lex_error(P, P->p, "unterminated string: expected a closing '\"'%s", "");
        char c = *q++;
        if (c == '"') break;
        /* Names and strings are C strings: a NUL would cut them short, and a name cut short can
         * clash with another one (the builder would then pick a fresh name behind our back). */
        if (!c) return lex_error(P, q - 1, "a string cannot contain a NUL byte%s", "");
        if (c != '\\') {
            ampc_sb_putc(&P->text, c);
            continue;
        }
        if (q >= P->end) return lex_error(P, q, "unterminated escape sequence%s", "");
        char e = *q++;
        switch (e) {
        case '"': ampc_sb_putc(&P->text, '"'); break;
        case '\\': ampc_sb_putc(&P->text, '\\'); break;
        case 'n': ampc_sb_putc(&P->text, '\n'); break;
        case 't': ampc_sb_putc(&P->text, '\t'); break;
        case 'r': ampc_sb_putc(&P->text, '\r'); break;
        case 'x': {
            int v = 0;
            for (int k = 0; k < 2; k++, q++) {
                char h = q < P->end ? *q : 0;
                int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
                if (d < 0) return lex_error(P, q, "expected two hex digits after '\\x'%s", "");
                v = v * 16 + d;
            }
            if (!v) return lex_error(P, q - 4, "a string cannot contain '\\x00'%s", "");
            ampc_sb_putc(&P->text, (char)v);
            break;
        }
        default: {
            char esc[2] = {e, 0};
            return lex_error(
                P, q - 2, "unknown escape sequence '\\%s' (use \\\" \\\\ \\n \\t \\r \\xHH)", esc);
        }
        }
    }
    P->p = q;
    return true;
}

/* Reads the name after '%' or '@': plain characters or a quoted string. */
static bool lex_name(parser *P) {
    P->p++;
    if (P->p < P->end && *P->p == '"') return lex_string(P);
    const char *s = P->p;
    while (P->p < P->end && plain_char(*P->p)) P->p++;
    if (P->p == s)
        return lex_error(P, s,
                         "expected a name (letters, digits, '_', '.') or a quoted string "
                         "after '%s'",
                         s[-1] == '%' ? "%" : "@");
    text_reset(P);
    for (const char *c = s; c < P->p; c++) ampc_sb_putc(&P->text, *c);
    return true;
}

static bool lex_number(parser *P) {
    const char *s = P->p, *q = P->p;
    bool is_float = false;
    if (*q == '-' || *q == '+') q++;
    if (P->end - q >= 3 && (!strncmp(q, "inf", 3) || !strncmp(q, "nan", 3))) {
        q += 3;
        is_float = true;
    } else {
        while (q < P->end && is_digit(*q)) q++;
        if (q < P->end && *q == '.') {
            is_float = true;
            q++;
            while (q < P->end && is_digit(*q)) q++;
        }
        if (q < P->end && (*q == 'e' || *q == 'E')) {
            const char *e = q + 1;
            if (e < P->end && (*e == '+' || *e == '-')) e++;
            if (e < P->end && is_digit(*e)) {
                is_float = true;
                q = e;
                while (q < P->end && is_digit(*q)) q++;
            }
        }
    }
    if (q < P->end && plain_char(*q)) {
        char buf[40];
        while (q < P->end && plain_char(*q)) q++;
        snprintf(buf, sizeof buf, "%.*s", (int)AMPC_MIN(q - s, 32), s);
        return lex_error(P, s, "malformed number '%s'", buf);
    }
    P->t.kind = is_float ? TK_FLOAT : TK_INT;
    P->p = q;
    return true;
}

/* Advances to the next token. */
static bool next(parser *P) {
    if (P->t.kind == TK_ERROR) return false;
    for (;;) { /* whitespace and comments */
        if (P->p >= P->end) break;
        char c = *P->p;
        if (c == '\n') {
            P->line++;
            P->line_start = ++P->p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            P->p++;
        } else if (c == '/' && P->p + 1 < P->end && P->p[1] == '/') {
            while (P->p < P->end && *P->p != '\n') P->p++;
        } else {
            break;
        }
    }
    tok *t = &P->t;
    t->start = P->p;
    t->line = P->line;
    t->col = col_of(P, P->p);
    if (P->p >= P->end) {
        t->kind = TK_EOF;
        t->len = 0;
        return true;
    }
    char c = *P->p;
    bool ok = true;
    if (c == '%' || c == '@') {
        t->kind = c == '%' ? TK_VALUE : TK_NODE;
        ok = lex_name(P);
    } else if (c == '"') {
        t->kind = TK_STRING;
        ok = lex_string(P);
    } else if (is_alpha(c) || c == '_') {
        t->kind = TK_IDENT;
        text_reset(P);
        while (P->p < P->end && plain_char(*P->p)) ampc_sb_putc(&P->text, *P->p++);
    } else if (is_digit(c) || ((c == '-' || c == '+') && P->p + 1 < P->end &&
                               (is_digit(P->p[1]) || P->p[1] == 'i' || P->p[1] == 'n'))) {
        ok = lex_number(P);
    } else if (c == '.' && P->end - P->p >= 3 && P->p[1] == '.' && P->p[2] == '.') {
        t->kind = TK_ELLIPSIS;
        P->p += 3;
    } else if (c && strchr("{}()[],:=<>", c)) {
        t->kind = TK_PUNCT;
        P->p++;
    } else {
        char buf[8];
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
            snprintf(buf, sizeof buf, "\\x%02x", (unsigned char)c);
        else
            snprintf(buf, sizeof buf, "%c", c);
        return lex_error(P, P->p, "unexpected character '%s'", buf);
    }
    if (!ok) return false;
    t->len = (size_t)(P->p - t->start);
    return true;
}

/* ---- token helpers -------------------------------------------------------------------------- */

static bool is_punct(const parser *P, char c) { return P->t.kind == TK_PUNCT && *P->t.start == c; }
static bool is_ident(const parser *P, const char *s) {
    return P->t.kind == TK_IDENT && !strcmp(P->text.data, s);
}
static bool accept_punct(parser *P, char c) { return is_punct(P, c) && next(P); }

static bool expect_punct(parser *P, char c, const char *context) {
    if (is_punct(P, c)) return next(P);
    char what[96];
    snprintf(what, sizeof what, "'%c'%s%s", c, *context ? " " : "", context);
    return expected(P, what);
}

/* Copies the raw text of a number token (NUL-terminated) into buf. */
static bool number_text(parser *P, char *buf, size_t n) {
    if (P->t.len >= n) return FAIL_TOK(P, &P->t, "number is too long (%zu characters)", P->t.len);
    memcpy(buf, P->t.start, P->t.len);
    buf[P->t.len] = 0;
    return true;
}

/* Parses an INT token into *out (no advance). */
static bool int_value(parser *P, int64_t *out) {
    char buf[64];
    if (!number_text(P, buf, sizeof buf)) return false;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return FAIL_TOK(P, &P->t, "integer %s does not fit in 64 bits", buf);
    *out = v;
    return true;
}

/* A float: an INT or FLOAT token, or the identifiers nan / inf (no advance). */
static bool is_real_tok(const parser *P) {
    return P->t.kind == TK_INT || P->t.kind == TK_FLOAT || is_ident(P, "nan") || is_ident(P, "inf");
}
static bool real_value(parser *P, double *out) {
    char buf[64];
    if (P->t.kind == TK_IDENT) {
        *out = P->text.data[0] == 'n' ? NAN : INFINITY;
        return true;
    }
    if (!number_text(P, buf, sizeof buf)) return false;
    *out = strtod(buf, NULL); /* overflow gives +-inf, which is what the text says */
    return true;
}

/* ---- types and data ------------------------------------------------------------------------- */

static bool parse_type(parser *P, ampc_dtype *dtype, ampc_shape *shape) {
    if (P->t.kind != TK_IDENT) return expected(P, "a dtype (f32, f16, bf16, f64, i64, ..., bool)");
    ampc_dtype t = ampc_dtype_from_name(P->text.data);
    if (t == AMPC_DTYPE_UNDEFINED) {
        char buf[80];
        return FAIL_TOK(P, &P->t,
                        "unknown dtype %s (expected f32, f16, bf16, f64, i64, i32, i16, i8, u64, "
                        "u32, u16, u8 or bool)",
                        describe(&P->t, buf, sizeof buf));
    }
    if (!next(P) || !expect_punct(P, '[', "after the dtype (a scalar is f32[])")) return false;
    ampc_shape s = {0};
    int64_t numel = 1, bytes;
    while (!is_punct(P, ']')) {
        if (s.rank && !expect_punct(P, ',', "or ']' in the shape")) return false;
        if (P->t.kind != TK_INT) return expected(P, "a dimension (an integer >= 0)");
        int64_t d;
        if (!int_value(P, &d)) return false;
        if (d < 0) return FAIL_TOK(P, &P->t, "dimensions must be >= 0, found %lld", (long long)d);
        if (s.rank == AMPC_MAX_RANK)
            return FAIL_TOK(P, &P->t, "shape has more than %d dimensions", AMPC_MAX_RANK);
        if (!ampc_mul_ok(numel, d, &numel))
            return FAIL_TOK(P, &P->t, "shape has more elements than a 64-bit size can count");
        s.dims[s.rank++] = d;
        if (!next(P)) return false;
    }
    if (!ampc_mul_ok(numel, (int64_t)ampc_dtype_size(t), &bytes))
        return FAIL_TOK(P, &P->t, "shape has more bytes than a 64-bit size can count");
    *dtype = t;
    *shape = s;
    return next(P);
}

/* Parses one element of data for dtype t and stores it at index i of `data`. */
static bool parse_elem(parser *P, void *data, ampc_dtype t, int64_t i) {
    char buf[80];
    if (ampc_dtype_is_float(t)) {
        double d;
        if (!is_real_tok(P)) {
            snprintf(buf, sizeof buf, "a number for %s", ampc_dtype_name(t));
            return expected(P, buf);
        }
        if (!real_value(P, &d)) return false;
        ampc_ref_store_f64(data, t, i, d);
        return next(P);
    }
    if (t == AMPC_DTYPE_BOOL) {
        int64_t v = -1;
        if (is_ident(P, "true"))
            v = 1;
        else if (is_ident(P, "false"))
            v = 0;
        else if (P->t.kind == TK_INT && !int_value(P, &v))
            return false;
        if (v != 0 && v != 1) return expected(P, "a bool (true, false, 1 or 0)");
        ampc_ref_store_i64(data, t, i, v);
        return next(P);
    }
    if (P->t.kind != TK_INT) {
        snprintf(buf, sizeof buf, "an integer for %s", ampc_dtype_name(t));
        return expected(P, buf);
    }
    char num[64];
    if (!number_text(P, num, sizeof num)) return false;
    errno = 0;
    if (t == AMPC_DTYPE_U64) {
        unsigned long long u = strtoull(num, NULL, 10);
        if (num[0] == '-' || errno == ERANGE)
            return FAIL_TOK(P, &P->t, "value %s is out of range for u64", num);
        ((uint64_t *)data)[i] = u;
        return next(P);
    }
    long long v = strtoll(num, NULL, 10);
    int bits = (int)ampc_dtype_size(t) * 8;
    bool sgn = ampc_dtype_is_signed(t);
    long long lo = sgn ? (bits == 64 ? INT64_MIN : -(1LL << (bits - 1))) : 0;
    long long hi = bits == 64 ? INT64_MAX : sgn ? (1LL << (bits - 1)) - 1 : (1LL << bits) - 1;
    if (errno == ERANGE || v < lo || v > hi)
        return FAIL_TOK(P, &P->t, "value %s is out of range for %s", num, ampc_dtype_name(t));
    ampc_ref_store_i64(data, t, i, v);
    return next(P);
}

/* Allocates v->data (in the graph's arena) for data that starts at token `at`. Every element takes
 * at least one byte of text, so a shape that claims more elements than the text has bytes left
 * is refused before anything is allocated (f32[8,888003316] would otherwise ask for 28 GB). */
static bool alloc_data(parser *P, ampc_value *v, const tok *at, const char *ty) {
    int64_t numel = ampc_shape_numel(&v->shape), left = (int64_t)(P->end - at->start);
    if (numel > left)
        return FAIL_TOK(P, at, "%s needs %lld values, more than the %lld bytes of text left hold",
                        ty, (long long)numel, (long long)left);
    size_t nb = ampc_ir_nbytes(v);
    v->data = ampc_ir_alloc(P->g, nb ? nb : 1);
    if (!v->data) return fail_at(P, at->line, at->col, AMPC_E_OOM, "out of host memory for %s", ty);
    return true;
}

/* Parses `data` for v, whose dtype and shape are set, into a new arena buffer v->data. */
static bool parse_data(parser *P, ampc_value *v) {
    ampc_dtype t = v->dtype;
    const ampc_shape *s = &v->shape;
    int64_t numel = ampc_shape_numel(s), count = 0;
    char ty[AMPC_TYPE_STR_MAX], sh[AMPC_SHAPE_STR_MAX];
    snprintf(ty, sizeof ty, "%s%s", ampc_dtype_name(t), ampc_shape_str(s, sh, sizeof sh));
    tok open = P->t;
    if (!is_punct(P, '[')) {
        if (numel != 1) return expected(P, "'[' opening the data");
        return alloc_data(P, v, &open, ty) && parse_elem(P, v->data, t, 0);
    }
    if (!next(P)) return false;
    if (P->t.kind == TK_ELLIPSIS)
        return FAIL_TOK(P, &P->t,
                        "the data of this %s constant was elided ('[...]'); print the graph with "
                        "full data to parse it back",
                        ty);
    if (!alloc_data(P, v, &open, ty)) return false;
    while (!is_punct(P, ']')) {
        if (count && !expect_punct(P, ',', "or ']' in the data")) return false;
        if (count == numel)
            return FAIL_TOK(P, &P->t, "too many values: %s holds %lld", ty, (long long)numel);
        if (!parse_elem(P, v->data, t, count++)) return false;
    }
    if (count != numel)
        return FAIL_TOK(P, &open, "expected %lld values for %s, found %lld", (long long)numel, ty,
                        (long long)count);
    return next(P);
}

/* ---- values --------------------------------------------------------------------------------- */

/* The value named by the current VALUE token; must be defined already. */
static bool parse_use(parser *P, ampc_value **out) {
    if (P->t.kind != TK_VALUE) return expected(P, "a value (%name)");
    ampc_value *v = ampc_ir_value_find(P->g, P->text.data);
    if (!v) return FAIL_TOK(P, &P->t, "value %%%s is not defined before this use", P->text.data);
    *out = v;
    return next(P);
}

/* Checks that the current VALUE token names a fresh value; returns the name (arena copy). */
static const char *fresh_name(parser *P) {
    if (P->t.kind != TK_VALUE) {
        expected(P, "a value name (%name)");
        return NULL;
    }
    if (!P->text.len) {
        FAIL_TOK(P, &P->t, "a value name cannot be empty");
        return NULL;
    }
    if (ampc_ir_value_find(P->g, P->text.data)) {
        intptr_t line = (intptr_t)ampc_strmap_get(P->defs, P->text.data);
        FAIL_TOK(P, &P->t, "value %%%s is already defined at line %d", P->text.data, (int)line);
        return NULL;
    }
    const char *s = ampc_arena_strdup(&P->g->arena, P->text.data);
    if (!s) fail_at(P, P->t.line, P->t.col, AMPC_E_OOM, "out of host memory");
    return s;
}

static void record_def(parser *P, const ampc_value *v, int line) {
    ampc_strmap_put(P->defs, v->name, (void *)(intptr_t)line);
}

/* ---- attributes ----------------------------------------------------------------------------- */

static bool parse_graph(parser *P, ampc_graph *g);

static bool parse_list(parser *P, ampc_attr *a, ampc_attr_kind forced) {
    tok open = P->t;
    int32_t n = 0, cap = 0;
    int64_t *ints = NULL;
    double *reals = NULL;
    const char **strs = NULL;
    bool any_float = false, any_string = false, ok = next(P);
    while (ok && !is_punct(P, ']')) {
        if (n && !(ok = expect_punct(P, ',', "or ']' in the list"))) break;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            ints = ampc_xrealloc(ints, (size_t)cap * sizeof *ints);
            reals = ampc_xrealloc(reals, (size_t)cap * sizeof *reals);
            strs = ampc_xrealloc(strs, (size_t)cap * sizeof *strs);
        }
        /* An untyped list takes its kind (string or number) from its first element. */
        bool want_str = forced == AMPC_ATTR_STRINGS || (forced == AMPC_ATTR_UNDEFINED &&
                                                        (n ? any_string : P->t.kind == TK_STRING));
        if (want_str) {
            if (P->t.kind != TK_STRING) {
                ok = expected(P, "a string (this is a list of strings)");
                break;
            }
            any_string = true;
            strs[n] = ampc_arena_strdup(&P->g->arena, P->text.data);
        } else if (forced != AMPC_ATTR_FLOATS && P->t.kind == TK_INT) {
            if (!(ok = int_value(P, &ints[n]))) break;
            reals[n] = (double)ints[n];
            if (!(ok = real_value(P, &reals[n]))) break; /* exact text, not via int64 */
        } else if (forced != AMPC_ATTR_INTS && is_real_tok(P)) {
            any_float = true;
            if (!(ok = real_value(P, &reals[n]))) break;
        } else {
            ok = expected(P, forced == AMPC_ATTR_INTS     ? "an integer (this is a list of ints)"
                             : forced == AMPC_ATTR_FLOATS ? "a number (this is a list of floats)"
                                                          : "a number or a string");
            break;
        }
        n++;
        ok = next(P);
    }
    if (ok && n == 0 && forced == AMPC_ATTR_UNDEFINED)
        ok =
            FAIL_TOK(P, &open, "an empty list needs its kind: write ints[], floats[] or strings[]");
    if (ok) {
        a->kind = forced != AMPC_ATTR_UNDEFINED ? forced
                  : any_string                  ? AMPC_ATTR_STRINGS
                  : any_float                   ? AMPC_ATTR_FLOATS
                                                : AMPC_ATTR_INTS;
        a->n = n;
        size_t m = (size_t)(n ? n : 1); /* an empty list still gets a (non-NULL) array */
        if (a->kind == AMPC_ATTR_INTS) {
            int64_t *v = ampc_arena_alloc(&P->g->arena, m * sizeof *v);
            for (int32_t i = 0; v && i < n; i++) v[i] = ints[i];
            a->ints = v;
        } else if (a->kind == AMPC_ATTR_FLOATS) {
            float *v = ampc_arena_alloc(&P->g->arena, m * sizeof *v);
            for (int32_t i = 0; v && i < n; i++) v[i] = (float)reals[i];
            a->floats = v;
        } else {
            const char **v = ampc_arena_alloc(&P->g->arena, m * sizeof *v);
            for (int32_t i = 0; v && i < n; i++) v[i] = strs[i];
            a->strings = v;
        }
        ok = next(P);
    }
    free(ints);
    free(reals);
    free(strs);
    return ok;
}

/* tensor<type>data: a constant that lives outside graph->values. */
static bool parse_tensor_attr(parser *P, ampc_attr *a) {
    ampc_value *v = ampc_ir_alloc(P->g, sizeof *v);
    if (!v) return fail_at(P, P->t.line, P->t.col, AMPC_E_OOM, "out of host memory");
    if (!next(P) || !expect_punct(P, '<', "after 'tensor'") ||
        !parse_type(P, &v->dtype, &v->shape) || !expect_punct(P, '>', "closing the tensor type"))
        return false;
    v->id = -1;
    v->name = a->name;
    a->kind = AMPC_ATTR_TENSOR;
    a->tensor = v;
    return parse_data(P, v);
}

/* graph "name" { ... } as an attribute: a subgraph owned by the current graph. */
static bool parse_graph_attr(parser *P, ampc_attr *a) {
    ampc_graph *sub = ampc_graph_create("graph");
    if (!sub) return fail_at(P, P->t.line, P->t.col, AMPC_E_OOM, "out of host memory");
    ampc_graph *g = P->g;
    g->subgraphs = ampc_xrealloc(g->subgraphs, (size_t)(g->n_subgraphs + 1) * sizeof *g->subgraphs);
    g->subgraphs[g->n_subgraphs++] = sub; /* owned (and freed) by the parent from here on */
    ampc_strmap *outer_defs = P->defs, inner_defs = {0};
    P->defs = &inner_defs;
    P->g = sub;
    bool ok = parse_graph(P, sub);
    P->g = g;
    P->defs = outer_defs;
    ampc_strmap_free(&inner_defs);
    a->kind = AMPC_ATTR_GRAPH;
    a->graph = sub;
    return ok;
}

static bool parse_attr(parser *P, ampc_attr *a) {
    if (P->t.kind != TK_IDENT && P->t.kind != TK_STRING) return expected(P, "an attribute name");
    a->name = ampc_arena_strdup(&P->g->arena, P->text.data);
    if (!next(P) || !expect_punct(P, '=', "after the attribute name")) return false;
    if (P->t.kind == TK_INT) {
        a->kind = AMPC_ATTR_INT;
        return int_value(P, &a->i) && next(P);
    }
    if (P->t.kind == TK_FLOAT || is_ident(P, "nan") || is_ident(P, "inf")) {
        double d;
        a->kind = AMPC_ATTR_FLOAT;
        if (!real_value(P, &d)) return false;
        a->f = (float)d;
        return next(P);
    }
    if (P->t.kind == TK_STRING) {
        a->kind = AMPC_ATTR_STRING;
        a->s = ampc_arena_strdup(&P->g->arena, P->text.data);
        return next(P);
    }
    if (is_punct(P, '[')) return parse_list(P, a, AMPC_ATTR_UNDEFINED);
    if (is_ident(P, "ints") || is_ident(P, "floats") || is_ident(P, "strings")) {
        ampc_attr_kind k = P->text.data[0] == 'i'   ? AMPC_ATTR_INTS
                           : P->text.data[0] == 'f' ? AMPC_ATTR_FLOATS
                                                    : AMPC_ATTR_STRINGS;
        if (!next(P)) return false;
        if (!is_punct(P, '[')) return expected(P, "'[' after the list kind");
        return parse_list(P, a, k);
    }
    if (is_ident(P, "tensor")) return parse_tensor_attr(P, a);
    if (is_ident(P, "graph")) return parse_graph_attr(P, a);
    return expected(P, "an attribute value (an int, a float, a string, a list, tensor<...> or a "
                       "graph)");
}

/* ---- statements ----------------------------------------------------------------------------- */

/* input %x : type [= data]   or   const %c : type = data */
static bool parse_input_or_const(parser *P, bool is_input) {
    int line = P->t.line;
    if (!next(P)) return false;
    const char *name = fresh_name(P);
    ampc_dtype t;
    ampc_shape s;
    if (!name || !next(P) || !expect_punct(P, ':', "after the value name") ||
        !parse_type(P, &t, &s))
        return false;
    ampc_value *v = ampc_ir_value_new(P->g, name, t, &s);
    if (!v) return fail_at(P, line, 1, AMPC_E_OOM, "out of host memory");
    record_def(P, v, line);
    if (is_input) ampc_ir_graph_add_input(P->g, v);
    if (is_input && !is_punct(P, '=')) return true;
    if (!expect_punct(P, '=', "before the constant's data")) return false;
    return parse_data(P, v);
}

static bool parse_output(parser *P) {
    if (!next(P)) return false;
    do {
        ampc_value *v = NULL;
        if (!parse_use(P, &v)) return false;
        ampc_ir_graph_add_output(P->g, v);
    } while (accept_punct(P, ','));
    return P->t.kind != TK_ERROR;
}

enum { MAX_RESULTS = 64 };

typedef struct result_decl {
    const char *name;
    bool typed;
    ampc_dtype dtype;
    ampc_shape shape;
    tok at;
} result_decl;

/* %a [: type] {, %b [: type]} = Op(args) [{attrs}] [@name] */
static bool parse_node(parser *P) {
    result_decl res[MAX_RESULTS];
    const char *names[MAX_RESULTS];
    int32_t n_res = 0;
    int line = P->t.line;
    do {
        if (n_res == MAX_RESULTS)
            return FAIL_TOK(P, &P->t, "a node has at most %d results", MAX_RESULTS);
        result_decl *r = &res[n_res];
        r->at = P->t;
        if (!(r->name = fresh_name(P))) return false;
        for (int32_t i = 0; i < n_res; i++)
            if (!strcmp(res[i].name, r->name))
                return FAIL_TOK(P, &P->t, "value %%%s is named twice in the results", r->name);
        names[n_res++] = r->name;
        if (!next(P)) return false;
        r->typed = accept_punct(P, ':');
        if (r->typed && !parse_type(P, &r->dtype, &r->shape)) return false;
    } while (accept_punct(P, ','));
    if (!expect_punct(P, '=', "or ',' after the results")) return false;

    if (P->t.kind != TK_IDENT) return expected(P, "an op name (Add, MatMul, ...)");
    tok op_tok = P->t;
    ampc_opcode op;
    if (!ampc_op_from_onnx(P->text.data, &op))
        return FAIL_TOK(P, &op_tok, "unknown op '%s' (not in ampc's op table)", P->text.data);
    if (!next(P) || !expect_punct(P, '(', "after the op name")) return false;

    ampc_value **in = NULL;
    ampc_attr *attrs = NULL;
    int32_t n_in = 0, cap_in = 0, n_attrs = 0, cap_attrs = 0;
    bool ok = true;
    while (ok && !is_punct(P, ')')) {
        if (n_in && !(ok = expect_punct(P, ',', "or ')' in the inputs"))) break;
        if (n_in == cap_in) {
            cap_in = cap_in ? 2 * cap_in : 8;
            in = ampc_xrealloc(in, (size_t)cap_in * sizeof *in);
        }
        if (is_ident(P, "_")) {
            in[n_in++] = NULL;
            ok = next(P);
        } else if (P->t.kind == TK_VALUE) {
            ok = parse_use(P, &in[n_in++]);
        } else {
            ok = expected(P, "an input (%name, or _ for an absent optional input)");
        }
    }
    ok = ok && next(P);
    if (ok && accept_punct(P, '{')) {
        while (ok && !is_punct(P, '}')) {
            if (n_attrs && !(ok = expect_punct(P, ',', "or '}' in the attributes"))) break;
            if (n_attrs == cap_attrs) {
                cap_attrs = cap_attrs ? 2 * cap_attrs : 8;
                attrs = ampc_xrealloc(attrs, (size_t)cap_attrs * sizeof *attrs);
            }
            memset(&attrs[n_attrs], 0, sizeof *attrs);
            tok at = P->t;
            if (!(ok = parse_attr(P, &attrs[n_attrs]))) break;
            for (int32_t i = 0; i < n_attrs && ok; i++)
                if (!strcmp(attrs[i].name, attrs[n_attrs].name))
                    ok = FAIL_TOK(P, &at, "attribute '%s' is given twice", attrs[i].name);
            n_attrs++;
        }
        ok = ok && next(P);
    }
    const char *node_name = NULL;
    if (ok && P->t.kind == TK_NODE) {
        node_name = ampc_arena_strdup(&P->g->arena, P->text.data);
        ok = next(P);
    }

    if (ok) {
        ampc_graph *g = P->g;
        int32_t before = g->diag.n;
        ampc_node *n = NULL;
        ampc_status st =
            ampc_ir_node_build(g, op, node_name, in, n_in, attrs, n_attrs, n_res, names, &n);
        if (st != AMPC_OK) {
            ampc_strbuf sb = {0};
            for (int32_t i = before; i < g->diag.n; i++)
                ampc_sb_printf(&sb, "%s%s", i > before ? "; " : "", g->diag.entries[i].msg);
            ok = fail_at(P, op_tok.line, op_tok.col, st, "%s node does not build: %s",
                         ampc_op_get(op)->onnx, sb.data ? sb.data : ampc_status_str(st));
            ampc_sb_free(&sb);
        }
        for (int32_t i = 0; ok && i < n_res; i++) {
            ampc_value *v = n->outputs[i];
            AMPC_ASSERT(!strcmp(v->name, res[i].name)); /* fresh_name checked it is free */
            record_def(P, v, line);
            if (!res[i].typed) continue;
            if (v->dtype != res[i].dtype || !ampc_shape_eq(&v->shape, &res[i].shape)) {
                char want[AMPC_TYPE_STR_MAX], got[AMPC_TYPE_STR_MAX], sh[AMPC_SHAPE_STR_MAX];
                snprintf(want, sizeof want, "%s%s", ampc_dtype_name(res[i].dtype),
                         ampc_shape_str(&res[i].shape, sh, sizeof sh));
                ok = FAIL_TOK(P, &res[i].at, "%%%s is declared %s, but %s inference gives %s",
                              v->name, want, ampc_op_get(op)->onnx,
                              ampc_value_type_str(v, got, sizeof got));
            }
        }
    }
    free(in);
    free(attrs);
    return ok;
}

/* graph "name" [opset N] { stmt* } into g (whose name is replaced). */
static bool parse_graph(parser *P, ampc_graph *g) {
    if (!is_ident(P, "graph")) return expected(P, "'graph'");
    if (!next(P)) return false;
    if (P->t.kind != TK_STRING && P->t.kind != TK_IDENT) return expected(P, "the graph's name");
    g->name = ampc_arena_strdup(&g->arena, P->text.data);
    if (!next(P)) return false;
    if (is_ident(P, "opset")) {
        if (!next(P)) return false;
        if (P->t.kind != TK_INT) return expected(P, "an opset number");
        if (!int_value(P, &g->opset) || !next(P)) return false;
    }
    if (is_ident(P, "batch_split")) { /* one GPU's share of a batch split (partition-data) */
        int64_t n = 0;
        if (!next(P)) return false;
        if (P->t.kind != TK_INT) return expected(P, "a number of GPUs after batch_split");
        if (!int_value(P, &n) || !next(P)) return false;
        if (n < 2 || n > 1024) return expected(P, "a number of GPUs from 2 to 1024 after batch_split");
        g->data_ranks = (int32_t)n;
    }
    if (is_ident(P, "micro_batches")) { /* one micro-batch of a pipeline (partition-data) */
        int64_t n = 0;
        if (!next(P)) return false;
        if (P->t.kind != TK_INT) return expected(P, "a number of micro-batches");
        if (!int_value(P, &n) || !next(P)) return false;
        if (n < 1 || n > 65536) return expected(P, "micro_batches from 1 to 65536");
        g->micro_batches = (int32_t)n;
    }
    if (is_ident(P, "stages")) { /* pipeline stages (partition-pipeline): node rank = stage */
        int64_t n = 0;
        if (!next(P)) return false;
        if (P->t.kind != TK_INT) return expected(P, "a number of pipeline stages");
        if (!int_value(P, &n) || !next(P)) return false;
        if (n < 2 || n > 1024) return expected(P, "a number of stages from 2 to 1024");
        g->pipeline_stages = (int32_t)n;
    }
    if (!expect_punct(P, '{', "opening the graph body")) return false;
    for (;;) {
        bool ok;
        if (is_punct(P, '}')) return next(P);
        if (is_ident(P, "input"))
            ok = parse_input_or_const(P, true);
        else if (is_ident(P, "const"))
            ok = parse_input_or_const(P, false);
        else if (is_ident(P, "output"))
            ok = parse_output(P);
        else if (P->t.kind == TK_VALUE)
            ok = parse_node(P);
        else if (P->t.kind == TK_EOF)
            return expected(P, "'}' closing the graph");
        else
            ok = expected(P, "a statement (input, const, output, or %name = Op(...)) or '}'");
        if (!ok) return false;
    }
}

ampc_status ampc_graph_parse(const char *text, size_t len, ampc_graph **out, char **err) {
    if (out) *out = NULL;
    if (err) *err = NULL;
    if (!out || (!text && len)) return AMPC_E_INVALID_ARG;
    parser P = {0};
    ampc_strmap defs = {0};
    P.p = P.line_start = text ? text : "";
    P.end = P.p + len;
    P.line = 1;
    P.defs = &defs;
    P.g = ampc_graph_create("graph");
    if (!P.g) return AMPC_E_OOM;
    ampc_graph *g = P.g;
    bool ok = next(&P) && parse_graph(&P, g);
    if (ok && P.t.kind != TK_EOF) ok = expected(&P, "end of input after the graph's closing '}'");
    ampc_strmap_free(&defs);
    ampc_sb_free(&P.text);
    if (!ok) {
        AMPC_ASSERT(P.err);
        ampc_graph_destroy(g);
        if (err)
            *err = P.err;
        else
            free(P.err);
        return P.status;
    }
    *out = g;
    return AMPC_OK;
}

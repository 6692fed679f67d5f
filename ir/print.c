/*
 * print.c — the textual IR: writes a graph as deterministic, line-oriented text that parse.c reads
 * back (golden tests, --emit ir, --dump-after). The form:
 *
 *     graph "mlp" {
 *       input %x : f32[2,784]
 *       const %w : f32[784,10] = [0.1, -2, ...]
 *       %h : f32[2,10] = MatMul(%x, %w) @"fc1"
 *       %y : f32[2,10], %m : bool[2,10] = Dropout(%h, _, _) @"drop"
 *       %t : f32[10,2] = Transpose(%y) {perm = [1, 0]} @"Transpose_3"
 *       output %t
 *     }
 *
 * Inputs come first (in graph input order), then constants (values with data and no producer, in
 * value order), then live nodes in topological order, then outputs. Values produced by nodes print
 * as node results even when eager folding attached data to them (the parser re-derives it).
 * Names that are not plain identifiers ([A-Za-z0-9_.]+) are quoted with C-style escapes (every
 * control byte and every byte that is not UTF-8 escaped: the text is valid UTF-8). Numbers
 * print in the shortest form that reads back to the same bits (at most %.9g for f32/f16/bf16,
 * %.17g for f64; f16/bf16 as their float values); float attributes always carry '.', 'e', "inf" or
 * "nan" so that they read back as floats. Empty lists carry their kind (ints[], floats[],
 * strings[]) and tensor attributes their type (tensor<f32[2]>[1, 2]).
 */
#include "ir.h"
#include "ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Constants above this many elements print as `[...]` unless full data is asked for. */
enum { PRINT_ELIDE_ABOVE = 16 };

static bool plain_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* A quoted string the parser reads back to the same bytes: well-formed UTF-8 (but the C1
 * controls) as it is, every other byte below 0x20 or above 0x7e as an escape, so that the text
 * holds no control character and is valid UTF-8 whatever the model's names hold. */
static void put_quoted(ampc_strbuf *sb, const char *s) {
    ampc_sb_putc(sb, '"');
    size_t n = strlen(s);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            int len = ampc_utf8_len(p, n - (size_t)((const char *)p - s));
            if (len == 0 || (len == 2 && *p == 0xc2 && p[1] < 0xa0)) {
                ampc_sb_printf(sb, "\\x%02x", *p);
            } else {
                for (int k = 0; k < len; k++) ampc_sb_putc(sb, (char)p[k]);
                p += len - 1;
            }
            continue;
        }
        switch (*p) {
        case '"': ampc_sb_puts(sb, "\\\""); break;
        case '\\': ampc_sb_puts(sb, "\\\\"); break;
        case '\n': ampc_sb_puts(sb, "\\n"); break;
        case '\t': ampc_sb_puts(sb, "\\t"); break;
        case '\r': ampc_sb_puts(sb, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                ampc_sb_printf(sb, "\\x%02x", *p);
            else
                ampc_sb_putc(sb, (char)*p);
        }
    }
    ampc_sb_putc(sb, '"');
}

/* A name as `prefix` + plain identifier, or `prefix` + quoted string. Without a prefix (an
 * attribute name) the lexer reads a plain name as an identifier only when it starts with a letter
 * or '_' ("1ode" would lex as a malformed number), so such a name is quoted. */
static void put_name(ampc_strbuf *sb, char prefix, const char *name) {
    bool plain = *name != '\0';
    if (!prefix && plain && (*name == '.' || (*name >= '0' && *name <= '9'))) plain = false;
    for (const char *p = name; *p && plain; p++) plain = plain_char(*p);
    if (prefix) ampc_sb_putc(sb, prefix);
    if (plain)
        ampc_sb_puts(sb, name);
    else
        put_quoted(sb, name);
}

/* Shortest "%.*g" text of element i of a float buffer that reads back (strtod, then the parser's
 * store into dtype t) to the same bits. */
static void fmt_float_elem(char *buf, size_t n, const void *data, ampc_dtype t, int64_t i) {
    double v = ampc_ref_load_f64(data, t, i);
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
        return;
    }
    size_t esz = ampc_dtype_size(t);
    const unsigned char *orig = (const unsigned char *)data + (size_t)i * esz;
    int maxp = t == AMPC_DTYPE_F64 ? 17 : 9;
    for (int p = 1; p <= maxp; p++) {
        unsigned char back[8];
        snprintf(buf, n, "%.*g", p, v);
        ampc_ref_store_f64(back, t, 0, strtod(buf, NULL));
        if (memcmp(back, orig, esz)) continue;
        /* %g writes 10 as "1e+01" at one digit; below 10^maxp print the plain number, which
         * has at least as many digits and so reads back the same. */
        const char *e = strchr(buf, 'e');
        int exp10 = e ? atoi(e + 1) : -1;
        if (exp10 >= p && exp10 < maxp) snprintf(buf, n, "%.*g", exp10 + 1, v);
        return;
    }
}

static void put_elem(ampc_strbuf *sb, const void *data, ampc_dtype t, int64_t i) {
    char buf[40];
    if (ampc_dtype_is_float(t)) {
        fmt_float_elem(buf, sizeof buf, data, t, i);
        ampc_sb_puts(sb, buf);
    } else if (t == AMPC_DTYPE_BOOL) {
        ampc_sb_puts(sb, ((const uint8_t *)data)[i] ? "true" : "false");
    } else if (t == AMPC_DTYPE_U64) {
        ampc_sb_printf(sb, "%llu", (unsigned long long)((const uint64_t *)data)[i]);
    } else {
        ampc_sb_printf(sb, "%lld", (long long)ampc_ref_load_i64(data, t, i));
    }
}

/* The data of a value as a flat row-major list "[a, b, c]" (scalars too: "[a]"). */
static void put_data(ampc_strbuf *sb, const ampc_value *v, bool full) {
    int64_t n = ampc_ir_numel(v);
    if (!v->data) {
        ampc_sb_puts(sb, "[?]"); /* broken graph (the verifier reports it); never parses */
        return;
    }
    if (!full && n > PRINT_ELIDE_ABOVE) {
        ampc_sb_puts(sb, "[...]");
        return;
    }
    ampc_sb_putc(sb, '[');
    for (int64_t i = 0; i < n; i++) {
        if (i) ampc_sb_puts(sb, ", ");
        put_elem(sb, v->data, v->dtype, i);
    }
    ampc_sb_putc(sb, ']');
}

static void put_type(ampc_strbuf *sb, const ampc_value *v) {
    char buf[AMPC_TYPE_STR_MAX];
    ampc_sb_puts(sb, ampc_value_type_str(v, buf, sizeof buf));
}

static void put_float_attr(ampc_strbuf *sb, float f) {
    char buf[40];
    fmt_float_elem(buf, sizeof buf, &f, AMPC_DTYPE_F32, 0);
    ampc_sb_puts(sb, buf);
    if (!strpbrk(buf, ".eEn")) ampc_sb_puts(sb, ".0"); /* "2" would read back as an int */
}

static void print_graph(ampc_strbuf *sb, const ampc_graph *g, bool full, int indent);

static void put_attr(ampc_strbuf *sb, const ampc_attr *a, bool full, int indent) {
    put_name(sb, 0, a->name);
    ampc_sb_puts(sb, " = ");
    switch (a->kind) {
    case AMPC_ATTR_INT: ampc_sb_printf(sb, "%lld", (long long)a->i); break;
    case AMPC_ATTR_FLOAT: put_float_attr(sb, a->f); break;
    case AMPC_ATTR_STRING: put_quoted(sb, a->s ? a->s : ""); break;
    case AMPC_ATTR_INTS:
        if (!a->n) ampc_sb_puts(sb, "ints");
        ampc_sb_putc(sb, '[');
        for (int32_t i = 0; i < a->n; i++)
            ampc_sb_printf(sb, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
        ampc_sb_putc(sb, ']');
        break;
    case AMPC_ATTR_FLOATS:
        if (!a->n) ampc_sb_puts(sb, "floats");
        ampc_sb_putc(sb, '[');
        for (int32_t i = 0; i < a->n; i++) {
            if (i) ampc_sb_puts(sb, ", ");
            put_float_attr(sb, a->floats[i]);
        }
        ampc_sb_putc(sb, ']');
        break;
    case AMPC_ATTR_STRINGS:
        if (!a->n) ampc_sb_puts(sb, "strings");
        ampc_sb_putc(sb, '[');
        for (int32_t i = 0; i < a->n; i++) {
            if (i) ampc_sb_puts(sb, ", ");
            put_quoted(sb, a->strings[i]);
        }
        ampc_sb_putc(sb, ']');
        break;
    case AMPC_ATTR_TENSOR:
        ampc_sb_puts(sb, "tensor<");
        put_type(sb, a->tensor);
        ampc_sb_putc(sb, '>');
        put_data(sb, a->tensor, full);
        break;
    case AMPC_ATTR_GRAPH: print_graph(sb, a->graph, full, indent); break;
    default: ampc_sb_printf(sb, "<attribute kind %d>", (int)a->kind); break;
    }
}

static void put_indent(ampc_strbuf *sb, int indent) {
    for (int i = 0; i < indent; i++) ampc_sb_puts(sb, "  ");
}

static void print_node(ampc_strbuf *sb, const ampc_node *n, bool full, int indent) {
    put_indent(sb, indent);
    for (int32_t i = 0; i < n->n_outputs; i++) {
        const ampc_value *v = n->outputs[i];
        if (i) ampc_sb_puts(sb, ", ");
        put_name(sb, '%', v->name);
        ampc_sb_puts(sb, " : ");
        put_type(sb, v);
    }
    ampc_sb_printf(sb, " = %s(", ampc_op_get(n->op)->onnx);
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (i) ampc_sb_puts(sb, ", ");
        if (n->inputs[i])
            put_name(sb, '%', n->inputs[i]->name);
        else
            ampc_sb_putc(sb, '_');
    }
    ampc_sb_putc(sb, ')');
    if (n->n_attrs) {
        ampc_sb_puts(sb, " {");
        for (int32_t i = 0; i < n->n_attrs; i++) {
            if (i) ampc_sb_puts(sb, ", ");
            put_attr(sb, &n->attrs[i], full, indent);
        }
        ampc_sb_putc(sb, '}');
    }
    ampc_sb_puts(sb, " @");
    put_quoted(sb, n->name);
    ampc_sb_putc(sb, '\n');
}

/* Writes `graph "name" { ... }` with body lines indented one level below `indent`; the opening
 * line is not indented (the caller placed it) and no newline follows the closing brace. */
static void print_graph(ampc_strbuf *sb, const ampc_graph *g, bool full, int indent) {
    ampc_sb_puts(sb, "graph ");
    put_quoted(sb, g->name);
    if (g->opset) ampc_sb_printf(sb, " opset %lld", (long long)g->opset);
    if (g->data_ranks > 1) ampc_sb_printf(sb, " batch_split %d", g->data_ranks);
    if (g->micro_batches > 0) ampc_sb_printf(sb, " micro_batches %d", g->micro_batches);
    if (g->pipeline_stages > 1) ampc_sb_printf(sb, " stages %d", g->pipeline_stages);
    ampc_sb_puts(sb, " {\n");
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        put_indent(sb, indent + 1);
        ampc_sb_puts(sb, "input ");
        put_name(sb, '%', v->name);
        ampc_sb_puts(sb, " : ");
        put_type(sb, v);
        if (v->data) { /* an input with a default (ONNX initializer listed as an input) */
            ampc_sb_puts(sb, " = ");
            put_data(sb, v, full);
        }
        ampc_sb_putc(sb, '\n');
    }
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        if (!v->data || v->producer || (v->flags & AMPC_VALUE_INPUT)) continue;
        put_indent(sb, indent + 1);
        ampc_sb_puts(sb, "const ");
        put_name(sb, '%', v->name);
        ampc_sb_puts(sb, " : ");
        put_type(sb, v);
        ampc_sb_puts(sb, " = ");
        put_data(sb, v, full);
        ampc_sb_putc(sb, '\n');
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) print_node(sb, g->nodes[i], full, indent + 1);
    for (int32_t i = 0; i < g->n_outputs; i++) {
        put_indent(sb, indent + 1);
        ampc_sb_puts(sb, "output ");
        put_name(sb, '%', g->outputs[i]->name);
        ampc_sb_putc(sb, '\n');
    }
    put_indent(sb, indent);
    ampc_sb_putc(sb, '}');
}

char *ampc_graph_to_text(const ampc_graph *g, bool full_data) {
    if (!g) return NULL;
    ampc_strbuf sb = {0};
    print_graph(&sb, g, full_data, 0);
    ampc_sb_putc(&sb, '\n');
    return ampc_sb_take(&sb);
}

ampc_status ampc_graph_print(const ampc_graph *g, FILE *f, bool full_data) {
    if (!g || !f) return AMPC_E_INVALID_ARG;
    char *text = ampc_graph_to_text(g, full_data);
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len;
    free(text);
    return ok ? AMPC_OK : AMPC_E_IO;
}

/*
 * inspect.c — `ampc inspect MODEL.onnx`: a summary of an ONNX model (versions, producer, opsets,
 * inputs and outputs with their declared types, an op histogram, initializer count and bytes),
 * its coverage (every node ampc cannot import, all at once), and the outcome of an import without
 * options. Whatever the file holds, the summary prints what it can and then the error.
 */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

/* "f32[N,3,224,224]" from a value info's declared type. */
static void put_type(FILE *f, const Onnx__ValueInfoProto *v) {
    char nb[32];
    const Onnx__TypeProto *t = v->type;
    if (!t) {
        fputs("(no type)", f);
        return;
    }
    if (t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) {
        fputs(t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE   ? "sequence"
              : t->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE      ? "map"
              : t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "optional"
                                                                       : "(not a tensor)",
              f);
        return;
    }
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    int32_t code = tt->has_elem_type ? tt->elem_type : 0;
    ampc_dtype dt = ampc_dtype_from_onnx(code);
    fputs(dt ? ampc_dtype_name(dt) : ampc_onnx_dtype_name(code, nb, sizeof nb), f);
    if (!tt->shape) {
        fputs("[?rank]", f);
        return;
    }
    fputc('[', f);
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[d];
        if (d) fputc(',', f);
        if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            fprintf(f, "%lld", (long long)dm->dim_value);
        else if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 dm->dim_param && *dm->dim_param)
            fputs(dm->dim_param, f);
        else
            fputc('?', f);
    }
    fputc(']', f);
}

typedef struct op_count {
    const char *domain, *op;
    int64_t n;
} op_count;

/* Most used first, then by domain and name (a stable, readable order). */
static int by_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    int d = strcmp(x->domain, y->domain);
    return d ? d : strcmp(x->op, y->op);
}

/* Whether a graph input has an initializer (it is then a constant). */
static bool has_initializer(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name && !strcmp(g->initializer[i]->name, name))
            return true;
    return false;
}

/* The part of the report that needs only the parsed model. */
static void summary(const Onnx__ModelProto *m, FILE *f) {
    fprintf(f, "  ir_version: %lld\n", (long long)m->ir_version);
    if (m->producer_name || m->producer_version)
        fprintf(f, "  producer: %s %s\n", m->producer_name ? m->producer_name : "",
                m->producer_version ? m->producer_version : "");
    fputs("  opsets:", f);
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (m->opset_import[i])
            fprintf(f, " %s %lld", m->opset_import[i]->domain && *m->opset_import[i]->domain
                                       ? m->opset_import[i]->domain : "ai.onnx",
                    (long long)m->opset_import[i]->version);
    fputs(m->n_opset_import ? "\n" : " none\n", f);
    const Onnx__GraphProto *g = m->graph;
    if (!g) return;

    int64_t bytes = 0, external = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t) continue;
        bytes += ampc_onnx_tensor_nbytes(t);
        external += t->has_data_location &&
                    t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    }
    fprintf(f, "  graph '%s': %zu nodes, %zu initializers (%lld bytes", g->name ? g->name : "",
            g->n_node, g->n_initializer, (long long)bytes);
    if (external) fprintf(f, ", %lld of them in external files", (long long)external);
    fputs(")", f);
    if (m->n_functions) fprintf(f, ", %zu model functions", m->n_functions);
    fputc('\n', f);

    fputs("  inputs:\n", f);
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        if (!v) continue;
        fprintf(f, "    %s: ", v->name ? v->name : "");
        put_type(f, v);
        fputs(v->name && has_initializer(g, v->name) ? "  (initializer: a constant)\n" : "\n", f);
    }
    fputs("  outputs:\n", f);
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *v = g->output[i];
        if (!v) continue;
        fprintf(f, "    %s: ", v->name ? v->name : "");
        put_type(f, v);
        fputc('\n', f);
    }

    /* The op histogram, most used first. */
    op_count *h = ampc_xcalloc(g->n_node + 1, sizeof *h);
    size_t nh = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n) continue;
        const char *d = n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "";
        const char *op = n->op_type ? n->op_type : "?";
        size_t j = 0;
        while (j < nh && (strcmp(h[j].domain, d) || strcmp(h[j].op, op))) j++;
        if (j == nh) h[nh++] = (op_count){d, op, 0};
        h[j].n++;
    }
    qsort(h, nh, sizeof *h, by_count);
    fputs("  ops:\n", f);
    for (size_t j = 0; j < nh; j++)
        fprintf(f, "    %s%s%s %lld\n", h[j].domain, *h[j].domain ? "::" : "", h[j].op,
                (long long)h[j].n);
    free(h);
}

ampc_status ampc_onnx_inspect(const char *path, FILE *f) {
    if (!path || !f) return AMPC_E_INVALID_ARG;
    fprintf(f, "model: %s\n", path);
    ampc_strbuf err = {0};
    uint8_t *buf;
    size_t len;
    ampc_status st = ampc_onnx_slurp(path, &buf, &len, &err);
    if (st != AMPC_OK) {
        fprintf(f, "  error: %s\n", err.data);
        ampc_sb_free(&err);
        return st;
    }
    Onnx__ModelProto *m = ampc_onnx_model_parse(buf, len, &err);
    free(buf);
    if (!m) {
        fprintf(f, "  error: %s\n", err.data);
        ampc_sb_free(&err);
        return AMPC_E_PARSE;
    }
    summary(m, f);

    ampc_strbuf lines = {0};
    int32_t unsupported = ampc_onnx_model_coverage(m, &lines);
    if (unsupported < 0) {
        fprintf(f, "  coverage: not checked: %s\n", lines.data ? lines.data : "");
    } else if (unsupported == 0) {
        fprintf(f, "  coverage: every node is supported\n");
    } else {
        fprintf(f, "  coverage: %d node%s not supported:", unsupported,
                unsupported == 1 ? " is" : "s are");
        for (const char *p = lines.data; *p; p++) fputs(*p == '\n' ? "\n  " : (char[2]){*p, 0}, f);
        fputc('\n', f);
    }
    ampc_sb_free(&lines);

    char *dir = ampc_onnx_dir_of(path);
    ampc_graph *g = NULL;
    ampc_strbuf notes = {0};
    st = ampc_onnx_model_import(m, dir, NULL, &g, &err, &notes);
    const char *with = "";
    if (st == AMPC_E_SHAPE && err.data && strstr(err.data, "--max-batch")) {
        /* A symbolic batch: say why, then try the import with a batch of 1. */
        fputs("  import: needs shapes:\n", f);
        for (const char *p = err.data; *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            fprintf(f, "    %.*s\n", (int)n, p);
            p += n + (e != NULL);
        }
        err.len = 0;
        notes.len = 0;
        ampc_import_options one = {.max_batch = 1};
        st = ampc_onnx_model_import(m, dir, &one, &g, &err, &notes);
        with = " with --max-batch 1";
    }
    free(dir);
    if (st == AMPC_OK) {
        fprintf(f, "  import%s: ok (%d nodes, %d inputs, %d outputs in ampc's graph)\n", with,
                ampc_graph_node_count(g), ampc_graph_input_count(g), ampc_graph_output_count(g));
    } else if (unsupported <= 0) { /* the coverage list above already says why */
        fprintf(f, "  import%s: failed:\n", with);
        for (const char *p = err.data ? err.data : ""; *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            fprintf(f, "    %.*s\n", (int)n, p);
            p += n + (e != NULL);
        }
    } else {
        fputs("  import: failed (coverage)\n", f);
    }
    if (notes.len) {
        fputs("  notes:\n", f);
        for (const char *p = notes.data; *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            fprintf(f, "    %.*s\n", (int)n, p);
            p += n + (e != NULL);
        }
    }
    ampc_sb_free(&notes);
    ampc_sb_free(&err);
    ampc_graph_destroy(g);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

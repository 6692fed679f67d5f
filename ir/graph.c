/*
 * graph.c — creating graphs, values and nodes; the node builder that runs inference and eager
 * constant evaluation; attribute readers; compaction and use replacement.
 */
#include "ir.h"
#include "ref/ref.h"
#include "subgraph.h"

#include <stdlib.h>
#include <string.h>

/* Nodes whose inputs all carry data are evaluated while building when their outputs are at most
 * this many elements: enough for every shape computation, small enough to keep building cheap. */
enum { EAGER_FOLD_MAX_ELEMS = 1 << 16 };

#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? (cap) * 2 : 16;                                                        \
            (arr) = ampc_xrealloc((arr), (size_t)(cap) * sizeof *(arr));                           \
        }                                                                                          \
    } while (0)

ampc_graph *ampc_graph_create(const char *name) {
    ampc_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    ampc_arena_init(&g->arena);
    g->name = ampc_arena_strdup(&g->arena, name ? name : "graph");
    if (!g->name) {
        free(g);
        return NULL;
    }
    return g;
}

void ampc_graph_set_max_loop_iterations(ampc_graph *g, int64_t n) {
    if (g) g->max_loop_iterations = n > 0 ? n : 0;
}

void ampc_graph_set_reference_tf32(ampc_graph *g, bool on) {
    if (g) g->ref_tf32 = on;
}

void ampc_graph_destroy(ampc_graph *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_subgraphs; i++) ampc_graph_destroy(g->subgraphs[i]);
    free(g->subgraphs);
    free(g->nodes);
    free(g->values);
    free(g->inputs);
    free(g->outputs);
    free(g->errors_text);
    ampc_strmap_free(&g->names);
    ampc_diag_free(&g->diag);
    ampc_arena_free(&g->arena);
    free(g);
}

void *ampc_ir_alloc(ampc_graph *g, size_t n) {
    void *p = ampc_arena_alloc(&g->arena, n);
    if (!p) AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory allocating %zu bytes", n);
    return p;
}

ampc_status ampc_graph_status(const ampc_graph *g) {
    return g ? ampc_diag_status(&g->diag) : AMPC_E_INVALID_ARG;
}

const char *ampc_graph_errors(ampc_graph *g) {
    if (!g) return "no graph (NULL)";
    free(g->errors_text);
    g->errors_text = ampc_diag_join(&g->diag);
    return g->errors_text;
}

void ampc_graph_clear_errors(ampc_graph *g) {
    if (g) ampc_diag_clear(&g->diag);
}

int32_t ampc_graph_node_count(const ampc_graph *g) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) n += !g->nodes[i]->dead;
    return n;
}
int32_t ampc_graph_input_count(const ampc_graph *g) { return g->n_inputs; }
int32_t ampc_graph_output_count(const ampc_graph *g) { return g->n_outputs; }
ampc_value *ampc_graph_input(const ampc_graph *g, int32_t i) {
    return i >= 0 && i < g->n_inputs ? g->inputs[i] : NULL;
}
ampc_value *ampc_graph_output(const ampc_graph *g, int32_t i) {
    return i >= 0 && i < g->n_outputs ? g->outputs[i] : NULL;
}

const char *ampc_value_name(const ampc_value *v) { return v ? v->name : "(null)"; }
ampc_dtype ampc_value_dtype(const ampc_value *v) {
    return v && !(v->flags & AMPC_VALUE_POISON) ? v->dtype : AMPC_DTYPE_UNDEFINED;
}
ampc_shape ampc_value_shape(const ampc_value *v) {
    ampc_shape s = {0};
    return v && !(v->flags & AMPC_VALUE_POISON) ? v->shape : s;
}
bool ampc_value_is_poisoned(const ampc_value *v) { return !v || (v->flags & AMPC_VALUE_POISON); }

/* ---- values --------------------------------------------------------------------------------- */

static const char *unique_name(ampc_graph *g, const char *name) {
    char buf[64];
    if (name && *name && !ampc_strmap_get(&g->names, name)) return ampc_arena_strdup(&g->arena, name);
    do snprintf(buf, sizeof buf, "%s%lld", name && *name ? "" : "t", (long long)g->next_name++);
    while (ampc_strmap_get(&g->names, buf));
    if (!name || !*name) return ampc_arena_strdup(&g->arena, buf);
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s.%s", name, buf);
    while (ampc_strmap_get(&g->names, sb.data)) {
        sb.len = 0;
        ampc_sb_printf(&sb, "%s.%lld", name, (long long)g->next_name++);
    }
    const char *s = ampc_arena_strdup(&g->arena, sb.data);
    ampc_sb_free(&sb);
    return s;
}

ampc_value *ampc_ir_value_new(ampc_graph *g, const char *name, ampc_dtype dtype,
                              const ampc_shape *shape) {
    ampc_value *v = ampc_ir_alloc(g, sizeof *v);
    if (!v) return NULL;
    v->name = unique_name(g, name);
    if (!v->name) return NULL;
    v->dtype = dtype;
    if (shape) v->shape = *shape;
    v->id = g->n_values;
    GROW(g->values, g->n_values, g->cap_values);
    g->values[g->n_values++] = v;
    ampc_strmap_put(&g->names, v->name, v);
    return v;
}

ampc_value *ampc_ir_const_new(ampc_graph *g, const char *name, ampc_dtype dtype,
                              const ampc_shape *shape, const void *data) {
    ampc_value *v = ampc_ir_value_new(g, name, dtype, shape);
    if (!v) return NULL;
    size_t nb = ampc_ir_nbytes(v);
    v->data = ampc_ir_alloc(g, nb ? nb : 1);
    if (!v->data) return NULL;
    if (data && nb) memcpy(v->data, data, nb);
    return v;
}

ampc_value *ampc_ir_poison_new(ampc_graph *g, const char *name) {
    ampc_value *v = ampc_ir_value_new(g, name, AMPC_DTYPE_UNDEFINED, NULL);
    if (v) v->flags |= AMPC_VALUE_POISON;
    return v;
}

ampc_status ampc_ir_value_rename(ampc_graph *g, ampc_value *v, const char *name) {
    if (!strcmp(v->name, name)) return AMPC_OK;
    if (ampc_strmap_get(&g->names, name))
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG,
                         "cannot rename value '%s' to '%s': the name is taken", v->name, name);
    ampc_strmap_del(&g->names, v->name);
    v->name = ampc_arena_strdup(&g->arena, name);
    ampc_strmap_put(&g->names, v->name, v);
    return AMPC_OK;
}

ampc_value *ampc_ir_value_find(const ampc_graph *g, const char *name) {
    return ampc_strmap_get(&g->names, name);
}

ampc_status ampc_ir_graph_add_input(ampc_graph *g, ampc_value *v) {
    GROW(g->inputs, g->n_inputs, g->cap_inputs);
    g->inputs[g->n_inputs++] = v;
    v->flags |= AMPC_VALUE_INPUT;
    return AMPC_OK;
}

ampc_status ampc_ir_graph_add_output(ampc_graph *g, ampc_value *v) {
    GROW(g->outputs, g->n_outputs, g->cap_outputs);
    g->outputs[g->n_outputs++] = v;
    v->flags |= AMPC_VALUE_OUTPUT;
    return AMPC_OK;
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static bool copy_attrs(ampc_graph *g, ampc_attr *dst, const ampc_attr *src, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        ampc_attr a = src[i];
        a.name = ampc_arena_strdup(&g->arena, a.name);
        size_t len = (size_t)(a.n > 0 ? a.n : 0);
        switch (a.kind) {
        case AMPC_ATTR_STRING: a.s = ampc_arena_strdup(&g->arena, a.s ? a.s : ""); break;
        case AMPC_ATTR_INTS: a.ints = ampc_arena_memdup(&g->arena, a.ints, len * sizeof *a.ints); break;
        case AMPC_ATTR_FLOATS:
            a.floats = ampc_arena_memdup(&g->arena, a.floats, len * sizeof *a.floats);
            break;
        case AMPC_ATTR_STRINGS: {
            const char **s = ampc_arena_alloc(&g->arena, (len ? len : 1) * sizeof *s);
            if (!s) return false;
            for (size_t j = 0; j < len; j++) s[j] = ampc_arena_strdup(&g->arena, a.strings[j]);
            a.strings = s;
            break;
        }
        default: break;
        }
        if (!a.name) return false;
        dst[i] = a;
    }
    return true;
}

ampc_node *ampc_ir_node_append(ampc_graph *g, ampc_opcode op, const char *name,
                               ampc_value *const *inputs, int32_t n_inputs,
                               const ampc_attr *attrs, int32_t n_attrs,
                               ampc_value *const *outputs, int32_t n_outputs) {
    ampc_node *n = ampc_ir_alloc(g, sizeof *n);
    if (!n) return NULL;
    n->op = op;
    n->id = g->n_nodes;
    if (name && *name) {
        n->name = ampc_arena_strdup(&g->arena, name);
    } else {
        char buf[48];
        snprintf(buf, sizeof buf, "%s_%d", ampc_op_get(op)->onnx, n->id);
        n->name = ampc_arena_strdup(&g->arena, buf);
    }
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->n_attrs = n_attrs;
    n->inputs = ampc_ir_alloc(g, (size_t)(n_inputs + 1) * sizeof *n->inputs);
    n->outputs = ampc_ir_alloc(g, (size_t)(n_outputs + 1) * sizeof *n->outputs);
    n->attrs = ampc_ir_alloc(g, (size_t)(n_attrs + 1) * sizeof *n->attrs);
    if (!n->name || !n->inputs || !n->outputs || !n->attrs) return NULL;
    if (n_inputs) memcpy(n->inputs, inputs, (size_t)n_inputs * sizeof *inputs);
    if (!copy_attrs(g, n->attrs, attrs, n_attrs)) {
        AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory copying attributes");
        return NULL;
    }
    for (int32_t i = 0; i < n_outputs; i++) {
        n->outputs[i] = outputs[i];
        if (outputs[i]) outputs[i]->producer = n;
    }
    GROW(g->nodes, g->n_nodes, g->cap_nodes);
    g->nodes[g->n_nodes++] = n;
    return n;
}

static void poison_outputs(ampc_node *n) {
    for (int32_t i = 0; i < n->n_outputs; i++) {
        ampc_value *v = n->outputs[i];
        v->flags |= AMPC_VALUE_POISON;
        v->dtype = AMPC_DTYPE_UNDEFINED;
        v->shape.rank = 0;
        v->data = NULL;
    }
}

/* Arity, input sanity and the op's own inference. */
ampc_status ampc_ir_node_infer(ampc_graph *g, ampc_node *n) {
    const ampc_op_info *info = ampc_op_get(n->op);
    if (n->n_inputs < info->min_in || (info->max_in >= 0 && n->n_inputs > info->max_in)) {
        if (info->max_in < 0)
            return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "%s takes at least %d inputs, got %d",
                             info->onnx, info->min_in, n->n_inputs);
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "%s takes %d to %d inputs, got %d", info->onnx,
                         info->min_in, info->max_in, n->n_inputs);
    }
    if (n->n_outputs < info->min_out || (info->max_out >= 0 && n->n_outputs > info->max_out))
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "%s has %d to %d outputs, got %d", info->onnx,
                         info->min_out, info->max_out, n->n_outputs);
    /* Attributes are looked up by name, so a second one of a name would be silently ignored
     * (and the printed IR would not parse back): refuse it, as ONNX's checker does. */
    for (int32_t i = 1; i < n->n_attrs; i++)
        for (int32_t j = 0; j < i; j++)
            if (!strcmp(n->attrs[i].name, n->attrs[j].name))
                return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' is given twice",
                                 n->attrs[i].name);
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) {
            if (ampc_op_input_required(n->op, i))
                return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "input %d is required but absent", i);
            continue;
        }
        if (v->flags & AMPC_VALUE_POISON) return AMPC_E_INVALID_ARG; /* reported where it arose */
        if (i < 32 && (info->const_inputs & (1u << i)) && !v->data)
            return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                             "input %d '%s' must be known at compile time (it sets a shape, axes or "
                             "pads), but it is computed at run time; ampc compiles static graphs%s",
                             i, v->name,
                             (v->flags & AMPC_VALUE_INPUT) ? ": give the graph input's value when "
                             "compiling (the command line's --bind NAME=FILE, or `ampc run`'s "
                             "--input)" : "");
    }
    ampc_status st = info->infer(g, n);
    if (st != AMPC_OK) return st;
    for (int32_t i = 0; i < n->n_outputs; i++) {
        ampc_value *v = n->outputs[i];
        AMPC_ASSERT(v->dtype != AMPC_DTYPE_UNDEFINED);
        if (!ampc_shape_check_size(g, n, &v->shape, v->dtype)) return AMPC_E_OVERFLOW;
    }
    return AMPC_OK;
}

static bool eager_foldable(const ampc_node *n) {
    if (ampc_op_has(n->op, T_NOFOLD) || !ampc_ir_node_bodies_foldable(n)) return false;
    for (int32_t i = 0; i < n->n_inputs && !ampc_op_has(n->op, T_SHAPEONLY); i++)
        if (n->inputs[i] && !n->inputs[i]->data) return false;
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (ampc_ir_numel(n->outputs[i]) > EAGER_FOLD_MAX_ELEMS) return false;
    return true;
}

ampc_status ampc_ir_node_build(ampc_graph *g, ampc_opcode op, const char *name,
                               ampc_value *const *inputs, int32_t n_inputs,
                               const ampc_attr *attrs, int32_t n_attrs, int32_t n_outputs,
                               const char *const *out_names, ampc_node **out_node) {
    if (out_node) *out_node = NULL;
    ampc_value *outs[64];
    if (n_outputs < 0 || n_outputs > AMPC_ARRAY_LEN(outs))
        return AMPC_FAIL(g, NULL, AMPC_E_UNSUPPORTED, "%s node '%s' has %d outputs; at most %d "
                         "are supported", ampc_op_get(op)->onnx, name ? name : "", n_outputs,
                         AMPC_ARRAY_LEN(outs));
    /* Unnamed nodes are "<Op>_<index>"; unnamed outputs take the node's name ("<node>:<i>" past
     * the first), made unique when taken. */
    char node_name[64], out_name[80];
    if (!name || !*name) {
        snprintf(node_name, sizeof node_name, "%s_%d", ampc_op_get(op)->onnx, g->n_nodes);
        name = node_name;
    }
    for (int32_t i = 0; i < n_outputs; i++) {
        const char *on = out_names ? out_names[i] : NULL;
        if (!on || !*on) {
            if (i) snprintf(out_name, sizeof out_name, "%.60s:%d", name, i);
            else snprintf(out_name, sizeof out_name, "%.60s", name);
            on = out_name;
        }
        outs[i] = ampc_ir_value_new(g, on, AMPC_DTYPE_UNDEFINED, NULL);
        if (!outs[i]) return AMPC_E_OOM;
    }
    ampc_node *n = ampc_ir_node_append(g, op, name, inputs, n_inputs, attrs, n_attrs, outs,
                                       n_outputs);
    if (!n) return AMPC_E_OOM;
    if (out_node) *out_node = n;
    ampc_status st = ampc_ir_node_infer(g, n);
    if (st == AMPC_OK && eager_foldable(n)) st = ampc_ref_fold_node(g, n);
    if (st != AMPC_OK) poison_outputs(n);
    return st;
}

void ampc_ir_node_remove(ampc_graph *g, ampc_node *n) {
    (void)g;
    n->dead = true;
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] && n->outputs[i]->producer == n) n->outputs[i]->producer = NULL;
}

void ampc_ir_graph_compact(ampc_graph *g) {
    bool *used = ampc_xcalloc((size_t)g->n_values, 1);
    int32_t k = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        n->id = k;
        g->nodes[k++] = n;
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j]) used[n->inputs[j]->id] = true;
        for (int32_t j = 0; j < n->n_outputs; j++) used[n->outputs[j]->id] = true;
    }
    g->n_nodes = k;
    for (int32_t i = 0; i < g->n_inputs; i++) used[g->inputs[i]->id] = true;
    for (int32_t i = 0; i < g->n_outputs; i++) used[g->outputs[i]->id] = true;
    k = 0;
    for (int32_t i = 0; i < g->n_values; i++) {
        ampc_value *v = g->values[i];
        if (!used[i]) {
            ampc_strmap_del(&g->names, v->name);
            continue;
        }
        v->id = k;
        g->values[k++] = v;
    }
    g->n_values = k;
    free(used);
}

void ampc_ir_graph_replace_output(ampc_graph *g, int32_t i, ampc_value *r) {
    ampc_value *v = g->outputs[i];
    /* A graph output keeps its name (callers address outputs by name): the replacement takes it
     * over and the replaced value gets the replacement's, unless the replacement is itself a
     * graph input or output whose name is also part of the interface. */
    v->flags &= ~(uint32_t)AMPC_VALUE_OUTPUT;
    if (!(r->flags & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT))) {
        const char *name = v->name;
        ampc_strmap_del(&g->names, v->name);
        ampc_strmap_del(&g->names, r->name);
        v->name = r->name;
        r->name = name;
        ampc_strmap_put(&g->names, v->name, v);
        ampc_strmap_put(&g->names, r->name, r);
    }
    r->flags |= AMPC_VALUE_OUTPUT;
    g->outputs[i] = r;
}

void ampc_ir_graph_replace_uses(ampc_graph *g, ampc_value *const *map) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] && map[n->inputs[j]->id]) n->inputs[j] = map[n->inputs[j]->id];
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (map[g->outputs[i]->id]) ampc_ir_graph_replace_output(g, i, map[g->outputs[i]->id]);
}

void ampc_ir_graph_settle(ampc_graph *g, int32_t first_new) {
    int32_t n = g->n_nodes, n_new = n - first_new;
    if (n_new <= 0) return;
    /* after[j]: the position of the old node new node j must follow (-1: none, it goes first);
     * a new node reading another new node follows what that one follows, and comes later in
     * the appended order, so the order between them holds. */
    int32_t *after = ampc_xmalloc((size_t)n_new * sizeof *after);
    int32_t *count = ampc_xcalloc((size_t)first_new + 1, sizeof *count);
    ampc_node **order = ampc_xmalloc((size_t)n * sizeof *order);
    for (int32_t j = 0; j < n_new; j++) {
        const ampc_node *m = g->nodes[first_new + j];
        after[j] = -1;
        for (int32_t k = 0; k < m->n_inputs; k++) {
            const ampc_node *p = m->inputs[k] ? m->inputs[k]->producer : NULL;
            if (!p) continue;
            int32_t at = p->id < first_new ? p->id : after[p->id - first_new];
            if (at > after[j]) after[j] = at;
        }
        count[after[j] + 1]++;
    }
    /* Counting sort by `after`: slot s holds the new nodes following old node s - 1. */
    int32_t *start = ampc_xmalloc(((size_t)first_new + 1) * sizeof *start);
    for (int32_t s = 0, total = 0; s <= first_new; s++) start[s] = total, total += count[s];
    ampc_node **placed = ampc_xmalloc((size_t)n_new * sizeof *placed);
    for (int32_t j = 0; j < n_new; j++) placed[start[after[j] + 1]++] = g->nodes[first_new + j];
    int32_t k = 0, next = 0;
    for (int32_t s = 0; s <= first_new; s++) {
        if (s) order[k++] = g->nodes[s - 1];
        for (int32_t c = 0; c < count[s]; c++) order[k++] = placed[next++];
    }
    for (int32_t i = 0; i < n; i++) order[i]->id = i, g->nodes[i] = order[i];
    free(after);
    free(count);
    free(order);
    free(start);
    free(placed);
}

/* ---- attributes ----------------------------------------------------------------------------- */

const ampc_attr *ampc_ir_attr_find(const ampc_node *n, const char *name) {
    for (int32_t i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
    return NULL;
}

static const ampc_attr *attr_kind(const ampc_node *n, const char *name, ampc_attr_kind kind) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == kind ? a : NULL;
}

int64_t ampc_attr_int_or(const ampc_node *n, const char *name, int64_t dflt) {
    const ampc_attr *a = attr_kind(n, name, AMPC_ATTR_INT);
    return a ? a->i : dflt;
}

double ampc_attr_float_or(const ampc_node *n, const char *name, float dflt) {
    const ampc_attr *a = attr_kind(n, name, AMPC_ATTR_FLOAT);
    return a ? (double)a->f : (double)dflt;
}

const char *ampc_attr_string_or(const ampc_node *n, const char *name, const char *dflt) {
    const ampc_attr *a = attr_kind(n, name, AMPC_ATTR_STRING);
    return a ? a->s : dflt;
}

const ampc_attr *ampc_attr_ints_of(const ampc_node *n, const char *name) {
    return attr_kind(n, name, AMPC_ATTR_INTS);
}

static const char *const attr_kind_names[] = {"undefined", "int",     "float",  "string", "ints",
                                              "floats",    "strings", "tensor", "graph"};

static const ampc_attr *attr_typed(ampc_graph *g, const ampc_node *n, const char *name,
                                   ampc_attr_kind kind) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    if (!a || a->kind == kind) return a;
    AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be of type %s, got %s", name,
              attr_kind_names[kind], attr_kind_names[a->kind]);
    return NULL;
}

int64_t ampc_ir_attr_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt) {
    const ampc_attr *a = attr_typed(g, n, name, AMPC_ATTR_INT);
    return a ? a->i : dflt;
}

float ampc_ir_attr_float(ampc_graph *g, const ampc_node *n, const char *name, float dflt) {
    const ampc_attr *a = attr_typed(g, n, name, AMPC_ATTR_FLOAT);
    return a ? a->f : dflt;
}

const char *ampc_ir_attr_string(ampc_graph *g, const ampc_node *n, const char *name,
                                const char *dflt) {
    const ampc_attr *a = attr_typed(g, n, name, AMPC_ATTR_STRING);
    return a ? a->s : dflt;
}

const int64_t *ampc_ir_attr_ints(ampc_graph *g, const ampc_node *n, const char *name,
                                 int32_t *count) {
    const ampc_attr *a = attr_typed(g, n, name, AMPC_ATTR_INTS);
    *count = a ? a->n : 0;
    return a ? a->ints : NULL;
}

const float *ampc_ir_attr_floats(ampc_graph *g, const ampc_node *n, const char *name,
                                 int32_t *count) {
    const ampc_attr *a = attr_typed(g, n, name, AMPC_ATTR_FLOATS);
    *count = a ? a->n : 0;
    return a ? a->floats : NULL;
}

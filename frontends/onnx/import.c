/*
 * import.c — the ONNX importer: a ModelProto becomes an ampc graph built through
 * ampc_ir_node_build, so every node runs the op table's inference (and small all-constant nodes
 * are evaluated as they are built: shape arithmetic resolves at import).
 *
 * Stages, each reporting every problem it finds in one message before the import gives up:
 *   1. versions     ir_version 3..14, opset_import (one entry per domain, default opset <= 28)
 *   2. coverage     every node: its op (table row or model-local function, expanded recursively)
 *                   at its opset, and its attribute kinds/combinations. One line per node, the
 *                   nodes of If/Loop/Scan subgraphs included (with their path).
 *   3. structure    duplicate and dangling value names, graph outputs, cycles; nodes out of
 *                   topological order are sorted (stable) rather than refused
 *   4. inputs       options checked; symbolic dims bound from --shape, constant bindings and
 *                   --max-batch; each unresolved dim named with its input and symbol
 *   5. build        inputs, used initializers (every encoding, see tensor_io.c), nodes through
 *                   opset.c's per-version rewriting, functions expanded inline, Constant nodes
 *                   as constants, subgraphs imported recursively with explicit captures (an If
 *                   with a constant condition becomes its taken branch; a Loop that only builds
 *                   with its iteration number known is unrolled); inference diagnostics
 *                   re-worded against the ONNX node
 *   6. outputs      graph outputs named as in the model; value_info compared (notes only)
 *
 * Graph inputs that also have an initializer are constants (ONNX IR >= 4 semantics: a compiler
 * cannot take an override for them). Fields newer than the onnx.proto we were generated from
 * (NodeProto.overload, FunctionProto.overload and attribute_proto) are read from protobuf-c's
 * unknown fields (pb.c); other newer fields (metadata_props, device configurations) carry nothing
 * a single-device inference compiler uses and are skipped.
 */
#include "onnx_internal.h"
#include "ir/subgraph.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_ERROR_LINES = 100, /* lines of one message; the rest are counted */
    MAX_FN_DEPTH = 16,     /* function calls nested in function bodies */
    /* Tags of fields the ONNX 1.12 schema lacks. */
    TAG_NODE_OVERLOAD = 8,
    TAG_FN_ATTRIBUTE_PROTO = 11,
    TAG_FN_OVERLOAD = 13,
};

/* A model-local function (ModelProto.functions). */
typedef struct fn_def {
    const Onnx__FunctionProto *proto;
    const char *overload;  /* not NUL-terminated; overload_len bytes */
    size_t overload_len;
    Onnx__AttributeProto **defaults; /* attribute_proto: attributes with default values */
    int32_t n_defaults;
    int64_t opset;         /* the default-domain opset of its body */
    bool active;           /* on the current check/expansion stack (recursion guard) */
} fn_def;

/* An attribute of a node after ref_attr_name resolution: `a`'s value under the name `name`. */
typedef struct attr_ref {
    const char *name;
    const Onnx__AttributeProto *a;
} attr_ref;

/* What ref_attr_name resolves against inside a function body. */
typedef struct attr_env {
    const attr_ref *call;  /* the call site's attributes */
    int32_t n_call;
    Onnx__AttributeProto *const *dflt; /* the function's defaults */
    int32_t n_dflt;
} attr_env;

/* Names in scope: the main graph, one function expansion, or one subgraph (a body of If, Loop
 * or Scan). A subgraph scope sees the names of the scopes around it (`up`): a use of an outer
 * value becomes a capture (see resolve()); a function scope sees only its own names. */
typedef struct scope {
    ampc_strmap vals;      /* ONNX name -> ampc_value (or &absent) */
    ampc_strmap outs;      /* function bodies: formal output -> call-site output name */
    const char *prefix;    /* function bodies: hint prefix for internal value names */
    bool in_fn;
    ampc_graph *g;         /* the graph the scope's values live in */
    struct scope *up;      /* subgraphs: the enclosing scope; NULL otherwise */
    bool inline_up;        /* an unrolled Loop iteration: up's names are seen directly */
    ampc_strmap local;     /* subgraphs: every name the subgraph itself defines */
    ampc_value **cap_outer, **cap_inner; /* subgraphs: captures, outer value -> body input */
    int32_t n_cap, cap_cap;
} scope;

/* The value standing for an absent optional function input. */
static ampc_value absent;

struct ampc_onnx_ctx {
    ampc_graph *g;
    const Onnx__ModelProto *m;
    const char *base_dir;
    ampc_import_options opt;
    ampc_strbuf errs;
    int32_t n_errs;
    ampc_status first;
    ampc_strmap model_names; /* every value name of the main graph */
    ampc_onnx_pb_pool pool;
    fn_def *fns;
    int32_t n_fns;
    int64_t opset;           /* default-domain opset (0: not imported) */
    ampc_strbuf *notes;
    ampc_strmap needed;      /* constants_if_needed: names whose value must be known */
    bool needed_done;
    /* Name indexes of the main graph and the options, built once (index_names) so that every
     * lookup by name is a hash probe: initializer name -> its TensorProto; input name without
     * an initializer -> 1 + its position among those (the first of a repeated name); every input
 * name -> 1; a named
     * constant binding or --shape -> its entry. */
    ampc_strmap inits, inputs, free_inputs, named_bindings, named_shapes;
    size_t n_free_inputs;
    bool index_done;
};

/* ---- errors --------------------------------------------------------------------------------- */

static ampc_status ctx_verr(ampc_onnx_ctx *c, ampc_status code, const char *fmt, va_list ap) {
    if (c->first == AMPC_OK) c->first = code;
    if (++c->n_errs > MAX_ERROR_LINES) return code;
    if (c->errs.len) ampc_sb_putc(&c->errs, '\n');
    ampc_sb_vprintf(&c->errs, fmt, ap);
    return code;
}

/* Records one error line (the first status wins); lines past MAX_ERROR_LINES are only
 * counted, so a model with thousands of bad nodes still gets a readable message. */
static ampc_status __attribute__((format(printf, 3, 4)))
ctx_err(ampc_onnx_ctx *c, ampc_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ctx_verr(c, code, fmt, ap);
    va_end(ap);
    return code;
}

/* An error about the node being imported, prefixed with where it is (see onnx_internal.h). */
ampc_status ampc_onnx_fail(ampc_onnx_ctx *c, const ampc_onnx_node *nd, ampc_status code,
                           const char *fmt, ...) {
    ampc_strbuf sb = {0};
    va_list ap;
    va_start(ap, fmt);
    ampc_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    ctx_err(c, code, "%s: %s", nd->where, sb.data);
    ampc_sb_free(&sb);
    return code;
}

/* Moves the collected errors into err, with a count of those past the line limit. */
static ampc_status ctx_finish_errors(ampc_onnx_ctx *c, ampc_strbuf *err) {
    if (c->n_errs > MAX_ERROR_LINES)
        ampc_sb_printf(&c->errs, "\n... and %d more errors", c->n_errs - MAX_ERROR_LINES);
    ampc_sb_puts(err, c->errs.data ? c->errs.data : "");
    ampc_sb_free(&c->errs);
    return c->first;
}

/* ---- small helpers -------------------------------------------------------------------------- */

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

/* Domain equality, with "" and "ai.onnx" the same domain. */
static bool same_domain(const char *a, const char *b) {
    if (is_default_domain(a) || is_default_domain(b))
        return is_default_domain(a) && is_default_domain(b);
    return !strcmp(a, b);
}

/* Protobuf strings are NULL when absent. */
static const char *str_or(const char *s, const char *dflt) { return s ? s : dflt; }

/* True for values whose construction failed (reported where it failed). */
static bool poisoned(const ampc_value *v) { return v && (v->flags & AMPC_VALUE_POISON); }

/* The version a list of opset imports gives a domain; -1 when the domain is not imported. */
static int64_t domain_version(Onnx__OperatorSetIdProto *const *ops, size_t n, const char *domain) {
    for (size_t i = 0; i < n; i++)
        if (ops[i] && same_domain(ops[i]->domain, domain)) return ops[i]->version;
    return -1;
}

/* "node 12 'conv_5' (ai.onnx.ml::LabelEncoder)", nested under `parent` for function bodies. */
static void node_where(ampc_strbuf *sb, const char *parent, size_t idx, const Onnx__NodeProto *n) {
    if (parent) ampc_sb_printf(sb, "%s > body ", parent);
    ampc_sb_printf(sb, "node %zu '%s' (", idx, str_or(n->name, ""));
    if (!is_default_domain(n->domain)) ampc_sb_printf(sb, "%s::", n->domain);
    ampc_sb_printf(sb, "%s)", str_or(n->op_type, "?"));
}

/* "<where> > body node 1 'add' (Add)": node idx of the subgraph attribute `attr` of the node
 * described by `where`. */
static void body_node_where(ampc_strbuf *sb, const char *where, const char *attr, size_t idx,
                            const Onnx__NodeProto *n) {
    ampc_sb_printf(sb, "%s > %s ", where, attr);
    node_where(sb, NULL, idx, n);
}

/* Accessors and helpers opset.c builds through (contracts in onnx_internal.h). */
ampc_graph *ampc_onnx_graph(ampc_onnx_ctx *c) { return c->g; }

/* Tries `hint`, then `hint.1`, `hint.2`...: the first name neither the model nor the graph uses.
 * Model names are reserved up front so a generated name can never take one that a later node's
 * output (whose IR name must be the ONNX name) still needs. */
const char *ampc_onnx_fresh_name(ampc_onnx_ctx *c, const char *hint) {
    ampc_strbuf sb = {0};
    ampc_sb_puts(&sb, hint && *hint ? hint : "v");
    for (int64_t k = 1;
         ampc_strmap_get(&c->model_names, sb.data) || ampc_ir_value_find(c->g, sb.data); k++) {
        sb.len = 0;
        ampc_sb_printf(&sb, "%s.%lld", hint && *hint ? hint : "v", (long long)k);
    }
    const char *s = ampc_arena_strdup(&c->g->arena, sb.data);
    ampc_sb_free(&sb);
    return s ? s : "v";
}

ampc_value *ampc_onnx_const(ampc_onnx_ctx *c, const char *hint, ampc_dtype dt, const ampc_shape *s,
                            const void *data) {
    ampc_value *v = ampc_ir_const_new(c->g, ampc_onnx_fresh_name(c, hint), dt, s, data);
    if (!v) ctx_err(c, AMPC_E_OOM, "out of host memory creating constant '%s'", hint);
    return v;
}

/* A poisoned value standing for an output that could not be built. */
static ampc_value *poison(ampc_onnx_ctx *c, const char *hint) {
    ampc_value *v = ampc_ir_poison_new(c->g, ampc_onnx_fresh_name(c, hint));
    AMPC_ASSERT(v); /* a few bytes; the arena aborts before this fails in practice */
    return v;
}

/* ---- building one IR node ------------------------------------------------------------------- */

ampc_status ampc_onnx_build(ampc_onnx_ctx *c, const ampc_onnx_node *nd, ampc_opcode op,
                            const char *name, ampc_value *const *in, int32_t n_in,
                            const ampc_attr *attrs, int32_t n_attrs, int32_t n_out,
                            const char *const *out_names, ampc_value **outs) {
    ampc_graph *g = c->g;
    const char *names[64] = {0};
    if (n_out < 0 || n_out > AMPC_ARRAY_LEN(names))
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "%d outputs; ampc supports at most %d",
                              n_out, AMPC_ARRAY_LEN(names));
    for (int32_t i = 0; i < n_out; i++) {
        if (out_names && out_names[i]) {
            names[i] = out_names[i];
        } else {
            ampc_strbuf h = {0};
            ampc_sb_printf(&h, "%s/out%d", name ? name : ampc_op_get(op)->onnx, i);
            names[i] = ampc_onnx_fresh_name(c, h.data);
            ampc_sb_free(&h);
        }
    }
    int32_t before = g->diag.n;
    ampc_node *node = NULL;
    ampc_status st = ampc_ir_node_build(g, op, name, in, n_in, attrs, n_attrs, n_out, names, &node);
    for (int32_t i = 0; i < n_out; i++) outs[i] = node ? node->outputs[i] : NULL;
    if (st == AMPC_OK) return st;

    /* Re-word the IR's diagnostics ("node 7 (Flatten 'x/flatten'): ...") against the ONNX node. */
    const char *row = ampc_op_get(op)->onnx;
    const char *ot = nd->proto && nd->proto->op_type ? nd->proto->op_type : row;
    bool helper = strcmp(row, ot) != 0;
    char prefix[512] = "";
    if (node) snprintf(prefix, sizeof prefix, "node %d (%s '%s'): ", node->id, row, node->name);
    size_t pl = strlen(prefix);
    for (int32_t i = before; i < g->diag.n; i++) {
        const char *msg = g->diag.entries[i].msg;
        if (pl && !strncmp(msg, prefix, pl)) msg += pl;
        ctx_err(c, g->diag.entries[i].code, "%s: %s%s%s%s", nd->where, helper ? "in the " : "",
                helper ? row : "", helper ? " ampc inserts for this form: " : "", msg);
    }
    bool quiet = false; /* a poisoned input: reported where it arose */
    for (int32_t i = 0; i < n_in; i++) quiet |= poisoned(in[i]);
    if (g->diag.n == before && !quiet)
        ctx_err(c, st, "%s: building %s failed (%s)", nd->where, row, ampc_status_str(st));
    ampc_diag_clear(&g->diag);
    for (int32_t i = 0; i < n_out; i++)
        if (!outs[i]) outs[i] = poison(c, names[i]);
    return st;
}

/* ---- attributes ----------------------------------------------------------------------------- */

static const char *attr_type_name(int t) {
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "a graph";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "a list of graphs";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "a sparse tensor";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "a list of sparse tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "a list of tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "a type";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "a list of types";
    default: return "of an unknown type";
    }
}

/* Checks the kind of an attribute the importer will convert; false with the reason in why. */
static bool attr_kind_ok(const Onnx__AttributeProto *a, ampc_strbuf *why) {
    char nb[32];
    switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!a->t) {
            ampc_sb_printf(why, "attribute '%s' is a tensor without a value", a->name);
            return false;
        }
        if (a->t->has_data_type && ampc_dtype_from_onnx(a->t->data_type) == AMPC_DTYPE_UNDEFINED) {
            ampc_sb_printf(why,
                           "attribute '%s' is a tensor of element type %s, which ampc does "
                           "not support",
                           a->name, ampc_onnx_dtype_name(a->t->data_type, nb, sizeof nb));
            return false;
        }
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
        ampc_sb_printf(why, "attribute '%s' has no type", a->name);
        return false;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: /* the ops that take one check the rest */
        if (!a->g) {
            ampc_sb_printf(why, "attribute '%s' is a graph without a value", a->name);
            return false;
        }
        return true;
    default:
        ampc_sb_printf(why, "attribute '%s' is %s, which ampc does not support", a->name,
                       attr_type_name(a->type));
        return false;
    }
}

/* The value a ref_attr_name resolves to: the call site's attribute, else the function's
 * default; NULL when neither has it (the attribute is then left unset). */
static const Onnx__AttributeProto *env_lookup(const attr_env *env, const char *name) {
    for (int32_t i = 0; env && i < env->n_call; i++)
        if (!strcmp(env->call[i].name, name)) return env->call[i].a;
    for (int32_t i = 0; env && i < env->n_dflt; i++)
        if (env->dflt[i] && env->dflt[i]->name && !strcmp(env->dflt[i]->name, name))
            return env->dflt[i];
    return NULL;
}

/* Resolves a node's attributes (ref_attr_name against env); attributes a reference leaves unset
 * are dropped, as ONNX says. Returns the count, the array in *out (malloc'ed). */
static int32_t resolve_attrs(const Onnx__NodeProto *n, const attr_env *env, attr_ref **out) {
    attr_ref *r = ampc_xmalloc((n->n_attribute + 1) * sizeof *r);
    int32_t k = 0;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (!a || !a->name) continue;
        if (a->ref_attr_name && *a->ref_attr_name) {
            const Onnx__AttributeProto *src = env_lookup(env, a->ref_attr_name);
            if (!src) continue;
            r[k++] = (attr_ref){a->name, src};
        } else {
            r[k++] = (attr_ref){a->name, a};
        }
    }
    *out = r;
    return k;
}

/* A TensorProto attribute as a constant outside graph->values (ampc_attr's tensor contract). */
static ampc_value *tensor_attr_value(ampc_onnx_ctx *c, const Onnx__TensorProto *t,
                                     const char *what) {
    ampc_strbuf err = {0};
    ampc_dtype dt;
    ampc_shape s;
    ampc_status st = ampc_onnx_tensor_type(t, what, &dt, &s, &err);
    if (st == AMPC_OK) st = ampc_onnx_tensor_data(t, what, c->base_dir, dt, &s, NULL, &err);
    ampc_value *v = NULL;
    if (st == AMPC_OK) {
        size_t nb = (size_t)ampc_shape_numel(&s) * ampc_dtype_size(dt);
        v = ampc_ir_alloc(c->g, sizeof *v);
        void *data = ampc_ir_alloc(c->g, nb ? nb : 1);
        if (!v || !data) {
            ampc_diag_clear(&c->g->diag);
            ctx_err(c, AMPC_E_OOM, "%s: out of host memory (%zu bytes)", what, nb);
            ampc_sb_free(&err);
            return NULL;
        }
        v->id = -1;
        v->name = ampc_arena_strdup(&c->g->arena, t->name && *t->name ? t->name : "value");
        v->dtype = dt;
        v->shape = s;
        v->data = data;
        st = ampc_onnx_tensor_data(t, what, c->base_dir, dt, &s, data, &err);
    }
    if (st != AMPC_OK) {
        ctx_err(c, st, "%s", err.data);
        v = NULL;
    }
    ampc_sb_free(&err);
    return v;
}

/* Converts resolved attributes into the node's ampc_attr list (strings and lists point into the
 * model or the graph's arena; ampc_ir_node_build copies them). */
static bool convert_attrs(ampc_onnx_ctx *c, ampc_onnx_node *nd, const attr_ref *r, int32_t n) {
    nd->cap_attrs = n + 4;
    nd->attrs = ampc_xcalloc((size_t)nd->cap_attrs, sizeof *nd->attrs);
    nd->n_attrs = 0;
    for (int32_t i = 0; i < n; i++) {
        const Onnx__AttributeProto *a = r[i].a;
        ampc_attr o = {.name = r[i].name};
        ampc_strbuf why = {0};
        if (!attr_kind_ok(a, &why)) {
            ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "%s", why.data);
            ampc_sb_free(&why);
            return false;
        }
        switch (a->type) {
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
            continue; /* imported as a subgraph by import_bodies, which adds the attribute */
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
            o.kind = AMPC_ATTR_FLOAT, o.f = a->f;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: o.kind = AMPC_ATTR_INT, o.i = a->i; break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
            char *s = ampc_ir_alloc(c->g, a->s.len + 1);
            if (!s) return false;
            if (a->s.len) memcpy(s, a->s.data, a->s.len);
            o.kind = AMPC_ATTR_STRING, o.s = s;
            break;
        }
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
            o.kind = AMPC_ATTR_FLOATS, o.floats = a->floats, o.n = (int32_t)a->n_floats;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
            o.kind = AMPC_ATTR_INTS, o.ints = a->ints, o.n = (int32_t)a->n_ints;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
            const char **ss = ampc_ir_alloc(c->g, (a->n_strings + 1) * sizeof *ss);
            if (!ss) return false;
            for (size_t j = 0; j < a->n_strings; j++) {
                char *s = ampc_ir_alloc(c->g, a->strings[j].len + 1);
                if (!s) return false;
                if (a->strings[j].len) memcpy(s, a->strings[j].data, a->strings[j].len);
                ss[j] = s;
            }
            o.kind = AMPC_ATTR_STRINGS, o.strings = ss, o.n = (int32_t)a->n_strings;
            break;
        }
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
            ampc_strbuf what = {0};
            ampc_sb_printf(&what, "%s: attribute '%s'", nd->where, r[i].name);
            o.kind = AMPC_ATTR_TENSOR, o.tensor = tensor_attr_value(c, a->t, what.data);
            ampc_sb_free(&what);
            if (!o.tensor) return false;
            break;
        }
        default: AMPC_ASSERT(!"attr_kind_ok let an unhandled kind through");
        }
        nd->attrs[nd->n_attrs++] = o;
    }
    return true;
}

/* ---- functions ------------------------------------------------------------------------------ */

static fn_def *find_fn(ampc_onnx_ctx *c, const Onnx__NodeProto *n) {
    if (!n->op_type || !c->n_fns) return NULL;
    const char *ov = "";
    size_t ovl = 0;
    ampc_onnx_pb_string(&n->base, TAG_NODE_OVERLOAD, &ov, &ovl);
    for (int32_t i = 0; i < c->n_fns; i++) {
        fn_def *f = &c->fns[i];
        if (f->proto->name && !strcmp(f->proto->name, n->op_type) &&
            same_domain(f->proto->domain, n->domain) && f->overload_len == ovl &&
            (!ovl || !memcmp(f->overload, ov, ovl)))
            return f;
    }
    return NULL;
}

/* Reads ModelProto.functions into c->fns; duplicate identities are errors. */
static void load_functions(ampc_onnx_ctx *c) {
    const Onnx__ModelProto *m = c->m;
    c->fns = ampc_xcalloc(m->n_functions + 1, sizeof *c->fns);
    for (size_t i = 0; i < m->n_functions; i++) {
        const Onnx__FunctionProto *fp = m->functions[i];
        if (!fp || !fp->name) {
            ctx_err(c, AMPC_E_PARSE, "model function %zu has no name", i);
            continue;
        }
        fn_def *f = &c->fns[c->n_fns];
        f->proto = fp;
        f->overload = "";
        ampc_onnx_pb_string(&fp->base, TAG_FN_OVERLOAD, &f->overload, &f->overload_len);
        ProtobufCMessage *const *d;
        int32_t nd = ampc_onnx_pb_messages(&fp->base, TAG_FN_ATTRIBUTE_PROTO,
                                           &onnx__attribute_proto__descriptor, &c->pool, &d);
        f->defaults = ampc_xcalloc((size_t)nd + 1, sizeof *f->defaults);
        for (int32_t j = 0; j < nd; j++) f->defaults[j] = (Onnx__AttributeProto *)d[j];
        f->n_defaults = nd;
        int64_t v = domain_version(fp->opset_import, fp->n_opset_import, "");
        f->opset = v > 0 ? v : c->opset;
        for (int32_t j = 0; j < c->n_fns; j++) {
            const fn_def *o = &c->fns[j];
            if (!strcmp(o->proto->name, fp->name) && same_domain(o->proto->domain, fp->domain) &&
                o->overload_len == f->overload_len &&
                (!f->overload_len || !memcmp(o->overload, f->overload, f->overload_len)))
                ctx_err(c, AMPC_E_VERIFY, "model function '%s' (domain '%s') is defined twice",
                        fp->name, str_or(fp->domain, ""));
        }
        c->n_fns++;
    }
}

/* ---- 1. versions ---------------------------------------------------------------------------- */

static ampc_status check_versions(ampc_onnx_ctx *c) {
    const Onnx__ModelProto *m = c->m;
    if (!m->has_ir_version || m->ir_version == 0)
        return ctx_err(c, AMPC_E_PARSE, "not an ONNX model: ir_version is missing (is this a .onnx "
                       "file?)");
    if (m->ir_version < AMPC_ONNX_IR_OLDEST)
        return ctx_err(c, AMPC_E_UNSUPPORTED, "the model's ir_version %lld is too old: ampc reads "
                       "IR versions %d to %d (older models have no opset_import; re-export it)",
                       (long long)m->ir_version, AMPC_ONNX_IR_OLDEST, AMPC_ONNX_IR_NEWEST);
    if (m->ir_version > AMPC_ONNX_IR_NEWEST)
        return ctx_err(c, AMPC_E_UNSUPPORTED, "the model's ir_version %lld is newer than ampc "
                       "knows: it reads IR versions %d to %d", (long long)m->ir_version,
                       AMPC_ONNX_IR_OLDEST, AMPC_ONNX_IR_NEWEST);
    if (!m->graph) return ctx_err(c, AMPC_E_PARSE, "not an ONNX model: it has no graph");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *a = m->opset_import[i];
        if (!a) continue;
        for (size_t j = 0; j < i; j++)
            if (m->opset_import[j] && same_domain(m->opset_import[j]->domain, a->domain))
                ctx_err(c, AMPC_E_PARSE, "opset_import lists domain '%s' twice (versions %lld "
                        "and %lld)", str_or(a->domain, ""), (long long)m->opset_import[j]->version,
                        (long long)a->version);
        if (a->version < 1)
            ctx_err(c, AMPC_E_PARSE, "opset_import gives domain '%s' version %lld; versions "
                    "start at 1", str_or(a->domain, ""), (long long)a->version);
    }
    int64_t v = domain_version(m->opset_import, m->n_opset_import, "");
    c->opset = v > 0 ? v : 0;
    if (v > AMPC_ONNX_OPSET_NEWEST)
        ctx_err(c, AMPC_E_UNSUPPORTED, "the model imports opset %lld of the default domain, newer "
                "than ampc knows (%d): ops may have changed meaning there", (long long)v,
                AMPC_ONNX_OPSET_NEWEST);
    return c->first;
}

/* ---- 2. coverage ---------------------------------------------------------------------------- */

/* Why a Constant node cannot be imported (an unsupported value attribute); "" when it can. */
static void constant_support(const attr_ref *r, int32_t n, ampc_strbuf *why) {
    int32_t values = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *nm = r[i].name;
        if (!strcmp(nm, "value_string") || !strcmp(nm, "value_strings")) {
            ampc_sb_printf(why, "a Constant with attribute '%s' makes a string tensor, which ampc "
                           "does not support", nm);
            return;
        }
        if (!strcmp(nm, "sparse_value")) {
            ampc_sb_puts(why, "a Constant with attribute 'sparse_value' makes a sparse tensor, "
                         "which ampc does not support");
            return;
        }
        values += !strcmp(nm, "value") || !strcmp(nm, "value_float") ||
                  !strcmp(nm, "value_floats") || !strcmp(nm, "value_int") ||
                  !strcmp(nm, "value_ints");
    }
    if (values != 1)
        ampc_sb_printf(why, "a Constant needs exactly one value attribute (value, value_float(s), "
                       "value_int(s)), got %d", values);
}

/* Appends one line to `lines` for a node ampc cannot import (function bodies: one per body
 * node), counting them in *count. */
static void cover_node(ampc_onnx_ctx *c, const Onnx__NodeProto *n, int64_t opset,
                       const attr_env *env, const char *where, ampc_strbuf *lines,
                       int32_t *count, int depth) {
    ampc_strbuf why = {0};
    fn_def *f;
    ampc_opcode op;
    attr_ref *body_refs = NULL; /* the attributes of a node with subgraphs */
    int32_t n_body_refs = 0;
    if (!n->op_type || !*n->op_type) {
        ampc_sb_puts(&why, "the node has no op_type");
    } else if ((f = find_fn(c, n))) {
        if (f->active || depth >= MAX_FN_DEPTH) {
            ampc_sb_printf(&why, "function '%s' calls itself (directly or through others)",
                           f->proto->name);
        } else {
            attr_ref *r;
            int32_t nr = resolve_attrs(n, env, &r);
            attr_env inner = {r, nr, f->defaults, f->n_defaults};
            f->active = true;
            for (size_t j = 0; j < f->proto->n_node; j++) {
                if (!f->proto->node[j]) continue;
                ampc_strbuf w = {0};
                node_where(&w, where, j, f->proto->node[j]);
                cover_node(c, f->proto->node[j], f->opset, &inner, w.data, lines, count, depth + 1);
                ampc_sb_free(&w);
            }
            f->active = false;
            free(r);
        }
    } else if (!is_default_domain(n->domain)) {
        if (domain_version(c->m->opset_import, c->m->n_opset_import, n->domain) < 0)
            ampc_sb_printf(&why, "op not in ampc's op table (and domain '%s' is not in the model's "
                           "opset_import)", n->domain);
        else
            ampc_sb_puts(&why, "op not in ampc's op table (ampc implements the default ONNX "
                         "domain)");
    } else if (opset <= 0) {
        ampc_sb_puts(&why, "the model does not import the default ONNX domain (opset_import)");
    } else if (ampc_onnx_op_lookup(n->op_type, opset, &op, &why)) {
        attr_ref *r;
        int32_t nr = resolve_attrs(n, env, &r);
        for (size_t i = 0; i < n->n_attribute && !why.len; i++) {
            const Onnx__AttributeProto *a = n->attribute[i];
            if (a && a->name && a->ref_attr_name && *a->ref_attr_name && !env)
                ampc_sb_printf(&why, "attribute '%s' refers to '%s', which only a function body "
                               "may do", a->name, a->ref_attr_name);
            else if (!a || !a->name)
                ampc_sb_puts(&why, "an attribute has no name");
        }
        for (int32_t i = 0; i < nr && !why.len; i++) attr_kind_ok(r[i].a, &why);
        bool bodies = ampc_ir_op_has_bodies(op);
        for (int32_t i = 0; i < nr && !why.len; i++) {
            if (r[i].a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH && !bodies)
                ampc_sb_printf(&why, "attribute '%s' is a graph, which ampc does not take for %s",
                               r[i].name, n->op_type);
            else if (bodies && !strcmp(r[i].name, AMPC_ATTR_NUM_CAPTURES))
                ampc_sb_printf(&why, "attribute '%s' is ampc's own (the importer derives it from "
                               "the subgraphs); a model may not set it", r[i].name);
        }
        if (!why.len && op == AMPC_OP_CONSTANT) constant_support(r, nr, &why);
        if (!why.len) ampc_onnx_node_supported(n, op, opset, &why);
        if (bodies) body_refs = r, n_body_refs = nr;
        else free(r);
    }
    if (why.len && ++*count <= MAX_ERROR_LINES)
        ampc_sb_printf(lines, "\n  %s: %s", where, why.data);
    ampc_sb_free(&why);
    /* Then the nodes of its subgraphs, each with its path: "node 3 'l' (Loop) > body node 1". */
    for (int32_t i = 0; i < n_body_refs; i++) {
        const Onnx__AttributeProto *a = body_refs[i].a;
        const Onnx__GraphProto *b = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ? a->g
                                                                                          : NULL;
        for (size_t j = 0; b && j < b->n_node; j++) {
            if (!b->node[j]) continue;
            ampc_strbuf w = {0};
            body_node_where(&w, where, body_refs[i].name, j, b->node[j]);
            cover_node(c, b->node[j], opset, env, w.data, lines, count, depth);
            ampc_sb_free(&w);
        }
    }
    free(body_refs);
}

/* Runs cover_node over the main graph; returns the number of unsupported nodes. */
static int32_t coverage(ampc_onnx_ctx *c, ampc_strbuf *lines) {
    int32_t count = 0;
    const Onnx__GraphProto *gp = c->m->graph;
    for (size_t i = 0; i < gp->n_node; i++) {
        if (!gp->node[i]) continue;
        ampc_strbuf w = {0};
        node_where(&w, NULL, i, gp->node[i]);
        cover_node(c, gp->node[i], c->opset, NULL, w.data, lines, &count, 0);
        ampc_sb_free(&w);
    }
    if (count > MAX_ERROR_LINES)
        ampc_sb_printf(lines, "\n  ... and %d more", count - MAX_ERROR_LINES);
    return count;
}

/* ---- 3. structure --------------------------------------------------------------------------- */

/* Adds to `out` the free names of subgraph b: the names its nodes (and the subgraphs of those,
 * at any depth) read or it outputs without defining them itself, i.e. the outer values it uses. */
static void body_free_names(const Onnx__GraphProto *b, ampc_strmap *out) {
    ampc_strmap local = {0}, inner = {0};
    for (size_t i = 0; i < b->n_input; i++)
        if (b->input[i] && b->input[i]->name) ampc_strmap_put(&local, b->input[i]->name, &local);
    for (size_t i = 0; i < b->n_initializer; i++)
        if (b->initializer[i] && b->initializer[i]->name)
            ampc_strmap_put(&local, b->initializer[i]->name, &local);
    for (size_t k = 0; k < b->n_node; k++)
        for (size_t j = 0; b->node[k] && j < b->node[k]->n_output; j++)
            if (b->node[k]->output[j] && *b->node[k]->output[j])
                ampc_strmap_put(&local, b->node[k]->output[j], &local);
    for (size_t k = 0; k < b->n_node; k++) {
        const Onnx__NodeProto *n = b->node[k];
        if (!n) continue;
        for (size_t j = 0; j < n->n_input; j++)
            if (n->input[j] && *n->input[j]) ampc_strmap_put(&inner, n->input[j], &inner);
        for (size_t i = 0; i < n->n_attribute; i++)
            if (n->attribute[i] && n->attribute[i]->type ==
                                       ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH &&
                n->attribute[i]->g)
                body_free_names(n->attribute[i]->g, &inner);
    }
    for (size_t j = 0; j < b->n_output; j++)
        if (b->output[j] && b->output[j]->name && *b->output[j]->name)
            ampc_strmap_put(&inner, b->output[j]->name, &inner);
    for (size_t i = 0; i < inner.cap; i++)
        if (inner.keys[i] && !ampc_strmap_get(&local, inner.keys[i]))
            ampc_strmap_put(out, inner.keys[i], (void *)1);
    ampc_strmap_free(&local);
    ampc_strmap_free(&inner);
}

/* Adds to `names` the outer values the subgraphs of node n use (see body_free_names). */
static void body_refs(const Onnx__NodeProto *n, ampc_strmap *names) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH && a->g)
            body_free_names(a->g, names);
    }
}

/* Who defines a name: a graph input, an initializer, or node k (stored as k + 3). */
enum { DEF_INPUT = 1, DEF_INIT = 2 };

/* Describes a definition for messages: "a graph input", "node 3 'x' (Relu)". */
static void def_desc(const Onnx__GraphProto *gp, intptr_t d, ampc_strbuf *sb) {
    if (d == DEF_INPUT) ampc_sb_puts(sb, "a graph input");
    else if (d == DEF_INIT) ampc_sb_puts(sb, "an initializer");
    else node_where(sb, NULL, (size_t)(d - 3), gp->node[d - 3]);
}

/* Checks names and order; on success *order holds the node indices in a topological order. */
static ampc_status check_structure(ampc_onnx_ctx *c, int32_t **order_out) {
    const Onnx__GraphProto *gp = c->m->graph;
    const int32_t nn = (int32_t)gp->n_node;
    ampc_strmap defs = {0};
    ampc_strbuf w = {0}, o = {0};
    *order_out = NULL;

    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || !*t->name) {
            ctx_err(c, AMPC_E_PARSE, "initializer %zu has no name", i);
            continue;
        }
        if (ampc_strmap_get(&defs, t->name))
            ctx_err(c, AMPC_E_VERIFY, "initializer '%s' is defined twice", t->name);
        ampc_strmap_put(&defs, t->name, (void *)(intptr_t)DEF_INIT);
    }
    ampc_strmap inputs = {0};
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        if (!v || !v->name || !*v->name) {
            ctx_err(c, AMPC_E_PARSE, "graph input %zu has no name", i);
            continue;
        }
        if (ampc_strmap_get(&inputs, v->name))
            ctx_err(c, AMPC_E_VERIFY, "graph input '%s' is listed twice", v->name);
        ampc_strmap_put(&inputs, v->name, (void *)1);
        if (!ampc_strmap_get(&defs, v->name))
            ampc_strmap_put(&defs, v->name, (void *)(intptr_t)DEF_INPUT);
    }
    ampc_strmap_free(&inputs);
    for (int32_t k = 0; k < nn; k++) {
        const Onnx__NodeProto *n = gp->node[k];
        if (!n) continue;
        for (size_t j = 0; j < n->n_output; j++) {
            const char *nm = n->output[j];
            if (!nm || !*nm) continue;
            intptr_t d = (intptr_t)ampc_strmap_get(&defs, nm);
            if (d) {
                w.len = o.len = 0;
                node_where(&w, NULL, (size_t)k, n);
                def_desc(gp, d, &o);
                ctx_err(c, AMPC_E_VERIFY, "%s: output %zu '%s' is already defined by %s (ONNX "
                        "values are assigned once)", w.data, j, nm, o.data);
                continue;
            }
            ampc_strmap_put(&defs, nm, (void *)(intptr_t)(k + 3));
        }
    }
    for (int32_t k = 0; k < nn; k++) {
        const Onnx__NodeProto *n = gp->node[k];
        if (!n) {
            ctx_err(c, AMPC_E_PARSE, "node %d is empty", k);
            continue;
        }
        for (size_t j = 0; j < n->n_input; j++) {
            const char *nm = n->input[j];
            if (!nm || !*nm || ampc_strmap_get(&defs, nm)) continue;
            w.len = 0;
            node_where(&w, NULL, (size_t)k, n);
            ctx_err(c, AMPC_E_VERIFY, "%s: input %zu '%s' is not produced by any node, nor a "
                    "graph input or an initializer", w.data, j, nm);
        }
    }
    ampc_strmap outs = {0};
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *v = gp->output[i];
        if (!v || !v->name || !*v->name) {
            ctx_err(c, AMPC_E_PARSE, "graph output %zu has no name", i);
            continue;
        }
        if (ampc_strmap_get(&outs, v->name))
            ctx_err(c, AMPC_E_VERIFY, "graph output '%s' is listed twice (duplicate output names)",
                    v->name);
        ampc_strmap_put(&outs, v->name, (void *)1);
        if (!ampc_strmap_get(&defs, v->name))
            ctx_err(c, AMPC_E_VERIFY, "graph output '%s' is not produced by any node, nor a graph "
                    "input or an initializer", v->name);
    }
    ampc_strmap_free(&outs);
    if (!gp->n_output) ctx_err(c, AMPC_E_VERIFY, "the graph has no outputs");
    if (c->first != AMPC_OK) goto done;

    /* Order: Kahn's algorithm over node-to-node edges, seeded and fed in index order, so a
     * sorted graph keeps its order. */
    int32_t *indeg = ampc_xcalloc((size_t)nn + 1, sizeof *indeg);
    int32_t *order = ampc_xmalloc(((size_t)nn + 1) * sizeof *order);
    int32_t *first = ampc_xmalloc(((size_t)nn + 1) * sizeof *first);
    size_t n_edges = 0;
    ampc_strmap *refs = ampc_xcalloc((size_t)nn + 1, sizeof *refs); /* what subgraphs use */
    for (int32_t k = 0; k < nn; k++) {
        body_refs(gp->node[k], &refs[k]);
        n_edges += gp->node[k]->n_input + refs[k].len;
    }
    int32_t *next = ampc_xmalloc((n_edges + 1) * sizeof *next),
            *dst = ampc_xmalloc((n_edges + 1) * sizeof *dst);
    for (int32_t k = 0; k < nn; k++) first[k] = -1;
    int32_t e = 0;
    bool sorted = true;
    for (int32_t k = 0; k < nn; k++) {
        const Onnx__NodeProto *n = gp->node[k];
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || !*n->input[j]) continue;
            intptr_t d = (intptr_t)ampc_strmap_get(&defs, n->input[j]);
            if (d < 3) continue;
            int32_t p = (int32_t)(d - 3);
            sorted &= p < k;
            dst[e] = k, next[e] = first[p], first[p] = e++;
            indeg[k]++;
        }
        for (size_t j = 0; j < refs[k].cap; j++) { /* implicit inputs: outer values a body uses */
            intptr_t d = refs[k].keys[j] ? (intptr_t)ampc_strmap_get(&defs, refs[k].keys[j]) : 0;
            if (d < 3 || d - 3 == k) continue;
            int32_t p = (int32_t)(d - 3);
            sorted &= p < k;
            dst[e] = k, next[e] = first[p], first[p] = e++;
            indeg[k]++;
        }
        ampc_strmap_free(&refs[k]);
    }
    free(refs);
    int32_t head = 0, tail = 0;
    if (sorted) {
        for (int32_t k = 0; k < nn; k++) order[tail++] = k;
    } else { /* FIFO queue seeded in index order: deterministic, and close to the original */
        for (int32_t k = 0; k < nn; k++)
            if (indeg[k] == 0) order[tail++] = k;
        while (head < tail) {
            int32_t k = order[head++];
            for (int32_t x = first[k]; x >= 0; x = next[x])
                if (--indeg[dst[x]] == 0) order[tail++] = dst[x];
        }
        if (tail < nn) {
            ampc_strbuf lines = {0};
            int32_t shown = 0;
            for (int32_t k = 0; k < nn && shown < 8; k++) {
                if (indeg[k] == 0) continue;
                const Onnx__NodeProto *n = gp->node[k];
                w.len = 0;
                node_where(&w, NULL, (size_t)k, n);
                for (size_t j = 0; j < n->n_input; j++) {
                    intptr_t d = n->input[j] && *n->input[j]
                                     ? (intptr_t)ampc_strmap_get(&defs, n->input[j]) : 0;
                    if (d >= 3 && indeg[d - 3] != 0) {
                        o.len = 0;
                        def_desc(gp, d, &o);
                        ampc_sb_printf(&lines, "\n  %s needs '%s' from %s", w.data, n->input[j],
                                       o.data);
                        break;
                    }
                }
                shown++;
            }
            ctx_err(c, AMPC_E_VERIFY, "the graph has a cycle: %d nodes can never run, each waiting "
                    "on another:%s", nn - tail, lines.data ? lines.data : "");
            ampc_sb_free(&lines);
        }
    }
    free(indeg);
    free(first);
    free(next);
    free(dst);
    if (c->first == AMPC_OK) *order_out = order;
    else free(order);
done:
    ampc_strmap_free(&defs);
    ampc_sb_free(&w);
    ampc_sb_free(&o);
    return c->first;
}

/* ---- 4. graph inputs and symbolic dims ------------------------------------------------------ */

/* The declared tensor type of a value info; NULL (with a message) when it is not a tensor. */
static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__ValueInfoProto *v) {
    return v->type && v->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
               ? v->type->tensor_type : NULL;
}

/* Symbol -> value bindings, with where each came from for messages. */
typedef struct symtab {
    ampc_strmap idx;     /* symbol -> index + 1 */
    int64_t *val;
    const char **from;
    int32_t n, cap;
} symtab;

/* The value bound to symbol s (and which input bound it); false when unbound. */
static bool sym_get(const symtab *t, const char *s, int64_t *v, const char **from) {
    intptr_t i = (intptr_t)ampc_strmap_get(&t->idx, s);
    if (!i) return false;
    *v = t->val[i - 1];
    if (from) *from = t->from[i - 1];
    return true;
}

/* Binds symbol s to v; `from` names the input (or option) that fixed it. */
static void sym_set(symtab *t, const char *s, int64_t v, const char *from) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->val = ampc_xrealloc(t->val, (size_t)t->cap * sizeof *t->val);
        t->from = ampc_xrealloc(t->from, (size_t)t->cap * sizeof *t->from);
    }
    t->val[t->n] = v;
    t->from[t->n] = from;
    ampc_strmap_put(&t->idx, s, (void *)(intptr_t)++t->n);
}

static void sym_free(symtab *t) {
    ampc_strmap_free(&t->idx);
    free(t->val);
    free(t->from);
}

/* The declared dims as text ("[N,3,224,224]") for messages. */
static void decl_dims(const Onnx__TensorShapeProto *sh, ampc_strbuf *sb) {
    ampc_sb_putc(sb, '[');
    for (size_t d = 0; sh && d < sh->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[d];
        if (d) ampc_sb_putc(sb, ',');
        if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            ampc_sb_printf(sb, "%lld", (long long)dm->dim_value);
        else if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 dm->dim_param && *dm->dim_param)
            ampc_sb_puts(sb, dm->dim_param);
        else
            ampc_sb_putc(sb, '?');
    }
    ampc_sb_putc(sb, ']');
}

/* Builds the name indexes of the context (see struct ampc_onnx_ctx); the first entry of a
 * repeated name wins, as the linear searches they replace did. */
static void index_names(ampc_onnx_ctx *c) {
    if (c->index_done) return;
    c->index_done = true;
    const Onnx__GraphProto *gp = c->m->graph;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (t && t->name && !ampc_strmap_get(&c->inits, t->name))
            ampc_strmap_put(&c->inits, t->name, (void *)t);
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *nm = gp->input[i] ? gp->input[i]->name : NULL;
        if (nm) ampc_strmap_put(&c->inputs, nm, (void *)1);
        if (!nm || ampc_strmap_get(&c->inits, nm)) continue;
        if (!ampc_strmap_get(&c->free_inputs, nm))
            ampc_strmap_put(&c->free_inputs, nm, (void *)(uintptr_t)(c->n_free_inputs + 1));
        c->n_free_inputs++;
    }
    for (int32_t i = 0; i < c->opt.n_constants; i++) {
        const char *nm = c->opt.constants[i].name;
        if (nm && *nm && !ampc_strmap_get(&c->named_bindings, nm))
            ampc_strmap_put(&c->named_bindings, nm, (void *)&c->opt.constants[i]);
    }
    for (int32_t i = 0; i < c->opt.n_shapes; i++) {
        const char *nm = c->opt.shapes[i].name;
        if (nm && !ampc_strmap_get(&c->named_shapes, nm))
            ampc_strmap_put(&c->named_shapes, nm, (void *)&c->opt.shapes[i]);
    }
}

/* Whether a main-graph input has an initializer (which makes it a constant). */
static bool is_initializer(ampc_onnx_ctx *c, const char *name) {
    index_names(c);
    return ampc_strmap_get(&c->inits, name) != NULL;
}

static bool unnamed(const ampc_input_binding *b) { return !b->name || !*b->name; }

/* The caller's binding for an input, named or by position (see ampc_input_binding), or NULL. */
static const ampc_input_binding *any_binding(ampc_onnx_ctx *c, const char *name) {
    index_names(c);
    const ampc_input_binding *b = ampc_strmap_get(&c->named_bindings, name);
    if (b) return b;
    size_t k = (size_t)(uintptr_t)ampc_strmap_get(&c->free_inputs, name);
    if (!k--) return NULL;
    return k < (size_t)c->opt.n_constants && unnamed(&c->opt.constants[k]) ? &c->opt.constants[k]
                                                                           : NULL;
}

/* For constants_if_needed: marks every name whose value must be known at compile time. A node
 * input at a position the op table marks compile-time is needed; so is the trip count and the
 * initial condition of a Loop with scan outputs (their row count is the trip count); every input
 * of a node whose output is needed is needed too, and so are the outputs of its subgraphs. One
 * backward sweep over the nodes in their given order (the ONNX order is topological; an
 * out-of-order model is sorted later and may bind less); a node's subgraphs are swept when the
 * node is reached, before the nodes that compute the outer values they use. Names are matched as
 * strings across scopes (a shadowing name inside a subgraph may bind an input needlessly). */
static void needed_sweep(ampc_onnx_ctx *c, Onnx__NodeProto *const *nodes, size_t nn) {
    for (size_t k = nn; k-- > 0;) {
        const Onnx__NodeProto *n = nodes[k];
        if (!n || !n->op_type) continue;
        ampc_opcode op;
        ampc_strbuf why = {0};
        bool known_op = (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx")) &&
                        ampc_onnx_op_lookup(n->op_type, c->opset, &op, &why);
        ampc_sb_free(&why);
        bool out_needed = false;
        for (size_t j = 0; j < n->n_output; j++)
            out_needed |= n->output[j] && ampc_strmap_get(&c->needed, n->output[j]) != NULL;
        bool loop_rows = known_op && op == AMPC_OP_LOOP && n->n_input >= 2 &&
                         n->n_output > n->n_input - 2; /* a Loop with scan outputs */
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || !*n->input[j]) continue;
            bool cin = known_op && j < 32 && (ampc_op_get(op)->const_inputs & (1u << j));
            if (out_needed || cin || (loop_rows && j < 2))
                ampc_strmap_put(&c->needed, n->input[j], (void *)1);
        }
        for (size_t i = 0; known_op && ampc_ir_op_has_bodies(op) && i < n->n_attribute; i++) {
            const Onnx__AttributeProto *a = n->attribute[i];
            if (!a || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !a->g) continue;
            for (size_t j = 0; out_needed && j < a->g->n_output; j++)
                if (a->g->output[j] && a->g->output[j]->name)
                    ampc_strmap_put(&c->needed, a->g->output[j]->name, (void *)1);
            needed_sweep(c, a->g->node, a->g->n_node);
        }
    }
}

static void compute_needed(ampc_onnx_ctx *c) {
    c->needed_done = true;
    needed_sweep(c, c->m->graph->node, c->m->graph->n_node);
}

/* The binding that makes an input a constant, or NULL (with constants_if_needed, only when the
 * input's value must be known). */
static const ampc_input_binding *binding(ampc_onnx_ctx *c, const char *name) {
    const ampc_input_binding *b = any_binding(c, name);
    if (!b || !c->opt.constants_if_needed) return b;
    if (!c->needed_done) compute_needed(c);
    return ampc_strmap_get(&c->needed, name) ? b : NULL;
}

/* The caller's shape for an input: from options.shapes or a binding (bound or not). */
static const ampc_shape *given_shape(ampc_onnx_ctx *c, const char *name) {
    index_names(c);
    const ampc_input_shape *sh = ampc_strmap_get(&c->named_shapes, name);
    if (sh) return &sh->shape;
    const ampc_input_binding *b = any_binding(c, name);
    return b ? &b->value.shape : NULL;
}

/* Checks the options against the model's inputs. */
static ampc_status check_options(ampc_onnx_ctx *c) {
    const Onnx__GraphProto *gp = c->m->graph;
    ampc_strbuf list = {0};
    index_names(c);
    for (size_t i = 0, k = 0; i < gp->n_input; i++)
        if (!is_initializer(c, gp->input[i]->name))
            ampc_sb_printf(&list, "%s'%s'", k++ ? ", " : "", gp->input[i]->name);
    if (c->opt.max_batch < 0)
        ctx_err(c, AMPC_E_INVALID_ARG, "--max-batch %lld: the bound must be positive",
                (long long)c->opt.max_batch);
    if (c->opt.max_loop_iterations < 0)
        ctx_err(c, AMPC_E_INVALID_ARG, "--max-loop-iterations %lld: the bound must be positive",
                (long long)c->opt.max_loop_iterations);
    for (int32_t pass = 0; pass < 2; pass++) {
        int32_t n = pass ? c->opt.n_constants : c->opt.n_shapes;
        const char *what = pass ? "constant binding" : "--shape";
        for (int32_t i = 0; i < n; i++) {
            const char *name = pass ? c->opt.constants[i].name : c->opt.shapes[i].name;
            const ampc_shape *s = pass ? &c->opt.constants[i].value.shape : &c->opt.shapes[i].shape;
            if (pass && (!name || !*name)) { /* positional: the runtime input at index i */
                size_t k = c->n_free_inputs;
                if ((size_t)i >= k)
                    ctx_err(c, AMPC_E_INVALID_ARG, "constant binding %d has no name and the model "
                            "has only %zu inputs without an initializer", i, k);
                continue;
            }
            if (!name) {
                ctx_err(c, AMPC_E_INVALID_ARG, "%s %d has no input name", what, i);
                continue;
            }
            if (!ampc_strmap_get(&c->inputs, name)) {
                ctx_err(c, AMPC_E_INVALID_ARG, "%s names '%s', which is not a graph input (the "
                        "inputs are %s)", what, name, list.data ? list.data : "none");
                continue;
            }
            if (is_initializer(c, name))
                ctx_err(c, AMPC_E_INVALID_ARG, "%s names '%s', which has an initializer: it is a "
                        "constant of the model, not an input", what, name);
            const void *first = pass ? ampc_strmap_get(&c->named_bindings, name)
                                     : ampc_strmap_get(&c->named_shapes, name);
            if (first != (pass ? (const void *)&c->opt.constants[i] : (const void *)&c->opt.shapes[i]))
                ctx_err(c, AMPC_E_INVALID_ARG, "%s gives input '%s' twice", what, name);
            if (pass && ampc_strmap_get(&c->named_shapes, name))
                ctx_err(c, AMPC_E_INVALID_ARG, "input '%s' has both a --shape and a "
                        "constant binding", name);
            bool bad = s->rank < 0 || s->rank > AMPC_MAX_RANK;
            for (int32_t d = 0; !bad && d < s->rank; d++) bad |= s->dims[d] < 0;
            if (bad) ctx_err(c, AMPC_E_INVALID_ARG, "%s for input '%s': the shape has a rank "
                             "outside 0..%d or a negative dim", what, name, AMPC_MAX_RANK);
            if (pass) {
                const ampc_tensor *t = &c->opt.constants[i].value;
                if (t->dtype <= AMPC_DTYPE_UNDEFINED || t->dtype >= AMPC_DTYPE_COUNT)
                    ctx_err(c, AMPC_E_INVALID_ARG, "constant binding for input '%s' has an "
                            "invalid dtype %d", name, (int)t->dtype);
                else if (!bad && !t->data && ampc_shape_numel(&t->shape))
                    ctx_err(c, AMPC_E_INVALID_ARG, "constant binding for input '%s' has no data",
                            name);
            }
        }
    }
    ampc_sb_free(&list);
    return c->first;
}

/* Resolves every non-constant graph input's dtype and shape into dts/shapes (indexed like
 * graph.input); all problems are reported together. */
static ampc_status resolve_inputs(ampc_onnx_ctx *c, ampc_dtype *dts, ampc_shape *shapes) {
    const Onnx__GraphProto *gp = c->m->graph;
    symtab syms = {0};
    char nb[32];
    ampc_strbuf dd = {0};

    /* Pass 1: what the caller gives binds the symbols it covers. */
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        if (is_initializer(c, v->name)) continue;
        const Onnx__TypeProto__Tensor *tt = tensor_type(v);
        const ampc_shape *s = given_shape(c, v->name);
        if (!tt) {
            ctx_err(c, AMPC_E_UNSUPPORTED, "graph input '%s' %s; ampc imports tensor inputs only",
                    v->name,
                    v->type ? "is not a tensor (a sequence, map or optional)" : "has no type");
            continue;
        }
        dts[i] = ampc_dtype_from_onnx(tt->has_elem_type ? tt->elem_type : 0);
        if (dts[i] == AMPC_DTYPE_UNDEFINED) {
            ctx_err(c, AMPC_E_UNSUPPORTED, "graph input '%s' has element type %s, which ampc does "
                    "not support", v->name,
                    ampc_onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0, nb, sizeof nb));
            continue;
        }
        const ampc_input_binding *b = binding(c, v->name);
        if (b && b->value.dtype != dts[i])
            ctx_err(c, AMPC_E_DTYPE,
                    "constant binding for input '%s' is %s, but the model "
                    "declares %s",
                    v->name, ampc_dtype_name(b->value.dtype), ampc_dtype_name(dts[i]));
        if (!s) continue;
        const Onnx__TensorShapeProto *sh = tt->shape;
        shapes[i] = *s;
        if (!sh) continue;
        dd.len = 0;
        decl_dims(sh, &dd);
        if ((int32_t)sh->n_dim != s->rank) {
            ctx_err(c, AMPC_E_SHAPE, "the shape given for input '%s' has rank %d, but the model "
                    "declares rank %zu %s", v->name, s->rank, sh->n_dim, dd.data);
            continue;
        }
        for (int32_t d = 0; d < s->rank; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = sh->dim[d];
            int64_t had;
            const char *from;
            if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                dm->dim_value != s->dims[d])
                ctx_err(c, AMPC_E_SHAPE, "the shape given for input '%s' has dim %d = %lld, but "
                        "the model fixes it to %lld %s", v->name, d, (long long)s->dims[d],
                        (long long)dm->dim_value, dd.data);
            else if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                     dm->dim_param && *dm->dim_param) {
                if (!sym_get(&syms, dm->dim_param, &had, &from))
                    sym_set(&syms, dm->dim_param, s->dims[d], v->name);
                else if (had != s->dims[d])
                    ctx_err(c, AMPC_E_SHAPE, "symbol '%s' is %lld in the shape given for input "
                            "'%s' but %lld in the one given for '%s'", dm->dim_param,
                            (long long)s->dims[d], v->name, (long long)had, from);
            }
        }
    }
    /* Pass 2: --max-batch binds the symbols of unbound batch dims (dim 0). */
    for (size_t i = 0; i < gp->n_input && c->opt.max_batch > 0; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        const Onnx__TypeProto__Tensor *tt = tensor_type(v);
        if (is_initializer(c, v->name) || given_shape(c, v->name) || !tt || !tt->shape ||
            !tt->shape->n_dim)
            continue;
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[0];
        int64_t had;
        if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
            dm->dim_param && *dm->dim_param && !sym_get(&syms, dm->dim_param, &had, NULL))
            sym_set(&syms, dm->dim_param, c->opt.max_batch, "--max-batch");
    }
    /* Pass 3: every other input's dims. */
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *v = gp->input[i];
        const Onnx__TypeProto__Tensor *tt = tensor_type(v);
        if (is_initializer(c, v->name) || given_shape(c, v->name) || !tt ||
            dts[i] == AMPC_DTYPE_UNDEFINED)
            continue;
        const Onnx__TensorShapeProto *sh = tt->shape;
        if (!sh) {
            ctx_err(c, AMPC_E_SHAPE, "graph input '%s' has no shape in the model (not even a "
                    "rank): give it with --shape %s=AxBxC", v->name, v->name);
            continue;
        }
        if (sh->n_dim > AMPC_MAX_RANK) {
            ctx_err(c, AMPC_E_UNSUPPORTED, "graph input '%s' has rank %zu; ampc supports ranks up "
                    "to %d", v->name, sh->n_dim, AMPC_MAX_RANK);
            continue;
        }
        dd.len = 0;
        decl_dims(sh, &dd);
        shapes[i].rank = (int32_t)sh->n_dim;
        for (int32_t d = 0; d < shapes[i].rank; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = sh->dim[d];
            int64_t val;
            if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                if (dm->dim_value < 0)
                    ctx_err(c, AMPC_E_SHAPE, "graph input '%s' dim %d is %lld; dims must be >= 0",
                            v->name, d, (long long)dm->dim_value);
                shapes[i].dims[d] = dm->dim_value;
            } else if (dm &&
                       dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                       dm->dim_param && *dm->dim_param) {
                if (sym_get(&syms, dm->dim_param, &val, NULL)) shapes[i].dims[d] = val;
                else
                    ctx_err(c, AMPC_E_SHAPE, "graph input '%s' dim %d is the symbol '%s', which "
                            "has no value: give the input's shape with --shape %s=AxBxC (declared "
                            "%s), or bound a batch dim 0 with --max-batch N", v->name, d,
                            dm->dim_param, v->name, dd.data);
            } else if (d == 0 && c->opt.max_batch > 0) {
                shapes[i].dims[d] = c->opt.max_batch;
            } else {
                ctx_err(c, AMPC_E_SHAPE, "graph input '%s' dim %d has no size (neither a value "
                        "nor a symbol): give the input's shape with --shape %s=AxBxC (declared "
                        "%s), or bound a batch dim 0 with --max-batch N", v->name, d, v->name,
                        dd.data);
            }
        }
        int64_t numel = 1, bytes;
        bool ok = true;
        for (int32_t d = 0; d < shapes[i].rank; d++)
            ok &= shapes[i].dims[d] < 0 || ampc_mul_ok(numel, shapes[i].dims[d], &numel);
        if (!ok || !ampc_mul_ok(numel, (int64_t)ampc_dtype_size(dts[i]), &bytes))
            ctx_err(c, AMPC_E_OVERFLOW, "graph input '%s' has dims %s whose size overflows 64 "
                    "bits", v->name, dd.data);
    }
    sym_free(&syms);
    ampc_sb_free(&dd);
    return c->first;
}

/* ---- 5. build ------------------------------------------------------------------------------- */

/* A constant of the graph from a TensorProto, named `name`. */
static ampc_value *const_from_proto(ampc_onnx_ctx *c, const Onnx__TensorProto *t,
                                    const char *name, const char *what) {
    ampc_strbuf err = {0};
    ampc_dtype dt;
    ampc_shape s;
    ampc_value *v = NULL;
    ampc_status st = ampc_onnx_tensor_type(t, what, &dt, &s, &err);
    if (st == AMPC_OK) st = ampc_onnx_tensor_data(t, what, c->base_dir, dt, &s, NULL, &err);
    if (st == AMPC_OK) {
        v = ampc_ir_const_new(c->g, name, dt, &s, NULL);
        if (!v) {
            ampc_diag_clear(&c->g->diag);
            ctx_err(c, AMPC_E_OOM, "%s: out of host memory (%zu bytes)", what,
                    (size_t)ampc_shape_numel(&s) * ampc_dtype_size(dt));
            ampc_sb_free(&err);
            return NULL;
        }
        st = ampc_onnx_tensor_data(t, what, c->base_dir, dt, &s, v->data, &err);
    }
    if (st != AMPC_OK) {
        ctx_err(c, st, "%s", err.data);
        v = NULL;
    }
    ampc_sb_free(&err);
    return v;
}

/* Imports one node in scope sc: a function call is expanded, a Constant becomes a constant, any
 * other op goes through opset.c onto its table row. Its outputs are bound in sc (poison when it
 * fails, after the error is recorded). */
static void import_node(ampc_onnx_ctx *c, const Onnx__NodeProto *n, scope *sc, int64_t opset,
                        const attr_env *env, const char *where, int depth);

/* The IR name for output j of a node in scope sc: the model's name in the main graph; in a
 * function body the call site's name for the function's outputs, a fresh one otherwise. */
static const char *out_name(ampc_onnx_ctx *c, const scope *sc, const Onnx__NodeProto *n, size_t j) {
    const char *nm = n->output[j];
    if (!sc->in_fn && !sc->inline_up) return nm && *nm ? nm : NULL;
    if (nm && *nm) {
        const char *call = ampc_strmap_get(&sc->outs, nm);
        if (call) return call;
    }
    ampc_strbuf h = {0};
    ampc_sb_printf(&h, "%s/%s", sc->prefix, nm && *nm ? nm : "unused");
    const char *s = ampc_onnx_fresh_name(c, h.data);
    ampc_sb_free(&h);
    return s;
}

/* Makes an ONNX name stand for a value in a scope ("" names nothing). */
static void bind(scope *sc, const char *name, ampc_value *v) {
    if (name && *name) ampc_strmap_put(&sc->vals, name, v);
}

/* Binds every named output of a node that could not be built to poison, so later nodes that
 * use them fail silently instead of reporting the same root cause again. */
static void bind_poison(ampc_onnx_ctx *c, scope *sc, const Onnx__NodeProto *n) {
    for (size_t j = 0; j < n->n_output; j++)
        if (n->output[j] && *n->output[j]) bind(sc, n->output[j], poison(c, n->output[j]));
}

/* Constant: the value attribute becomes a constant of the graph. */
static void import_constant(ampc_onnx_ctx *c, const Onnx__NodeProto *n, scope *sc,
                            const attr_env *env, const char *where) {
    attr_ref *r;
    int32_t nr = resolve_attrs(n, env, &r);
    const char *name = n->n_output ? out_name(c, sc, n, 0) : NULL;
    if (!name) name = ampc_onnx_fresh_name(c, "constant");
    ampc_value *v = NULL;
    ampc_strbuf why = {0};
    constant_support(r, nr, &why);
    if (why.len) ctx_err(c, AMPC_E_UNSUPPORTED, "%s: %s", where, why.data);
    for (int32_t i = 0; i < nr && !why.len; i++) {
        const Onnx__AttributeProto *a = r[i].a;
        const char *nm = r[i].name;
        ampc_shape s = {0};
        if (!strcmp(nm, "value") && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR &&
            a->t) {
            ampc_strbuf what = {0};
            ampc_sb_printf(&what, "%s: attribute 'value'", where);
            v = const_from_proto(c, a->t, name, what.data);
            ampc_sb_free(&what);
            if (!v) goto poisoned;
        } else if (!strcmp(nm, "value_float") &&
                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
            v = ampc_ir_const_new(c->g, name, AMPC_DTYPE_F32, &s, &a->f);
        } else if (!strcmp(nm, "value_int") &&
                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            v = ampc_ir_const_new(c->g, name, AMPC_DTYPE_I64, &s, &a->i);
        } else if (!strcmp(nm, "value_floats") &&
                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
            s = (ampc_shape){1, {(int64_t)a->n_floats}};
            v = ampc_ir_const_new(c->g, name, AMPC_DTYPE_F32, &s, a->floats);
        } else if (!strcmp(nm, "value_ints") &&
                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
            s = (ampc_shape){1, {(int64_t)a->n_ints}};
            v = ampc_ir_const_new(c->g, name, AMPC_DTYPE_I64, &s, a->ints);
        } else {
            continue;
        }
        if (!v) {
            ctx_err(c, AMPC_E_OOM, "%s: out of host memory", where);
            goto poisoned;
        }
    }
    if (!v && !why.len) {
        ctx_err(c, AMPC_E_ATTR, "%s: the value attribute has the wrong type", where);
        goto poisoned;
    }
    if (!v) goto poisoned;
    if (n->n_output) bind(sc, n->output[0], v);
    free(r);
    ampc_sb_free(&why);
    return;
poisoned:
    bind_poison(c, sc, n);
    free(r);
    ampc_sb_free(&why);
}

/* ---- subgraphs: the bodies of If, Loop and Scan --------------------------------------------- */

/* Outer constants up to this many elements are copied into a body (positions that must be known
 * at compile time stay known there); larger ones (weights) are captured. */
enum { COPY_CONST_MAX_ELEMS = 1 << 16, MAX_BODIES = 4, MAX_BODY_INPUTS = 64 };

static void scope_free(scope *sc) {
    ampc_strmap_free(&sc->vals);
    ampc_strmap_free(&sc->outs);
    ampc_strmap_free(&sc->local);
    free(sc->cap_outer);
    free(sc->cap_inner);
}

static void add_capture(scope *sc, ampc_value *outer, ampc_value *inner) {
    if (sc->n_cap == sc->cap_cap) {
        sc->cap_cap = sc->cap_cap ? sc->cap_cap * 2 : 8;
        sc->cap_outer = ampc_xrealloc(sc->cap_outer, (size_t)sc->cap_cap * sizeof *sc->cap_outer);
        sc->cap_inner = ampc_xrealloc(sc->cap_inner, (size_t)sc->cap_cap * sizeof *sc->cap_inner);
    }
    sc->cap_outer[sc->n_cap] = outer;
    sc->cap_inner[sc->n_cap++] = inner;
}

/* The value outer value `o` becomes inside subgraph scope sc, under the ONNX name `name`: a copy
 * of a small constant, else a new graph input of the subgraph recorded as a capture. An outer
 * poison stays poison (its cause is reported where it arose). */
static ampc_value *capture(ampc_onnx_ctx *c, scope *sc, const char *name, ampc_value *o) {
    ampc_value *v;
    if (poisoned(o)) {
        v = ampc_ir_poison_new(sc->g, name);
        AMPC_ASSERT(v); /* a few bytes */
        return v;
    }
    if (o->data && !(o->flags & AMPC_VALUE_INPUT) && ampc_ir_numel(o) <= COPY_CONST_MAX_ELEMS) {
        v = ampc_ir_const_new(sc->g, name, o->dtype, &o->shape, o->data);
    } else {
        v = ampc_ir_value_new(sc->g, name, o->dtype, &o->shape);
        if (v) {
            ampc_ir_graph_add_input(sc->g, v);
            add_capture(sc, o, v);
        }
    }
    if (!v) {
        ampc_diag_clear(&sc->g->diag);
        ctx_err(c, AMPC_E_OOM, "out of host memory bringing '%s' into a subgraph", name);
        v = ampc_ir_poison_new(sc->g, name);
        AMPC_ASSERT(v);
    }
    return v;
}

/* The value an ONNX name stands for in scope sc: its own binding; in a subgraph, else the value
 * of an enclosing scope brought in (captured or copied, through every level between). NULL when
 * no scope defines it, or when the subgraph defines it only later (a use before the definition,
 * which must not silently capture an outer value of the same name). */
static ampc_value *resolve(ampc_onnx_ctx *c, scope *sc, const char *name) {
    ampc_value *v = ampc_strmap_get(&sc->vals, name);
    if (v || !sc->up || ampc_strmap_get(&sc->local, name)) return v;
    if (sc->inline_up) return resolve(c, sc->up, name); /* the same graph: nothing to capture */
    ampc_value *o = resolve(c, sc->up, name);
    if (!o || o == &absent) return o;
    v = capture(c, sc, name, o);
    bind(sc, name, v);
    return v;
}

/* What a node feeds the ONNX inputs of one of its subgraphs. */
typedef struct body_sig {
    int32_t n;
    ampc_dtype dt[MAX_BODY_INPUTS];
    ampc_shape sh[MAX_BODY_INPUTS];
    char layout[160]; /* what the inputs are, for messages */
} body_sig;

/* Shape [] or [1] for the iteration number and condition of a Loop body: [1] when the body
 * declares that, else a scalar (ONNX's form, and what a missing shape means). */
static ampc_shape one_elem_shape(const Onnx__ValueInfoProto *v) {
    const Onnx__TypeProto__Tensor *tt = v ? tensor_type(v) : NULL;
    ampc_shape s = {0};
    if (tt && tt->shape && tt->shape->n_dim == 1 && tt->shape->dim[0] &&
        tt->shape->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        tt->shape->dim[0]->dim_value == 1)
        s = (ampc_shape){1, {1}};
    return s;
}

/* s without dims d0 (and d1 when >= 0); false when s has too few dims. */
static bool drop_dims(const ampc_shape *s, int32_t d0, int32_t d1, ampc_shape *out) {
    if (d0 < 0 || d0 >= s->rank || d1 >= s->rank) return false;
    *out = (ampc_shape){0};
    for (int32_t d = 0; d < s->rank; d++)
        if (d != d0 && d != d1) out->dims[out->rank++] = s->dims[d];
    return true;
}

/* The types nd feeds to the ONNX inputs of subgraph gp, from its (already resolved) inputs:
 * If's branches take none; a Loop body (iteration number, condition, loop-carried values); a
 * Scan body (states, then one slice of each scan input; Scan-8's batch dim and sequence_lens
 * are left out). False with an error when the node's inputs do not allow it. */
static bool body_signature(ampc_onnx_ctx *c, const ampc_onnx_node *nd, const Onnx__GraphProto *gp,
                           body_sig *sig) {
    const Onnx__NodeProto *n = nd->proto;
    int32_t n_in = (int32_t)n->n_input;
    sig->n = 0;
    if (nd->op == AMPC_OP_IF) {
        snprintf(sig->layout, sizeof sig->layout, "If's branches take no inputs");
        return true;
    }
    int32_t lead = 0, N, M = 0;
    if (nd->op == AMPC_OP_LOOP) {
        N = n_in - 2;
        if (N < 0)
            return ampc_onnx_fail(c, nd, AMPC_E_INVALID_ARG, "Loop has %d inputs; it takes M, "
                                  "cond, then its loop-carried values", n_in), false;
        snprintf(sig->layout, sizeof sig->layout, "the iteration number, the condition and %d "
                 "loop-carried value%s", N, N == 1 ? "" : "s");
        sig->dt[0] = AMPC_DTYPE_I64;
        sig->sh[0] = one_elem_shape(gp->n_input ? gp->input[0] : NULL);
        sig->dt[1] = AMPC_DTYPE_BOOL;
        sig->sh[1] = one_elem_shape(gp->n_input > 1 ? gp->input[1] : NULL);
        lead = 2;
    } else { /* Scan */
        const ampc_attr *ma = ampc_onnx_attr(nd, "num_scan_inputs");
        bool v8 = nd->opset < 9;
        lead = v8 ? 1 : 0;
        if (!ma || ma->kind != AMPC_ATTR_INT || ma->i < 1 || ma->i > n_in - lead)
            return ampc_onnx_fail(c, nd, AMPC_E_ATTR, "attribute 'num_scan_inputs' must be an int "
                                  "from 1 to %d (the node's inputs%s)", n_in - lead,
                                  v8 ? " after sequence_lens" : ""), false;
        M = (int32_t)ma->i;
        N = n_in - lead - M;
        snprintf(sig->layout, sizeof sig->layout, "%d state variable%s and %d scan input slice%s",
                 N, N == 1 ? "" : "s", M, M == 1 ? "" : "s");
    }
    if (lead + N + M > AMPC_ARRAY_LEN(sig->dt))
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "the subgraph takes %d inputs; ampc "
                              "supports at most %d", lead + N + M, AMPC_ARRAY_LEN(sig->dt)), false;
    const ampc_attr *axes = nd->opset >= 9 ? ampc_onnx_attr(nd, "scan_input_axes") : NULL;
    for (int32_t j = 0; j < N + M; j++) {
        int32_t i = lead + j;
        const ampc_value *v = i < nd->n_in ? nd->in[i] : NULL;
        if (!v)
            return ampc_onnx_fail(c, nd, AMPC_E_INVALID_ARG, "input %d is absent; %s", i,
                                  nd->op == AMPC_OP_LOOP ? "loop-carried values are required"
                                                         : "Scan's states and scan inputs are "
                                                           "required"), false;
        ampc_shape *s = &sig->sh[nd->op == AMPC_OP_LOOP ? i : j];
        sig->dt[nd->op == AMPC_OP_LOOP ? i : j] = v->dtype;
        bool fine;
        if (nd->op == AMPC_OP_LOOP) {
            *s = v->shape, fine = true;
        } else if (nd->opset < 9) { /* Scan-8: [batch, ...] states, [batch, seq, ...] inputs */
            fine = j < N ? drop_dims(&v->shape, 0, -1, s) : drop_dims(&v->shape, 0, 1, s);
        } else if (j < N) {
            *s = v->shape, fine = true;
        } else {
            int64_t ax =
                axes && axes->kind == AMPC_ATTR_INTS && j - N < axes->n ? axes->ints[j - N] : 0;
            if (ax < 0) ax += v->shape.rank;
            fine = ax >= 0 && drop_dims(&v->shape, (int32_t)ax, -1, s);
        }
        if (!fine) {
            char b[AMPC_SHAPE_STR_MAX];
            return ampc_onnx_fail(c, nd, AMPC_E_SHAPE, "input %d '%s' is %s, which has no %s to "
                                  "scan along", i, v->name, ampc_shape_str(&v->shape, b, sizeof b),
                                  nd->opset < 9 ? "batch and sequence dims" : "such axis"), false;
        }
    }
    sig->n = nd->op == AMPC_OP_LOOP ? lead + N : N + M;
    return true;
}

/* Imports subgraph gp (attribute `attr` of the node `where` in scope `outer`) as a new graph
 * owned by outer's graph, in the subgraph scope *bs (set up here; the caller reads its captures,
 * then frees it with scope_free). Its ONNX inputs take the types of sig, whatever gp declares
 * (ONNX bodies often leave dims unset), checked against a declared element type; its outputs are
 * resolved in it, so an output may be an outer value (captured). NULL only when out of memory. */
static ampc_graph *import_body(ampc_onnx_ctx *c, const Onnx__GraphProto *gp, scope *outer,
                               const char *attr, const body_sig *sig, int64_t opset,
                               const attr_env *env, const char *where, int depth, scope *bs) {
    memset(bs, 0, sizeof *bs);
    ampc_graph *b = ampc_ir_subgraph_new(outer->g, gp->name && *gp->name ? gp->name : attr);
    if (!b) {
        ampc_diag_clear(&outer->g->diag);
        ctx_err(c, AMPC_E_OOM, "%s: out of host memory creating subgraph '%s'", where, attr);
        return NULL;
    }
    bs->g = b;
    bs->up = outer;
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i] && gp->input[i]->name) ampc_strmap_put(&bs->local, gp->input[i]->name, bs);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i] && gp->initializer[i]->name)
            ampc_strmap_put(&bs->local, gp->initializer[i]->name, bs);
    for (size_t k = 0; k < gp->n_node; k++)
        for (size_t j = 0; gp->node[k] && j < gp->node[k]->n_output; j++)
            if (gp->node[k]->output[j] && *gp->node[k]->output[j])
                ampc_strmap_put(&bs->local, gp->node[k]->output[j], bs);
    if ((int32_t)gp->n_input != sig->n) {
        ctx_err(c, AMPC_E_INVALID_ARG, "%s: attribute '%s': the subgraph has %zu inputs, expected "
                "%d (%s)", where, attr, gp->n_input, sig->n, sig->layout);
        return b;
    }
    ampc_graph *saved = c->g;
    c->g = b;
    char nb[32];
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *nm = vi && vi->name && *vi->name ? vi->name : NULL;
        if (!nm) {
            ctx_err(c, AMPC_E_PARSE, "%s: attribute '%s': subgraph input %zu has no name", where,
                    attr, i);
            continue;
        }
        const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
        ampc_dtype dt = tt && tt->has_elem_type ? ampc_dtype_from_onnx(tt->elem_type) : sig->dt[i];
        if (vi->type && !tt) {
            ctx_err(c, AMPC_E_UNSUPPORTED, "%s: attribute '%s': subgraph input %zu '%s' is not a "
                    "tensor (a sequence, map or optional); ampc imports tensors only", where, attr,
                    i, nm);
            bind(bs, nm, poison(c, nm));
            continue;
        }
        if (tt && tt->has_elem_type && tt->elem_type && dt != sig->dt[i]) {
            ctx_err(c, AMPC_E_DTYPE, "%s: attribute '%s': subgraph input %zu '%s' is declared %s, "
                    "but the node feeds it %s (%s)", where, attr, i, nm,
                    dt ? ampc_dtype_name(dt) : ampc_onnx_dtype_name(tt->elem_type, nb, sizeof nb),
                    ampc_dtype_name(sig->dt[i]), sig->layout);
            bind(bs, nm, poison(c, nm));
            continue;
        }
        ampc_value *v = ampc_ir_value_new(b, nm, sig->dt[i], &sig->sh[i]);
        if (!v) {
            ctx_err(c, AMPC_E_OOM, "%s: out of host memory", where);
            break;
        }
        ampc_ir_graph_add_input(b, v);
        bind(bs, nm, v);
    }
    if (gp->n_sparse_initializer)
        ctx_err(c, AMPC_E_UNSUPPORTED, "%s: attribute '%s': the subgraph has sparse initializers, "
                "which ampc does not support", where, attr);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || ampc_strmap_get(&bs->vals, t->name)) continue;
        ampc_strbuf what = {0};
        ampc_sb_printf(&what, "%s: attribute '%s': initializer '%s'", where, attr, t->name);
        ampc_value *v = const_from_proto(c, t, t->name, what.data);
        ampc_sb_free(&what);
        bind(bs, t->name, v ? v : poison(c, t->name));
    }
    for (size_t j = 0; j < gp->n_node; j++) {
        if (!gp->node[j]) continue;
        ampc_strbuf w = {0};
        body_node_where(&w, where, attr, j, gp->node[j]);
        import_node(c, gp->node[j], bs, opset, env, w.data, depth);
        ampc_sb_free(&w);
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *nm = gp->output[i] && gp->output[i]->name ? gp->output[i]->name : "";
        ampc_value *v = *nm ? resolve(c, bs, nm) : NULL;
        if (!v || v == &absent) {
            ctx_err(c, AMPC_E_VERIFY, "%s: attribute '%s': subgraph output %zu '%s' is not "
                    "defined, neither in the subgraph nor around it", where, attr, i, nm);
            v = poison(c, *nm ? nm : "output");
        }
        ampc_ir_graph_add_output(b, v);
    }
    c->g = saved;
    return b;
}

/* Imports the subgraph attributes of control-flow node nd (its ONNX inputs resolved, its other
 * attributes converted) and applies the capture convention (ir/subgraph.c): the outer values the
 * bodies capture, in order of first use across the bodies, are appended to nd's inputs; every
 * body gets one input per capture, in that order, after its ONNX inputs (a body that does not
 * use a capture gets an unused input); num_captures says how many. The graph attributes are
 * added to nd. False when a body failed (the errors are recorded) or depends on a value that
 * failed earlier. */
static bool import_bodies(ampc_onnx_ctx *c, ampc_onnx_node *nd, const attr_ref *r, int32_t nr,
                          scope *sc, const attr_env *env, int depth) {
    scope bs[MAX_BODIES];
    ampc_graph *bg[MAX_BODIES];
    const char *names[MAX_BODIES];
    int32_t nb = 0, errs = c->n_errs;
    bool ok = true;
    for (int32_t i = 0; i < nr && ok; i++) {
        const Onnx__AttributeProto *a = r[i].a;
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) continue;
        body_sig sig;
        if (nb == MAX_BODIES || !body_signature(c, nd, a->g, &sig)) {
            if (nb == MAX_BODIES)
                ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "more than %d graph attributes",
                               MAX_BODIES);
            ok = false;
            break;
        }
        names[nb] = r[i].name;
        bg[nb] = import_body(c, a->g, sc, r[i].name, &sig, nd->opset, env, nd->where, depth,
                             &bs[nb]);
        ok = bg[nb] != NULL;
        nb += ok;
    }
    ok = ok && c->n_errs == errs;
    for (int32_t b = 0; ok && b < nb; b++)
        for (int32_t i = 0; i < bg[b]->n_outputs; i++) ok &= !poisoned(bg[b]->outputs[i]);

    /* The union of the captures, in order of first use. */
    ampc_value **u = NULL;
    int32_t nu = 0;
    for (int32_t b = 0; ok && b < nb; b++)
        for (int32_t j = 0; j < bs[b].n_cap; j++) {
            bool seen = false;
            for (int32_t i = 0; i < nu && !seen; i++) seen = u[i] == bs[b].cap_outer[j];
            if (seen) continue;
            u = ampc_xrealloc(u, (size_t)(nu + 1) * sizeof *u);
            u[nu++] = bs[b].cap_outer[j];
        }
    /* Every body takes all of them, in that order, after its ONNX inputs. */
    for (int32_t b = 0; ok && b < nb; b++) {
        ampc_graph *g = bg[b];
        int32_t base = g->n_inputs - bs[b].n_cap;
        for (int32_t i = 0; i < nu && ok; i++) {
            bool has = false;
            for (int32_t j = 0; j < bs[b].n_cap && !has; j++) has = bs[b].cap_outer[j] == u[i];
            if (has) continue;
            ampc_value *v = ampc_ir_value_new(g, u[i]->name, u[i]->dtype, &u[i]->shape);
            if (!v) {
                ampc_diag_clear(&g->diag);
                ctx_err(c, AMPC_E_OOM, "%s: out of host memory", nd->where);
                ok = false;
                break;
            }
            ampc_ir_graph_add_input(g, v);
            add_capture(&bs[b], u[i], v);
        }
        for (int32_t i = 0; i < nu && ok; i++)
            for (int32_t j = 0; j < bs[b].n_cap; j++)
                if (bs[b].cap_outer[j] == u[i]) g->inputs[base + i] = bs[b].cap_inner[j];
    }
    if (ok) {
        for (int32_t i = 0; i < nu; i++) ampc_onnx_set_input(nd, nd->n_in, u[i]);
        int32_t need = nd->n_attrs + nb + 1;
        if (need > nd->cap_attrs) {
            nd->cap_attrs = need;
            nd->attrs = ampc_xrealloc(nd->attrs, (size_t)need * sizeof *nd->attrs);
        }
        for (int32_t b = 0; b < nb; b++)
            nd->attrs[nd->n_attrs++] =
                (ampc_attr){.name = names[b], .kind = AMPC_ATTR_GRAPH, .graph = bg[b]};
        if (nu)
            nd->attrs[nd->n_attrs++] =
                (ampc_attr){.name = AMPC_ATTR_NUM_CAPTURES, .kind = AMPC_ATTR_INT, .i = nu};
    }
    free(u);
    for (int32_t b = 0; b < nb; b++) scope_free(&bs[b]);
    return ok;
}

/* ---- If with a condition known at import time ------------------------------------------------ */

/* An If whose condition is a constant (ONNX functions branch on a rank or an attribute) becomes
 * its taken branch, imported inline into the node's own graph (names prefixed
 * `<if>/<branch>/`); the other branch is never built, which matters since it may not build for
 * these shapes at all. Returns 0 when this does not apply (the If form then reports what is
 * wrong), 1 when nd->outs hold the branch's outputs, -1 on a failure (recorded). */
static int inline_if(ampc_onnx_ctx *c, ampc_onnx_node *nd, scope *sc, const attr_ref *r,
                     int32_t nr, const attr_env *env, int depth) {
    const ampc_value *cond = nd->n_in > 0 ? nd->in[0] : NULL;
    if (!cond || !cond->data || (cond->flags & AMPC_VALUE_INPUT) ||
        cond->dtype != AMPC_DTYPE_BOOL || ampc_ir_numel(cond) != 1)
        return 0;
    const char *attr = ((const uint8_t *)cond->data)[0] ? "then_branch" : "else_branch";
    const Onnx__GraphProto *gp = NULL;
    for (int32_t i = 0; i < nr; i++)
        if (!strcmp(r[i].name, attr) &&
            r[i].a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)
            gp = r[i].a->g;
    if (!gp || gp->n_input) return 0;
    if ((int32_t)gp->n_output != nd->n_out) {
        ampc_onnx_fail(c, nd, AMPC_E_INVALID_ARG, "attribute '%s' (taken: the condition is a "
                       "constant) has %zu outputs, the If %d", attr, gp->n_output, nd->n_out);
        return -1;
    }
    int32_t errs = c->n_errs;
    scope us = {.g = c->g, .up = sc, .inline_up = true};
    ampc_strbuf pre = {0};
    ampc_sb_printf(&pre, "%s/%s", nd->name ? nd->name : "if", attr);
    us.prefix = pre.data;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; gp->node[i] && j < gp->node[i]->n_output; j++)
            if (gp->node[i]->output[j] && *gp->node[i]->output[j])
                ampc_strmap_put(&us.local, gp->node[i]->output[j], &us);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t || !t->name || ampc_strmap_get(&us.vals, t->name)) continue;
        ampc_strmap_put(&us.local, t->name, &us);
        ampc_value *v = const_from_proto(c, t, ampc_onnx_fresh_name(c, t->name), nd->where);
        bind(&us, t->name, v ? v : poison(c, t->name));
    }
    for (size_t j = 0; j < gp->n_node; j++) {
        if (!gp->node[j]) continue;
        ampc_strbuf w = {0};
        body_node_where(&w, nd->where, attr, j, gp->node[j]);
        import_node(c, gp->node[j], &us, nd->opset, env, w.data, depth);
        ampc_sb_free(&w);
    }
    for (int32_t i = 0; i < nd->n_out; i++) {
        const char *nm = gp->output[i] && gp->output[i]->name ? gp->output[i]->name : "";
        ampc_value *v = *nm ? resolve(c, &us, nm) : NULL;
        if (!v || v == &absent) {
            ctx_err(c, AMPC_E_VERIFY, "%s: attribute '%s': branch output %d '%s' is not defined, "
                    "neither in the branch nor around it", nd->where, attr, i, nm);
            v = NULL;
        }
        nd->outs[i] = v;
    }
    scope_free(&us);
    ampc_sb_free(&pre);
    return c->n_errs == errs ? 1 : -1;
}

/* ---- unrolling a Loop whose body only builds with its iteration number known --------------- */

/* A Loop whose body cannot be built as a body (typically: the iteration number sets a Slice's
 * starts, which must be known at compile time) is unrolled instead when its trip count is a small
 * constant: its body is imported once per iteration into the node's own graph, with the
 * iteration number and the condition as constants and the loop-carried values of the previous
 * iteration; the condition the body returns must then be a constant (a false one ends the loop
 * early), and the scan outputs are stacked with Unsqueeze and Concat. */
enum { UNROLL_MAX_TRIPS = 256, UNROLL_MAX_NODES = 1 << 14 };

/* A point in the error list to come back to. */
typedef struct err_mark {
    size_t len;
    int32_t n_errs;
    ampc_status first;
} err_mark;

static err_mark err_here(const ampc_onnx_ctx *c) {
    return (err_mark){c->errs.len, c->n_errs, c->first};
}

static void err_back(ampc_onnx_ctx *c, err_mark m) {
    c->errs.len = m.len;
    if (c->errs.data) c->errs.data[m.len] = 0;
    c->n_errs = m.n_errs;
    c->first = m.first;
}

/* Takes back what building a node that failed added to g: the nodes and values past the given
 * counts (the failed node and its poisoned outputs, nothing refers to them) and the subgraphs
 * past `subs` (bodies no node holds). */
static void undo_nodes(ampc_graph *g, int32_t nodes, int32_t values, int32_t subs) {
    for (int32_t i = values; i < g->n_values; i++) ampc_strmap_del(&g->names, g->values[i]->name);
    g->n_values = values;
    g->n_nodes = nodes;
    for (int32_t i = subs; i < g->n_subgraphs; i++) ampc_graph_destroy(g->subgraphs[i]);
    g->n_subgraphs = subs;
}

/* The trip count of Loop nd when it can be unrolled: M a constant in 1..UNROLL_MAX_TRIPS (fewer
 * than UNROLL_MAX_NODES nodes in all), the initial condition absent or a constant true. */
static int64_t unroll_trips(const ampc_onnx_node *nd, const Onnx__GraphProto *body) {
    const ampc_value *m = nd->n_in > 0 ? nd->in[0] : NULL, *c = nd->n_in > 1 ? nd->in[1] : NULL;
    if (!m || !m->data || (m->flags & AMPC_VALUE_INPUT) || m->dtype != AMPC_DTYPE_I64 ||
        ampc_ir_numel(m) != 1)
        return 0;
    if (c && (!c->data || (c->flags & AMPC_VALUE_INPUT) || c->dtype != AMPC_DTYPE_BOOL ||
              ampc_ir_numel(c) != 1 || !((const uint8_t *)c->data)[0]))
        return 0;
    int64_t T = ((const int64_t *)m->data)[0];
    if (T < 1 || T > UNROLL_MAX_TRIPS || T * (int64_t)(body->n_node + 1) > UNROLL_MAX_NODES)
        return 0;
    return T;
}

/* Unrolls Loop nd (node n in scope sc) T times at most; fills nd->outs. False with errors. */
static bool unroll_loop(ampc_onnx_ctx *c, const Onnx__NodeProto *n, ampc_onnx_node *nd, scope *sc,
                        const Onnx__GraphProto *body, int64_t T, const attr_env *env, int depth) {
    int32_t N = (int32_t)n->n_input - 2, K = nd->n_out - N;
    if (K < 0 || body->n_input != (size_t)(2 + N) || body->n_output != (size_t)(1 + N + K))
        return false; /* the Loop form reported why */
    body_sig sig; /* the body's declared input types must fit, as for the Loop form */
    if (!body_signature(c, nd, body, &sig) || sig.n != 2 + N) return false;
    for (size_t i = 0; i < body->n_input; i++) {
        const Onnx__ValueInfoProto *vi = body->input[i];
        const Onnx__TypeProto__Tensor *tt = vi ? tensor_type(vi) : NULL;
        if (!vi || (vi->type && !tt) ||
            (tt && tt->has_elem_type && tt->elem_type &&
             ampc_dtype_from_onnx(tt->elem_type) != sig.dt[i]))
            return false;
    }
    ampc_value **carried = ampc_xcalloc((size_t)N + 1, sizeof *carried);
    ampc_value **rows = ampc_xcalloc((size_t)(T * K) + 1, sizeof *rows);
    for (int32_t j = 0; j < N; j++) carried[j] = nd->in[2 + j];
    int32_t errs = c->n_errs;
    int64_t done = 0;
    bool ok = true, more = true;
    for (int64_t it = 0; ok && more && it < T; it++) {
        scope us = {.g = c->g, .up = sc, .inline_up = true};
        ampc_strbuf pre = {0}, where = {0};
        ampc_sb_printf(&pre, "%s/iter%lld", nd->name ? nd->name : "loop", (long long)it);
        ampc_sb_printf(&where, "body (unrolled, iteration %lld)", (long long)it);
        us.prefix = pre.data;
        for (size_t i = 0; i < body->n_node; i++)
            for (size_t j = 0; body->node[i] && j < body->node[i]->n_output; j++)
                if (body->node[i]->output[j] && *body->node[i]->output[j])
                    ampc_strmap_put(&us.local, body->node[i]->output[j], &us);
        uint8_t yes = 1;
        ampc_shape si = one_elem_shape(body->input[0]), sb = one_elem_shape(body->input[1]);
        ampc_value *iv = ampc_onnx_const(c, "iteration", AMPC_DTYPE_I64, &si, &it);
        ampc_value *cv = ampc_onnx_const(c, "condition", AMPC_DTYPE_BOOL, &sb, &yes);
        ok = iv && cv;
        for (size_t i = 0; ok && i < body->n_input; i++) {
            const char *nm = body->input[i] ? body->input[i]->name : NULL;
            if (nm && *nm) {
                ampc_strmap_put(&us.local, nm, &us);
                bind(&us, nm, i == 0 ? iv : i == 1 ? cv : carried[i - 2]);
            }
        }
        for (size_t i = 0; ok && i < body->n_initializer; i++) {
            const Onnx__TensorProto *t = body->initializer[i];
            if (!t || !t->name || ampc_strmap_get(&us.vals, t->name)) continue;
            ampc_value *v = const_from_proto(c, t, ampc_onnx_fresh_name(c, t->name), nd->where);
            bind(&us, t->name, v ? v : poison(c, t->name));
        }
        for (size_t j = 0; ok && j < body->n_node; j++) {
            if (!body->node[j]) continue;
            ampc_strbuf w = {0};
            body_node_where(&w, nd->where, where.data, j, body->node[j]);
            import_node(c, body->node[j], &us, nd->opset, env, w.data, depth);
            ampc_sb_free(&w);
        }
        ampc_value *outs[64 + 1];
        ok = ok && c->n_errs == errs && body->n_output <= 64;
        for (size_t i = 0; ok && i < body->n_output; i++) {
            const char *nm = body->output[i] ? body->output[i]->name : NULL;
            outs[i] = nm && *nm ? resolve(c, &us, nm) : NULL;
            ok = outs[i] && outs[i] != &absent && !poisoned(outs[i]);
        }
        if (ok && (!outs[0]->data || outs[0]->dtype != AMPC_DTYPE_BOOL)) {
            ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "unrolling the loop: iteration %lld's "
                           "condition (body output 0 '%s') is computed at run time",
                           (long long)it, outs[0]->name);
            ok = false;
        }
        if (ok) {
            more = ((const uint8_t *)outs[0]->data)[0] != 0;
            for (int32_t j = 0; j < N; j++) carried[j] = outs[1 + j];
            for (int32_t j = 0; j < K; j++) rows[it * K + j] = outs[1 + N + j];
            done = it + 1;
        }
        scope_free(&us);
        ampc_sb_free(&pre);
        ampc_sb_free(&where);
    }
    /* Final values; each scan output stacked: Unsqueeze every row, Concat along dim 0. */
    ampc_shape one = {1, {1}};
    int64_t zero = 0;
    ampc_attr axis0 = {.name = "axis", .kind = AMPC_ATTR_INT, .i = 0};
    ampc_value *axes = ok && K ? ampc_onnx_const(c, "axes", AMPC_DTYPE_I64, &one, &zero) : NULL;
    ok = ok && (!K || axes);
    for (int32_t j = 0; ok && j < N; j++) nd->outs[j] = carried[j];
    for (int32_t j = 0; ok && j < K; j++) {
        ampc_value **col = ampc_xcalloc((size_t)done + 1, sizeof *col);
        for (int64_t it = 0; ok && it < done; it++) {
            ampc_value *in[2] = {rows[it * K + j], axes};
            ok = ampc_onnx_build(c, nd, AMPC_OP_UNSQUEEZE, NULL, in, 2, NULL, 0, 1,
                                 done == 1 ? &nd->out_names[N + j] : NULL, &col[it]) == AMPC_OK;
        }
        if (ok && done == 1) nd->outs[N + j] = col[0];
        else if (ok)
            ok = ampc_onnx_build(c, nd, AMPC_OP_CONCAT, NULL, col, (int32_t)done, &axis0, 1, 1,
                                 &nd->out_names[N + j], &nd->outs[N + j]) == AMPC_OK;
        free(col);
    }
    free(carried);
    free(rows);
    return ok;
}

/* A call of a model-local function: its body is imported inline in a scope of its own. */
static void expand_function(ampc_onnx_ctx *c, const Onnx__NodeProto *n, fn_def *f, scope *sc,
                            const attr_env *env, const char *where, int depth) {
    const Onnx__FunctionProto *fp = f->proto;
    if (f->active || depth >= MAX_FN_DEPTH) { /* coverage reports this first */
        ctx_err(c, AMPC_E_UNSUPPORTED, "%s: function '%s' calls itself", where, fp->name);
        bind_poison(c, sc, n);
        return;
    }
    attr_ref *r;
    int32_t nr = resolve_attrs(n, env, &r);
    attr_env inner_env = {r, nr, f->defaults, f->n_defaults};
    scope inner = {.in_fn = true, .g = c->g};
    ampc_strbuf pre = {0};
    ampc_sb_printf(&pre, "%s", n->name && *n->name ? n->name : fp->name);
    inner.prefix = pre.data;
    bool bad = false;
    for (size_t i = 0; i < fp->n_input; i++) {
        const char *actual = i < n->n_input ? n->input[i] : NULL;
        ampc_value *v = &absent;
        if (actual && *actual) {
            v = resolve(c, sc, actual);
            if (!v) {
                ctx_err(c, AMPC_E_VERIFY, "%s: input %zu '%s' is not defined before this node",
                        where, i, actual);
                bad = true;
                continue;
            }
        }
        if (fp->input[i]) ampc_strmap_put(&inner.vals, fp->input[i], v);
    }
    for (size_t i = 0; i < fp->n_output && i < n->n_output; i++)
        if (fp->output[i] && n->output[i] && *n->output[i])
            ampc_strmap_put(&inner.outs, fp->output[i], (void *)(sc->in_fn ? out_name(c, sc, n, i)
                                                                           : n->output[i]));
    if (!bad) {
        f->active = true;
        for (size_t j = 0; j < fp->n_node; j++) {
            if (!fp->node[j]) continue;
            ampc_strbuf w = {0};
            node_where(&w, where, j, fp->node[j]);
            import_node(c, fp->node[j], &inner, f->opset, &inner_env, w.data, depth + 1);
            ampc_sb_free(&w);
        }
        f->active = false;
    }
    for (size_t i = 0; i < n->n_output; i++) {
        if (!n->output[i] || !*n->output[i]) continue;
        ampc_value *v = !bad && i < fp->n_output && fp->output[i]
                            ? ampc_strmap_get(&inner.vals, fp->output[i]) : NULL;
        if (!bad && (!v || v == &absent)) {
            ctx_err(c, AMPC_E_VERIFY, "%s: function '%s' does not produce its output %zu '%s'",
                    where, fp->name, i, i < fp->n_output ? str_or(fp->output[i], "") : "");
            v = NULL;
        }
        bind(sc, n->output[i], v && v != &absent ? v : poison(c, n->output[i]));
    }
    ampc_strmap_free(&inner.vals);
    ampc_strmap_free(&inner.outs);
    ampc_sb_free(&pre);
    free(r);
}

static void import_node(ampc_onnx_ctx *c, const Onnx__NodeProto *n, scope *sc, int64_t opset,
                        const attr_env *env, const char *where, int depth) {
    fn_def *f = find_fn(c, n);
    if (f) {
        expand_function(c, n, f, sc, env, where, depth);
        return;
    }
    ampc_strbuf why = {0};
    ampc_onnx_node nd = {.proto = n, .where = where, .opset = opset};
    if (!is_default_domain(n->domain) || !n->op_type ||
        !ampc_onnx_op_lookup(n->op_type, opset, &nd.op, &why)) { /* coverage reports these */
        ctx_err(c, AMPC_E_UNSUPPORTED, "%s: %s", where, why.len ? why.data : "op not supported");
        ampc_sb_free(&why);
        bind_poison(c, sc, n);
        return;
    }
    ampc_sb_free(&why);
    if (nd.op == AMPC_OP_CONSTANT) {
        import_constant(c, n, sc, env, where);
        return;
    }

    /* Inputs: "" is an absent optional input; a poisoned one poisons the outputs silently. */
    nd.cap_in = (int32_t)n->n_input + 8;
    nd.in = ampc_xcalloc((size_t)nd.cap_in, sizeof *nd.in);
    nd.n_in = (int32_t)n->n_input;
    bool ok = true, quiet = false;
    for (size_t i = 0; i < n->n_input; i++) {
        const char *nm = n->input[i];
        if (!nm || !*nm) continue;
        ampc_value *v = resolve(c, sc, nm);
        if (!v) {
            ctx_err(c, AMPC_E_VERIFY, "%s: input %zu '%s' is not defined before this node%s",
                    where, i, nm, sc->up ? " (neither in its subgraph nor around it)" : "");
            ok = false;
        } else if (v != &absent) {
            nd.in[i] = v;
            quiet |= poisoned(v);
        }
    }
    /* Trailing absent inputs carry nothing; dropping them keeps arity checks exact. Control-flow
     * ops keep their places: captures follow their ONNX inputs. */
    bool bodies = ampc_ir_op_has_bodies(nd.op);
    while (!bodies && nd.n_in > 0 && !nd.in[nd.n_in - 1]) nd.n_in--;
    bool prefixed = sc->in_fn || sc->inline_up; /* names made unique per expansion */
    nd.name = !prefixed && n->name && *n->name ? n->name : NULL;
    if (prefixed && n->name && *n->name) {
        ampc_strbuf h = {0};
        ampc_sb_printf(&h, "%s/%s", sc->prefix, n->name);
        nd.name = ampc_arena_strdup(&c->g->arena, h.data);
        ampc_sb_free(&h);
    }
    nd.n_out = (int32_t)n->n_output;
    nd.out_names = ampc_xcalloc((size_t)nd.n_out + 1, sizeof *nd.out_names);
    nd.outs = ampc_xcalloc((size_t)nd.n_out + 1, sizeof *nd.outs);
    for (int32_t j = 0; j < nd.n_out; j++) nd.out_names[j] = out_name(c, sc, n, (size_t)j);

    attr_ref *r;
    int32_t nr = resolve_attrs(n, env, &r);
    ok = ok && !quiet && convert_attrs(c, &nd, r, nr);
    int inlined = ok && nd.op == AMPC_OP_IF ? inline_if(c, &nd, sc, r, nr, env, depth) : 0;
    if (inlined) {
        ok = inlined > 0;
    } else if (ok && bodies) {
        /* A Loop that is unsupported as a Loop (its body needs the iteration number at compile
         * time, or its scan outputs a trip count only the body's constant conditions give) is
         * unrolled instead when its trip count is a small constant (unroll_loop). */
        err_mark m = err_here(c);
        int32_t subs = c->g->n_subgraphs, nodes0 = c->g->n_nodes, values0 = c->g->n_values;
        ok = import_bodies(c, &nd, r, nr, sc, env, depth);
        bool failed_as_loop = !ok || ampc_onnx_emit(c, &nd) != AMPC_OK;
        const Onnx__GraphProto *body = NULL;
        for (int32_t i = 0; i < nr; i++)
            if (r[i].a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) body = r[i].a->g;
        int64_t T = failed_as_loop && nd.op == AMPC_OP_LOOP && c->first == AMPC_E_UNSUPPORTED &&
                            m.first == AMPC_OK && body
                        ? unroll_trips(&nd, body) : 0;
        if (T) { /* try again, unrolled; keep the first messages if that fails too */
            char *first_try = ampc_xstrdup(c->errs.data ? c->errs.data + m.len : "");
            err_mark failed = err_here(c);
            err_back(c, m);
            undo_nodes(c->g, nodes0, values0, subs); /* the first try's Loop node and bodies */
            bool unrolled = unroll_loop(c, n, &nd, sc, body, T, env, depth);
            if (!unrolled) {
                err_back(c, m);
                ampc_sb_puts(&c->errs, first_try);
                c->n_errs = failed.n_errs;
                c->first = failed.first;
                ok = false; /* the outputs are poison (the Loop node was taken back) */
            }
            free(first_try);
            for (int32_t j = 0; unrolled && j < nd.n_out; j++) {
                if (!n->output[j] || !*n->output[j]) continue;
                bind(sc, n->output[j], nd.outs[j]);
            }
            if (unrolled) goto done;
        }
    } else if (ok) {
        ampc_onnx_emit(c, &nd);
    }
    for (int32_t j = 0; j < nd.n_out; j++) {
        if (!n->output[j] || !*n->output[j]) continue;
        bind(sc, n->output[j], ok && nd.outs[j] ? nd.outs[j] : poison(c, n->output[j]));
    }
done:
    free(r);
    free(nd.in);
    free(nd.attrs);
    free(nd.out_names);
    free(nd.outs);
}

/* Whether the static type `tt` declares for v disagrees with inference: its element type (when
 * set), its rank (when a shape is given) or a dim given as a number. */
static void declared_vs_inferred(const Onnx__TypeProto__Tensor *tt, const ampc_value *v,
                                 bool *dtype_differs, bool *shape_differs) {
    ampc_dtype dt = ampc_dtype_from_onnx(tt->has_elem_type ? tt->elem_type : 0);
    *dtype_differs = dt != AMPC_DTYPE_UNDEFINED && dt != v->dtype;
    const Onnx__TensorShapeProto *sh = tt->shape;
    *shape_differs = sh && (int32_t)sh->n_dim != v->shape.rank;
    for (size_t d = 0; sh && !*shape_differs && d < sh->n_dim; d++)
        *shape_differs = sh->dim[d] && sh->dim[d]->value_case ==
                                           ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                         sh->dim[d]->dim_value != v->shape.dims[d];
}

/* "i64[2,3]" as tt declares it (into sb). */
static void declared_type_str(const Onnx__TypeProto__Tensor *tt, ampc_strbuf *sb) {
    ampc_dtype dt = ampc_dtype_from_onnx(tt->has_elem_type ? tt->elem_type : 0);
    char nb[32];
    ampc_sb_puts(sb, dt ? ampc_dtype_name(dt) : ampc_onnx_dtype_name(tt->elem_type, nb, sizeof nb));
    if (tt->shape) decl_dims(tt->shape, sb);
}

/* When vi declares a static type for a value the import computed and the two disagree: the
 * declared type's text (into decl) and true. */
static bool declared_differs(const Onnx__ValueInfoProto *vi, const scope *sc, const ampc_value **v,
                             bool *dtype_differs, ampc_strbuf *decl) {
    const Onnx__TypeProto__Tensor *tt = vi && vi->name ? tensor_type(vi) : NULL;
    *v = tt ? ampc_strmap_get(&sc->vals, vi->name) : NULL;
    if (!*v || *v == &absent || poisoned(*v)) return false;
    bool shape_differs;
    declared_vs_inferred(tt, *v, dtype_differs, &shape_differs);
    if (!*dtype_differs && !shape_differs) return false;
    declared_type_str(tt, decl);
    return true;
}

/* value_info and graph outputs whose declared static type disagrees with inference (notes). */
static void compare_value_info(ampc_onnx_ctx *c, const Onnx__ValueInfoProto *vi, const scope *sc) {
    const ampc_value *v;
    bool dtype_differs;
    ampc_strbuf dd = {0};
    char got[AMPC_TYPE_STR_MAX];
    if (c->notes && declared_differs(vi, sc, &v, &dtype_differs, &dd))
        ampc_sb_printf(c->notes, "value_info '%s' declares %s, inference gives %s\n", vi->name,
                       dd.data, ampc_value_type_str(v, got, sizeof got));
    ampc_sb_free(&dd);
}

/* A graph output's declared type is what a program linking the model is told to expect: an
 * element type, rank or numbered dim other than the one computed is refused (symbolic and
 * unknown dims match anything). */
static void check_declared_output(ampc_onnx_ctx *c, const Onnx__ValueInfoProto *vi, const scope *sc) {
    const ampc_value *v;
    bool dtype_differs;
    ampc_strbuf dd = {0};
    char got[AMPC_TYPE_STR_MAX];
    if (declared_differs(vi, sc, &v, &dtype_differs, &dd))
        ctx_err(c, dtype_differs ? AMPC_E_DTYPE : AMPC_E_SHAPE,
                "graph output '%s' is declared %s, but the model computes %s: the file "
                "contradicts itself (re-export it, or correct the output's type)", vi->name,
                dd.data, ampc_value_type_str(v, got, sizeof got));
    ampc_sb_free(&dd);
}

/* Stage 5 and 6: graph inputs (constants where an initializer or a binding gives the value),
 * the initializers nodes use (unused ones are never decoded), the nodes in `order`, then the
 * graph outputs under their ONNX names. */
static ampc_status build(ampc_onnx_ctx *c, const int32_t *order, const ampc_dtype *dts,
                         const ampc_shape *shapes) {
    const Onnx__GraphProto *gp = c->m->graph;
    scope sc = {.g = c->g};
    ampc_strmap inits = {0}, used = {0};
    for (size_t i = 0; i < gp->n_initializer; i++)
        ampc_strmap_put(&inits, gp->initializer[i]->name, gp->initializer[i]);
    for (size_t k = 0; k < gp->n_node; k++) {
        for (size_t j = 0; j < gp->node[k]->n_input; j++)
            if (gp->node[k]->input[j] && *gp->node[k]->input[j])
                ampc_strmap_put(&used, gp->node[k]->input[j], (void *)1);
        body_refs(gp->node[k], &used); /* initializers used only inside subgraphs */
    }
    for (size_t i = 0; i < gp->n_output; i++)
        ampc_strmap_put(&used, gp->output[i]->name, (void *)1);

    /* Graph inputs: constants when an initializer or a binding gives the value. */
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *nm = gp->input[i]->name;
        const Onnx__TensorProto *t = ampc_strmap_get(&inits, nm);
        const ampc_input_binding *b = binding(c, nm);
        ampc_value *v = NULL;
        if (t) {
            ampc_strbuf what = {0};
            ampc_sb_printf(&what, "initializer '%s'", nm);
            v = ampc_strmap_get(&used, nm) ? const_from_proto(c, t, nm, what.data) : NULL;
            ampc_sb_free(&what);
        } else if (b) {
            v = ampc_ir_const_new(c->g, nm, b->value.dtype, &b->value.shape, b->value.data);
            if (!v) ctx_err(c, AMPC_E_OOM, "out of host memory binding input '%s'", nm);
        } else {
            v = ampc_ir_value_new(c->g, nm, dts[i], &shapes[i]);
            if (v) ampc_ir_graph_add_input(c->g, v);
            else ctx_err(c, AMPC_E_OOM, "out of host memory");
        }
        bind(&sc, nm, v ? v : poison(c, nm));
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (ampc_strmap_get(&sc.vals, t->name) || !ampc_strmap_get(&used, t->name)) continue;
        ampc_strbuf what = {0};
        ampc_sb_printf(&what, "initializer '%s'", t->name);
        ampc_value *v = const_from_proto(c, t, t->name, what.data);
        ampc_sb_free(&what);
        bind(&sc, t->name, v ? v : poison(c, t->name));
    }

    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *n = gp->node[order[k]];
        ampc_strbuf w = {0};
        node_where(&w, NULL, (size_t)order[k], n);
        import_node(c, n, &sc, c->opset, NULL, w.data, 0);
        ampc_sb_free(&w);
    }

    /* Graph outputs, named as the model names them. */
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *nm = gp->output[i]->name;
        ampc_value *v = ampc_strmap_get(&sc.vals, nm);
        if (!v || poisoned(v)) continue;
        if (strcmp(v->name, nm) != 0 || (v->flags & AMPC_VALUE_OUTPUT)) {
            ampc_onnx_node nd = {.where = "graph output"};
            ampc_value *out;
            if (ampc_onnx_build(c, &nd, AMPC_OP_IDENTITY, NULL, &v, 1, NULL, 0, 1, &nm, &out) !=
                AMPC_OK)
                continue;
            v = out;
        }
        ampc_ir_graph_add_output(c->g, v);
    }
    if (c->first == AMPC_OK) {
        for (size_t i = 0; i < gp->n_value_info; i++) compare_value_info(c, gp->value_info[i], &sc);
        for (size_t i = 0; i < gp->n_output; i++) compare_value_info(c, gp->output[i], &sc);
        for (size_t i = 0; i < gp->n_output; i++) check_declared_output(c, gp->output[i], &sc);
    }
    ampc_strmap_free(&sc.vals);
    ampc_strmap_free(&inits);
    ampc_strmap_free(&used);
    return c->first;
}

/* ---- entry points --------------------------------------------------------------------------- */

static void ctx_init(ampc_onnx_ctx *c, const Onnx__ModelProto *m, const char *base_dir,
                     const ampc_import_options *o) {
    memset(c, 0, sizeof *c);
    c->m = m;
    c->base_dir = base_dir;
    if (o) c->opt = *o;
}

/* Frees what the context owns (not the graph: it goes to the caller or is destroyed). */
static void ctx_free(ampc_onnx_ctx *c) {
    for (int32_t i = 0; i < c->n_fns; i++) free(c->fns[i].defaults);
    free(c->fns);
    ampc_onnx_pb_pool_free(&c->pool);
    ampc_strmap_free(&c->model_names);
    ampc_strmap_free(&c->needed);
    ampc_strmap_free(&c->inits);
    ampc_strmap_free(&c->inputs);
    ampc_strmap_free(&c->free_inputs);
    ampc_strmap_free(&c->named_bindings);
    ampc_strmap_free(&c->named_shapes);
    ampc_sb_free(&c->errs);
}

/* Every value name the main graph uses, so generated names never take one. */
static void collect_names(ampc_onnx_ctx *c) {
    const Onnx__GraphProto *gp = c->m->graph;
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i] && gp->input[i]->name)
            ampc_strmap_put(&c->model_names, gp->input[i]->name, (void *)1);
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i] && gp->output[i]->name)
            ampc_strmap_put(&c->model_names, gp->output[i]->name, (void *)1);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i] && gp->initializer[i]->name)
            ampc_strmap_put(&c->model_names, gp->initializer[i]->name, (void *)1);
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *n = gp->node[k];
        if (!n) continue;
        for (size_t j = 0; j < n->n_output; j++)
            if (n->output[j] && *n->output[j])
                ampc_strmap_put(&c->model_names, n->output[j], (void *)1);
    }
}

/* Stages 1 and 2 only, for inspect (contract in onnx_internal.h). */
int32_t ampc_onnx_model_coverage(const Onnx__ModelProto *m, ampc_strbuf *lines) {
    ampc_onnx_ctx c;
    ctx_init(&c, m, NULL, NULL);
    int32_t count = -1;
    if (check_versions(&c) == AMPC_OK) {
        load_functions(&c);
        count = coverage(&c, lines);
    } else {
        ampc_sb_puts(lines, c.errs.data);
    }
    ctx_free(&c);
    return count;
}

/* The whole pipeline of stages for a parsed model (contract in onnx_internal.h). */
ampc_status ampc_onnx_model_import(const Onnx__ModelProto *m, const char *base_dir,
                                   const ampc_import_options *o, ampc_graph **out,
                                   ampc_strbuf *err, ampc_strbuf *notes) {
    ampc_onnx_ctx c;
    ctx_init(&c, m, base_dir, o);
    c.notes = notes;
    *out = NULL;
    int32_t *order = NULL;
    ampc_dtype *dts = NULL;
    ampc_shape *shapes = NULL;
    if (check_versions(&c) != AMPC_OK) goto fail;
    load_functions(&c);
    if (c.first != AMPC_OK) goto fail;

    ampc_strbuf lines = {0};
    int32_t unsupported = coverage(&c, &lines);
    if (unsupported) {
        ctx_err(&c, AMPC_E_UNSUPPORTED, "%d node%s not supported:%s", unsupported,
                unsupported == 1 ? " is" : "s are", lines.data);
        ampc_sb_free(&lines);
        goto fail;
    }
    ampc_sb_free(&lines);
    if (check_structure(&c, &order) != AMPC_OK || check_options(&c) != AMPC_OK) goto fail;
    const Onnx__GraphProto *gp = m->graph;
    dts = ampc_xcalloc(gp->n_input + 1, sizeof *dts);
    shapes = ampc_xcalloc(gp->n_input + 1, sizeof *shapes);
    if (resolve_inputs(&c, dts, shapes) != AMPC_OK) goto fail;

    c.g = ampc_graph_create(gp->name && *gp->name ? gp->name : "model");
    if (!c.g) {
        ctx_err(&c, AMPC_E_OOM, "out of host memory creating the graph");
        goto fail;
    }
    c.g->opset = c.opset;
    ampc_graph_set_max_loop_iterations(c.g, c.opt.max_loop_iterations);
    collect_names(&c);
    if (build(&c, order, dts, shapes) != AMPC_OK) goto fail;
    *out = c.g;
    free(order);
    free(dts);
    free(shapes);
    ctx_free(&c);
    return AMPC_OK;
fail:
    free(order);
    free(dts);
    free(shapes);
    ampc_graph_destroy(c.g);
    ampc_status st = ctx_finish_errors(&c, err);
    ctx_free(&c);
    return st != AMPC_OK ? st : AMPC_E_INTERNAL;
}

/* Hands a message to the caller's err (or drops it when err is NULL). */
static void give_err(char **err, ampc_strbuf *sb) {
    if (err) *err = ampc_sb_take(sb);
    else ampc_sb_free(sb);
}

/* Public entry points (contracts in ampc.h): argument checks, the parse, then the import. */
ampc_status ampc_onnx_import_buffer(const void *data, size_t len, const char *base_dir,
                                    const ampc_import_options *o, ampc_graph **out, char **err) {
    if (err) *err = NULL;
    if (out) *out = NULL;
    ampc_strbuf sb = {0};
    if (!out || (!data && len)) {
        ampc_sb_puts(&sb, "ampc_onnx_import_buffer: out is NULL, or data is NULL with len > 0");
        give_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    if (o && ((o->n_shapes && !o->shapes) || (o->n_constants && !o->constants) ||
              o->n_shapes < 0 || o->n_constants < 0)) {
        ampc_sb_puts(&sb, "ampc_import_options: a count is negative or its array is NULL");
        give_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    Onnx__ModelProto *m = ampc_onnx_model_parse(data, len, &sb);
    if (!m) {
        give_err(err, &sb);
        return AMPC_E_PARSE;
    }
    ampc_status st = ampc_onnx_model_import(m, base_dir, o, out, &sb, NULL);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st != AMPC_OK) give_err(err, &sb);
    else ampc_sb_free(&sb);
    return st;
}

/* Reads the file whole, takes its folder as the base of external data, and prefixes any error
 * with the path. */
ampc_status ampc_onnx_import_file(const char *path, const ampc_import_options *o, ampc_graph **out,
                                  char **err) {
    if (err) *err = NULL;
    if (out) *out = NULL;
    ampc_strbuf sb = {0};
    if (!path || !out) {
        ampc_sb_puts(&sb, "ampc_onnx_import_file: path or out is NULL");
        give_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    uint8_t *buf;
    size_t len;
    ampc_status st = ampc_onnx_slurp(path, &buf, &len, &sb);
    if (st != AMPC_OK) {
        give_err(err, &sb);
        return st;
    }
    ampc_sb_free(&sb);
    char *dir = ampc_onnx_dir_of(path);
    char *e = NULL;
    st = ampc_onnx_import_buffer(buf, len, dir, o, out, err ? &e : NULL);
    free(dir);
    free(buf);
    if (st != AMPC_OK && err) {
        ampc_sb_printf(&sb, "%s: %s", path, e ? e : "");
        free(e);
        *err = ampc_sb_take(&sb);
    }
    return st;
}

/*
 * test_fuse_elementwise.c — chains of elementwise ops computed in one kernel
 * (passes/fuse_elementwise.c, plan-memory's handling of fused values, codegen's lower_chain):
 *   - a chain of five ops (Cast, Mul, Add with a broadcast bias, Relu, Cast) is one kernel
 *     step; the four values inside it get no memory; the pipeline's verification (reference
 *     evaluator before and after each pass) holds;
 *   - a Gather heads a chain (BERT's embedding lookup and its two Adds: one kernel), and so do
 *     a Transpose, a Slice (an offset, a reversed axis) and an Expand: the chain reads the
 *     view's input in place, no copy step, equal to the reference on a GPU; a view every
 *     reader of which reads through it (a chain, another view) is never stored, and a chain
 *     reading a buffer through a view is not written over that buffer;
 *   - a Concat read only by an elementwise node of its shape is computed in that node's chain,
 *     its inputs' chains (a rotary embedding's Neg of a Slice) and views (a class token's
 *     Expand) in its branches: a rotary embedding, and a class token joined to the patches
 *     before the position embedding's Add, are one kernel each, equal to the reference on a GPU;
 *     a Concat read twice, or by a reduction, is stored; each Concat read in place counts
 *     towards its chain's size (a sum of 17 compiles);
 *   - a Cast after a LayerNormalization, and a Relu after a BatchNormalization, is written by
 *     the norm's kernel, equal bit for bit on a GPU to the two kernels it replaces;
 *   - the padding mask as transformers exports it (a Gather in order, an Expand to the shape
 *     it has: the simplify pass) is two kernels;
 *   - what stops a chain: a value read twice, a graph output, a change of shape, a node that is
 *     not elementwise;
 *   - a value read by the chain's first node stays alive until the chain's last node runs (no
 *     other value may take its bytes in between);
 *   - NVRTC compiles the chain's kernel;
 *   - on a GPU, the chains' outputs equal the reference evaluator's: exactly for correctly
 *     rounded ops (f32, f16, bf16; a bool mask chain), within 1e-5 past a reduction and sinf /
 *     expf; skipped without one.
 */
#include "support.h"

#include "compiler/module.h"
#include "ir/ref/ref.h"

#include <stdlib.h>
#include <string.h>

static ampc_module *compile(ampc_graph *g) {
    static const int32_t sm80 = 80;
    ampc_pipeline_options po = {.verify = true};
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    return m;
}

static int32_t steps_of(const ampc_module *m, ampc_rt_step_kind kind) {
    const ampc_rt_plan *p = &m->cg->plan;
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_steps; i++) n += p->steps[i].kind == (uint8_t)kind;
    return n;
}

/* ONNX's TensorProto code of t (Cast's `to`). */
static int64_t onnx_code(ampc_dtype t) {
    return t == AMPC_DTYPE_F16 ? 10 : t == AMPC_DTYPE_BF16 ? 16 : 1;
}

/* y = Cast<t>(Relu(Cast<f32>(x) * 0.5 + bias[8])), x [4, 8] of type t. */
static ampc_graph *five(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("five");
    ampc_value *x = t_input(g, "x", t, SHAPE(4, 8));
    double half = 0.5, b[8] = {1, -2, 3, -4, 0.25, -0.5, 2, -1};
    ampc_attr_arg to32 = AMPC_ATTR_I("to", 1), back = AMPC_ATTR_I("to", onnx_code(t));
    ampc_value *y = ampc_op(g, "Cast", &x, 1, &to32, 1);
    y = ampc_mul(g, y, t_const_f32(g, SHAPE(), &half));
    y = ampc_add(g, y, t_const_f32(g, SHAPE(8), b));
    y = ampc_relu(g, y);
    y = ampc_op(g, "Cast", &y, 1, &back, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(fuse_elementwise, a_chain_is_one_kernel_and_its_values_no_memory) {
    ampc_graph *g = five(AMPC_DTYPE_F16);
    ampc_module *m = compile(g);
    cr_assert_eq(steps_of(m, AMPC_RT_STEP_KERNEL), 1);
    cr_assert_eq(m->cg->plan.n_steps, 1);
    int32_t fused = 0;
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        if (!(v->flags & AMPC_VALUE_FUSED)) continue;
        fused++;
        cr_assert_eq(v->mem_space, AMPC_MEM_NONE, "'%s' has memory", v->name);
    }
    cr_assert_eq(fused, 4, "the four values inside the chain");
    const char *label = m->cg->plan.steps[0].label;
    cr_assert(strstr(label, "Cast") && strstr(label, "Mul") && strstr(label, "Add") &&
                  strstr(label, "Relu"), "%s", label);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* x -> Neg -> a; a read by Exp and by Sin: a stays in memory, Exp and Sin each end a chain. */
Test(fuse_elementwise, a_value_read_twice_is_stored) {
    ampc_graph *g = ampc_graph_create("twice");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(16));
    ampc_value *a = ampc_op(g, "Neg", &x, 1, NULL, 0);
    ampc_value *e = ampc_exp(g, a), *s = ampc_op(g, "Sin", &a, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, ampc_add(g, e, s), "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    cr_assert(!(a->flags & AMPC_VALUE_FUSED));
    cr_assert_eq(a->mem_space, AMPC_MEM_ARENA);
    cr_assert(e->flags & AMPC_VALUE_FUSED);
    cr_assert(s->flags & AMPC_VALUE_FUSED);
    cr_assert_eq(steps_of(m, AMPC_RT_STEP_KERNEL), 2, "Neg; Exp, Sin and Add");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise, outputs_shape_changes_and_other_ops_stop_a_chain) {
    ampc_graph *g = ampc_graph_create("stops");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(8));
    ampc_value *z = t_input(g, "z", AMPC_DTYPE_F32, SHAPE(4, 8));
    ampc_value *n = ampc_op(g, "Sin", &x, 1, NULL, 0);  /* [8], read by an Add of [4, 8] */
    ampc_value *s = ampc_add(g, n, z);                  /* [4, 8] */
    ampc_value *r = ampc_relu(g, s);                    /* also a graph output */
    ampc_value *t = ampc_op(g, "Tanh", &r, 1, NULL, 0);
    int64_t axes[1] = {1};
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *ins[2] = {t, t_const_i64(g, SHAPE(1), axes)};
    ampc_value *red = ampc_op(g, "ReduceSum", ins, 2, &keep, 1); /* not elementwise */
    ampc_value *out = ampc_exp(g, red);
    cr_assert_eq(ampc_output(g, r, "r"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, out, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    cr_assert(!(n->flags & AMPC_VALUE_FUSED), "its reader's shape differs, and Sin is not cheap");
    cr_assert(s->flags & AMPC_VALUE_FUSED);
    cr_assert(!(r->flags & AMPC_VALUE_FUSED), "a graph output");
    cr_assert(!(t->flags & AMPC_VALUE_FUSED), "read by a reduction");
    cr_assert(!(red->flags & AMPC_VALUE_FUSED), "made by a reduction");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* l = Exp(x) is read by Neg (fused into the final Add) and by Sin (an output); between them
 * ReduceSum makes w. Were l's life to end at Sin, w could take its bytes before the Add's kernel
 * reads l. */
Test(fuse_elementwise, a_leaf_lives_until_the_chain_runs) {
    ampc_graph *g = ampc_graph_create("leaf");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64));
    ampc_value *q = t_input(g, "q", AMPC_DTYPE_F32, SHAPE(64, 64));
    ampc_value *l = ampc_exp(g, x);
    ampc_value *p = ampc_op(g, "Neg", &l, 1, NULL, 0);
    ampc_value *s = ampc_op(g, "Sin", &l, 1, NULL, 0);
    int64_t axes[1] = {1};
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *ins[2] = {q, t_const_i64(g, SHAPE(1), axes)};
    ampc_value *w = ampc_op(g, "ReduceSum", ins, 2, &keep, 1);
    ampc_value *y = ampc_add(g, p, w);
    cr_assert_eq(ampc_output(g, s, "s"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    cr_assert(p->flags & AMPC_VALUE_FUSED);
    cr_assert(!(l->flags & AMPC_VALUE_FUSED));
    int64_t lb = (int64_t)ampc_ir_nbytes(l), wb = (int64_t)ampc_ir_nbytes(w);
    bool overlap = l->mem_offset < w->mem_offset + wb && w->mem_offset < l->mem_offset + lb;
    cr_assert(!overlap, "l [%lld, +%lld) and w [%lld, +%lld) share bytes", (long long)l->mem_offset,
              (long long)lb, (long long)w->mem_offset, (long long)wb);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise, the_chain_compiles_for_sm80) {
    ampc_dtype ts[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        ampc_graph *g = five(ts[i]);
        ampc_module *m = compile(g);
        cr_assert(strstr(ampc_module_ptx(m, 0), ".entry k0_chain"), "%s", ampc_dtype_name(ts[i]));
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

/* ---- on a GPU ----------------------------------------------------------------------------- */

static void fill(ampc_tensor *t, uint64_t seed) {
    for (int64_t i = 0; i < ampc_shape_numel(&t->shape); i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ampc_ref_store_f64(t->data, t->dtype, i, (double)((seed >> 33) % 2000) / 250.0 - 4.0);
    }
}

/* Runs g on the GPU and compares every output with the reference evaluator, output j within
 * atol + rtol[j] * |expected| (both 0: equal exactly). */
static void close_on_gpu(ampc_graph *g, ampc_tensor *in, int32_t n_in, int32_t n_out,
                         const double *rtol, double atol) {
    t_skip_without_gpu();
    ampc_tensor ref[3], got[3];
    cr_assert_eq(ampc_graph_evaluate(g, in, n_in, ref, n_out), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    for (int32_t j = 0; j < n_out; j++)
        got[j] = (ampc_tensor){ref[j].dtype, ref[j].shape,
                               calloc((size_t)ampc_shape_numel(&ref[j].shape) + 1, 8)};
    cr_assert_eq(ampc_module_run(m, in, n_in, got, n_out, NULL), AMPC_OK, "%s", ampc_module_errors(m));
    for (int32_t j = 0; j < n_out; j++) {
        char msg[512] = "";
        cr_assert(t_tensors_close(&got[j], &ref[j], rtol[j], atol, "y", msg, sizeof msg), "%s", msg);
        free(got[j].data);
        ampc_tensor_free(&ref[j]);
    }
    ampc_module_destroy(m);
}

static void same_on_gpu(ampc_graph *g, ampc_tensor *in, int32_t n_in, int32_t n_out,
                        const double *rtol) {
    close_on_gpu(g, in, n_in, n_out, rtol, 0);
}

Test(fuse_elementwise_gpu, five_ops_in_each_float_type) {
    ampc_dtype ts[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        ampc_graph *g = five(ts[i]);
        ampc_tensor x = {ts[i], SHAPE(4, 8), calloc(32, 8)};
        fill(&x, 3 + (uint64_t)i);
        static const double exact[1] = {0};
        same_on_gpu(g, &x, 1, 1, exact); /* Cast, Mul, Add, Relu: correctly rounded ops */
        free(x.data);
        ampc_graph_destroy(g);
    }
}

/* Ends a mask graph: output "mask" = Where(cond, 0, -1e4). */
static ampc_graph *masked(ampc_graph *g, ampc_value *cond) {
    double zero = 0, big = -1e4;
    ampc_value *w_in[3] = {cond, t_const_f32(g, SHAPE(), &zero), t_const_f32(g, SHAPE(), &big)};
    cr_assert_eq(ampc_output(g, ampc_op(g, "Where", w_in, 3, NULL, 0), "mask"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    return g;
}

/* The padding mask as transformers exports it: Cast(m, bool), a Gather of the whole axis in
 * order (indices 0..7), And with an all-true [8, 1] (the broadcast to [1, 8, 8]), an Expand to
 * the shape it has, Where(e, 0, -1e4). simplify makes the Gather a view, moves the Cast past it
 * and drops the Expand, so the And joins the Where's chain and the Cast, read broadcast, is
 * computed in it: one kernel, no copy; with `order` false the indices are reversed and the
 * Gather stays (the Cast, the Gather, the chain). */
static ampc_graph *padding_mask(bool order) {
    ampc_graph *g = ampc_graph_create("padmask");
    ampc_value *m = t_input(g, "m", AMPC_DTYPE_I64, SHAPE(1, 8));
    ampc_attr_arg to_bool = AMPC_ATTR_I("to", 9), axis1 = AMPC_ATTR_I("axis", 1);
    ampc_value *c = ampc_op(g, "Cast", &m, 1, &to_bool, 1);
    int64_t idx[8];
    for (int32_t i = 0; i < 8; i++) idx[i] = order ? i : 7 - i;
    ampc_value *gi_in[2] = {c, t_const_i64(g, SHAPE(1, 8), idx)};
    ampc_value *gi = ampc_op(g, "Gather", gi_in, 2, &axis1, 1); /* [1, 1, 8] */
    bool yes[8] = {true, true, true, true, true, true, true, true};
    ampc_value *and_in[2] = {gi, t_const(g, AMPC_DTYPE_BOOL, SHAPE(8, 1), yes)};
    ampc_value *a = ampc_op(g, "And", and_in, 2, NULL, 0); /* [1, 8, 8] */
    int64_t to[3] = {1, 8, 8};
    ampc_value *e_in[2] = {a, t_const_i64(g, SHAPE(3), to)};
    ampc_value *e = ampc_op(g, "Expand", e_in, 2, NULL, 0);
    return masked(g, e);
}

Test(fuse_elementwise, the_exported_padding_mask_is_one_kernel) {
    for (int32_t order = 1; order >= 0; order--) {
        ampc_graph *g = padding_mask(order);
        ampc_module *m = compile(g); /* the pipeline's verification: the evaluator agrees */
        int32_t gathers = 0, expands = 0;
        for (int32_t i = 0; i < g->n_nodes; i++) {
            gathers += !g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_GATHER;
            expands += !g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_EXPAND;
        }
        cr_assert_eq(expands, 0, "the Expand to the shape it has is gone");
        cr_assert_eq(gathers, order ? 0 : 1, "a Gather in order is a view, reversed it stays");
        cr_assert_eq(steps_of(m, AMPC_RT_STEP_COPY), 0);
        cr_assert_eq(steps_of(m, AMPC_RT_STEP_KERNEL), order ? 1 : 3);
        const char *label = m->cg->plan.steps[m->cg->plan.n_steps - 1].label;
        cr_assert(strstr(label, "And") && strstr(label, "Where"), "%s", label);
        cr_assert(!order || strstr(label, "Cast"), "the Cast is computed in the chain: %s", label);
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

/* Runs mask graph g (destroying it) on the GPU with padding mask mv [1, 8]: the reference
 * evaluator's mask exactly. */
static void mask_same_on_gpu(ampc_graph *g, const int64_t mv[8]) {
    int64_t m[8];
    memcpy(m, mv, sizeof m);
    ampc_tensor in[1] = {{AMPC_DTYPE_I64, SHAPE(1, 8), m}};
    static const double exact[1] = {0};
    same_on_gpu(g, in, 1, 1, exact);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise_gpu, the_exported_padding_mask) {
    static const int64_t mv[8] = {1, 1, 0, 1, 0, 0, 1, 1};
    for (int32_t order = 1; order >= 0; order--) mask_same_on_gpu(padding_mask(order), mv);
}

/* The mask as transformers 5 exports it at opset 17: Cast(m, bool) [1, 8], Flatten [8, 1],
 * Reshape [1, 1, 1, 8], And with a constant [1, 1, 8, 1], Where(e, 0, -1e4). simplify moves the
 * Cast past both views; the Cast, read broadcast by the And, is computed in the chain: one
 * kernel. */
static ampc_graph *mask_views(void) {
    ampc_graph *g = ampc_graph_create("maskviews");
    ampc_value *m = t_input(g, "m", AMPC_DTYPE_I64, SHAPE(1, 8));
    ampc_attr_arg to_bool = AMPC_ATTR_I("to", 9), axis2 = AMPC_ATTR_I("axis", 2);
    ampc_value *c = ampc_op(g, "Cast", &m, 1, &to_bool, 1);
    ampc_value *f = ampc_op(g, "Flatten", &c, 1, &axis2, 1); /* [8, 1] */
    int64_t to[4] = {1, 1, 1, 8};
    ampc_value *r_in[2] = {f, t_const_i64(g, SHAPE(4), to)};
    ampc_value *r = ampc_op(g, "Reshape", r_in, 2, NULL, 0);
    bool rows[8] = {true, false, true, true, true, true, false, true};
    ampc_value *and_in[2] = {t_const(g, AMPC_DTYPE_BOOL, SHAPE(1, 1, 8, 1), rows), r};
    ampc_value *a = ampc_op(g, "And", and_in, 2, NULL, 0); /* [1, 1, 8, 8] */
    return masked(g, a);
}

Test(fuse_elementwise, a_cast_moves_past_views_into_the_chain) {
    ampc_graph *g = mask_views();
    ampc_module *m = compile(g);
    cr_assert_eq(m->cg->plan.n_steps, 1);
    const char *label = m->cg->plan.steps[0].label;
    cr_assert(strstr(label, "Cast") && strstr(label, "And") && strstr(label, "Where"), "%s", label);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise_gpu, a_cast_moved_past_views) {
    static const int64_t mv[8] = {1, 0, 0, 1, 1, 0, 1, 1};
    mask_same_on_gpu(mask_views(), mv);
}

/* BERT's embeddings: Gather(table [11, 8], ids [2, 5]) + position [5, 8] + token type [8], the
 * lookup heading the chain; ids run-time, with negative entries (counted from the end). */
static ampc_graph *embedding(void) {
    ampc_graph *g = ampc_graph_create("embed");
    ampc_value *ids = t_input(g, "ids", AMPC_DTYPE_I64, SHAPE(2, 5));
    double table[88], pos[40], tok[8];
    for (int32_t i = 0; i < 88; i++) table[i] = (double)(i % 13) * 0.25 - 1.0;
    for (int32_t i = 0; i < 40; i++) pos[i] = (double)(i % 7) * 0.125;
    for (int32_t i = 0; i < 8; i++) tok[i] = (double)i * -0.5;
    ampc_value *lk_in[2] = {t_const_f32(g, SHAPE(11, 8), table), ids};
    ampc_value *y = ampc_op(g, "Gather", lk_in, 2, NULL, 0);
    y = ampc_add(g, y, t_const_f32(g, SHAPE(5, 8), pos));
    y = ampc_add(g, y, t_const_f32(g, SHAPE(8), tok));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Compiles g (and destroys it): one step, a kernel whose label names ops a and b. */
static void one_kernel_of(ampc_graph *g, const char *a, const char *b) {
    ampc_module *m = compile(g);
    cr_assert_eq(m->cg->plan.n_steps, 1, "one kernel for %s and %s", a, b);
    const char *label = m->cg->plan.steps[0].label;
    cr_assert(strstr(label, a) && strstr(label, b), "%s", label);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise, a_lookup_heads_a_chain) { one_kernel_of(embedding(), "Gather", "Add"); }

Test(fuse_elementwise_gpu, a_lookup_heading_a_chain) {
    ampc_graph *g = embedding();
    int64_t ids[10] = {0, 3, 10, -1, -11, 5, 7, 2, 9, 1};
    ampc_tensor in[1] = {{AMPC_DTYPE_I64, SHAPE(2, 5), ids}};
    static const double tol[1] = {0};
    same_on_gpu(g, in, 1, 1, tol);
    ampc_graph_destroy(g);
}

/* Views heading chains, x [2, 3, 4, 8]:
 *   t = Relu(Transpose(x, (0, 2, 1, 3)) + z)                     [2, 4, 3, 8]
 *   s = Neg(Slice(x, axis 3 from 4) * w) + Slice(x, axis 2 reversed, axis 3 to 4)   [2, 3, 4, 4]
 *   e = Abs(Expand(b [3, 1, 8] to [2, 3, 4, 8]) - x)              [2, 3, 4, 8]
 * each chain one kernel, no copy step. */
static ampc_graph *views(void) {
    ampc_graph *g = ampc_graph_create("views");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 4, 8));
    ampc_value *z = t_input(g, "z", AMPC_DTYPE_F32, SHAPE(2, 4, 3, 8));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(3, 1, 8));
    ampc_attr_arg perm = AMPC_ATTR_IS("perm", ((int64_t[]){0, 2, 1, 3}), 4);
    ampc_value *t = ampc_op(g, "Transpose", &x, 1, &perm, 1);
    cr_assert_eq(ampc_output(g, ampc_relu(g, ampc_add(g, t, z)), "t"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    int64_t s4 = 4, e8 = 8, a3 = 3, from[2] = {-1, 0}, upto[2] = {INT64_MIN, 4}, ax[2] = {2, 3},
            st[2] = {-1, 1};
    ampc_value *hi_in[4] = {x, t_const_i64(g, SHAPE(1), &s4), t_const_i64(g, SHAPE(1), &e8),
                            t_const_i64(g, SHAPE(1), &a3)};
    ampc_value *lo_in[5] = {x, t_const_i64(g, SHAPE(2), from), t_const_i64(g, SHAPE(2), upto),
                            t_const_i64(g, SHAPE(2), ax), t_const_i64(g, SHAPE(2), st)};
    double w[4] = {0.5, -2, 4, 0.25};
    ampc_value *upper = ampc_op(g, "Slice", hi_in, 4, NULL, 0);
    ampc_value *lower = ampc_op(g, "Slice", lo_in, 5, NULL, 0);
    ampc_value *scaled = ampc_mul(g, upper, t_const_f32(g, SHAPE(4), w));
    ampc_value *neg = ampc_op(g, "Neg", &scaled, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, ampc_add(g, neg, lower), "s"), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t to[4] = {2, 3, 4, 8};
    ampc_value *ex_in[2] = {b, t_const_i64(g, SHAPE(4), to)};
    ampc_value *e = ampc_op(g, "Expand", ex_in, 2, NULL, 0);
    ampc_value *d = ampc_op(g, "Sub", (ampc_value *[]){e, x}, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, ampc_op(g, "Abs", &d, 1, NULL, 0), "e"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    return g;
}

Test(fuse_elementwise, views_head_chains) {
    ampc_graph *g = views();
    ampc_module *m = compile(g);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_steps, 3, "one kernel a chain, no copy: %d steps", p->n_steps);
    cr_assert_eq(steps_of(m, AMPC_RT_STEP_KERNEL), 3);
    const char *heads[3] = {"Transpose", "Slice", "Expand"};
    for (int32_t i = 0; i < 3; i++) {
        bool found = false;
        for (int32_t j = 0; j < p->n_steps && !found; j++) found = strstr(p->steps[j].label, heads[i]);
        cr_assert(found, "a chain's kernel covers the %s", heads[i]);
    }
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise_gpu, views_heading_chains) {
    ampc_graph *g = views();
    ampc_tensor in[3] = {{AMPC_DTYPE_F32, SHAPE(2, 3, 4, 8), calloc(192, 4)},
                         {AMPC_DTYPE_F32, SHAPE(2, 4, 3, 8), calloc(192, 4)},
                         {AMPC_DTYPE_F32, SHAPE(3, 1, 8), calloc(24, 4)}};
    for (int32_t i = 0; i < 3; i++) fill(&in[i], 21 + (uint64_t)i);
    static const double exact[3] = {0, 0, 0};
    same_on_gpu(g, in, 3, 3, exact); /* Add, Relu, Mul, Neg, Sub, Abs: correctly rounded */
    for (int32_t i = 0; i < 3; i++) free(in[i].data);
    ampc_graph_destroy(g);
}

/* The two halves of t's last axis (of 8 elements), as Slices: lo = 0:4, hi = 4:8 (t of rank 4). */
static void halves(ampc_graph *g, ampc_value *t, ampc_value **lo, ampc_value **hi) {
    int64_t k0 = 0, k4 = 4, k8 = 8, k3 = 3;
    ampc_value *ax = t_const_i64(g, SHAPE(1), &k3), *c4 = t_const_i64(g, SHAPE(1), &k4);
    ampc_value *lo_in[4] = {t, t_const_i64(g, SHAPE(1), &k0), c4, ax};
    ampc_value *hi_in[4] = {t, c4, t_const_i64(g, SHAPE(1), &k8), ax};
    *lo = ampc_op(g, "Slice", lo_in, 4, NULL, 0);
    *hi = ampc_op(g, "Slice", hi_in, 4, NULL, 0);
}

/* A view with three readers, each reading through it (a rotary embedding's heads):
 *   a = Neg(x [2, 4, 4, 8]); t = Transpose(a, (0, 2, 1, 3))
 *   z = Concat(Slice(t, last axis 0:4), Neg(Slice(t, last axis 4:8)))   (a copy and a chain)
 *   y = ReduceMax(t + a, last axis)       (a view heading a chain, its source read directly too)
 * t is never stored, and t + a may not be written over a: its kernel reads a transposed. */
static ampc_graph *shared_view(void) {
    ampc_graph *g = ampc_graph_create("shared_view");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4, 4, 8));
    ampc_value *a = ampc_op(g, "Neg", &x, 1, NULL, 0);
    ampc_attr_arg perm = AMPC_ATTR_IS("perm", ((int64_t[]){0, 2, 1, 3}), 4);
    ampc_value *t = ampc_op(g, "Transpose", &a, 1, &perm, 1);
    ampc_value *lo, *hi;
    halves(g, t, &lo, &hi);
    ampc_value *neg = ampc_op(g, "Neg", &hi, 1, NULL, 0);
    ampc_attr_arg last = AMPC_ATTR_I("axis", -1);
    ampc_value *z = ampc_op(g, "Concat", (ampc_value *[]){lo, neg}, 2, &last, 1);
    int64_t k3 = 3;
    ampc_value *ax = t_const_i64(g, SHAPE(1), &k3);
    cr_assert_eq(ampc_output(g, z, "z"), AMPC_OK, "%s", ampc_graph_errors(g));
    /* made last, so that it is a's last reader, and read by a reduction, so that it is no
     * graph output (which is never written over an input) */
    ampc_value *sum = ampc_add(g, t, a);
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *red_in[2] = {sum, ax};
    ampc_value *y = ampc_op(g, "ReduceMax", red_in, 2, &keep, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(fuse_elementwise, a_view_every_reader_reads_through_is_not_stored) {
    ampc_graph *g = shared_view();
    ampc_module *m = compile(g);
    ampc_value *t = NULL, *a = NULL, *y = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        if (n->op == AMPC_OP_TRANSPOSE) t = n->outputs[0];
        if (n->op == AMPC_OP_NEG && n->inputs[0]->flags & AMPC_VALUE_INPUT) a = n->outputs[0];
        if (n->op == AMPC_OP_ADD) y = n->outputs[0]; /* t + a */
    }
    cr_assert(t && a && y);
    cr_assert(t->flags & AMPC_VALUE_FUSED, "the transposed heads are never stored");
    cr_assert_eq(t->mem_space, AMPC_MEM_NONE);
    const ampc_rt_plan *p = &m->cg->plan;
    for (int32_t j = 0; j < p->n_steps; j++)
        cr_assert(strncmp(p->steps[j].label, "Transpose", 9) != 0,
                  "no step of the Transpose's own: %s", p->steps[j].label);
    cr_assert(y->mem_space != a->mem_space || y->mem_offset != a->mem_offset,
              "t + a reads a transposed: it may not be written over it");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* Twenty Slices in a row, each dropping the first element, then a Neg: a view of a view never
 * stored composes with it, up to eight in a row; the ninth is stored (the composition recurses
 * once per view, so a hostile run of views cannot exhaust the stack), and so is the eighteenth. */
Test(fuse_elementwise, a_long_run_of_views_is_stored_every_few) {
    ampc_graph *g = ampc_graph_create("run");
    ampc_value *y = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64));
    int64_t one = 1, end = INT64_MAX, zero = 0;
    for (int32_t i = 0; i < 20; i++) {
        ampc_value *in[4] = {y, t_const_i64(g, SHAPE(1), &one), t_const_i64(g, SHAPE(1), &end),
                             t_const_i64(g, SHAPE(1), &zero)};
        y = ampc_op(g, "Slice", in, 4, NULL, 0);
    }
    cr_assert_eq(ampc_output(g, ampc_op(g, "Neg", &y, 1, NULL, 0), "y"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_module *m = compile(g);
    const ampc_rt_plan *p = &m->cg->plan;
    int32_t stored = 0;
    for (int32_t j = 0; j < p->n_steps; j++) stored += !strncmp(p->steps[j].label, "Slice", 5);
    cr_assert_eq(stored, 2, "the 9th and the 18th Slice are stored: %d", stored);
    cr_assert_eq(p->n_steps, 3);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise_gpu, a_view_every_reader_reads_through) {
    ampc_graph *g = shared_view();
    ampc_tensor in[1] = {{AMPC_DTYPE_F32, SHAPE(2, 4, 4, 8), calloc(256, 4)}};
    fill(&in[0], 31);
    static const double exact[2] = {0, 0};
    same_on_gpu(g, in, 1, 2, exact); /* Neg, Add and copies: exact; z first, then y */
    free(in[0].data);
    ampc_graph_destroy(g);
}

/* A cheap op of graph inputs alone, read broadcast by a chain: Neg(x [8]) + z [4, 8], then Relu
 * and Mul by w [4, 1]: the Neg is computed in the chain, once for each of the 32 elements. */
static ampc_graph *broadcast_neg(void) {
    ampc_graph *g = ampc_graph_create("bneg");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(8));
    ampc_value *z = t_input(g, "z", AMPC_DTYPE_F32, SHAPE(4, 8));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(4, 1));
    ampc_value *n = ampc_op(g, "Neg", &x, 1, NULL, 0);
    ampc_value *y = ampc_mul(g, ampc_relu(g, ampc_add(g, n, z)), w);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(fuse_elementwise, a_cheap_op_read_broadcast_is_computed_in_the_chain) {
    one_kernel_of(broadcast_neg(), "Neg", "Mul");
}

Test(fuse_elementwise_gpu, a_cheap_op_read_broadcast) {
    ampc_graph *g = broadcast_neg();
    ampc_tensor in[3] = {{AMPC_DTYPE_F32, SHAPE(8), calloc(8, 4)},
                         {AMPC_DTYPE_F32, SHAPE(4, 8), calloc(32, 4)},
                         {AMPC_DTYPE_F32, SHAPE(4, 1), calloc(4, 4)}};
    for (int32_t i = 0; i < 3; i++) fill(&in[i], 11 + (uint64_t)i);
    static const double exact[1] = {0};
    same_on_gpu(g, in, 3, 1, exact); /* Neg, Add, Relu, Mul: correctly rounded ops */
    for (int32_t i = 0; i < 3; i++) free(in[i].data);
    ampc_graph_destroy(g);
}

/* y = Cast<f32>(LayerNormalization(x [5, len] f16, scale, bias)): rows of 256 take the
 * warp-row kernel, rows of 2080 the row-loop one. */
static ampc_graph *norm_cast(int64_t len) {
    ampc_graph *g = ampc_graph_create("normcast");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(5, len));
    double *sc = malloc((size_t)len * sizeof *sc), *bi = malloc((size_t)len * sizeof *bi);
    for (int64_t i = 0; i < len; i++) sc[i] = 0.5 + (double)(i % 9) * 0.125, bi[i] = (double)(i % 5) - 2.0;
    ampc_attr_arg to16 = AMPC_ATTR_I("to", 10), to32 = AMPC_ATTR_I("to", 1);
    ampc_value *s32 = t_const_f32(g, SHAPE(len), sc), *b32 = t_const_f32(g, SHAPE(len), bi);
    ampc_value *ln_in[3] = {x, ampc_op(g, "Cast", &s32, 1, &to16, 1), ampc_op(g, "Cast", &b32, 1, &to16, 1)};
    ampc_value *y = ampc_op(g, "LayerNormalization", ln_in, 3, NULL, 0);
    cr_assert_eq(ampc_output(g, ampc_op(g, "Cast", &y, 1, &to32, 1), "y"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    free(sc), free(bi);
    return g;
}

Test(fuse_elementwise, a_cast_after_a_norm_is_written_by_the_norm) {
    for (int32_t k = 0; k < 2; k++) one_kernel_of(norm_cast(k ? 2080 : 256), "LayerNormalization", "Cast");
}

/* Compiles make(arg) with and without fuse-elementwise (steps: how many plan steps each way),
 * runs both on the GPU with inputs `in` and asserts that output 0 (n_out elements of 4 bytes)
 * is the same bit for bit. */
static void fused_equals_apart(ampc_graph *(*make)(int64_t), int64_t arg, ampc_tensor *in,
                               int32_t n_in, ampc_shape out_shape, const int32_t steps[2]) {
    ampc_tensor got[2];
    const int64_t n_out = ampc_shape_numel(&out_shape);
    for (int32_t j = 0; j < 2; j++) {
        static const int32_t sm80 = 80;
        const char *off[1] = {"fuse-elementwise"};
        ampc_pipeline_options po = {.verify = true, .disable = j ? off : NULL, .n_disable = j};
        ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
        ampc_graph *gj = make(arg);
        ampc_module *m = NULL;
        cr_assert_eq(ampc_compile(gj, &o, &m), AMPC_OK, "%s", ampc_graph_errors(gj));
        cr_assert_eq(m->cg->plan.n_steps, steps[j], "%s: %d steps", j ? "apart" : "fused",
                     m->cg->plan.n_steps);
        got[j] = (ampc_tensor){AMPC_DTYPE_F32, out_shape, calloc((size_t)n_out, 4)};
        cr_assert_eq(ampc_module_run(m, in, n_in, &got[j], 1, NULL), AMPC_OK, "%s",
                     ampc_module_errors(m));
        ampc_module_destroy(m);
        ampc_graph_destroy(gj);
    }
    cr_assert_eq(memcmp(got[0].data, got[1].data, (size_t)n_out * 4), 0,
                 "fused and separate kernels differ (%lld)", (long long)arg);
    free(got[0].data), free(got[1].data);
}

/* The fused norm gives what the norm's kernel and the Cast's kernel give, bit for bit (each
 * value rounded to f16 first), and the reference evaluator's values within f16's rounding. */
Test(fuse_elementwise_gpu, a_norm_writing_its_cast) {
    t_skip_without_gpu();
    for (int32_t k = 0; k < 2; k++) {
        const int64_t len = k ? 2080 : 256;
        ampc_graph *g = norm_cast(len);
        ampc_tensor x = {AMPC_DTYPE_F16, SHAPE(5, len), calloc((size_t)(5 * len), 2)};
        fill(&x, 11 + (uint64_t)k);
        static const double tol[1] = {2e-3};
        same_on_gpu(g, &x, 1, 1, tol);
        static const int32_t steps[2] = {1, 2};
        fused_equals_apart(norm_cast, len, &x, 1, SHAPE(5, len), steps);
        free(x.data);
        ampc_graph_destroy(g);
    }
}

/* y = Cast(Mul(w, RMSNormalization(x [5, len] f16, ones)), f32), w a constant: an exported RMS
 * norm's weight, multiplied after rounding (Hugging Face's Llama and T5). len 256: w [256], the
 * warp-row kernel; len 40: w [5, 1], one value a row, the row loop. The Cast gives output 0 four
 * bytes an element (fused_equals_apart). */
static ampc_graph *norm_mul(int64_t len) {
    ampc_graph *g = ampc_graph_create("normmul");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(5, len));
    double *one = malloc((size_t)len * sizeof *one), w[256];
    for (int64_t i = 0; i < len; i++) one[i] = 1.0;
    for (int64_t i = 0; i < 256; i++) w[i] = 0.5 + (double)(i % 7) * 0.375;
    ampc_attr_arg to16 = AMPC_ATTR_I("to", 10), to32 = AMPC_ATTR_I("to", 1);
    ampc_value *o32 = t_const_f32(g, SHAPE(len), one);
    ampc_value *w32 = len == 256 ? t_const_f32(g, SHAPE(len), w) : t_const_f32(g, SHAPE(5, 1), w);
    ampc_value *rms_in[2] = {x, ampc_op(g, "Cast", &o32, 1, &to16, 1)};
    ampc_value *y = ampc_op(g, "RMSNormalization", rms_in, 2, NULL, 0);
    ampc_value *m = ampc_mul(g, ampc_op(g, "Cast", &w32, 1, &to16, 1), y);
    cr_assert_eq(ampc_output(g, ampc_op(g, "Cast", &m, 1, &to32, 1), "y"), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    free(one);
    return g;
}

/* The norm's kernel writes the Mul's output: two steps (the norm with its Mul, the Cast); a Mul
 * by a graph input is not a constant weight and keeps its kernel. */
Test(fuse_elementwise, a_mul_by_a_constant_after_a_norm_is_written_by_the_norm) {
    for (int64_t len = 40; len <= 256; len += 216) {
        ampc_graph *g = norm_mul(len);
        ampc_module *m = compile(g);
        cr_assert_eq(m->cg->plan.n_steps, 2, "len %lld: %d steps", (long long)len, m->cg->plan.n_steps);
        const char *label = m->cg->plan.steps[0].label;
        cr_assert(strstr(label, "RMSNormalization") && strstr(label, "Mul"), "%s", label);
        const bool warp = strstr(ampc_module_cuda(m, 0), "norm_rows_warp<256,") != NULL;
        cr_assert_eq(warp, len == 256, "len %lld", (long long)len);
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
    ampc_graph *g = ampc_graph_create("normmul_input");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(5, 64));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F16, SHAPE(64));
    ampc_value *rms_in[2] = {x, w};
    ampc_value *y = ampc_op(g, "RMSNormalization", rms_in, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, ampc_mul(g, w, y), "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    cr_assert_eq(m->cg->plan.n_steps, 2, "a Mul by an input: %d steps", m->cg->plan.n_steps);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* The norm writing its Mul gives what the two kernels give, bit for bit, and the reference
 * evaluator's values within f16's rounding. */
Test(fuse_elementwise_gpu, a_norm_writing_its_mul) {
    t_skip_without_gpu();
    for (int64_t len = 40; len <= 256; len += 216) {
        ampc_graph *g = norm_mul(len);
        ampc_tensor x = {AMPC_DTYPE_F16, SHAPE(5, len), calloc((size_t)(5 * len), 2)};
        fill(&x, 17 + (uint64_t)len);
        static const double tol[1] = {2e-3};
        close_on_gpu(g, &x, 1, 1, tol, 1e-3);
        static const int32_t steps[2] = {2, 3};
        fused_equals_apart(norm_mul, len, &x, 1, SHAPE(5, len), steps);
        free(x.data);
        ampc_graph_destroy(g);
    }
}

/* BatchNormalization of x over c <= 40 channels, its scale, bias, mean and variance constants
 * varying by channel (variance positive). */
static ampc_value *batch_norm(ampc_graph *g, ampc_value *x, int64_t c) {
    double p[4][40];
    for (int64_t i = 0; i < c; i++)
        p[0][i] = 0.5 + 0.1 * (double)(i % 4), p[1][i] = 0.25 * (double)(i % 3) - 0.2,
        p[2][i] = 0.1 * (double)(i % 5) - 0.2, p[3][i] = 0.3 + 0.2 * (double)(i % 2);
    ampc_value *in[5] = {x, t_const_f32(g, SHAPE(c), p[0]), t_const_f32(g, SHAPE(c), p[1]),
                         t_const_f32(g, SHAPE(c), p[2]), t_const_f32(g, SHAPE(c), p[3])};
    return ampc_op(g, "BatchNormalization", in, 5, NULL, 0);
}

/* y = Relu(BatchNormalization(x [2, c, 5, 5] f32)): a pre-activation block's norm and ReLU. */
static ampc_graph *bn_relu(int64_t c) {
    ampc_graph *g = ampc_graph_create("bnrelu");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, c, 5, 5));
    ampc_value *y = batch_norm(g, x, c);
    cr_assert_eq(ampc_output(g, ampc_relu(g, y), "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(fuse_elementwise, a_relu_after_a_batch_norm_is_written_by_the_norm) {
    one_kernel_of(bn_relu(16), "BatchNormalization", "Relu");
}

/* The fused BatchNormalization and Relu give what their two kernels give, bit for bit, and the
 * reference evaluator's values. */
Test(fuse_elementwise_gpu, a_batch_norm_writing_its_relu) {
    t_skip_without_gpu();
    ampc_graph *g = bn_relu(16);
    ampc_tensor x = {AMPC_DTYPE_F32, SHAPE(2, 16, 5, 5), calloc(2 * 16 * 25, 4)};
    fill(&x, 5);
    static const double tol[1] = {1e-6};
    same_on_gpu(g, &x, 1, 1, tol);
    static const int32_t steps[2] = {1, 2};
    fused_equals_apart(bn_relu, 16, &x, 1, SHAPE(2, 16, 5, 5), steps);
    free(x.data);
    ampc_graph_destroy(g);
}

/* DenseNet's pre-activation of a concatenation, channels last (f32):
 *   a = Neg(xa [2, 3, 4, ca]); b = Abs(xb [2, 3, 4, 16]); c = Concat(a, b, last axis)
 *   e = Neg(xe [2, 3, 4, ca]); z = Transpose(e)   (e made after the Concat, stored: it could
 *                                  take a's or b's bytes were they dead after the Concat)
 *   y = Relu(BatchNormalization(Reshape(c, [24, ca + 16])))
 * With `twice` the Concat has a second reader, z2 = ReduceMax(c). */
static ampc_graph *concat_norm(int64_t ca, bool twice, ampc_value **vals) {
    ampc_graph *g = ampc_graph_create("concat_norm");
    const int64_t c = ca + 16;
    ampc_value *xa = t_input(g, "xa", AMPC_DTYPE_F32, SHAPE(2, 3, 4, ca));
    ampc_value *xb = t_input(g, "xb", AMPC_DTYPE_F32, SHAPE(2, 3, 4, 16));
    ampc_value *xe = t_input(g, "xe", AMPC_DTYPE_F32, SHAPE(2, 3, 4, ca));
    ampc_value *a = ampc_op(g, "Neg", &xa, 1, NULL, 0), *b = ampc_op(g, "Abs", &xb, 1, NULL, 0);
    ampc_attr_arg last = AMPC_ATTR_I("axis", -1), keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *cat = ampc_op(g, "Concat", (ampc_value *[]){a, b}, 2, &last, 1);
    ampc_value *e = ampc_op(g, "Neg", &xe, 1, NULL, 0);
    int64_t axis = 3, rows[2] = {24, c};
    ampc_value *ax = t_const_i64(g, SHAPE(1), &axis);
    ampc_attr_arg perm = AMPC_ATTR_IS("perm", ((int64_t[]){3, 0, 1, 2}), 4);
    ampc_value *z = ampc_op(g, "Transpose", &e, 1, &perm, 1);
    ampc_value *r = ampc_op(g, "Reshape", (ampc_value *[]){cat, t_const_i64(g, SHAPE(2), rows)}, 2,
                            NULL, 0);
    ampc_value *y = ampc_relu(g, batch_norm(g, r, c));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, z, "z"), AMPC_OK, "%s", ampc_graph_errors(g));
    if (twice) {
        ampc_value *z2 = ampc_op(g, "ReduceMax", (ampc_value *[]){cat, ax}, 2, &keep, 1);
        cr_assert_eq(ampc_output(g, z2, "z2"), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    if (vals) vals[0] = a, vals[1] = e, vals[2] = cat, vals[3] = r; /* (b: the Concat's input 1) */
    return g;
}

/* The Concat and the Reshape are never stored, the norm's kernel reading a and b (16 bytes at a
 * time when every input's channels are a multiple of 4 floats, ca = 8; one float at a time with
 * ca = 2), and a and b live until that kernel runs; a second reader of the Concat keeps it stored. */
Test(fuse_elementwise, a_concat_read_by_a_batch_norm_is_not_stored) {
    for (int64_t ca = 2; ca <= 8; ca += 6) {
        ampc_value *v[4];
        ampc_graph *g = concat_norm(ca, false, v);
        ampc_module *m = compile(g);
        cr_assert(v[2]->flags & AMPC_VALUE_FUSED && v[3]->flags & AMPC_VALUE_FUSED, "ca %lld",
                  (long long)ca);
        const ampc_rt_plan *plan = &m->cg->plan;
        cr_assert_eq(plan->n_steps, 5, "Neg, Abs, Neg, Transpose, the norm: %d steps", plan->n_steps);
        cr_assert(!(v[0]->flags & AMPC_VALUE_FUSED) && !(v[1]->flags & AMPC_VALUE_FUSED));
        const char *label = plan->steps[4].label, *src = ampc_module_cuda(m, 0);
        cr_assert(strstr(label, "BatchNormalization") && strstr(label, "Relu") &&
                  strstr(label, "Concat"), "%s", label);
        cr_assert_eq(strstr(src, "ampc::ld_vec<4>(src_ + at_, x_);") != NULL, ca == 8, "%s", src);
        const int64_t eb = (int64_t)ampc_ir_nbytes(v[1]);
        for (int32_t j = 0; j < 2; j++) { /* a and b, live until the norm's kernel */
            const ampc_value *x = v[2]->producer->inputs[j];
            const int64_t xb = (int64_t)ampc_ir_nbytes(x);
            cr_assert(x->mem_offset >= v[1]->mem_offset + eb || v[1]->mem_offset >= x->mem_offset + xb,
                      "input %d [%lld, +%lld) and e [%lld, +%lld) share bytes", j,
                      (long long)x->mem_offset, (long long)xb, (long long)v[1]->mem_offset,
                      (long long)eb);
        }
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
    ampc_value *v[4];
    ampc_graph *g = concat_norm(8, true, v);
    ampc_module *m = compile(g);
    cr_assert(!(v[2]->flags & AMPC_VALUE_FUSED), "a Concat with two readers is stored");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* The norm reading the Concat's inputs gives the reference evaluator's values, both forms. */
Test(fuse_elementwise_gpu, a_batch_norm_reading_a_concat) {
    t_skip_without_gpu();
    for (int64_t ca = 2; ca <= 8; ca += 6) {
        ampc_graph *g = concat_norm(ca, false, NULL);
        ampc_tensor in[3] = {{AMPC_DTYPE_F32, SHAPE(2, 3, 4, ca), calloc(24 * (size_t)ca, 4)},
                             {AMPC_DTYPE_F32, SHAPE(2, 3, 4, 16), calloc(24 * 16, 4)},
                             {AMPC_DTYPE_F32, SHAPE(2, 3, 4, ca), calloc(24 * (size_t)ca, 4)}};
        for (int32_t i = 0; i < 3; i++) fill(&in[i], 41 + (uint64_t)i);
        static const double tol[2] = {1e-6, 0}; /* z: a copy */
        close_on_gpu(g, in, 3, 2, tol, 1e-6);
        for (int32_t i = 0; i < 3; i++) free(in[i].data);
        ampc_graph_destroy(g);
    }
}

/* BERT's embeddings and their LayerNorm: Gather(table [11, len], ids [B, 512]) + position
 * [512, len] + token type [len], normalised over len with Scale and B: over 1024 rows (B = 2) the
 * norm's kernel computes the lookup and the Adds where it reads each element; over 512 (B = 1)
 * the chain keeps its kernel. len 64 takes the warp-row kernel, 40 the row loop. */
static ampc_graph *embedding_norm_b(int64_t len, int64_t batch) {
    ampc_graph *g = ampc_graph_create("embednorm");
    ampc_value *ids = t_input(g, "ids", AMPC_DTYPE_I64, SHAPE(batch, 512));
    double *table = malloc((size_t)(11 * len) * sizeof *table), *pos = malloc((size_t)(512 * len) * sizeof *pos);
    double *tok = malloc((size_t)len * sizeof *tok), *sc = malloc((size_t)len * sizeof *sc);
    for (int64_t i = 0; i < 11 * len; i++) table[i] = (double)(i % 13) * 0.25 - 1.0;
    for (int64_t i = 0; i < 512 * len; i++) pos[i] = (double)(i % 7) * 0.125;
    for (int64_t i = 0; i < len; i++) tok[i] = (double)(i % 3) * -0.5, sc[i] = 0.5 + (double)(i % 9) * 0.125;
    ampc_value *lk_in[2] = {t_const_f32(g, SHAPE(11, len), table), ids};
    ampc_value *y = ampc_op(g, "Gather", lk_in, 2, NULL, 0);
    y = ampc_add(g, y, t_const_f32(g, SHAPE(512, len), pos));
    y = ampc_add(g, y, t_const_f32(g, SHAPE(len), tok));
    ampc_value *ln_in[3] = {y, t_const_f32(g, SHAPE(len), sc), t_const_f32(g, SHAPE(len), tok)};
    ampc_attr_arg eps = AMPC_ATTR_F("epsilon", 1e-3f);
    cr_assert_eq(ampc_output(g, ampc_op(g, "LayerNormalization", ln_in, 3, &eps, 1), "y"), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    free(table), free(pos), free(tok), free(sc);
    return g;
}

static ampc_graph *embedding_norm(int64_t len) { return embedding_norm_b(len, 2); }

Test(fuse_elementwise, a_chain_before_a_norm_is_computed_by_the_norm) {
    for (int32_t k = 0; k < 2; k++) one_kernel_of(embedding_norm(k ? 40 : 64), "Gather", "LayerNormalization");
    ampc_graph *g = embedding_norm_b(64, 1);
    ampc_module *m = compile(g);
    cr_assert_eq(m->cg->plan.n_steps, 2, "512 rows: the chain, then the norm");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise_gpu, a_norm_computing_its_input) {
    t_skip_without_gpu();
    int64_t *ids = malloc(1024 * sizeof *ids);
    for (int32_t i = 0; i < 1024; i++) ids[i] = (int64_t)((i * 7) % 22) - 11; /* [-11, 10] */
    for (int32_t k = 0; k < 2; k++) {
        const int64_t len = k ? 40 : 64;
        ampc_graph *g = embedding_norm(len);
        ampc_tensor in[1] = {{AMPC_DTYPE_I64, SHAPE(2, 512), ids}};
        /* statistics in f32 against the reference's f64: outputs near 0 (x - mean against -B)
         * err by an f32 rounding of the terms (measured on the H200: 3e-8 at 0.0019) */
        static const double tol[1] = {1e-5};
        close_on_gpu(g, in, 1, 1, tol, 1e-6);
        static const int32_t steps[2] = {1, 4}; /* apart: the Gather, two Adds, the norm */
        fused_equals_apart(embedding_norm, len, in, 1, SHAPE(2, 512, len), steps);
        ampc_graph_destroy(g);
    }
    free(ids);
}

/* A bool step inside the chain (a mask as BERT builds it): Where(x > 0 and m, x, -1e4) then
 * Cast to f16, and the leaf l read before a reduction makes another value. */
Test(fuse_elementwise_gpu, mask_chain_and_a_leaf_across_a_reduction) {
    ampc_graph *g = ampc_graph_create("mask");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64));
    ampc_value *q = t_input(g, "q", AMPC_DTYPE_F32, SHAPE(64, 64));
    double zero = 0, big = -1e4;
    ampc_value *pos_in[2] = {x, t_const_f32(g, SHAPE(), &zero)};
    ampc_value *pos = ampc_op(g, "Greater", pos_in, 2, NULL, 0);
    ampc_value *neg = ampc_op(g, "Not", &pos, 1, NULL, 0);
    ampc_value *w_in[3] = {neg, x, t_const_f32(g, SHAPE(), &big)};
    ampc_value *wh = ampc_op(g, "Where", w_in, 3, NULL, 0);
    ampc_attr_arg to16 = AMPC_ATTR_I("to", 10);
    ampc_value *mask = ampc_op(g, "Cast", &wh, 1, &to16, 1);
    ampc_value *l = ampc_exp(g, ampc_op(g, "Neg", &x, 1, NULL, 0));
    ampc_value *p = ampc_op(g, "Sin", &l, 1, NULL, 0);
    int64_t axes[1] = {1};
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *ins[2] = {q, t_const_i64(g, SHAPE(1), axes)};
    ampc_value *red = ampc_op(g, "ReduceSum", ins, 2, &keep, 1);
    ampc_value *y = ampc_add(g, ampc_add(g, p, red), l);
    cr_assert_eq(ampc_output(g, mask, "mask"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_tensor in[2] = {{AMPC_DTYPE_F32, SHAPE(64), calloc(64, 4)},
                         {AMPC_DTYPE_F32, SHAPE(64, 64), calloc(64 * 64, 4)}};
    fill(&in[0], 7);
    fill(&in[1], 9);
    /* the mask exactly; y within 1e-5: the GPU's ReduceSum adds in another order than the
     * reference (measured on the H200: 3e-7 at worst), and sinf/expf are not correctly rounded */
    static const double tol[2] = {0, 1e-5};
    same_on_gpu(g, in, 2, 2, tol);
    free(in[0].data), free(in[1].data);
    ampc_graph_destroy(g);
}

/* ---- Concats read in place by a chain ----------------------------------------------------- */

/* A rotary embedding as Hugging Face's Llama writes it, on heads permuted from x [2, 3, 4, 8]
 * (type t): h = Transpose(x, (0, 2, 1, 3)) [2, 4, 3, 8]; rot = Concat(Neg(Slice(h, last axis
 * 4:8)), Slice(h, last axis 0:4)); y = h * cos + rot * sin (cos, sin [3, 8], graph inputs). */
static ampc_graph *rotary(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("rotary");
    ampc_value *x = t_input(g, "x", t, SHAPE(2, 3, 4, 8));
    ampc_value *cs = t_input(g, "cos", t, SHAPE(3, 8)), *sn = t_input(g, "sin", t, SHAPE(3, 8));
    ampc_attr_arg perm = AMPC_ATTR_IS("perm", ((int64_t[]){0, 2, 1, 3}), 4);
    ampc_value *h = ampc_op(g, "Transpose", &x, 1, &perm, 1);
    ampc_value *lo, *hi;
    halves(g, h, &lo, &hi);
    ampc_value *neg = ampc_op(g, "Neg", &hi, 1, NULL, 0);
    ampc_attr_arg last = AMPC_ATTR_I("axis", -1);
    ampc_value *rot = ampc_op(g, "Concat", (ampc_value *[]){neg, lo}, 2, &last, 1);
    ampc_value *y = ampc_add(g, ampc_mul(g, h, cs), ampc_mul(g, rot, sn));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* A class token joined to the patches along a middle axis, then a position embedding added:
 * y = Concat(Expand(cls [1, 1, 8] to [2, 1, 8]), p * 2, q, axis 1) + pos [8, 8], p [2, 5, 8] and
 * q [2, 2, 8] graph inputs: a view, a chain and a stored value as the Concat's inputs. */
static ampc_graph *class_token(void) {
    ampc_graph *g = ampc_graph_create("class_token");
    ampc_value *cls = t_input(g, "cls", AMPC_DTYPE_F32, SHAPE(1, 1, 8));
    ampc_value *p = t_input(g, "p", AMPC_DTYPE_F32, SHAPE(2, 5, 8));
    ampc_value *q = t_input(g, "q", AMPC_DTYPE_F32, SHAPE(2, 2, 8));
    ampc_value *pos = t_input(g, "pos", AMPC_DTYPE_F32, SHAPE(8, 8));
    int64_t to[3] = {2, 1, 8};
    double two = 2;
    ampc_value *ex_in[2] = {cls, t_const_i64(g, SHAPE(3), to)};
    ampc_value *e = ampc_op(g, "Expand", ex_in, 2, NULL, 0);
    ampc_value *twice = ampc_mul(g, p, t_const_f32(g, SHAPE(), &two));
    ampc_attr_arg axis = AMPC_ATTR_I("axis", 1);
    ampc_value *cat = ampc_op(g, "Concat", (ampc_value *[]){e, twice, q}, 3, &axis, 1);
    cr_assert_eq(ampc_output(g, ampc_add(g, cat, pos), "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* The graph's live steps and whether its Concat's output is stored. */
static void concat_fused_in(ampc_graph *g, int32_t steps) {
    ampc_module *m = compile(g);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_steps, steps, "%d steps", p->n_steps);
    bool found = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->op != AMPC_OP_CONCAT) continue;
        found = true;
        cr_assert(n->outputs[0]->flags & AMPC_VALUE_FUSED, "the Concat is read in place");
        cr_assert_eq(n->outputs[0]->mem_space, AMPC_MEM_NONE, "and never stored");
    }
    cr_assert(found, "the Concat is in the optimised graph");
    bool covered = false;
    for (int32_t j = 0; j < p->n_steps && !covered; j++) covered = strstr(p->steps[j].label, "Concat");
    cr_assert(covered, "a chain's kernel covers the Concat");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

Test(fuse_elementwise, a_concat_read_by_a_chain_is_computed_in_it) {
    concat_fused_in(rotary(AMPC_DTYPE_F16), 1); /* the Slices, the Neg, the Concat, the Muls, the Add */
    concat_fused_in(class_token(), 1);          /* the Expand, the Mul, the Concat, the Add */
}

/* A Concat read by two nodes, or by a node that is no elementwise op, is stored. */
Test(fuse_elementwise, a_concat_read_twice_or_by_a_reduction_is_stored) {
    for (int32_t twice = 0; twice < 2; twice++) {
        ampc_graph *g = ampc_graph_create("cat");
        ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 2));
        ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(4, 3));
        ampc_attr_arg axis = AMPC_ATTR_I("axis", 1);
        ampc_value *cat = ampc_op(g, "Concat", (ampc_value *[]){ampc_relu(g, a), b}, 2, &axis, 1);
        int64_t ax = 1;
        ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 1);
        ampc_value *red_in[2] = {cat, t_const_i64(g, SHAPE(1), &ax)};
        ampc_value *y = twice ? ampc_mul(g, ampc_relu(g, cat), ampc_op(g, "Neg", &cat, 1, NULL, 0))
                              : ampc_op(g, "ReduceMax", red_in, 2, &keep, 1);
        cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
        ampc_module *m = compile(g);
        bool found = false;
        for (int32_t i = 0; i < g->n_nodes; i++)
            if (!g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_CONCAT) {
                found = true;
                cr_assert(!(g->nodes[i]->outputs[0]->flags & AMPC_VALUE_FUSED), "stored (%d)", twice);
            }
        cr_assert(found, "the Concat is in the optimised graph (%d)", twice);
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

Test(fuse_elementwise_gpu, concats_read_in_place) {
    static const double exact[1] = {0}; /* Neg, Mul, Add and copies: correctly rounded */
    ampc_dtype ts[2] = {AMPC_DTYPE_F16, AMPC_DTYPE_F32};
    for (int32_t i = 0; i < 2; i++) {
        ampc_graph *g = rotary(ts[i]);
        ampc_tensor in[3] = {{ts[i], SHAPE(2, 3, 4, 8), calloc(192, 4)},
                             {ts[i], SHAPE(3, 8), calloc(24, 4)}, {ts[i], SHAPE(3, 8), calloc(24, 4)}};
        for (int32_t j = 0; j < 3; j++) fill(&in[j], 41 + (uint64_t)j);
        same_on_gpu(g, in, 3, 1, exact);
        for (int32_t j = 0; j < 3; j++) free(in[j].data);
        ampc_graph_destroy(g);
    }
    ampc_graph *g = class_token();
    ampc_tensor in[4] = {{AMPC_DTYPE_F32, SHAPE(1, 1, 8), calloc(8, 4)},
                         {AMPC_DTYPE_F32, SHAPE(2, 5, 8), calloc(80, 4)},
                         {AMPC_DTYPE_F32, SHAPE(2, 2, 8), calloc(32, 4)},
                         {AMPC_DTYPE_F32, SHAPE(8, 8), calloc(64, 4)}};
    for (int32_t j = 0; j < 4; j++) fill(&in[j], 51 + (uint64_t)j);
    same_on_gpu(g, in, 4, 1, exact);
    for (int32_t j = 0; j < 4; j++) free(in[j].data);
    ampc_graph_destroy(g);
}

/* A sum of 17 Concats, each of two graph inputs [4, 1] and [4, 2]: every Concat is read in place
 * by an Add, and each counts towards its chain, so that no chain outgrows code generation's
 * limit (an internal error "a fused elementwise chain of more than 32 nodes" when the Concats
 * were not counted). */
Test(fuse_elementwise, concats_read_in_place_count_towards_the_chain) {
    ampc_graph *g = ampc_graph_create("cats");
    ampc_attr_arg axis = AMPC_ATTR_I("axis", 1);
    ampc_value *y = NULL;
    for (int32_t i = 0; i < 17; i++) {
        char an[8], bn[8];
        snprintf(an, sizeof an, "a%d", i);
        snprintf(bn, sizeof bn, "b%d", i);
        ampc_value *ab[2] = {t_input(g, an, AMPC_DTYPE_F32, SHAPE(4, 1)), t_input(g, bn, AMPC_DTYPE_F32, SHAPE(4, 2))};
        ampc_value *cat = ampc_op(g, "Concat", ab, 2, &axis, 1);
        y = y ? ampc_add(g, y, cat) : cat;
    }
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = compile(g);
    int32_t fused = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        fused += !g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_CONCAT &&
                 (g->nodes[i]->outputs[0]->flags & AMPC_VALUE_FUSED);
    cr_assert_eq(fused, 17, "every Concat read in place: %d", fused);
    cr_assert_gt(m->cg->plan.n_steps, 1, "more than one chain");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

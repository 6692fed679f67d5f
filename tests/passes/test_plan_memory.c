/*
 * test_plan_memory.c — the plan-memory pass: constants in the weights blob, views sharing bytes,
 * elementwise nodes working in place only where safe, and the central property: no two values
 * alive at the same time overlap in the arena (checked on every pair).
 */
#include "support.h"

#include "passes/passes.h"

/* Positions: a value is alive from its definition to its last use (outputs: the end). */
static void check_no_overlap(ampc_graph *g) {
    int32_t nv = g->n_values, pos = 0;
    int32_t *def = calloc((size_t)nv, sizeof *def), *last = calloc((size_t)nv, sizeof *last);
    for (int32_t i = 0; i < nv; i++) def[i] = last[i] = -1;
    for (int32_t k = 0; k < g->n_nodes; k++, pos++) {
        const ampc_node *n = g->nodes[k];
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j]) last[n->inputs[j]->id] = pos;
        for (int32_t j = 0; j < n->n_outputs; j++) def[n->outputs[j]->id] = last[n->outputs[j]->id] = pos;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]->id] = pos;
    for (int32_t a = 0; a < nv; a++) {
        const ampc_value *va = g->values[a];
        if (va->mem_space != AMPC_MEM_ARENA) continue;
        cr_assert_eq(va->mem_offset % AMPC_MEM_ALIGN, 0);
        cr_assert_leq(va->mem_offset + (int64_t)ampc_ir_nbytes(va), g->arena_bytes);
        for (int32_t b = a + 1; b < nv; b++) {
            const ampc_value *vb = g->values[b];
            if (vb->mem_space != AMPC_MEM_ARENA || va->mem_offset == vb->mem_offset) continue;
            bool time = def[a] <= last[b] && def[b] <= last[a];
            bool space = va->mem_offset < vb->mem_offset + (int64_t)ampc_ir_nbytes(vb) &&
                         vb->mem_offset < va->mem_offset + (int64_t)ampc_ir_nbytes(va);
            cr_assert_not(time && space, "'%s' and '%s' are alive together and overlap", va->name,
                          vb->name);
        }
    }
    free(def);
    free(last);
}

Test(plan_memory, constants_views_and_in_place) {
    ampc_graph *g = ampc_graph_create("p");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 8));
    double wv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ampc_value *w = t_const_f32(g, SHAPE(8), wv);
    ampc_value *a = ampc_add(g, x, w);         /* x is a graph input: never overwritten */
    ampc_value *r = ampc_relu(g, a);           /* a dies here: r may take its bytes */
    ampc_value *v = ampc_reshape(g, r, (int64_t[]){32}, 1); /* a view of r */
    ampc_value *e = ampc_exp(g, v);
    cr_assert_eq(ampc_output(g, e, "y"), AMPC_OK);
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK);
    cr_assert(changed);
    cr_assert_eq(w->mem_space, AMPC_MEM_WEIGHTS);
    /* w (32 bytes) and the Reshape's shape (8 bytes), each 256-aligned */
    cr_assert_eq(g->weights_bytes, 512, "weights %lld bytes", (long long)g->weights_bytes);
    cr_assert_eq(x->mem_space, AMPC_MEM_ARENA);
    cr_assert_neq(a->mem_offset, x->mem_offset, "a graph input is never written over");
    cr_assert_eq(r->mem_offset, a->mem_offset, "Relu works in place over a");
    cr_assert_eq(v->mem_offset, r->mem_offset, "the Reshape view shares r's bytes");
    check_no_overlap(g);
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK);
    cr_assert_not(changed, "a second run decides the same");
    ampc_graph_destroy(g);
}

Test(plan_memory, many_live_values_never_overlap) {
    ampc_graph *g = ampc_graph_create("p");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64));
    ampc_value *vals[40];
    vals[0] = x;
    /* A ladder where each value is read by the next and by one far later, with sizes varying. */
    for (int i = 1; i < 40; i++) {
        ampc_value *in[2] = {vals[i - 1], vals[i / 2]};
        vals[i] = ampc_op(g, i % 3 ? "Add" : "Mul", in, 2, NULL, 0);
        if (i % 7 == 0) vals[i] = ampc_op(g, "Concat", (ampc_value *[]){vals[i], vals[i]}, 2,
                                          (ampc_attr_arg[]){AMPC_ATTR_I("axis", 0)}, 1);
        if (i % 7 == 0) vals[i] = ampc_op(g, "Slice", (ampc_value *[]){vals[i], ampc_const_i64s(g, (int64_t[]){0}, 1), ampc_const_i64s(g, (int64_t[]){64}, 1)}, 3, NULL, 0);
    }
    cr_assert_eq(ampc_output(g, vals[39], "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, vals[20], "z"), AMPC_OK);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK);
    check_no_overlap(g);
    /* Reuse happened: far less than one buffer per value. */
    cr_assert_lt(g->arena_bytes, 40 * 256, "arena %lld bytes", (long long)g->arena_bytes);
    ampc_graph_destroy(g);
}

/* Every graph input and output has arena bytes no other value shares (views of it aside), for
 * the whole run: the runtime may then point the steps at the caller's buffers (io_bind.c). */
Test(plan_memory, inputs_and_outputs_have_bytes_of_their_own) {
    ampc_graph *g = ampc_graph_create("p");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64));
    ampc_value *a = ampc_exp(g, x);  /* x's last reader: a later value could take its bytes */
    ampc_value *b = ampc_relu(g, a); /* in place over a */
    ampc_value *c = ampc_exp(g, b);
    ampc_value *d = ampc_tanh(g, c);
    ampc_value *y = ampc_relu(g, d); /* y is defined last: earlier values could use its bytes */
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK);
    check_no_overlap(g);
    const ampc_value *io[2] = {x, y};
    for (int k = 0; k < 2; k++)
        for (int32_t i = 0; i < g->n_values; i++) {
            const ampc_value *v = g->values[i];
            if (v == io[k] || v->mem_space != AMPC_MEM_ARENA) continue;
            int64_t vn = (int64_t)ampc_ir_nbytes(v), n = (int64_t)ampc_ir_nbytes(io[k]);
            cr_assert(v->mem_offset >= io[k]->mem_offset + n || io[k]->mem_offset >= v->mem_offset + vn,
                      "'%s' shares bytes with %s '%s'", v->name, k ? "output" : "input", io[k]->name);
        }
    /* the four intermediates still reuse: fewer than one buffer each besides x and y */
    cr_assert_leq(g->arena_bytes, 5 * 256, "arena %lld bytes", (long long)g->arena_bytes);
    ampc_graph_destroy(g);
}

/* A view of a graph input shares the input's bytes, so an elementwise node reading the view as
 * its last use must not write over it: with the steps pointed at the caller's buffers, that
 * would write into the caller's input. */
Test(plan_memory, a_view_of_an_input_is_never_written_over) {
    ampc_graph *g = ampc_graph_create("p");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 16));
    ampc_value *v = ampc_reshape(g, x, (int64_t[]){64}, 1); /* a view of x: x's bytes */
    ampc_value *a = ampc_relu(g, v);                         /* v's last reader */
    ampc_value *y = ampc_exp(g, a);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK);
    check_no_overlap(g);
    cr_assert_eq(v->mem_offset, x->mem_offset, "the Reshape view shares x's bytes");
    cr_assert_neq(a->mem_offset, x->mem_offset, "Relu writes over the view of graph input x");
    ampc_graph_destroy(g);
}

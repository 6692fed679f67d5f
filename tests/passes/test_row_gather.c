/*
 * test_row_gather.c — the row-gather pass: runs of Transposes, Gathers by constant indices and
 * reshapes that keep the last dim become one Gather of rows (and, read by an elementwise op, a
 * chain that reads the rows in place); runs that gain nothing, or that an op outside the rule
 * ends, stay. Each graph is optimised with and without the pass and both are evaluated on the
 * reference evaluator: equal, element for element.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What the run is read by. */
enum reader { ADD, MATMUL, OUTPUT };

typedef struct rcase {
    int64_t B, W, S, C; /* batch, windows a side, tokens a window side, channels */
    bool shift;         /* the run has the two Gathers of a cyclic shift */
    bool reverse;       /* windows back to the image (else the image into windows) */
    enum reader reader;
    int64_t shift_by;   /* the shift's index offset, negative allowed */
} rcase;

/* A cyclic shift of n entries by s, as torch.roll exports it: Gather indices (j + s) mod n, or
 * j + s - n (negative) when `negative`. */
static ampc_value *shift_indices(ampc_graph *g, int64_t n, int64_t s, bool negative) {
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t j = 0; j < n; j++) v[j] = negative && j + s >= n ? j + s - n : (j + s) % n;
    ampc_value *c = t_const_i64(g, t_shape((int64_t[]){0, n}, 1), v);
    free(v);
    return c;
}

static ampc_value *gather(ampc_graph *g, ampc_value *x, ampc_value *ix, int64_t axis) {
    ampc_attr_arg a = AMPC_ATTR_I("axis", axis);
    return ampc_op(g, "Gather", (ampc_value *[]){x, ix}, 2, &a, 1);
}

/* Swin's window reverse [B, W, W, S, S, C] -> [B, W*S, W*S, C] (or the partition, the other way),
 * with the cyclic shift after the reverse (before the partition) when c->shift. */
static ampc_graph *build(const rcase *c) {
    ampc_graph *g = ampc_graph_create("rows");
    const int64_t H = c->W * c->S;
    static const int64_t swap[6] = {0, 1, 3, 2, 4, 5};
    const int64_t win[6] = {c->B, c->W, c->W, c->S, c->S, c->C}, img[4] = {c->B, H, H, c->C};
    const int64_t split[6] = {c->B, c->W, c->S, c->W, c->S, c->C};
    ampc_value *x, *y;
    if (c->reverse) {
        x = ampc_input(g, "x", AMPC_DTYPE_F32, 6, win);
        y = ampc_reshape(g, ampc_transpose(g, x, swap, 6), img, 4);
        if (c->shift) {
            y = gather(g, y, shift_indices(g, H, c->shift_by, c->shift_by < 0), 1);
            y = gather(g, y, shift_indices(g, H, c->shift_by, false), 2);
        }
    } else {
        x = ampc_input(g, "x", AMPC_DTYPE_F32, 4, img);
        y = x;
        if (c->shift) {
            y = gather(g, y, shift_indices(g, H, c->shift_by, false), 1);
            y = gather(g, y, shift_indices(g, H, c->shift_by, true), 2);
        }
        const int64_t rows[3] = {c->B * c->W * c->W, c->S * c->S, c->C};
        y = ampc_reshape(g, ampc_transpose(g, ampc_reshape(g, y, split, 6), swap, 6), rows, 3);
    }
    if (c->reader == ADD) {
        const ampc_shape ys = ampc_value_shape(y);
        y = ampc_add(g, y, ampc_input(g, "z", AMPC_DTYPE_F32, ys.rank, ys.dims));
    } else if (c->reader == MATMUL) {
        const int64_t wd[2] = {c->C, 4};
        double *w = malloc((size_t)(c->C * 4) * sizeof *w);
        for (int64_t i = 0; i < c->C * 4; i++) w[i] = sin((double)i);
        y = ampc_matmul(g, y, t_const_f32(g, t_shape((int64_t[]){0, wd[0], wd[1]}, 2), w));
        free(w);
    }
    ampc_output(g, y, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void optimise(ampc_graph *g, bool with) {
    static const char *off[1] = {"row-gather"};
    ampc_pipeline_options o = {.verify = true, .disable = with ? NULL : off, .n_disable = with ? 0 : 1};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* Optimises case c with and without the pass, expects `transposes` Transposes and `gathers`
 * Gathers left with it, and both graphs to compute the same, exactly. */
static void check(const rcase *c, int32_t transposes, int32_t gathers) {
    ampc_graph *a = build(c), *b = build(c);
    optimise(a, true);
    optimise(b, false);
    cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE), transposes, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(t_count_op(a, AMPC_OP_GATHER), gathers, "%s", ampc_graph_to_text(a, false));
    t_expect_same_outputs_filled(a, b, t_fill_uniform_f32, 3, 0, 0);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* The shifted window reverse (Transpose, Reshape, two Gathers) read by the residual Add: one
 * Gather of rows, which the Add's chain reads in place. Batch 2, windows 2 x 2 of 3 x 3. */
Test(row_gather, shifted_window_reverse_is_one_gather) {
    const rcase c = {2, 2, 3, 8, true, true, ADD, 2}, d = {1, 3, 2, 4, true, true, ADD, -1};
    check(&c, 0, 1);
    check(&d, 0, 1);
}

/* The plain reverse read by an Add: the Transpose then merged by the Reshape is no view of the
 * Add's shape, so it becomes a Gather of rows the Add reads in place. */
Test(row_gather, window_reverse_read_by_an_add_is_a_gather) {
    const rcase c = {2, 2, 3, 8, false, true, ADD};
    check(&c, 0, 1);
}

/* The shifted partition read by a matmul: three copies, one Gather; the plain partition (one
 * Transpose) and the reverse as an output stay Transposes. */
Test(row_gather, shifted_partition_is_one_gather_and_single_transposes_stay) {
    const rcase c = {2, 2, 3, 8, true, false, MATMUL, 1}, d = {2, 2, 3, 8, false, false, MATMUL},
                e = {1, 2, 3, 8, false, true, OUTPUT};
    check(&c, 0, 1);
    check(&d, 1, 0);
    check(&e, 1, 0);
}

/* A Transpose that moves the last axis moves no rows: the run stops before it. An index out of
 * range is the Gather's own lowering's to report: no run includes it. */
Test(row_gather, runs_stop_at_ops_outside_the_rule) {
    ampc_graph *g = ampc_graph_create("last_axis");
    const int64_t xd[3] = {2, 3, 3}; /* the last dim's size kept, its axis moved */
    static const int64_t perm[3] = {0, 2, 1};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, xd);
    ampc_value *t = ampc_transpose(g, x, perm, 3);
    ampc_output(g, gather(g, t, t_const_i64(g, t_shape((int64_t[]){0, 3}, 1), (int64_t[]){1, 2, 0}), 1),
                "y");
    bool changed = true;
    cr_assert_eq(ampc_pass_row_gather(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_not(changed, "%s", ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
    g = ampc_graph_create("out_of_range");
    const int64_t yd[3] = {4, 3, 2};
    x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, yd);
    ampc_value *a = gather(g, x, t_const_i64(g, t_shape((int64_t[]){0, 2}, 1), (int64_t[]){3, 0}), 0);
    ampc_value *b = gather(g, a, t_const_i64(g, t_shape((int64_t[]){0, 2}, 1), (int64_t[]){1, 7}), 1);
    ampc_output(g, b, "y");
    cr_assert_eq(ampc_pass_row_gather(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_not(changed, "%s", ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
}

/* Gathers by indices of any rank (a scalar drops the axis, a matrix adds two), Unsqueeze and
 * Squeeze between them, the run's end a graph output: one Gather, the same elements. */
Test(row_gather, gathers_of_any_index_rank_and_reshapes) {
    ampc_graph *a = NULL, *b = NULL;
    for (int32_t k = 0; k < 2; k++) {
        ampc_graph *g = ampc_graph_create("ranks");
        const int64_t xd[3] = {4, 3, 8}, zero[1] = {0};
        ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, xd);
        ampc_value *y = gather(g, x, ampc_scalar_i64(g, -2), 1);                        /* [4, 8] */
        y = ampc_op(g, "Unsqueeze", (ampc_value *[]){y, t_const_i64(g, SHAPE(1), zero)}, 2, NULL, 0);
        y = ampc_op(g, "Squeeze", (ampc_value *[]){y, t_const_i64(g, SHAPE(1), zero)}, 2, NULL, 0);
        y = gather(g, y, t_const_i64(g, SHAPE(2, 2), ((int64_t[]){3, 0, -1, 2})), 0); /* [2, 2, 8] */
        static const int64_t swap[3] = {1, 0, 2};
        ampc_output(g, ampc_transpose(g, y, swap, 3), "y");
        cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
        optimise(g, k == 0);
        if (k == 0) a = g; else b = g;
    }
    cr_assert_eq(t_count_op(a, AMPC_OP_GATHER), 1, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE) + t_count_op(b, AMPC_OP_GATHER), 0 + 2);
    t_expect_same_outputs_filled(a, b, t_fill_uniform_f32, 9, 0, 0);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

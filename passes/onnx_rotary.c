/*
 * onnx_rotary.c — ONNX's RotaryEmbedding op (opset 23) as slices and products, for a GPU build.
 *
 * Each head vector's first rot features are rot / 2 pairs (x1, x2), its halves or, interleaved,
 * its even and odd neighbours, rotated by the angle of the vector's position:
 * (x1 cos - x2 sin, x1 sin + x2 cos); the features past rot are copied (ir/ref/attention.c says
 * it in full). The node becomes, over X seen as [B, H, S, head] (4-D) or [B, S, H, head] (3-D,
 * a Reshape of [B, S, H * head]):
 *
 *   cos, sin     the caches' rows at position_ids (Gather along 0), or the caches themselves
 *                ([B, S, rot / 2]) without position_ids, reshaped to broadcast over the heads;
 *   x1, x2       Slices of the last dim (halves), or of [..., rot / 2, 2] (interleaved);
 *   y            x1 * cos - x2 * sin and x1 * sin + x2 * cos joined back in the pairs' layout
 *                (Concat of the halves, or of [..., rot / 2, 1] pieces reshaped), followed by
 *                the features past rot (Concat), reshaped to X's shape.
 *
 * fuse-elementwise computes the products of a pair in one kernel in f32; the op's definition
 * rounds once too (the reference computes each output in double). A position id outside the
 * caches, an evaluation error on the reference evaluator, is not one on the GPU, whose Gather
 * raises no errors. The reference evaluator runs the node as written (the pass runs only when
 * ampc_pipeline_options.gpu_build is set).
 */
#include "passes.h"
#include "ir/attention.h"

#include <stdio.h>

typedef struct rot {
    ampc_graph *g;
    char name[160];
    bool rank4, interleaved;
    int64_t B, H, S, head, rot, half;
} rot;

static ampc_value *node1(rot *r, ampc_opcode op, ampc_value *const *in, int32_t n_in,
                         const ampc_attr *at, int32_t n_at) {
    return ampc_pass_node1(r->g, op, r->name, in, n_in, at, n_at);
}

static ampc_value *reshape(rot *r, ampc_value *x, int32_t rank, const int64_t *dims) {
    return ampc_pass_reshape(r->g, r->name, x, rank, dims);
}

static ampc_value *slice(rot *r, ampc_value *x, int64_t axis, int64_t from, int64_t to) {
    return ampc_pass_slice(r->g, r->name, x, axis, from, to);
}

static ampc_value *binary(rot *r, ampc_opcode op, ampc_value *a, ampc_value *b) {
    return ampc_pass_binary(r->g, op, r->name, a, b);
}

static ampc_value *concat(rot *r, ampc_value *a, ampc_value *b, int64_t axis) {
    ampc_value *in[2] = {a, b};
    const ampc_attr ax = ampc_axis_attr_make(axis);
    return node1(r, AMPC_OP_CONCAT, in, 2, &ax, 1);
}

/* A cache's rows for every (b, s), shaped to broadcast over X's 4-D view. */
static ampc_value *angles(rot *r, ampc_value *cache, ampc_value *pos) {
    ampc_value *rows = cache;
    if (pos) {
        ampc_value *in[2] = {cache, pos};
        const ampc_attr ax = ampc_axis_attr_make(0);
        rows = node1(r, AMPC_OP_GATHER, in, 2, &ax, 1);
    }
    const int64_t d4[4] = {r->B, 1, r->S, r->half}, d3[4] = {r->B, r->S, 1, r->half};
    return reshape(r, rows, 4, r->rank4 ? d4 : d3);
}

/* The rotated features of x4 (X's 4-D view), laid out as X lays out its pairs. */
static ampc_value *rotated(rot *r, ampc_value *x4, ampc_value *c, ampc_value *s) {
    ampc_value *x1, *x2;
    const int64_t lead[3] = {x4->shape.dims[0], x4->shape.dims[1], x4->shape.dims[2]};
    const int64_t pairs[5] = {lead[0], lead[1], lead[2], r->half, 2};
    const int64_t halves[4] = {lead[0], lead[1], lead[2], r->half};
    ampc_value *p = NULL;
    if (r->interleaved) { /* [..., half, 2]: x1 the evens, x2 the odds */
        p = reshape(r, r->rot < r->head ? slice(r, x4, 3, 0, r->rot) : x4, 5, pairs);
        x1 = reshape(r, slice(r, p, 4, 0, 1), 4, halves);
        x2 = reshape(r, slice(r, p, 4, 1, 2), 4, halves);
    } else {
        x1 = slice(r, x4, 3, 0, r->half);
        x2 = slice(r, x4, 3, r->half, r->rot);
    }
    ampc_value *y1 = binary(r, AMPC_OP_SUB, binary(r, AMPC_OP_MUL, x1, c),
                            binary(r, AMPC_OP_MUL, x2, s));
    ampc_value *y2 = binary(r, AMPC_OP_ADD, binary(r, AMPC_OP_MUL, x1, s),
                            binary(r, AMPC_OP_MUL, x2, c));
    if (!r->interleaved) return concat(r, y1, y2, 3);
    const int64_t rot4[4] = {lead[0], lead[1], lead[2], r->rot};
    return reshape(r, concat(r, reshape(r, y1, 5, (int64_t[]){lead[0], lead[1], lead[2], r->half, 1}),
                             reshape(r, y2, 5, (int64_t[]){lead[0], lead[1], lead[2], r->half, 1}),
                             4),
                   4, rot4);
}

/* Node n's replacement: its output, or NULL when a node could not be built. */
static ampc_value *build(rot *r, const ampc_node *n) {
    ampc_value *x = n->inputs[0], *pos = n->n_inputs > 3 ? n->inputs[3] : NULL;
    ampc_value *x4 = r->rank4 ? x : reshape(r, x, 4, (int64_t[]){r->B, r->S, r->H, r->head});
    ampc_value *c = angles(r, n->inputs[1], pos), *s = angles(r, n->inputs[2], pos);
    ampc_value *y = x4 && c && s ? rotated(r, x4, c, s) : NULL;
    if (y && r->rot < r->head) y = concat(r, y, slice(r, x4, 3, r->rot, r->head), 3);
    return !y || r->rank4 ? y : reshape(r, y, x->shape.rank, x->shape.dims);
}

/* Node n's replacement into out (ampc_pass_replace_each). */
static ampc_status rewrite(ampc_graph *g, ampc_node *n, ampc_value **out) {
    const ampc_value *x = n->inputs[0];
    const ampc_rotary_params rp = ampc_rotary_params_of(n);
    rot r = {.g = g, .rank4 = x->shape.rank == 4, .interleaved = rp.interleaved};
    r.B = x->shape.dims[0];
    r.H = r.rank4 ? x->shape.dims[1] : rp.heads;
    r.S = x->shape.dims[r.rank4 ? 2 : 1];
    if (r.H <= 0) return AMPC_E_UNSUPPORTED;
    r.head = r.rank4 ? x->shape.dims[3] : x->shape.dims[2] / r.H;
    r.rot = rp.rot_dim ? rp.rot_dim : r.head;
    r.half = r.rot / 2;
    if (r.half < 1 || 2 * r.half != r.rot || r.rot > r.head) return AMPC_E_UNSUPPORTED;
    snprintf(r.name, sizeof r.name, "%.140s/rotate", n->name);
    return (out[0] = build(&r, n)) ? AMPC_OK : AMPC_E_UNSUPPORTED;
}

static bool is_rotary(const ampc_node *n) { return n->op == AMPC_OP_ROTARY_EMBEDDING; }

ampc_status ampc_pass_onnx_rotary(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    if (!cx->opt->gpu_build) return AMPC_OK;
    return ampc_pass_replace_each(g, is_rotary, rewrite, "rewriting RotaryEmbedding", changed);
}

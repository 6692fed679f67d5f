/*
 * onnx_deform_conv.c — ONNX's DeformConv (opset 19) as GridSample and MatMul, for a GPU build.
 *
 * A deformable convolution samples its input at each kernel point moved by a learned offset,
 * bilinearly with zeros outside (ir/ref/conv.c), and then contracts the samples with the weights
 * as a convolution does. A 2-D node becomes:
 *
 *   the grid     for offset group o and kernel point j = (u, v): the sampling position
 *                (oh * stride - pad + u * dilation + dy, ow * ... + dx), in f64 whatever X's type
 *                (constants for the fixed part, Add for the offsets), normalised as GridSample
 *                reads it without align_corners: (2 p + 1) / size - 1. In f64 the position
 *                GridSample computes back is the one the offsets give (f32 rounds it: 2.4e-7 of
 *                a pixel at a border then weighs a neighbour the reference leaves out);
 *   the samples  one GridSample (bilinear, zeros outside) per offset group over its channels of X,
 *                the K kernel points stacked along H: [N, C / offset_group, K * oH, oW], times the
 *                mask when one is given; joined along the channels;
 *   Y            MatMul of the weights as [group, M / group, C / group * K] by the samples as
 *                [N, group, C / group * K, oH * oW], plus the bias, reshaped to [N, M, oH, oW].
 *
 * The reference computes each output in double from samples it does not round; here the samples
 * (and their products with the mask) are values of X's type and the contraction is a MatMul's,
 * as a Conv over the same samples would be. Other ranks than 2-D stay on the reference evaluator
 * (the pass runs only when ampc_pipeline_options.gpu_build is set).
 */
#include "passes.h"
#include "ir/activation.h"
#include "ir/conv.h"
#include "ir/infer/infer.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct dcn {
    ampc_graph *g;
    char name[160];
    ampc_dtype t;                 /* X's */
    int64_t N, C, H, W, M, oH, oW, kH, kW, K, group, og;
    ampc_conv_geom geo;
} dcn;

static ampc_value *node1(dcn *d, ampc_opcode op, ampc_value *const *in, int32_t n_in,
                         const ampc_attr *at, int32_t n_at) {
    return ampc_pass_node1(d->g, op, d->name, in, n_in, at, n_at);
}

static ampc_value *reshape(dcn *d, ampc_value *x, int32_t rank, const int64_t *dims) {
    return ampc_pass_reshape(d->g, d->name, x, rank, dims);
}

static ampc_value *slice(dcn *d, ampc_value *x, int64_t axis, int64_t from, int64_t to) {
    return ampc_pass_slice(d->g, d->name, x, axis, from, to);
}

static ampc_value *binary(dcn *d, ampc_opcode op, ampc_value *a, ampc_value *b) {
    return ampc_pass_binary(d->g, op, d->name, a, b);
}

static ampc_value *f64s(dcn *d, int32_t rank, const int64_t *dims, const double *v) {
    ampc_shape s = {.rank = rank};
    for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
    return ampc_ir_const_new(d->g, NULL, AMPC_DTYPE_F64, &s, v);
}

/* One normalised grid coordinate, [N, OG, K, oH, oW]: the offsets `off` plus the fixed part
 * (kernel point j's along `axis` 0 = H, 1 = W), (2 p + 1) / size - 1. */
static ampc_value *coordinate(dcn *d, ampc_value *off, int axis) {
    const int64_t n_out = axis ? d->oW : d->oH, size = axis ? d->W : d->H;
    double *base = malloc((size_t)(d->K * n_out) * sizeof *base);
    if (!base) return NULL;
    for (int64_t j = 0; j < d->K; j++)
        for (int64_t o = 0; o < n_out; o++) {
            const int64_t tap = axis ? j % d->kW : j / d->kW;
            base[j * n_out + o] = (double)(o * d->geo.stride[axis] - d->geo.pad_begin[axis] +
                                           tap * d->geo.dil[axis]);
        }
    const int64_t dims[3] = {d->K, axis ? 1 : d->oH, axis ? d->oW : 1};
    ampc_value *b = f64s(d, 3, dims, base);
    free(base);
    const double scale = 2.0 / (double)size, shift = 1.0 / (double)size - 1.0;
    ampc_value *p = binary(d, AMPC_OP_ADD, off, b);
    ampc_value *sp = binary(d, AMPC_OP_MUL, p, f64s(d, 0, NULL, &scale));
    return binary(d, AMPC_OP_ADD, sp, f64s(d, 0, NULL, &shift));
}

/* The samples of offset group o: [N, C / OG, K * oH, oW], times the mask when given. */
static ampc_value *samples(dcn *d, ampc_value *x, ampc_value *grid, ampc_value *mask, int64_t o) {
    const int64_t cpo = d->C / d->og;
    ampc_value *xo = d->og > 1 ? slice(d, x, 1, o * cpo, (o + 1) * cpo) : x;
    ampc_value *go = reshape(d, slice(d, grid, 1, o, o + 1), 4,
                             (int64_t[]){d->N, d->K * d->oH, d->oW, 2});
    ampc_value *in[2] = {xo, go};
    ampc_value *s = node1(d, AMPC_OP_GRID_SAMPLE, in, 2, NULL, 0); /* bilinear, zeros, centres */
    if (!mask || !s) return s;
    ampc_value *m = reshape(d, slice(d, mask, 1, o, o + 1), 4,
                            (int64_t[]){d->N, 1, d->K * d->oH, d->oW});
    return binary(d, AMPC_OP_MUL, s, m);
}

/* Node n's replacement, or NULL when a node could not be built. */
static ampc_value *build(dcn *d, const ampc_node *n) {
    ampc_value *x = n->inputs[0], *w = n->inputs[1], *off = n->inputs[2];
    ampc_value *b = n->n_inputs > 3 ? n->inputs[3] : NULL, *mask = n->n_inputs > 4 ? n->inputs[4] : NULL;
    const ampc_attr f64 = ampc_cast_to_attr(AMPC_DTYPE_F64);
    if (off->dtype != AMPC_DTYPE_F64) off = node1(d, AMPC_OP_CAST, &off, 1, &f64, 1);
    ampc_value *pairs = reshape(d, off, 6, (int64_t[]){d->N, d->og, d->K, 2, d->oH, d->oW});
    const int64_t five[5] = {d->N, d->og, d->K, d->oH, d->oW};
    ampc_value *gy = coordinate(d, reshape(d, slice(d, pairs, 3, 0, 1), 5, five), 0);
    ampc_value *gx = coordinate(d, reshape(d, slice(d, pairs, 3, 1, 2), 5, five), 1);
    const int64_t six[6] = {d->N, d->og, d->K, d->oH, d->oW, 1};
    ampc_value *xy[2] = {reshape(d, gx, 6, six), reshape(d, gy, 6, six)};
    const ampc_attr last = ampc_axis_attr_make(5);
    ampc_value *grid = node1(d, AMPC_OP_CONCAT, xy, 2, &last, 1); /* (x, y), as GridSample reads */
    if (mask) mask = reshape(d, mask, 5, five);
    ampc_value *parts[64];
    if (d->og > 64) return NULL;
    for (int64_t o = 0; o < d->og; o++)
        if (!(parts[o] = samples(d, x, grid, mask, o))) return NULL;
    const ampc_attr channels = ampc_axis_attr_make(1);
    ampc_value *all = d->og > 1 ? node1(d, AMPC_OP_CONCAT, parts, (int32_t)d->og, &channels, 1)
                                : parts[0];
    const int64_t cg = d->C / d->group, mg = d->M / d->group, P = d->oH * d->oW;
    ampc_value *cols = reshape(d, all, 4, (int64_t[]){d->N, d->group, cg * d->K, P});
    ampc_value *wg = reshape(d, w, 3, (int64_t[]){d->group, mg, cg * d->K});
    ampc_value *y = reshape(d, binary(d, AMPC_OP_MATMUL, wg, cols), 3, (int64_t[]){d->N, d->M, P});
    if (b) y = binary(d, AMPC_OP_ADD, y, reshape(d, b, 2, (int64_t[]){d->M, 1}));
    return reshape(d, y, 4, (int64_t[]){d->N, d->M, d->oH, d->oW});
}

/* Node n's replacement into out (ampc_pass_replace_each). */
static ampc_status rewrite(ampc_graph *g, ampc_node *n, ampc_value **out) {
    const ampc_value *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
    if (x->shape.rank != 4) return AMPC_E_UNSUPPORTED;
    dcn d = {.g = g, .t = x->dtype};
    if (ampc_infer_conv_geom(g, n, &d.geo) != AMPC_OK) return AMPC_E_UNSUPPORTED;
    const ampc_conv_params cp = ampc_conv_params_of(n);
    d.N = x->shape.dims[0], d.C = x->shape.dims[1], d.H = x->shape.dims[2], d.W = x->shape.dims[3];
    d.M = w->shape.dims[0], d.kH = w->shape.dims[2], d.kW = w->shape.dims[3], d.K = d.kH * d.kW;
    d.oH = y->shape.dims[2], d.oW = y->shape.dims[3];
    d.group = cp.group, d.og = cp.offset_group;
    if (d.group < 1 || d.og < 1 || d.C % d.group || d.C % d.og || d.M % d.group || d.H < 1 ||
        d.W < 1)
        return AMPC_E_UNSUPPORTED;
    snprintf(d.name, sizeof d.name, "%.140s/deform", n->name);
    return (out[0] = build(&d, n)) ? AMPC_OK : AMPC_E_UNSUPPORTED;
}

static bool is_deform_conv(const ampc_node *n) { return n->op == AMPC_OP_DEFORM_CONV; }

ampc_status ampc_pass_onnx_deform_conv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    if (!cx->opt->gpu_build) return AMPC_OK;
    return ampc_pass_replace_each(g, is_deform_conv, rewrite, "rewriting DeformConv", changed);
}

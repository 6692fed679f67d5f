/*
 * infer.h — shape and dtype inference: the declarations of every ampc_infer_* function named in
 * ops.def, and the helpers the family files share (broadcasting, axis normalisation, reading
 * constant inputs, dtype checks). Each helper that fails records a diagnostic against the node.
 */
#ifndef AMPC_INFER_H
#define AMPC_INFER_H

#include "../ir.h"

#define OP(id, onnx, lo, hi, min_in, max_in, min_out, max_out, cin, traits, prec, infer, ref, lower)     \
    ampc_status ampc_infer_##infer(ampc_graph *g, ampc_node *n);
#include "../ops.def"
#undef OP

/* Dtype classes for ampc_infer_check_dtype. */
enum {
    DT_FLOAT = 1u << 0, /* f32 f16 bf16 f64 */
    DT_SINT = 1u << 1,  /* i8 .. i64 */
    DT_UINT = 1u << 2,  /* u8 .. u64 */
    DT_BOOL = 1u << 3,
    DT_INT = DT_SINT | DT_UINT,
    DT_NUM = DT_FLOAT | DT_INT,
    DT_ANY = DT_NUM | DT_BOOL,
};

/* True when dtype t is in the class mask. */
bool ampc_dtype_in(ampc_dtype t, uint32_t mask);
/* Checks input i's dtype against mask; records "input i 'x' must be <classes>, got <dtype>". */
bool ampc_infer_check_dtype(ampc_graph *g, const ampc_node *n, int32_t i, uint32_t mask);
/* Checks that inputs i and j have one dtype. */
bool ampc_infer_same_dtype(ampc_graph *g, const ampc_node *n, int32_t i, int32_t j);
/* Sets output i's dtype and shape. */
void ampc_infer_set(ampc_node *n, int32_t i, ampc_dtype t, const ampc_shape *s);
/* Numpy (multidirectional) broadcasting of the present inputs among in[0..k-1]; false with a
 * diagnostic naming both shapes when a dimension pair is neither equal nor 1. */
bool ampc_infer_bcast_shapes(ampc_graph *g, const ampc_node *n, const ampc_value *const *in,
                          int32_t k, ampc_shape *out);
/* Normalises a possibly negative axis against `rank` (axis in [-rank, rank-1]); `what` names the
 * attribute or input in the message. */
bool ampc_infer_axis(ampc_graph *g, const ampc_node *n, int64_t axis, int32_t rank,
                     const char *what, int32_t *out);
/* Reads n's `axis` attribute, the op's default when absent (ampc_axis_default, the one readers
 * decode it with); false, with the reader's diagnostic, when it is not an integer. */
bool ampc_infer_axis_attr(ampc_graph *g, const ampc_node *n, int64_t *axis);
/* Reads constant input i (an integer tensor of rank 0 or 1) into buf (at most cap entries);
 * returns the count, or -1 with a diagnostic. An absent input gives 0 entries. */
int32_t ampc_infer_const_ints(ampc_graph *g, const ampc_node *n, int32_t i, int64_t *buf,
                              int32_t cap);

/* The resolved window of a convolution or pooling node (Conv, ConvTranspose, ConvInteger,
 * QLinearConv, DeformConv, MaxPool, AveragePool, LpPool) whose inference succeeded, placed as the
 * reference kernels place it (ir/infer/conv.c); for code generation. Pads may be negative only for
 * a ConvTranspose whose output_shape exceeds its unpadded output. */
typedef struct ampc_conv_geom {
    int32_t k; /* spatial dims */
    int64_t kernel[AMPC_MAX_RANK], stride[AMPC_MAX_RANK], dil[AMPC_MAX_RANK];
    int64_t pad_begin[AMPC_MAX_RANK], pad_end[AMPC_MAX_RANK];
    int64_t output_padding[AMPC_MAX_RANK]; /* ConvTranspose only; 0 otherwise */
} ampc_conv_geom;
ampc_status ampc_infer_conv_geom(ampc_graph *g, const ampc_node *n, ampc_conv_geom *out);

/* An ampc.FusedConv with channels_last = 1 (passes/layout.c) holds x, z and y as [N, spatial...,
 * C] and w as [M, spatial..., C/group]. Its shadow is the same node over NCHW-shaped copies of
 * its values (no data), so the NCHW rules (inference, geometry) apply unchanged. */
typedef struct ampc_conv_shadow {
    ampc_node node;
    ampc_value vals[5]; /* x, w, b, z, y */
    ampc_value *in[4], *out[1];
} ampc_conv_shadow;

/* Fills s from n; s->node is what the NCHW rules read. */
void ampc_conv_shadow_make(const ampc_node *n, ampc_conv_shadow *s);
/* The channels-last shape of an NCHW one ([N, C, S...] -> [N, S..., C]), and back. */
ampc_shape ampc_shape_to_channels_last(const ampc_shape *s);
ampc_shape ampc_shape_to_channels_first(const ampc_shape *s);

#endif /* AMPC_INFER_H */

/*
 * resize.h — Resize's and Upsample's interpolation taps, one implementation for the reference
 * evaluator (ref/resize.c) and code generation (codegen/lower_resize.c, which bakes the tables
 * into its kernels): the attributes decoded once into a configuration, and per axis the input
 * positions and weights of every output coordinate.
 *
 * Every output coordinate x of an axis maps to x_ori in the input by the coordinate
 * transformation mode. An interpolation of n taps (2 for nearest and linear, 4 for cubic, more
 * with antialias when downsampling) takes the n input positions nearest to x_ori (ties to the
 * lower one; when x_ori is an integer it counts as the right end of its left interval, ratio
 * 1), reads positions outside the input from the nearest edge and weights them by the mode's
 * coefficients of ratio = x_ori - floor. With exclude_outside, taps outside the input get
 * weight 0 and the rest are renormalised. tf_crop_and_resize extrapolates where x_ori falls
 * outside the input. This is the ONNX reference implementation's arithmetic, in double; the taps
 * of one coordinate are resize_taps.h's, which the kernels computing taps at run time share.
 */
#ifndef AMPC_IR_RESIZE_H
#define AMPC_IR_RESIZE_H

#include "ir/ir.h"
#include "ir/resize_taps.h"

enum { AMPC_RESIZE_NEAREST, AMPC_RESIZE_LINEAR, AMPC_RESIZE_CUBIC };
enum {
    AMPC_RESIZE_HALF_PIXEL,
    AMPC_RESIZE_HALF_PIXEL_SYM,
    AMPC_RESIZE_PYTORCH,
    AMPC_RESIZE_ALIGN,
    AMPC_RESIZE_ASYM,
    AMPC_RESIZE_CROP,
    AMPC_RESIZE_TF_NN
};
enum { AMPC_RESIZE_ROUND_FLOOR, AMPC_RESIZE_ROUND_CEIL, AMPC_RESIZE_FLOOR, AMPC_RESIZE_CEIL };
/* The most taps one output coordinate may take (antialiased downsampling by 1/16 needs 64). */
enum { AMPC_RESIZE_MAX_TAPS = AMPC_RESIZE_TAPS_MAX };

typedef struct ampc_resize_cfg {
    int mode, coord, nearest;
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
    bool f32_scales; /* the scales came from an f32 input: in * scale is an f32 product */
} ampc_resize_cfg;

/* The configuration of node n: Resize's attributes (f32_scales: its scales input is given), or
 * Upsample's (asymmetric coordinates, nearest rounding down: the opset 7-9 semantics). */
ampc_resize_cfg ampc_resize_cfg_of(ampc_graph *g, const ampc_node *n, bool f32_scales);

/* One axis: per output coordinate, cnt taps (clamped input index, weight) and whether it
 * extrapolates. */
typedef struct ampc_resize_axis {
    int32_t per;   /* taps stored per output coordinate */
    int32_t *cnt;  /* [out] taps with non-zero weight */
    int64_t *idx;  /* [out * per] */
    double *w;     /* [out * per] */
    bool *extrap;  /* [out] */
    bool identity; /* each output coordinate reads its own input index with weight 1 */
    bool any_extrap;
} ampc_resize_axis;

/* Whether an axis scaled by `scale` fits AMPC_RESIZE_MAX_TAPS (antialiased downsampling below
 * 1/16 does not). */
bool ampc_resize_scale_ok(const ampc_resize_cfg *c, double scale);
/* The taps of an axis of `in` positions resized to `out` by `scale` (roi [roi_s, roi_e] for
 * tf_crop_and_resize); false when memory ran out (nothing to free then). */
bool ampc_resize_axis_build(const ampc_resize_cfg *c, int64_t in, int64_t out, double scale,
                            double roi_s, double roi_e, ampc_resize_axis *t);
void ampc_resize_axis_free(ampc_resize_axis *t);

/* A constant operand's elements: data of dtype t, or none (NULL). */
typedef struct ampc_resize_operand {
    const void *data;
    ampc_dtype t;
} ampc_resize_operand;

/* Resize's per-dim scale and roi [rs, re] for an input of rank r and dims x_dims, from its roi,
 * scales and sizes (given as they are: no scales means sizes, whose scale is want / have, all
 * of them set to the smallest or largest under keep_aspect_ratio_policy not_larger /
 * not_smaller) along its `axes` (all dims when absent); unlisted dims scale by 1 over [0, 1].
 * Returns the number of axes and their dims in ax[0 .. count). */
int32_t ampc_resize_scales(const ampc_node *n, int32_t r, const int64_t *x_dims,
                           ampc_resize_operand roi, ampc_resize_operand scales,
                           ampc_resize_operand sizes, double *scale, double *rs, double *re,
                           int32_t *ax);

/* Upsample's per-dim scale: its input 1 when given, else its (older) `scales` attribute; false
 * when neither holds r values. */
bool ampc_upsample_scales(const ampc_node *n, int32_t r, ampc_resize_operand in1, double *scale);

/* GridSample's and AffineGrid's parameters: the interpolation (AMPC_RESIZE_NEAREST, LINEAR,
 * CUBIC; "bicubic" is cubic), where a point outside the input reads, and align_corners (the
 * extreme grid values name the corner pixels' centres, else their outer edges). */
typedef enum ampc_grid_pad {
    AMPC_GRID_ZEROS,
    AMPC_GRID_BORDER,
    AMPC_GRID_REFLECTION
} ampc_grid_pad;
typedef struct ampc_grid_params {
    int mode;
    ampc_grid_pad pad;
    bool align;
} ampc_grid_params;

ampc_grid_params ampc_grid_params_of(const ampc_node *n);

/* RoiAlign's and MaxRoiPool's parameters: the max (else average) of a bin's samples, half-pixel
 * coordinates (else output_half_pixel), the scale from roi to map coordinates (1) and the samples
 * a bin takes along each dim (0: adaptive). */
typedef struct ampc_roi_params {
    bool is_max, half_pixel;
    double spatial_scale;
    int64_t sampling_ratio;
} ampc_roi_params;

ampc_roi_params ampc_roi_params_of(const ampc_node *n);

/* MaxUnpool's unpooled tensor for input shape x: (in - 1) * stride - pad_begin - pad_end + kernel
 * along each spatial dim (the output holds it at its origin when output_shape is larger). */
ampc_shape ampc_unpool_shape(const ampc_node *n, const ampc_shape *x);

#endif

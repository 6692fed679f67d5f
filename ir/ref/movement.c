/*
 * movement.c — reference kernels for the shape and data-movement family. Elements are moved as
 * raw bytes (no conversion), so every dtype is handled the same way; each kernel touches every
 * output element once (times the rank, for the index arithmetic).
 *
 * Inference (ir/infer/movement.c) has validated the attributes and the constant operands and
 * fixed the output shapes; the kernels read back only what places the elements (start offsets,
 * the permutation, the pads), trusting that validation.
 */
#include "ref.h"

#include "ir/movement.h"
#include "ir/pad.h"

#include <string.h>

/* Bytes of a tensor. */
static size_t tensor_bytes(const ampc_tensor *t) {
    return (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
}

/* Entries of a constant integer operand (absent: 0 entries), at most cap. */
static int32_t operand_ints(const ampc_tensor *t, int64_t *buf, int32_t cap) {
    if (!t) return 0;
    int64_t cnt = ampc_shape_numel(&t->shape);
    AMPC_ASSERT(cnt <= cap); /* inference bounds it */
    for (int64_t i = 0; i < cnt; i++) buf[i] = ampc_ref_load_i64(t->data, t->dtype, i);
    return (int32_t)cnt;
}

static int32_t norm_axis(int64_t a, int32_t rank) { return (int32_t)(a < 0 ? a + rank : a); }

/* ---- Constant, Shape, Size, views ----------------------------------------------------------- */

ampc_status ampc_ref_constant(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g, (void)in;
    ampc_tensor *y = out[0];
    for (int32_t i = 0; i < n->n_attrs; i++) {
        const ampc_attr *a = &n->attrs[i];
        if (!strcmp(a->name, "value") && a->kind == AMPC_ATTR_TENSOR) {
            size_t nb = tensor_bytes(y);
            if (nb) memcpy(y->data, a->tensor->data, nb);
        } else if (!strcmp(a->name, "value_float") && a->kind == AMPC_ATTR_FLOAT) {
            ((float *)y->data)[0] = a->f;
        } else if (!strcmp(a->name, "value_floats") && a->kind == AMPC_ATTR_FLOATS) {
            if (a->n) memcpy(y->data, a->floats, (size_t)a->n * sizeof(float));
        } else if (!strcmp(a->name, "value_int") && a->kind == AMPC_ATTR_INT) {
            ((int64_t *)y->data)[0] = a->i;
        } else if (!strcmp(a->name, "value_ints") && a->kind == AMPC_ATTR_INTS) {
            if (a->n) memcpy(y->data, a->ints, (size_t)a->n * sizeof(int64_t));
        }
    }
    return AMPC_OK;
}

/* Shape: dims [start, end) of the input (ampc_shape_range, as inference reads them). */
ampc_status ampc_ref_shape(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g;
    int32_t r = in[0]->shape.rank;
    int64_t lo, hi;
    ampc_shape_range(n, r, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) ((int64_t *)out[0]->data)[i - lo] = in[0]->shape.dims[i];
    return AMPC_OK;
}

ampc_status ampc_ref_size(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    (void)g, (void)n;
    ((int64_t *)out[0]->data)[0] = ampc_shape_numel(&in[0]->shape);
    return AMPC_OK;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under a new shape. */
ampc_status ampc_ref_view(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    (void)g, (void)n;
    size_t nb = tensor_bytes(in[0]);
    if (nb) memcpy(out[0]->data, in[0]->data, nb);
    return AMPC_OK;
}

/* ---- Transpose, Concat, Split, Slice -------------------------------------------------------- */

/* Walks the output row-major, carrying the input offset: output dim i steps the input by the
 * stride of input dim perm[i]. */
ampc_status ampc_ref_transpose(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                               ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    (void)g;
    int32_t r = x->shape.rank;
    int64_t perm[AMPC_MAX_RANK], xs[AMPC_MAX_RANK], st[AMPC_MAX_RANK], idx[AMPC_MAX_RANK] = {0};
    (void)ampc_transpose_perm(n, r, perm); /* inference checked its length */
    ampc_ref_strides(&x->shape, xs);
    for (int32_t i = 0; i < r; i++) st[i] = xs[perm[i]];
    size_t esz = ampc_dtype_size(x->dtype);
    int64_t count = ampc_shape_numel(&y->shape), off = 0;
    for (int64_t e = 0; e < count; e++) {
        ampc_ref_copy_elem(y->data, e, x->data, off, esz);
        for (int32_t d = r - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < y->shape.dims[d]) break;
            off -= st[d] * idx[d];
            idx[d] = 0;
        }
    }
    return AMPC_OK;
}

/* Bytes in one slab of `s` from dim `axis` on (the dims after the outer loop). */
static size_t slab_bytes(const ampc_shape *s, int32_t axis, size_t esz) {
    size_t b = esz;
    for (int32_t i = axis; i < s->rank; i++) b *= (size_t)s->dims[i];
    return b;
}

/* Concat: for each index of the dims before `axis`, the inputs' slabs one after another. */
ampc_status ampc_ref_concat(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g;
    ampc_tensor *y = out[0];
    int32_t ax = ampc_axis_of(n, y->shape.rank);
    size_t esz = ampc_dtype_size(y->dtype);
    int64_t outer = 1;
    for (int32_t i = 0; i < ax; i++) outer *= y->shape.dims[i];
    unsigned char *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int32_t k = 0; k < n->n_inputs; k++) {
            size_t nb = slab_bytes(&in[k]->shape, ax, esz);
            if (!nb) continue;
            memcpy(dst, (const unsigned char *)in[k]->data + (size_t)o * nb, nb);
            dst += nb;
        }
    return AMPC_OK;
}

/* Split: the inverse of Concat; the part sizes are the outputs' dims along `axis`. */
ampc_status ampc_ref_split(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    int32_t ax = ampc_axis_of(n, x->shape.rank);
    size_t esz = ampc_dtype_size(x->dtype);
    int64_t outer = 1;
    for (int32_t i = 0; i < ax; i++) outer *= x->shape.dims[i];
    const unsigned char *src = x->data;
    for (int64_t o = 0; o < outer; o++)
        for (int32_t k = 0; k < n->n_outputs; k++) {
            size_t nb = slab_bytes(&out[k]->shape, ax, esz);
            if (!nb) continue;
            memcpy((unsigned char *)out[k]->data + (size_t)o * nb, src, nb);
            src += nb;
        }
    return AMPC_OK;
}

/* The clamped start of one Slice axis, exactly as inference computes it (see slice_axis in
 * ir/infer/movement.c). */
static int64_t slice_start(int64_t dim, int64_t start, int64_t step) {
    if (start < 0) start += dim;
    return step > 0 ? AMPC_MIN(AMPC_MAX(start, 0), dim) : AMPC_MIN(AMPC_MAX(start, 0), dim - 1);
}

/* Slice: output index i along a sliced axis reads input index start + i * step. */
ampc_status ampc_ref_slice(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank;
    int64_t starts[AMPC_MAX_RANK], axes[AMPC_MAX_RANK], steps[AMPC_MAX_RANK];
    int64_t first[AMPC_MAX_RANK] = {0}, step[AMPC_MAX_RANK], xs[AMPC_MAX_RANK];
    int32_t ns = operand_ints(in[1], starts, AMPC_MAX_RANK);
    bool has_axes = n->n_inputs > 3 && in[3], has_steps = n->n_inputs > 4 && in[4];
    if (has_axes) operand_ints(in[3], axes, AMPC_MAX_RANK);
    if (has_steps) operand_ints(in[4], steps, AMPC_MAX_RANK);
    for (int32_t i = 0; i < r; i++) step[i] = 1;
    for (int32_t i = 0; i < ns; i++) {
        int32_t a = has_axes ? norm_axis(axes[i], r) : i;
        step[a] = has_steps ? steps[i] : 1;
        first[a] = slice_start(x->shape.dims[a], starts[i], step[a]);
    }
    int64_t count = ampc_shape_numel(&y->shape);
    if (!count) return AMPC_OK;
    /* Input offset of output element 0, and the input step per output step along each dim. */
    ampc_ref_strides(&x->shape, xs);
    int64_t off = 0, idx[AMPC_MAX_RANK] = {0};
    for (int32_t i = 0; i < r; i++) {
        off += first[i] * xs[i];
        /* A step only matters where the axis keeps 2 or more elements, and then it is at most
         * the dim; a huge step on a 1-element axis must not overflow the stride product. */
        xs[i] *= y->shape.dims[i] > 1 ? step[i] : 1;
    }
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t e = 0; e < count; e++) {
        ampc_ref_copy_elem(y->data, e, x->data, off, esz);
        for (int32_t d = r - 1; d >= 0; d--) {
            off += xs[d];
            if (++idx[d] < y->shape.dims[d]) break;
            off -= xs[d] * idx[d];
            idx[d] = 0;
        }
    }
    return AMPC_OK;
}

/* ---- Gather, Expand, ConstantOfShape, Range, Pad ------------------------------------------- */

/* Gather: every index is checked (negative ones count from the end) before anything moves. */
ampc_status ampc_ref_gather(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *ix = in[1];
    ampc_tensor *y = out[0];
    int32_t ax = ampc_axis_of(n, x->shape.rank);
    int64_t outer = 1, inner = 1, dim = x->shape.dims[ax], ni = ampc_shape_numel(&ix->shape);
    for (int32_t i = 0; i < ax; i++) outer *= x->shape.dims[i];
    for (int32_t i = ax + 1; i < x->shape.rank; i++) inner *= x->shape.dims[i];
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
        if (v < -dim || v >= dim)
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "index %lld (element %lld of input 1 '%s') is out of range for axis "
                             "%d of input 0 '%s', which has %lld entries (valid: %lld to %lld)",
                             (long long)v, (long long)j, n->inputs[1]->name, ax, n->inputs[0]->name,
                             (long long)dim, (long long)-dim, (long long)dim - 1);
    }
    size_t nb = (size_t)inner * ampc_dtype_size(x->dtype);
    if (!nb) return AMPC_OK;
    unsigned char *dst = y->data;
    const unsigned char *src = x->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++, dst += nb) {
            int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
            if (v < 0) v += dim;
            memcpy(dst, src + ((size_t)o * (size_t)dim + (size_t)v) * nb, nb);
        }
    return AMPC_OK;
}

ampc_status ampc_ref_expand(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_shape *shapes[1] = {&in[0]->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &out[0]->shape, shapes, 1);
    int64_t count = ampc_shape_numel(&out[0]->shape);
    size_t esz = ampc_dtype_size(out[0]->dtype);
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it))
        ampc_ref_copy_elem(out[0]->data, i, in[0]->data, it.off[0], esz);
    return AMPC_OK;
}

ampc_status ampc_ref_constant_of_shape(ampc_graph *g, const ampc_node *n,
                                       const ampc_tensor *const *in, ampc_tensor *const *out) {
    (void)g, (void)in;
    const void *fill = ampc_constant_fill(n);
    if (!fill) return AMPC_OK; /* f32 zeros: the buffer arrives zero-filled */
    int64_t count = ampc_shape_numel(&out[0]->shape);
    size_t esz = ampc_dtype_size(out[0]->dtype);
    for (int64_t i = 0; i < count; i++)
        ampc_ref_copy_elem(out[0]->data, i, fill, 0, esz);
    return AMPC_OK;
}

/* Range: element i is start + i * delta, computed in double (floats, rounded once) or int64. */
ampc_status ampc_ref_range(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g, (void)n;
    ampc_tensor *y = out[0];
    int64_t count = y->shape.dims[0];
    if (ampc_dtype_is_float(y->dtype)) {
        double s = ampc_ref_load_f64(in[0]->data, in[0]->dtype, 0);
        double d = ampc_ref_load_f64(in[2]->data, in[2]->dtype, 0);
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_f64(y->data, y->dtype, i, s + (double)i * d);
    } else {
        uint64_t s = (uint64_t)ampc_ref_load_i64(in[0]->data, in[0]->dtype, 0);
        uint64_t d = (uint64_t)ampc_ref_load_i64(in[2]->data, in[2]->dtype, 0);
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)(s + (uint64_t)i * d));
    }
    return AMPC_OK;
}

/* Pad: the modes and geometry of ir/pad.h. */
ampc_status ampc_ref_pad(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *cv = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank;
    int64_t pads[2 * AMPC_MAX_RANK], axes[AMPC_MAX_RANK];
    int64_t lo[AMPC_MAX_RANK], len[AMPC_MAX_RANK], shift[AMPC_MAX_RANK];
    int32_t np = operand_ints(in[1], pads, 2 * AMPC_MAX_RANK);
    bool has_axes = n->n_inputs > 3 && in[3];
    if (has_axes) operand_ints(in[3], axes, AMPC_MAX_RANK);
    const ampc_pad_mode mode = ampc_pad_mode_of(g, n);
    ampc_pad_geometry(r, x->shape.dims, pads, np, has_axes ? axes : NULL, lo, len, shift);
    size_t esz = ampc_dtype_size(x->dtype);
    unsigned char fill[16] = {0}; /* the constant's bytes (zeros when absent or empty) */
    if (cv && ampc_shape_numel(&cv->shape)) memcpy(fill, cv->data, esz);
    int64_t xs[AMPC_MAX_RANK], idx[AMPC_MAX_RANK] = {0}, count = ampc_shape_numel(&y->shape);
    ampc_ref_strides(&x->shape, xs);
    unsigned char *dst = y->data;
    for (int64_t e = 0; e < count; e++, dst += esz) {
        int64_t off = 0;
        for (int32_t d = 0; d < r && off >= 0; d++) {
            int64_t j = ampc_pad_source(idx[d] - shift[d], len[d], mode);
            off = j < 0 ? -1 : off + (lo[d] + j) * xs[d];
        }
        memcpy(dst, off < 0 ? fill : (const unsigned char *)x->data + (size_t)off * esz, esz);
        for (int32_t d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return AMPC_OK;
}

/* ---- Tile, DepthToSpace, SpaceToDepth, CenterCropPad --------------------------------------- */

/* Tile: output index o along dim d reads input index o mod dim. */
ampc_status ampc_ref_tile(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank;
    int64_t xs[AMPC_MAX_RANK], idx[AMPC_MAX_RANK] = {0}, count = ampc_shape_numel(&y->shape);
    ampc_ref_strides(&x->shape, xs);
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t e = 0; e < count; e++) {
        int64_t off = 0;
        for (int32_t d = 0; d < r; d++) off += (idx[d] % x->shape.dims[d]) * xs[d];
        ampc_ref_copy_elem(y->data, e, x->data, off, esz);
        for (int32_t d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return AMPC_OK;
}

/* DepthToSpace / SpaceToDepth, walking the [N, C, H, W] side with the channels: element
 * (n, c, h*b + i, w*b + j) of the spatial side is channel (i*b + j) * C' + c (DCR, and always for
 * SpaceToDepth) or c * b^2 + i*b + j (CRD) at (h, w) of the deep side, C' its channel count. */
ampc_status ampc_ref_depth_space(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 ampc_tensor *const *out) {
    (void)g;
    bool to_space = n->op == AMPC_OP_DEPTH_TO_SPACE;
    const ampc_tensor *deep = to_space ? in[0] : out[0], *wide = to_space ? out[0] : in[0];
    const ampc_space_depth_params sd = ampc_space_depth_params_of(n);
    const int64_t b = sd.blocksize;
    const bool crd = sd.crd; /* SpaceToDepth too (opset 22+) */
    int64_t N = wide->shape.dims[0], C = wide->shape.dims[1];
    int64_t H = deep->shape.dims[2], W = deep->shape.dims[3], CD = deep->shape.dims[1];
    size_t esz = ampc_dtype_size(in[0]->dtype);
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t hh = 0; hh < H * b; hh++)
                for (int64_t ww = 0; ww < W * b; ww++) {
                    int64_t h = hh / b, i = hh % b, w = ww / b, j = ww % b;
                    int64_t dc = crd ? c * b * b + i * b + j : (i * b + j) * C + c;
                    int64_t wi = ((nn * C + c) * H * b + hh) * W * b + ww;
                    int64_t di = ((nn * CD + dc) * H + h) * W + w;
                    if (to_space) ampc_ref_copy_elem(out[0]->data, wi, in[0]->data, di, esz);
                    else ampc_ref_copy_elem(out[0]->data, di, in[0]->data, wi, esz);
                }
    return AMPC_OK;
}

/* CenterCropPad: per axis, a crop starts floor((in - out) / 2) into the input, a pad places the
 * input floor((out - in) / 2) into the zero-filled output. */
ampc_status ampc_ref_center_crop_pad(ampc_graph *g, const ampc_node *n,
                                     const ampc_tensor *const *in, ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank;
    int64_t xs[AMPC_MAX_RANK], idx[AMPC_MAX_RANK] = {0}, count = ampc_shape_numel(&y->shape);
    int64_t shift[AMPC_MAX_RANK]; /* input index = output index + shift */
    for (int32_t d = 0; d < r; d++) {
        int64_t i = x->shape.dims[d], o = y->shape.dims[d];
        shift[d] = i >= o ? (i - o) / 2 : -((o - i) / 2);
    }
    ampc_ref_strides(&x->shape, xs);
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t e = 0; e < count; e++) {
        int64_t off = 0;
        for (int32_t d = 0; d < r && off >= 0; d++) {
            int64_t j = idx[d] + shift[d];
            off = j < 0 || j >= x->shape.dims[d] ? -1 : off + j * xs[d];
        }
        if (off >= 0) ampc_ref_copy_elem(y->data, e, x->data, off, esz);
        for (int32_t d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return AMPC_OK;
}

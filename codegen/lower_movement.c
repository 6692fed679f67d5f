/*
 * lower_movement.c — generated kernels for the shape and data-movement family (LOWER_MOVE):
 * Transpose, Concat, Split, Slice, Expand, Tile, DepthToSpace, SpaceToDepth, Pad,
 * CenterCropPad, Trilu, Range and ConstantOfShape.
 *
 * Most of these ops are a "view copy": every output element is one input element, and both
 * offsets are affine in the coordinates of an iteration space. Such an op is described as an
 * mv_view (dims, source and destination strides, base offsets), simplified (unit dims dropped,
 * neighbours that stay contiguous in both tensors merged) and emitted as
 *   - a copy step when what is left is one contiguous run (an identity Transpose, a Slice of
 *     leading rows, Concat or Split along the outermost dim that is not 1, Expand to the same
 *     shape...);
 *   - a tiled shared-memory transpose when the destination's contiguous dim is not the source's
 *     and both are long (32x32 tiles: reads and writes both coalesced);
 *   - otherwise a kernel with one thread per unit, its coordinates decomposed with the dims
 *     baked in (ampc_cg_coords). When the last dim is contiguous in both tensors, a unit is
 *     the widest run of up to 16 bytes that every stride and offset divides (mv_unit), else one
 *     element.
 * Concat and Split whose parts interleave are one kernel over the whole tensor that finds each
 * unit's part through a balanced tree of comparisons with the part boundaries.
 * Elements move as they are, never converted, so every dtype takes the same path. Pad,
 * CenterCropPad, Trilu, Range and ConstantOfShape have their own one-thread-per-element kernels.
 * Every rule mirrors the reference kernels (ir/ref/movement.c; Trilu in ir/ref/index.c).
 */
#include "codegen.h"

#include "ir/movement.h"
#include "ir/pad.h"
#include "ir/ref/ref.h"

#include <string.h>

/* ---- shared helpers ------------------------------------------------------------------------- */

/* Declared in codegen.h (lower_index.c uses it too): the coordinates of a flat index, innermost
 * first by remainder and quotient with the dims baked in; a unit dim costs nothing and the
 * outermost dim takes the last quotient as it is. */
void ampc_cg_coords(ampc_cg_kernel *k, const int64_t *dims, int32_t rank, const char *idx,
                    const char **names) {
    int32_t outer = -1; /* the outermost dim that is not 1 takes the quotient as it is */
    for (int32_t d = 0; d < rank && outer < 0; d++)
        if (dims[d] != 1) outer = d;
    const char *r = NULL;
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (dims[d] == 1) {
            names[d] = "0LL";
            continue;
        }
        const char *c = ampc_cg_local(k, "c");
        names[d] = c;
        if (d == outer) {
            ampc_cg_line(k, "const long long %s = %s;", c, r ? r : idx);
            continue;
        }
        if (!r) {
            r = ampc_cg_local(k, "r");
            ampc_cg_line(k, "long long %s = %s;", r, idx);
        }
        ampc_cg_line(k, "const long long %s = %s %% %lldLL;", c, r, (long long)dims[d]);
        ampc_cg_line(k, "%s /= %lldLL;", r, (long long)dims[d]);
    }
}

/* Row-major strides of a shape, in elements. */
static void dense_strides(const ampc_shape *s, int64_t *st) { ampc_ref_strides(s, st); }

/* The bytes of `count` elements of v starting at element `first`. */
static ampc_rt_ref sub_ref(ampc_cg *cg, const ampc_value *v, int64_t first, int64_t count) {
    ampc_rt_ref r = ampc_cg_ref(cg, v);
    int64_t esz = (int64_t)ampc_dtype_size(v->dtype);
    r.offset += first * esz;
    r.bytes = count * esz;
    return r;
}

/* Appends "base + c0 * s0 + ..." (terms with stride 0 dropped; "0LL" when nothing is left). */
static void offset_expr(ampc_strbuf *sb, int64_t base, const char *const *c, const int64_t *st,
                        int32_t rank) {
    bool any = false;
    if (base) {
        ampc_sb_printf(sb, "%lldLL", (long long)base);
        any = true;
    }
    for (int32_t d = 0; d < rank; d++) {
        if (!st[d] || !strcmp(c[d], "0LL")) continue;
        if (any) ampc_sb_puts(sb, " + ");
        if (st[d] == 1) ampc_sb_puts(sb, c[d]);
        else ampc_sb_printf(sb, "%s * %lldLL", c[d], (long long)st[d]);
        any = true;
    }
    if (!any) ampc_sb_puts(sb, "0LL");
}

/* The unsigned type of a width in bytes (1 to 16), for kernels that only move bits. */
static const char *bits_of(int64_t bytes) {
    switch (bytes) {
    case 1: return "unsigned char";
    case 2: return "unsigned short";
    case 4: return "unsigned int";
    case 8: return "unsigned long long";
    default: AMPC_ASSERT(bytes == 16); return "uint4";
    }
}

static const char *bits_type(ampc_dtype t) { return bits_of((int64_t)ampc_dtype_size(t)); }

/* The widest unit of at most 16 bytes, and at least esz, that divides every byte count whose
 * bits are or-ed into `bytes` (a power of two divides a sum of such counts iff it divides their
 * or; negative counts too, in two's complement). */
static int64_t unit_of(uint64_t bytes, int64_t esz) {
    int64_t u = 16;
    while (u > esz && (bytes & (uint64_t)(u - 1))) u /= 2;
    return u;
}

/* The kernel-name stem of a node's op ("depth_to_space"). */
static const char *stem(const ampc_node *n) { return ampc_op_get(n->op)->name; }

/* ---- the view copy -------------------------------------------------------------------------- */

enum { MV_MAX = 2 * AMPC_MAX_RANK }; /* Tile splits every dim in two */

/* An iteration space over which destination element dst0 + sum(c[d] * dst[d]) receives source
 * element src0 + sum(c[d] * src[d]); dims outermost first. */
typedef struct mv_view {
    int32_t rank;
    int64_t dims[MV_MAX];
    int64_t src[MV_MAX], dst[MV_MAX]; /* element strides (a source stride may be 0 or < 0) */
    int64_t src0, dst0; /* element offsets of coordinate 0 */
} mv_view;

static void mv_dim(mv_view *v, int64_t size, int64_t src, int64_t dst) {
    AMPC_ASSERT(v->rank < MV_MAX);
    v->dims[v->rank] = size;
    v->src[v->rank] = src;
    v->dst[v->rank] = dst;
    v->rank++;
}

static int64_t mv_count(const mv_view *v) {
    int64_t c = 1;
    for (int32_t d = 0; d < v->rank; d++) c *= v->dims[d];
    return c;
}

/* Drops unit dims and merges a dim into the one outside it when both tensors step over the
 * pair as over one longer dim. */
static void mv_simplify(mv_view *v) {
    mv_view o = {.src0 = v->src0, .dst0 = v->dst0};
    for (int32_t d = 0; d < v->rank; d++) {
        if (v->dims[d] == 1) continue;
        int32_t l = o.rank - 1;
        if (l >= 0 && o.src[l] == v->src[d] * v->dims[d] && o.dst[l] == v->dst[d] * v->dims[d]) {
            o.dims[l] *= v->dims[d];
            o.src[l] = v->src[d];
            o.dst[l] = v->dst[d];
            continue;
        }
        mv_dim(&o, v->dims[d], v->src[d], v->dst[d]);
    }
    *v = o;
}

/* Whether strides st are the row-major strides of dims (offset = the flat index). */
static bool mv_dense(const int64_t *dims, const int64_t *st, int32_t rank) {
    int64_t want = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (st[d] != want) return false;
        want *= dims[d];
    }
    return true;
}

/* Tiling pays when the destination's contiguous dim b is not the source's contiguous dim a and
 * both are long enough to fill a good part of a 32-wide tile. Returns a, or -1. */
static int32_t mv_tile_dim(const mv_view *v, int64_t count) {
    int32_t b = v->rank - 1;
    if (v->rank < 2 || count < 16384 || v->dst[b] != 1 || v->src[b] == 1 || v->dims[b] < 16)
        return -1;
    for (int32_t a = 0; a < b; a++)
        if (v->src[a] == 1) return v->dims[a] >= 16 ? a : -1;
    return -1;
}

/* The bytes each thread of v's copy moves: when v's last dim is contiguous in both tensors, the
 * widest unit up to 16 bytes that its length, every other stride, both base offsets and both
 * buffers' offsets are whole numbers of (a head split, a channel Concat, a window shift move 16
 * bytes a thread instead of one 2-byte element); else one element. */
static int64_t mv_unit(const mv_view *v, int64_t esz, const ampc_value *x, const ampc_value *y) {
    int32_t l = v->rank - 1;
    if (l < 0 || v->src[l] != 1 || v->dst[l] != 1) return esz;
    uint64_t bytes = (uint64_t)(v->dims[l] * esz) | (uint64_t)(v->src0 * esz) |
                     (uint64_t)(v->dst0 * esz) | (uint64_t)x->mem_offset | (uint64_t)y->mem_offset;
    for (int32_t d = 0; d < l; d++) bytes |= (uint64_t)(v->src[d] * esz) | (uint64_t)(v->dst[d] * esz);
    return unit_of(bytes, esz);
}

/* The tiled transpose: each block moves 32x32 tiles of the (a, b) plane, reading rows along a
 * (the source's contiguous dim) and writing rows along b (the destination's), through a padded
 * shared tile; the other dims index the tiles as a batch. Moves bits, not typed elements. */
static ampc_status emit_tiled(ampc_cg *cg, const ampc_node *n, const char *what,
                              const ampc_value *x, const ampc_value *y, const mv_view *v, int32_t a,
                              int64_t count) {
    int32_t b = v->rank - 1;
    int64_t da = v->dims[a], db = v->dims[b];
    int64_t ta = (da + 31) / 32, tb = (db + 31) / 32, batch = count / (da * db);
    int64_t tiles = batch * ta * tb;
    int64_t od[MV_MAX], os[MV_MAX], ot[MV_MAX];
    int32_t no = 0;
    for (int32_t d = 0; d < v->rank; d++)
        if (d != a && d != b) od[no] = v->dims[d], os[no] = v->src[d], ot[no] = v->dst[d], no++;

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, what);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    const char *bt = bits_type(x->dtype);
    ampc_cg_line(k, "__shared__ %s tile[32][33];", bt);
    ampc_cg_line(k, "const %s *x = (const %s *)%s;", bt, bt, px);
    ampc_cg_line(k, "%s *y = (%s *)%s;", bt, bt, py);
    ampc_cg_open(k, "for (long long t = blockIdx.x; t < %lldLL; t += gridDim.x)", (long long)tiles);
    ampc_cg_line(k, "const long long tb = t %% %lldLL, ta = t / %lldLL %% %lldLL, bt = t / %lldLL;",
                 (long long)tb, (long long)tb, (long long)ta, (long long)(ta * tb));
    const char *c[MV_MAX];
    ampc_cg_coords(k, od, no, "bt", c);
    ampc_strbuf so = {0}, dof = {0};
    offset_expr(&so, v->src0, c, os, no);
    offset_expr(&dof, v->dst0, c, ot, no);
    ampc_cg_line(k, "const long long sb = %s, db = %s;", so.data, dof.data);
    ampc_sb_free(&so);
    ampc_sb_free(&dof);
    ampc_cg_line(k, "const long long a0 = ta * 32, b0 = tb * 32;");
    ampc_cg_open(k, "for (int j = threadIdx.y; j < 32; j += 8)");
    ampc_cg_line(k, "const long long a = a0 + threadIdx.x, b = b0 + j;");
    ampc_cg_line(k, "if (a < %lldLL && b < %lldLL) tile[j][threadIdx.x] = x[sb + a + b * %lldLL];",
                 (long long)da, (long long)db, (long long)v->src[b]);
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_open(k, "for (int j = threadIdx.y; j < 32; j += 8)");
    ampc_cg_line(k, "const long long a = a0 + j, b = b0 + threadIdx.x;");
    ampc_cg_line(k, "if (a < %lldLL && b < %lldLL) y[db + a * %lldLL + b] = tile[threadIdx.x][j];",
                 (long long)da, (long long)db, (long long)v->dst[a]);
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_close(k);
    uint32_t grid[3] = {(uint32_t)AMPC_MIN(tiles, 65536), 1, 1}, block[3] = {32, 8, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

/* Emits the copy that view v describes from x into y: nothing when it is empty, a copy step
 * when it is one contiguous run, a tiled transpose when that pays, else one thread per element. */
static ampc_status emit_view(ampc_cg *cg, const ampc_node *n, const char *what, const ampc_value *x,
                             const ampc_value *y, mv_view v) {
    int64_t count = mv_count(&v);
    if (!count) return AMPC_OK;
    mv_simplify(&v);
    if (v.rank == 0 || (v.rank == 1 && v.src[0] == 1 && v.dst[0] == 1))
        return ampc_cg_step_copy(cg, n, sub_ref(cg, x, v.src0, count),
                                 sub_ref(cg, y, v.dst0, count));
    int32_t a = mv_tile_dim(&v, count);
    if (a >= 0) return emit_tiled(cg, n, what, x, y, &v, a, count);
    int64_t esz = (int64_t)ampc_dtype_size(x->dtype), unit = mv_unit(&v, esz, x, y);
    if (unit > esz) { /* count, offsets and strides in units of `unit` bytes */
        int64_t per = unit / esz;
        int32_t l = v.rank - 1;
        v.dims[l] /= per;
        for (int32_t d = 0; d < l; d++) v.src[d] /= per, v.dst[d] /= per;
        v.src0 /= per;
        v.dst0 /= per;
        count /= per;
    }

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, what);
    const char *type = unit > esz ? bits_of(unit) : ampc_cg_ctype(x->dtype);
    const char *px = ampc_cg_param_ref(k, ampc_cg_ref(cg, x), type, false);
    const char *py = ampc_cg_param_ref(k, ampc_cg_ref(cg, y), type, true);
    ampc_cg_grid_loop(k, count);
    bool sd = mv_dense(v.dims, v.src, v.rank), dd = mv_dense(v.dims, v.dst, v.rank);
    const char *c[MV_MAX];
    ampc_cg_coords(k, v.dims, v.rank, "i", c);
    ampc_strbuf so = {0}, dof = {0};
    if (sd) ampc_sb_printf(&so, v.src0 ? "%lldLL + i" : "i", (long long)v.src0);
    else offset_expr(&so, v.src0, c, v.src, v.rank);
    if (dd) ampc_sb_printf(&dof, v.dst0 ? "%lldLL + i" : "i", (long long)v.dst0);
    else offset_expr(&dof, v.dst0, c, v.dst, v.rank);
    ampc_cg_line(k, "%s[%s] = %s[%s];", py, dof.data, px, so.data);
    ampc_sb_free(&so);
    ampc_sb_free(&dof);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

ampc_status ampc_cg_view_copy(ampc_cg *cg, const ampc_node *n, const char *what,
                              const ampc_value *x, const ampc_value *y, const int64_t *dims,
                              int32_t rank, const int64_t *src, int64_t src0, const int64_t *dst,
                              int64_t dst0) {
    mv_view v = {.src0 = src0, .dst0 = dst0};
    int64_t dense = 1;
    for (int32_t d = rank - 1; d >= 0; d--) dense *= dims[d];
    AMPC_ASSERT(dst || dense == ampc_ir_numel(y));
    for (int32_t d = 0; d < rank; d++) {
        dense /= dims[d];
        mv_dim(&v, dims[d], src[d], dst ? dst[d] : dense);
    }
    return emit_view(cg, n, what, x, y, v);
}

/* A view over every element of y (row-major), the source strides still to fill. */
static mv_view view_over(const ampc_value *y) {
    mv_view v = {0};
    int64_t ys[AMPC_MAX_RANK];
    dense_strides(&y->shape, ys);
    for (int32_t d = 0; d < y->shape.rank; d++) mv_dim(&v, y->shape.dims[d], 0, ys[d]);
    return v;
}

static int32_t norm_axis(int64_t a, int32_t rank) { return (int32_t)(a < 0 ? a + rank : a); }

/* Entries of a constant integer operand (absent: 0 entries). */
static int32_t operand_ints(const ampc_value *v, int64_t *buf, int32_t cap) {
    if (!v) return 0;
    int64_t cnt = ampc_ir_numel(v);
    AMPC_ASSERT(v->data && cnt <= cap); /* `cin` operand; inference bounded it */
    for (int64_t i = 0; i < cnt; i++) buf[i] = ampc_ref_load_i64(v->data, v->dtype, i);
    return (int32_t)cnt;
}

static int64_t prod(const int64_t *dims, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++) p *= dims[i];
    return p;
}

/* ---- Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth ---------------------------- */

/* A Transpose, Slice or Expand n maps its output coordinate c to input coordinate e with
 * e[k] = first[k] + sum over the output dims d with from[d] == k of c[d] * step[d] (from[d] -1:
 * a dim the output broadcasts). */
typedef struct view_map {
    int32_t from[AMPC_MAX_RANK];
    int64_t step[AMPC_MAX_RANK];
    int64_t first[AMPC_MAX_RANK];
} view_map;

static view_map map_of(const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int32_t r = x->shape.rank;
    view_map m = {.first = {0}};
    if (n->op == AMPC_OP_TRANSPOSE) {
        int64_t perm[AMPC_MAX_RANK];
        (void)ampc_transpose_perm(n, r, perm); /* inference checked its length */
        for (int32_t d = 0; d < r; d++) m.from[d] = (int32_t)perm[d], m.step[d] = 1;
    } else if (n->op == AMPC_OP_SLICE) {
        /* output index i along an axis reads input index first + i * step (clamped start as
         * inference computes it; a step matters only where the axis keeps two or more elements) */
        int64_t starts[AMPC_MAX_RANK], axes[AMPC_MAX_RANK], st[AMPC_MAX_RANK];
        int32_t ns = operand_ints(n->inputs[1], starts, AMPC_MAX_RANK);
        const bool has_axes = n->n_inputs > 3 && n->inputs[3];
        const bool has_steps = n->n_inputs > 4 && n->inputs[4];
        if (has_axes) operand_ints(n->inputs[3], axes, AMPC_MAX_RANK);
        if (has_steps) operand_ints(n->inputs[4], st, AMPC_MAX_RANK);
        for (int32_t d = 0; d < r; d++) m.from[d] = d, m.step[d] = 1;
        for (int32_t i = 0; i < ns; i++) {
            int32_t a = has_axes ? norm_axis(axes[i], r) : i;
            int64_t dim = x->shape.dims[a], s = starts[i];
            m.step[a] = has_steps ? st[i] : 1;
            if (s < 0) s += dim;
            m.first[a] = m.step[a] > 0 ? AMPC_MIN(AMPC_MAX(s, 0), dim)
                                       : AMPC_MIN(AMPC_MAX(s, 0), dim - 1);
        }
        for (int32_t d = 0; d < r; d++)
            if (y->shape.dims[d] <= 1) m.step[d] = 0;
    } else { /* Expand: numpy broadcasting; dims the input lacks or holds as 1 read step 0 */
        AMPC_ASSERT(n->op == AMPC_OP_EXPAND);
        int32_t lead = y->shape.rank - r;
        for (int32_t d = 0; d < y->shape.rank; d++) {
            const bool kept = d >= lead && x->shape.dims[d - lead] != 1;
            m.from[d] = kept ? d - lead : -1, m.step[d] = kept;
        }
    }
    return m;
}

const ampc_value *ampc_cg_view_of(ampc_cg *cg, const ampc_node *n, int64_t *src0, int64_t *steps) {
    if (!ampc_op_is_strided_view(n->op)) return NULL;
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    /* the input's element steps: its own dense ones, or, when it is a view never stored
     * (fuse-elementwise), that view's, composed */
    int64_t xs[AMPC_MAX_RANK], x0 = 0;
    const ampc_value *src = x;
    if ((x->flags & AMPC_VALUE_FUSED) && x->producer && ampc_op_is_strided_view(x->producer->op))
        src = ampc_cg_view_of(cg, x->producer, &x0, xs);
    else
        dense_strides(&x->shape, xs);
    const view_map m = map_of(n);
    *src0 = x0;
    for (int32_t k = 0; k < x->shape.rank; k++) *src0 += m.first[k] * xs[k];
    for (int32_t d = 0; d < y->shape.rank; d++)
        steps[d] = m.from[d] < 0 ? 0 : m.step[d] * xs[m.from[d]];
    return src;
}

/* Transpose, Slice and Expand: one view copy of their geometry, from the tensor in memory they
 * (through views never stored) read. */
static ampc_status lower_view(ampc_cg *cg, const ampc_node *n, const char *what) {
    const ampc_value *y = n->outputs[0];
    if (n->op == AMPC_OP_SLICE && !ampc_ir_numel(y)) return AMPC_OK;
    int64_t steps[AMPC_MAX_RANK];
    mv_view v = view_over(y);
    const ampc_value *src = ampc_cg_view_of(cg, n, &v.src0, steps);
    for (int32_t d = 0; d < y->shape.rank; d++) v.src[d] = steps[d];
    return emit_view(cg, n, what, src, y, v);
}

/* Tile: each output dim of rep * dim entries is iterated as (rep, dim), the repeat reading
 * stride 0. */
static ampc_status lower_tile(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    if (!ampc_ir_numel(y)) return AMPC_OK;
    int64_t xs[AMPC_MAX_RANK], ys[AMPC_MAX_RANK];
    dense_strides(&x->shape, xs);
    dense_strides(&y->shape, ys);
    mv_view v = {0};
    for (int32_t d = 0; d < x->shape.rank; d++) {
        int64_t dim = x->shape.dims[d], rep = y->shape.dims[d] / dim;
        if (rep > 1) mv_dim(&v, rep, 0, dim * ys[d]);
        mv_dim(&v, dim, xs[d], ys[d]);
    }
    return emit_view(cg, n, "tile", x, y, v);
}

/* DepthToSpace / SpaceToDepth as views over the [N, C, H, b, W, b] form of the spatial side:
 * element (n, c, h*b + i, w*b + j) is channel (i*b + j) * C + c (DCR) or c * b^2 + i*b + j
 * (CRD) at (h, w) of the deep side, C the spatial side's channels. */
static ampc_status lower_depth_space(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    bool to_space = n->op == AMPC_OP_DEPTH_TO_SPACE;
    const ampc_space_depth_params sd = ampc_space_depth_params_of(n);
    const int64_t b = sd.blocksize;
    /* Newer opsets give SpaceToDepth a mode too: its CRD is the inverse of DepthToSpace's. */
    const bool crd = sd.crd;
    const ampc_value *deep = to_space ? x : y, *wide = to_space ? y : x;
    int64_t N = wide->shape.dims[0], C = wide->shape.dims[1];
    int64_t H = deep->shape.dims[2], W = deep->shape.dims[3];
    int64_t hw = H * W, ws = W * b;
    /* Strides of (n, c, h, i, w, j) in the spatial-side tensor and in the deep one. */
    int64_t wide_st[6] = {C * hw * b * b, hw * b * b, b * ws, ws, b, 1};
    int64_t deep_st[6] = {C * b * b * hw, hw, W, b * C * hw, 1, C * hw};
    if (crd) deep_st[1] = b * b * hw, deep_st[3] = b * hw, deep_st[5] = hw;
    int64_t dims[6] = {N, C, H, b, W, b};
    mv_view v = {0};
    for (int32_t d = 0; d < 6; d++)
        mv_dim(&v, dims[d], to_space ? deep_st[d] : wide_st[d], to_space ? wide_st[d] : deep_st[d]);
    return emit_view(cg, n, stem(n), x, y, v);
}

/* ---- Concat, Split -------------------------------------------------------------------------- */

/* Beyond this many parts, one view copy per part: the kernel's comparison tree grows with them. */
enum { PARTS_MAX = 256 };

/* The parts of a Concat (the inputs) or a Split (the outputs): the slabs of `part` elements
 * that follow one another, from `start`, in each `slab` of the whole tensor. */
typedef struct mv_parts {
    int32_t n;
    const char *name[PARTS_MAX]; /* kernel parameter */
    int64_t part[PARTS_MAX], start[PARTS_MAX];
} mv_parts;

/* Emits the comparisons that find, for position s in a slab, the part holding it (a balanced
 * tree over the part starts), and at each leaf the move of one element between that part and
 * the whole tensor (`whole`, index i): into it for Concat, out of it for Split. */
static void emit_part_tree(ampc_cg_kernel *k, const mv_parts *p, int32_t lo, int32_t hi,
                           const char *whole, bool concat) {
    if (hi - lo == 1) {
        if (concat)
            ampc_cg_line(k, "%s[i] = %s[o * %lldLL + s - %lldLL];", whole, p->name[lo],
                         (long long)p->part[lo], (long long)p->start[lo]);
        else
            ampc_cg_line(k, "%s[o * %lldLL + s - %lldLL] = %s[i];", p->name[lo],
                         (long long)p->part[lo], (long long)p->start[lo], whole);
        return;
    }
    int32_t mid = (lo + hi) / 2;
    ampc_cg_open(k, "if (s < %lldLL)", (long long)p->start[mid]);
    emit_part_tree(k, p, lo, mid, whole, concat);
    ampc_cg_close(k);
    ampc_cg_open(k, "else");
    emit_part_tree(k, p, mid, hi, whole, concat);
    ampc_cg_close(k);
}

/* Concat and Split: per index of the dims before `axis`, the parts' slabs one after another.
 * When the slabs are whole parts (nothing outside the axis but 1s), each part is one copy;
 * otherwise one kernel over the whole tensor finds each element's part with emit_part_tree
 * (or, past PARTS_MAX parts, one view copy per part). Empty parts are skipped. */
static ampc_status lower_concat_split(ampc_cg *cg, const ampc_node *n) {
    bool concat = n->op == AMPC_OP_CONCAT;
    const ampc_value *whole = concat ? n->outputs[0] : n->inputs[0];
    ampc_value *const *vals = concat ? n->inputs : n->outputs;
    int32_t nv = concat ? n->n_inputs : n->n_outputs, r = whole->shape.rank;
    int32_t ax = ampc_axis_of(n, r);
    int64_t count = ampc_ir_numel(whole), inner = prod(whole->shape.dims, ax + 1, r);
    int64_t outer = prod(whole->shape.dims, 0, ax), slab = whole->shape.dims[ax] * inner;
    if (!count) return AMPC_OK;
    int32_t parts = 0;
    for (int32_t i = 0; i < nv; i++) parts += ampc_ir_numel(vals[i]) > 0;
    if (outer == 1 || parts == 1 || parts > PARTS_MAX) {
        int64_t at = 0; /* the part's first element within a slab of the whole */
        for (int32_t i = 0; i < nv; i++) {
            int64_t part = vals[i]->shape.dims[ax] * inner;
            mv_view v = {0};
            if (concat) v.dst0 = at;
            else v.src0 = at;
            mv_dim(&v, outer, concat ? part : slab, concat ? slab : part);
            mv_dim(&v, part, 1, 1);
            ampc_status st = concat ? emit_view(cg, n, "concat", vals[i], whole, v)
                                    : emit_view(cg, n, "split", whole, vals[i], v);
            if (st != AMPC_OK) return st;
            at += part;
        }
        return AMPC_OK;
    }
    /* Moved in the widest unit that every part, the slab and every buffer's offset divide. */
    int64_t esz = (int64_t)ampc_dtype_size(whole->dtype);
    uint64_t bytes = (uint64_t)(slab * esz) | (uint64_t)whole->mem_offset;
    for (int32_t i = 0; i < nv; i++)
        bytes |= (uint64_t)(vals[i]->shape.dims[ax] * inner * esz) | (uint64_t)vals[i]->mem_offset;
    int64_t unit = unit_of(bytes, esz), per = unit / esz;
    const char *bits = unit > esz ? bits_of(unit) : ampc_cg_ctype(whole->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, concat ? "concat" : "split");
    mv_parts p = {0};
    const char *pw = concat ? NULL : ampc_cg_param_ref(k, ampc_cg_ref(cg, whole), bits, false);
    int64_t at = 0;
    for (int32_t i = 0; i < nv; i++) {
        int64_t part = vals[i]->shape.dims[ax] * inner / per;
        if (part) {
            p.name[p.n] = ampc_cg_param_ref(k, ampc_cg_ref(cg, vals[i]), bits, !concat);
            p.part[p.n] = part;
            p.start[p.n++] = at;
        }
        at += part;
    }
    if (concat) pw = ampc_cg_param_ref(k, ampc_cg_ref(cg, whole), bits, true);
    slab /= per;
    count /= per;
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long o = i / %lldLL, s = i %% %lldLL;", (long long)slab,
                 (long long)slab);
    emit_part_tree(k, &p, 0, p.n, pw, concat);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- Pad, CenterCropPad --------------------------------------------------------------------- */

/* Pad (the modes and geometry of ir/pad.h; the constant is the optional input 2, else 0): the
 * kernel maps each output index as ampc_pad_source does, with index code emitted only for the
 * axes that need it. */
static ampc_status lower_pad(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_value *cv = n->n_inputs > 2 ? n->inputs[2] : NULL;
    int32_t r = x->shape.rank;
    int64_t pads[2 * AMPC_MAX_RANK], axes[AMPC_MAX_RANK];
    int64_t lo[AMPC_MAX_RANK], len[AMPC_MAX_RANK], shift[AMPC_MAX_RANK];
    int32_t np = operand_ints(n->inputs[1], pads, 2 * AMPC_MAX_RANK);
    bool has_axes = n->n_inputs > 3 && n->inputs[3];
    if (has_axes) operand_ints(n->inputs[3], axes, AMPC_MAX_RANK);
    const ampc_pad_mode mode = ampc_pad_mode_of(g, n);
    ampc_pad_geometry(r, x->shape.dims, pads, np, has_axes ? axes : NULL, lo, len, shift);
    int64_t count = ampc_ir_numel(y), xs[AMPC_MAX_RANK];
    if (!count) return AMPC_OK;
    dense_strides(&x->shape, xs);
    /* An axis reaches outside the kept range when it is shifted or longer than what is kept. */
    bool outside[AMPC_MAX_RANK], any = false;
    for (int32_t d = 0; d < r; d++) {
        outside[d] = shift[d] > 0 || y->shape.dims[d] - shift[d] > len[d];
        any |= outside[d];
    }
    if (!any) { /* a pure crop: a view */
        mv_view v = view_over(y);
        for (int32_t d = 0; d < r; d++) v.src0 += lo[d] * xs[d], v.src[d] = xs[d];
        return emit_view(cg, n, "pad", x, y, v);
    }
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "pad");
    const char *px = ampc_cg_param(k, x, false);
    const char *pc =
        cv && ampc_ir_numel(cv) && mode == AMPC_PAD_CONSTANT ? ampc_cg_param(k, cv, false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    const char *ct = ampc_cg_ctype(y->dtype);
    ampc_cg_grid_loop(k, count);
    const char *c[AMPC_MAX_RANK];
    ampc_cg_coords(k, y->shape.dims, r, "i", c);
    if (mode == AMPC_PAD_CONSTANT) ampc_cg_line(k, "bool in = true;");
    ampc_cg_line(k, "long long s = 0;");
    for (int32_t d = 0; d < r; d++) {
        if (!outside[d]) {
            if (lo[d] || strcmp(c[d], "0LL"))
                ampc_cg_line(k, "s += (%s + %lldLL) * %lldLL;", c[d], (long long)lo[d],
                             (long long)xs[d]);
            continue;
        }
        const char *j = ampc_cg_local(k, "j");
        ampc_cg_line(k, "long long %s = %s - %lldLL;", j, c[d], (long long)shift[d]);
        int64_t l = len[d];
        switch (mode) {
        case AMPC_PAD_CONSTANT:
            ampc_cg_line(k, "if (%s < 0 || %s >= %lldLL) in = false;", j, j, (long long)l);
            break;
        case AMPC_PAD_EDGE:
            ampc_cg_line(k, "%s = %s < 0 ? 0 : %s >= %lldLL ? %lldLL : %s;", j, j, j, (long long)l,
                         (long long)(l - 1), j);
            break;
        case AMPC_PAD_WRAP:
            ampc_cg_line(k, "%s = (%s %% %lldLL + %lldLL) %% %lldLL;", j, j, (long long)l,
                         (long long)l, (long long)l);
            break;
        default: /* reflect */
            if (l == 1) {
                ampc_cg_line(k, "%s = 0;", j);
            } else {
                int64_t p = 2 * (l - 1);
                ampc_cg_line(k, "%s = (%s %% %lldLL + %lldLL) %% %lldLL;", j, j, (long long)p,
                             (long long)p, (long long)p);
                ampc_cg_line(k, "if (%s >= %lldLL) %s = %lldLL - %s;", j, (long long)l, j,
                             (long long)p, j);
            }
        }
        ampc_cg_line(k, "s += (%s + %lldLL) * %lldLL;", j, (long long)lo[d], (long long)xs[d]);
    }
    if (mode == AMPC_PAD_CONSTANT && pc) ampc_cg_line(k, "%s[i] = in ? %s[s] : %s[0];", py, px, pc);
    else if (mode == AMPC_PAD_CONSTANT)
        ampc_cg_line(k, "%s[i] = in ? %s[s] : ampc::zero<%s>();", py, px, ct);
    else ampc_cg_line(k, "%s[i] = %s[s];", py, px);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* CenterCropPad: per axis, a crop starts floor((in - out) / 2) into the input, a pad places the
 * input floor((out - in) / 2) into the zero-filled output. Without padded axes it is a view. */
static ampc_status lower_center_crop_pad(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    int32_t r = x->shape.rank;
    int64_t count = ampc_ir_numel(y), xs[AMPC_MAX_RANK], shift[AMPC_MAX_RANK];
    if (!count) return AMPC_OK;
    dense_strides(&x->shape, xs);
    bool padded = false;
    for (int32_t d = 0; d < r; d++) {
        int64_t i = x->shape.dims[d], o = y->shape.dims[d];
        shift[d] = i >= o ? (i - o) / 2 : -((o - i) / 2); /* input index = output index + shift */
        padded |= i < o;
    }
    if (!padded) {
        mv_view v = view_over(y);
        for (int32_t d = 0; d < r; d++) v.src0 += shift[d] * xs[d], v.src[d] = xs[d];
        return emit_view(cg, n, "center_crop_pad", x, y, v);
    }
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "center_crop_pad");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    const char *c[AMPC_MAX_RANK];
    ampc_cg_coords(k, y->shape.dims, r, "i", c);
    ampc_cg_line(k, "bool in = true;");
    ampc_cg_line(k, "long long s = 0;");
    for (int32_t d = 0; d < r; d++) {
        const char *j = ampc_cg_local(k, "j");
        ampc_cg_line(k, "const long long %s = %s + %lldLL;", j, c[d], (long long)shift[d]);
        if (x->shape.dims[d] < y->shape.dims[d])
            ampc_cg_line(k, "if (%s < 0 || %s >= %lldLL) in = false;", j, j,
                         (long long)x->shape.dims[d]);
        ampc_cg_line(k, "s += %s * %lldLL;", j, (long long)xs[d]);
    }
    ampc_cg_line(k, "%s[i] = in ? %s[s] : ampc::zero<%s>();", py, px, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- Trilu, Range, ConstantOfShape ---------------------------------------------------------- */

/* Trilu: element (i, j) of each matrix is kept when j - i >= k (upper) or j - i <= k (lower),
 * else 0. k is clamped to [-rows, cols], which keeps the same elements and fits any literal;
 * a Trilu keeping everything is a copy, one keeping nothing a memset. */
static ampc_status lower_trilu(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    int32_t r = x->shape.rank;
    int64_t count = ampc_ir_numel(y);
    if (!count) return AMPC_OK;
    int64_t kk = n->n_inputs > 1 && n->inputs[1] && n->inputs[1]->data
                     ? ampc_ref_load_i64(n->inputs[1]->data, n->inputs[1]->dtype, 0)
                     : 0;
    bool upper = ampc_ir_attr_int(ampc_cg_graph(cg), n, "upper", 1) != 0;
    int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
    kk = AMPC_MIN(AMPC_MAX(kk, -rows), cols);
    bool all = upper ? kk <= -(rows - 1) : kk >= cols - 1;
    bool none = upper ? kk >= cols : kk <= -rows;
    if (all) return ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, x), ampc_cg_ref(cg, y));
    if (none) return ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, y));
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "trilu");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long col = i %% %lldLL, row = i / %lldLL %% %lldLL;",
                 (long long)cols, (long long)cols, (long long)rows);
    ampc_cg_line(k, "%s[i] = col - row %s %lldLL ? %s[i] : ampc::zero<%s>();", py,
                 upper ? ">=" : "<=", (long long)kk, px, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* Range: element i is start + i * delta, in double rounded once (floats; f16 and bf16 through
 * f32, as the reference stores them) or in wrapping 64-bit integers. The operands are constants
 * and baked in. */
static ampc_status lower_range(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *y = n->outputs[0], *s = n->inputs[0], *d = n->inputs[2];
    int64_t count = ampc_ir_numel(y);
    if (!count) return AMPC_OK;
    const char *ct = ampc_cg_ctype(y->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "range");
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    if (ampc_dtype_is_float(y->dtype)) {
        double sv = ampc_ref_load_f64(s->data, s->dtype, 0),
               dv = ampc_ref_load_f64(d->data, d->dtype, 0);
        bool narrow = y->dtype == AMPC_DTYPE_F16 || y->dtype == AMPC_DTYPE_BF16;
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(%s(%s + (double)i * %s));", py, ct,
                     narrow ? "(float)" : "", ampc_cg_f64(sv).s, ampc_cg_f64(dv).s);
    } else {
        uint64_t sv = (uint64_t)ampc_ref_load_i64(s->data, s->dtype, 0);
        uint64_t dv = (uint64_t)ampc_ref_load_i64(d->data, d->dtype, 0);
        ampc_cg_line(k, "%s[i] = (%s)(0x%llxULL + (unsigned long long)i * 0x%llxULL);", py, ct,
                     (unsigned long long)sv, (unsigned long long)dv);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ConstantOfShape: every element is the `value` attribute's one element (default f32 0): a
 * memset when its bits are all zero, else a fill kernel with the bits baked in. */
static ampc_status lower_constant_of_shape(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *y = n->outputs[0];
    int64_t count = ampc_ir_numel(y);
    if (!count) return AMPC_OK;
    const void *fill = ampc_constant_fill(n);
    uint64_t bits = 0;
    if (fill) memcpy(&bits, fill, ampc_dtype_size(y->dtype));
    if (!bits) return ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, y));
    const char *ct = ampc_cg_ctype(y->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "constant_of_shape");
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_line(k, "const %s v = ampc::from_bits<%s>(0x%llxULL);", ct, ct,
                 (unsigned long long)bits);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "%s[i] = v;", py);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

/* Lowers one LOWER_MOVE node into kernels, copies or memsets (none when its outputs are empty);
 * AMPC_E_UNSUPPORTED naming the node for an op of the family without a lowering. */
ampc_status ampc_cg_lower_movement(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_TRANSPOSE: return lower_view(cg, n, "transpose");
    case AMPC_OP_CONCAT:
    case AMPC_OP_SPLIT: return lower_concat_split(cg, n);
    case AMPC_OP_SLICE: return lower_view(cg, n, "slice");
    case AMPC_OP_EXPAND: return lower_view(cg, n, "expand");
    case AMPC_OP_TILE: return lower_tile(cg, n);
    case AMPC_OP_DEPTH_TO_SPACE:
    case AMPC_OP_SPACE_TO_DEPTH: return lower_depth_space(cg, n);
    case AMPC_OP_PAD: return lower_pad(cg, n);
    case AMPC_OP_CENTER_CROP_PAD: return lower_center_crop_pad(cg, n);
    case AMPC_OP_TRILU: return lower_trilu(cg, n);
    case AMPC_OP_RANGE: return lower_range(cg, n);
    case AMPC_OP_CONSTANT_OF_SHAPE: return lower_constant_of_shape(cg, n);
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
}

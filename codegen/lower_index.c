/*
 * lower_index.c — generated kernels for the indexing family (LOWER_INDEX): Gather,
 * GatherElements, GatherND, ScatterElements, Scatter, ScatterND, TensorScatter, OneHot, TopK,
 * Compress, ReverseSequence, AffineGrid and TfIdfVectorizer (integer pools); GridSample, a row
 * of this kind, is lowered by lower_resize.c.
 *
 * Gathers run one thread per output element; a Gather whose constant indices step evenly
 * along the axis (one index: a head of a packed QKV) is that slice, a view copy. Scatters first
 * copy the data into the output (a copy step), then apply the updates in the reference's order,
 * so duplicates and reductions give exactly its result: ScatterElements runs one thread per line
 * along the axis (updates on different lines never meet) looping over the line; ScatterND one
 * thread per element of the updated slice, looping over the index tuples in order. TopK sorts each line in shared memory
 * (one block per line, bitonic sort, streamed in halves for lines longer than the tile; see
 * kernels/move.cuh). Compress, whose condition is a constant, maps output to input positions
 * through a balanced tree of comparisons over the runs of true entries, baked in.
 *
 * Run-time index values cannot fail a kernel: an index outside its range (an evaluation error
 * in the reference evaluator) reads as 0 in the gathers, is skipped by the scatters (as is a
 * TensorScatter row past the end of the cache in linear mode), and a ReverseSequence length
 * outside [0, steps] zeroes its batch entry. When the indices are a constant, they are checked
 * here instead, with the reference's message. DeformConv has no GPU lowering yet.
 *
 * TfIdfVectorizer: a thread a row; the pool's trie is baked into the kernel as sorted child
 * lists; counts accumulate in the row of the f32 output, then turn into TF / IDF / TFIDF.
 */
#include "codegen.h"
#include "ir/index.h"
#include "ir/tfidf.h"
#include "ir/resize.h"

#include "ir/ref/ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers -------------------------------------------------------------------------------- */


static int64_t prod(const int64_t *dims, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++) p *= dims[i];
    return p;
}

static const char *ctype(const ampc_value *v) { return ampc_cg_ctype(v->dtype); }

/* When input `in` of n (indices) is a constant, checks entry j against [-bound, bound) with
 * bound = bounds[j % period], as the reference does at evaluation; AMPC_E_EVAL with the
 * reference's message for the first one out of range. `what[j % period]` names the dim. */
static ampc_status check_const_indices(ampc_cg *cg, const ampc_node *n, int32_t in,
                                       const int64_t *bounds, const char *const *what,
                                       int32_t period) {
    const ampc_value *ix = n->inputs[in];
    if (!ix->data || (ix->flags & AMPC_VALUE_INPUT)) return AMPC_OK; /* run-time values */
    int64_t cnt = ampc_ir_numel(ix);
    for (int64_t j = 0; j < cnt; j++) {
        int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j), dim = bounds[j % period];
        if (v >= -dim && v < dim) continue;
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_EVAL,
                         "index %lld (element %lld of input %d '%s') is out of range for %s, "
                         "which has %lld entries (valid: %lld to %lld)",
                         (long long)v, (long long)j, in, ix->name, what[j % period], (long long)dim,
                         (long long)-dim, (long long)dim - 1);
    }
    return AMPC_OK;
}

/* Emits "long long <v> = index; if (v < 0) v += dim;" for the index element at p[at]. */
static const char *load_index(ampc_cg_kernel *k, const char *p, const char *at, int64_t dim) {
    const char *v = ampc_cg_local(k, "v");
    ampc_cg_line(k, "long long %s = ampc::to_index(%s[%s]);", v, p, at);
    ampc_cg_line(k, "if (%s < 0) %s += %lldLL;", v, v, (long long)dim);
    return v;
}

/* ---- Gather, GatherElements, GatherND ------------------------------------------------------- */

/* Beyond this many runs, a Gather with constant indices reads them from memory. */
enum { RUNS_MAX = 8 };

/* A run of constant indices: `len` entries from `first` by `step`, from entry `at` on. */
typedef struct run {
    int64_t at, first, step, len;
} run;

/* The constant indices ix (negative entries counted from the end of a dim of `dim` entries;
 * check_const_indices has checked them) as maximal arithmetic progressions, greedily: how
 * many (INT32_MAX when ix is not a constant), the first RUNS_MAX of them into out (may be NULL). */
static int32_t runs_of(const ampc_value *ix, int64_t dim, run *out) {
    if (!ix->data || (ix->flags & AMPC_VALUE_INPUT)) return INT32_MAX;
    const int64_t cnt = ampc_ir_numel(ix);
    int32_t n = 0;
    run cur = {0, 0, 0, 0};
    for (int64_t j = 0; j < cnt; j++) {
        int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
        if (v < 0) v += dim;
        if (cur.len == 1) cur.step = v - cur.first; /* any second entry extends a run */
        if (cur.len == 0 || v != cur.first + cur.len * cur.step) { /* a new run starts at j */
            if (cur.len && out && n < RUNS_MAX) out[n] = cur;
            n += cur.len > 0;
            cur = (run){j, v, 0, 1};
            continue;
        }
        cur.len++;
    }
    if (cur.len && out && n < RUNS_MAX) out[n] = cur;
    return n + (cur.len > 0);
}

/* Gather whose constant indices are a few runs (runs_of): each run is a strided slice of the
 * axis, one view copy into its place in y (a copy step when contiguous: one head of a packed
 * QKV; two for torch.roll's shift, written as a Concat of two Slices). */
static ampc_status gather_runs(ampc_cg *cg, const ampc_node *n, int32_t ax) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    const int32_t r = x->shape.rank;
    run runs[RUNS_MAX];
    const int32_t nr = runs_of(ix, x->shape.dims[ax], runs);
    int64_t dims[AMPC_MAX_RANK], src[AMPC_MAX_RANK], dst[AMPC_MAX_RANK], xs[AMPC_MAX_RANK];
    ampc_ref_strides(&x->shape, xs);
    int64_t st = 1; /* y as x with the axis holding the index entries */
    for (int32_t d = r - 1; d >= 0; d--) {
        dims[d] = d == ax ? ampc_ir_numel(ix) : x->shape.dims[d];
        dst[d] = st, st *= dims[d];
    }
    for (int32_t i = 0; i < nr; i++) {
        dims[ax] = runs[i].len;
        for (int32_t d = 0; d < r; d++) src[d] = d == ax ? runs[i].step * xs[ax] : xs[d];
        ampc_status s = ampc_cg_view_copy(cg, n, "gather", x, y, dims, r, src,
                                          runs[i].first * xs[ax], dst, runs[i].at * dst[ax]);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

/* The 16-byte units of each slice a Gather copies (the dims after its axis), when the slices
 * are whole units and both tensors start 16-byte aligned; else 0. A Gather of rows (row-gather:
 * a window's rows of C channels) then moves 16 bytes a thread. */
static int64_t gather_units(ampc_cg *cg, const ampc_node *n, int32_t ax) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t bytes = prod(x->shape.dims, ax + 1, x->shape.rank) * (int64_t)ampc_dtype_size(x->dtype);
    if (bytes % 16 || ampc_cg_ref(cg, x).offset % 16 || ampc_cg_ref(cg, y).offset % 16) return 0;
    return bytes / 16;
}

/* Gather by slices of whole 16-byte units (gather_units): output unit (o, j, w) is data unit
 * (o, indices[j], w); an index out of range gives zeros (run-time indices; constant ones were
 * checked). */
static ampc_status gather_16(ampc_cg *cg, const ampc_node *n, int32_t ax) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    const int64_t units = gather_units(cg, n, ax), dim = x->shape.dims[ax], ni = ampc_ir_numel(ix);
    const int64_t count = ampc_ir_numel(y) * (int64_t)ampc_dtype_size(y->dtype) / 16;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gather");
    const char *px = ampc_cg_param_ref(k, ampc_cg_ref(cg, x), "uint4", false);
    const char *pi = ampc_cg_param(k, ix, false);
    const char *py = ampc_cg_param_ref(k, ampc_cg_ref(cg, y), "uint4", true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long w = i %% %lldLL, j = i / %lldLL %% %lldLL, o = i / %lldLL;",
                 (long long)units, (long long)units, (long long)ni, (long long)(units * ni));
    const char *v = load_index(k, pi, "j", dim);
    ampc_cg_line(k, "%s[i] = %s >= 0 && %s < %lldLL ? %s[(o * %lldLL + %s) * %lldLL + w] : "
                 "make_uint4(0u, 0u, 0u, 0u);", py, v, v, (long long)dim, px, (long long)dim, v,
                 (long long)units);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* Gather: output (o, j, w) is data (o, indices[j], w) over the dims before the axis, the index
 * entries and the dims after it. */
static ampc_status lower_gather(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax], count = ampc_ir_numel(y);
    char what[160];
    snprintf(what, sizeof what, "axis %d of input 0 '%s'", ax, x->name);
    const char *whats[1] = {what};
    ampc_status st = check_const_indices(cg, n, 1, &dim, whats, 1);
    if (st != AMPC_OK || !count) return st;
    if (runs_of(ix, dim, NULL) <= RUNS_MAX) return gather_runs(cg, n, ax);
    if (gather_units(cg, n, ax)) return gather_16(cg, n, ax);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gather");
    const char *px = ampc_cg_param(k, x, false), *pi = ampc_cg_param(k, ix, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    char dst[32];
    snprintf(dst, sizeof dst, "%s[i]", py);
    ampc_cg_gather_element(k, n, px, pi, "i", dst);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

void ampc_cg_gather_element(ampc_cg_kernel *k, const ampc_node *n, const char *px, const char *pi,
                            const char *i, const char *dst) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax], inner = prod(x->shape.dims, ax + 1, r), ni = ampc_ir_numel(ix);
    const char *w = ampc_cg_local(k, "w"), *j = ampc_cg_local(k, "j"), *o = ampc_cg_local(k, "o");
    ampc_cg_line(k, "const long long %s = %s %% %lldLL, %s = %s / %lldLL %% %lldLL, %s = %s / %lldLL;",
                 w, i, (long long)inner, j, i, (long long)inner, (long long)ni, o, i,
                 (long long)(inner * ni));
    const char *v = load_index(k, pi, j, dim);
    ampc_cg_line(k, "%s = %s >= 0 && %s < %lldLL ? %s[(%s * %lldLL + %s) * %lldLL + %s] : "
                 "ampc::zero<%s>();", dst, v, v, (long long)dim, px, o, (long long)dim, v,
                 (long long)inner, w, ctype(y));
}

/* GatherElements: out[c] = data[c with coordinate `axis` replaced by indices[c]]. */
static ampc_status lower_gather_elements(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax], count = ampc_ir_numel(y), xs[AMPC_MAX_RANK];
    const char *whats[1] = {"the axis of input 0"};
    ampc_status st = check_const_indices(cg, n, 1, &dim, whats, 1);
    if (st != AMPC_OK || !count) return st;
    ampc_ref_strides(&x->shape, xs);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gather_elements");
    const char *px = ampc_cg_param(k, x, false), *pi = ampc_cg_param(k, ix, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    const char *c[AMPC_MAX_RANK];
    ampc_cg_coords(k, ix->shape.dims, r, "i", c);
    const char *v = load_index(k, pi, "i", dim);
    ampc_strbuf off = {0};
    ampc_sb_printf(&off, "%s * %lldLL", v, (long long)xs[ax]);
    for (int32_t d = 0; d < r; d++)
        if (d != ax && strcmp(c[d], "0LL"))
            ampc_sb_printf(&off, " + %s * %lldLL", c[d], (long long)xs[d]);
    ampc_cg_line(k, "%s[i] = %s >= 0 && %s < %lldLL ? %s[%s] : ampc::zero<%s>();", py, v, v,
                 (long long)dim, px, off.data, ctype(y));
    ampc_sb_free(&off);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* Emits the offset (in `off`, from `base`) of the slice that the kk indices at pi[t * kk ...]
 * address in dims b.. of x, clearing `in` when one is out of range. */
static void nd_offset(ampc_cg_kernel *k, const ampc_value *x, const char *pi, int32_t b,
                      int32_t kk) {
    int64_t xs[AMPC_MAX_RANK];
    ampc_ref_strides(&x->shape, xs);
    for (int32_t m = 0; m < kk; m++) {
        int64_t dim = x->shape.dims[b + m];
        char at[48];
        snprintf(at, sizeof at, "t * %dLL + %d", kk, m);
        const char *v = load_index(k, pi, at, dim);
        ampc_cg_line(k, "if (%s < 0 || %s >= %lldLL) in = false;", v, v, (long long)dim);
        ampc_cg_line(k, "off += %s * %lldLL;", v, (long long)xs[b + m]);
    }
}

/* The bounds and names of the dims an N-d index tuple addresses, for check_const_indices. */
static void nd_bounds(const ampc_value *x, int32_t b, int32_t kk, int64_t *bounds,
                      const char **whats) {
    for (int32_t m = 0; m < kk; m++)
        bounds[m] = x->shape.dims[b + m], whats[m] = "a dim of input 0";
}

/* GatherND: output (tuple t, element e of the slice) reads the slice that index tuple t
 * addresses within its batch block of the data. */
static ampc_status lower_gather_nd(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *y = n->outputs[0];
    int32_t b = ampc_index_params_of(n).batch_dims;
    int32_t q = ix->shape.rank, kk = (int32_t)ix->shape.dims[q - 1], r = x->shape.rank;
    int64_t tuples = prod(ix->shape.dims, b, q - 1), slice = prod(x->shape.dims, b + kk, r);
    int64_t block = prod(x->shape.dims, b, r), count = ampc_ir_numel(y), bounds[AMPC_MAX_RANK];
    const char *whats[AMPC_MAX_RANK];
    nd_bounds(x, b, kk, bounds, whats);
    ampc_status st = check_const_indices(cg, n, 1, bounds, whats, kk);
    if (st != AMPC_OK || !count) return st;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gather_nd");
    const char *px = ampc_cg_param(k, x, false), *pi = ampc_cg_param(k, ix, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long e = i %% %lldLL, t = i / %lldLL;", (long long)slice,
                 (long long)slice);
    ampc_cg_line(k, "long long off = t / %lldLL * %lldLL + e;", (long long)tuples,
                 (long long)block);
    ampc_cg_line(k, "bool in = true;");
    nd_offset(k, x, pi, b, kk);
    ampc_cg_line(k, "%s[i] = in ? %s[off] : ampc::zero<%s>();", py, px, ctype(y));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- ScatterElements, Scatter, ScatterND, TensorScatter ------------------------------------- */

/* ScatterElements and Scatter: the data copied, then one thread per line of the indices along
 * the axis applies that line's updates in order (row-major order within a line). */
static ampc_status lower_scatter_elements(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *u = n->inputs[2], *y = n->outputs[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax], xs[AMPC_MAX_RANK], is[AMPC_MAX_RANK], ld[AMPC_MAX_RANK];
    const char *whats[1] = {"the axis of input 0"};
    ampc_status st = check_const_indices(cg, n, 1, &dim, whats, 1);
    if (st == AMPC_OK) st = ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, x), ampc_cg_ref(cg, y));
    int64_t nu = ampc_ir_numel(ix);
    if (st != AMPC_OK || !nu) return st;
    int64_t lines = nu / ix->shape.dims[ax], along = ix->shape.dims[ax];
    ampc_ref_strides(&x->shape, xs);
    ampc_ref_strides(&ix->shape, is);
    memcpy(ld, ix->shape.dims, sizeof ld);
    ld[ax] = 1; /* the lines: every coordinate but the axis */
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *pi = ampc_cg_param(k, ix, false), *pu = ampc_cg_param(k, u, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, lines);
    const char *c[AMPC_MAX_RANK];
    ampc_cg_coords(k, ld, r, "i", c);
    ampc_strbuf bu = {0}, by = {0};
    ampc_sb_puts(&bu, "0LL");
    ampc_sb_puts(&by, "0LL");
    for (int32_t d = 0; d < r; d++) {
        if (d == ax || !strcmp(c[d], "0LL")) continue;
        ampc_sb_printf(&bu, " + %s * %lldLL", c[d], (long long)is[d]);
        ampc_sb_printf(&by, " + %s * %lldLL", c[d], (long long)xs[d]);
    }
    ampc_cg_line(k, "const long long bu = %s, by = %s;", bu.data, by.data);
    ampc_sb_free(&bu);
    ampc_sb_free(&by);
    ampc_cg_open(k, "for (long long j = 0; j < %lldLL; j++)", (long long)along);
    ampc_cg_line(k, "const long long at = bu + j * %lldLL;", (long long)is[ax]);
    const char *v = load_index(k, pi, "at", dim);
    ampc_cg_line(k, "if (%s >= 0 && %s < %lldLL) ampc::combine<%d>(%s, by + %s * %lldLL, %s[at]);",
                 v, v, (long long)dim, (int)ampc_index_params_of(n).reduction, py, v,
                 (long long)xs[ax], pu);
    ampc_cg_close(k);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, lines, 256);
}

/* ScatterND: the data copied, then one thread per element of the updated slice applies every
 * index tuple's update to it in tuple order (duplicates and reductions as the reference). */
static ampc_status lower_scatter_nd(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->inputs[1], *u = n->inputs[2], *y = n->outputs[0];
    int32_t q = ix->shape.rank, kk = (int32_t)ix->shape.dims[q - 1], r = x->shape.rank;
    int64_t tuples = prod(ix->shape.dims, 0, q - 1), slice = prod(x->shape.dims, kk, r);
    int64_t bounds[AMPC_MAX_RANK];
    const char *whats[AMPC_MAX_RANK];
    nd_bounds(x, 0, kk, bounds, whats);
    ampc_status st = check_const_indices(cg, n, 1, bounds, whats, kk);
    if (st == AMPC_OK) st = ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, x), ampc_cg_ref(cg, y));
    if (st != AMPC_OK || !tuples || !slice) return st;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "scatter_nd");
    const char *pi = ampc_cg_param(k, ix, false), *pu = ampc_cg_param(k, u, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, slice);
    ampc_cg_open(k, "for (long long t = 0; t < %lldLL; t++)", (long long)tuples);
    ampc_cg_line(k, "long long off = 0;");
    ampc_cg_line(k, "bool in = true;");
    nd_offset(k, x, pi, 0, kk);
    ampc_cg_line(k, "if (in) ampc::combine<%d>(%s, off + i, %s[t * %lldLL + i]);",
                 (int)ampc_index_params_of(n).reduction, py, pu, (long long)slice);
    ampc_cg_close(k);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, slice, 256);
}

/* TensorScatter: past_cache copied, then each update row s of index prefix o lands at row
 * write_indices[batch of o] + s (taken modulo the cache length in circular mode; a row past the
 * end in linear mode, an evaluation error in the reference, is skipped). */
static ampc_status lower_tensor_scatter(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *u = n->inputs[1], *y = n->outputs[0];
    const ampc_value *wi = n->n_inputs > 2 ? n->inputs[2] : NULL;
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    bool circular = ampc_index_params_of(n).circular;
    ampc_status st = ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, x), ampc_cg_ref(cg, y));
    int64_t count = ampc_ir_numel(u);
    if (st != AMPC_OK || !count) return st;
    int64_t B = x->shape.dims[0], M = x->shape.dims[ax], S = u->shape.dims[ax];
    int64_t outer = prod(x->shape.dims, 0, ax), inner = prod(x->shape.dims, ax + 1, r);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "tensor_scatter");
    const char *pu = ampc_cg_param(k, u, false);
    const char *pw = wi && ampc_ir_numel(wi) ? ampc_cg_param(k, wi, false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long e = i %% %lldLL, s = i / %lldLL %% %lldLL, o = i / %lldLL;",
                 (long long)inner, (long long)inner, (long long)S, (long long)(inner * S));
    if (pw) ampc_cg_line(k, "long long t = %s[o / %lldLL];", pw, (long long)(outer / B));
    else ampc_cg_line(k, "long long t = 0;");
    /* w + s saturates as the reference's overflow check does. */
    ampc_cg_line(k, "t = t > 0x7fffffffffffffffLL - s ? 0x7fffffffffffffffLL : t + s;");
    if (circular)
        ampc_cg_line(k, "t = (t %% %lldLL + %lldLL) %% %lldLL;", (long long)M, (long long)M,
                     (long long)M);
    else ampc_cg_line(k, "if (t < 0 || t >= %lldLL) continue;", (long long)M);
    ampc_cg_line(k, "%s[(o * %lldLL + t) * %lldLL + e] = %s[i];", py, (long long)M,
                 (long long)inner, pu);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- OneHot, TopK, Compress, ReverseSequence, AffineGrid ------------------------------------ */

/* OneHot: output (o, a, w) is values[1] when indices[o, w] (truncated, negative counting from
 * the end) is a, else values[0]; an index outside [-depth, depth) leaves its row off. */
static ampc_status lower_one_hot(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *ix = n->inputs[0], *vals = n->inputs[2], *y = n->outputs[0];
    int32_t r = y->shape.rank,
            ax = ampc_axis_of(n, r);
    int64_t depth = y->shape.dims[ax], inner = prod(y->shape.dims, ax + 1, r),
            count = ampc_ir_numel(y);
    if (!count) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "one_hot");
    const char *pi = ampc_cg_param(k, ix, false), *pv = ampc_cg_param(k, vals, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long w = i %% %lldLL, a = i / %lldLL %% %lldLL, o = i / %lldLL;",
                 (long long)inner, (long long)inner, (long long)depth, (long long)(inner * depth));
    ampc_cg_line(k, "long long v = ampc::to_index(%s[o * %lldLL + w]);", pi, (long long)inner);
    ampc_cg_line(k, "if (v < 0 && v >= -%lldLL) v += %lldLL;", (long long)depth, (long long)depth);
    ampc_cg_line(k, "%s[i] = %s[v == a ? 1 : 0];", py, pv);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* Largest sort tile of TopK, by key size: the keys and int positions of a tile fit the 48 KiB
 * of shared memory a launch gets without opting in. */
enum { TOPK_TILE_4 = 4096, TOPK_TILE_8 = 2048 };

/* TopK: one block per line along the axis sorts it in shared memory (kernels/move.cuh) and
 * writes the first K entries and their positions. Keys are f32 for f32/f16/bf16, the element
 * itself otherwise. */
static ampc_status lower_top_k(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *yv = n->outputs[0], *yi = n->outputs[1];
    ampc_graph *g = ampc_cg_graph(cg);
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    bool largest = ampc_index_params_of(n).largest;
    int64_t dim = x->shape.dims[ax], kk = yv->shape.dims[ax];
    int64_t outer = prod(x->shape.dims, 0, ax), inner = prod(x->shape.dims, ax + 1, r);
    if (!kk || !outer || !inner) return AMPC_OK;
    bool narrow = x->dtype == AMPC_DTYPE_F16 || x->dtype == AMPC_DTYPE_BF16;
    const char *key = narrow ? "float" : ctype(x);
    int64_t ksz = narrow ? 4 : (int64_t)ampc_dtype_size(x->dtype);
    int64_t tile = ksz <= 4 ? TOPK_TILE_4 : TOPK_TILE_8, cap = 2;
    while (cap < AMPC_MIN(dim, tile)) cap *= 2;
    if (dim > tile && kk > cap / 2)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "TopK of K = %lld over %lld entries has no GPU kernel yet: lines longer "
                         "than %lld are streamed through shared memory, which needs K <= %lld",
                         (long long)kk, (long long)dim, (long long)tile, (long long)cap / 2);
    if (dim > 0x7fffffff)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "TopK over %lld entries has no GPU kernel: positions are 32-bit there",
                         (long long)dim);
    int64_t key_bytes = (cap * ksz + 15) / 16 * 16, rows = outer * inner;
    uint32_t threads = (uint32_t)AMPC_MIN(AMPC_MAX(cap / 2, 32), 256);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "top_k");
    const char *px = ampc_cg_param(k, x, false), *pv = ampc_cg_param(k, yv, true);
    const char *pi = ampc_cg_param(k, yi, true);
    ampc_cg_line(k, "extern __shared__ __align__(16) unsigned char smem[];");
    ampc_cg_line(k, "%s *key = (%s *)smem;", key, key);
    ampc_cg_line(k, "int *pos = (int *)(smem + %lld);", (long long)key_bytes);
    ampc_cg_open(k, "for (long long row = blockIdx.x; row < %lldLL; row += gridDim.x)",
                 (long long)rows);
    ampc_cg_line(k, "const long long o = row / %lldLL, w = row %% %lldLL;", (long long)inner,
                 (long long)inner);
    ampc_cg_line(
        k,
        "ampc::topk_line<%s, %s>(%s, o * %lldLL + w, %lldLL, %lldLL, %s, %s, o * %lldLL + w, "
        "%lldLL, %lldLL, %s, %lld, key, pos);",
        ctype(x), key, px, (long long)(dim * inner), (long long)inner, (long long)dim, pv, pi,
        (long long)(kk * inner), (long long)inner, (long long)kk, largest ? "true" : "false",
        (long long)cap);
    ampc_cg_close(k);
    uint32_t grid[3] = {(uint32_t)AMPC_MIN(rows, 65536), 1, 1}, block[3] = {threads, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, (uint32_t)(key_bytes + cap * 4));
}

enum { COMPRESS_MAX_RUNS = 1024 };

/* Emits the comparisons that pick run lo..hi-1 of a Compress by the position s in an output
 * slab: `d = delta` of the run holding s. */
static void compress_tree(ampc_cg_kernel *k, const int64_t *starts, const int64_t *deltas,
                          int32_t lo, int32_t hi) {
    if (hi - lo == 1) {
        ampc_cg_line(k, "d = %lldLL;", (long long)deltas[lo]);
        return;
    }
    int32_t mid = (lo + hi) / 2;
    ampc_cg_open(k, "if (s < %lldLL)", (long long)starts[mid]);
    compress_tree(k, starts, deltas, lo, mid);
    ampc_cg_close(k);
    ampc_cg_open(k, "else");
    compress_tree(k, starts, deltas, mid, hi);
    ampc_cg_close(k);
}

/* Compress with its constant condition: the kept slices along the axis (or elements of the
 * flattened input) form runs; output position s of a slab reads input position s + delta of
 * its run. */
static ampc_status lower_compress(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0], *cond = n->inputs[1], *y = n->outputs[0];
    int64_t count = ampc_ir_numel(y);
    if (!count) return AMPC_OK;
    int64_t dim = ampc_ir_numel(x), inner = 1; /* without an axis: the flattened input */
    if (ampc_axis_given(n)) {
        int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
        dim = x->shape.dims[ax];
        inner = prod(x->shape.dims, ax + 1, r);
    }
    const uint8_t *cv = cond->data;
    int64_t clen = AMPC_MIN(cond->shape.dims[0], dim), kept = 0;
    int32_t runs = 0;
    for (int64_t i = 0; i < clen; i++) runs += cv[i] && (i == 0 || !cv[i - 1]);
    if (runs > COMPRESS_MAX_RUNS)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "Compress with %d runs of true entries in input 1 '%s' has no GPU kernel "
                         "yet (at most %d)",
                         runs, cond->name, COMPRESS_MAX_RUNS);
    int64_t starts[COMPRESS_MAX_RUNS], deltas[COMPRESS_MAX_RUNS];
    int32_t nr = 0;
    for (int64_t i = 0; i < clen; i++) {
        if (!cv[i]) continue;
        if (i == 0 || !cv[i - 1]) { /* a run starts: output slab position kept * inner */
            starts[nr] = kept * inner;
            deltas[nr++] = (i - kept) * inner;
        }
        kept++;
    }
    int64_t slab = kept * inner;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "compress");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long o = i / %lldLL, s = i %% %lldLL;", (long long)slab,
                 (long long)slab);
    ampc_cg_line(k, "long long d;");
    compress_tree(k, starts, deltas, 0, nr);
    ampc_cg_line(k, "%s[i] = %s[o * %lldLL + s + d];", py, px, (long long)(dim * inner));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ReverseSequence: for batch entry b, time step t < lens[b] reads step lens[b] - 1 - t; dims 0
 * and 1 are time and batch in some order, the rest move together. */
static ampc_status lower_reverse_sequence(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *lens = n->inputs[1], *y = n->outputs[0];
    int32_t ba = ampc_index_params_of(n).batch_axis;
    int64_t steps = x->shape.dims[1 - ba], batch = x->shape.dims[ba], count = ampc_ir_numel(y);
    int64_t inner = prod(x->shape.dims, 2, x->shape.rank);
    if (!count) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "reverse_sequence");
    const char *px = ampc_cg_param(k, x, false), *pl = ampc_cg_param(k, lens, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long w = i %% %lldLL, q = i / %lldLL;", (long long)inner,
                 (long long)inner);
    if (ba == 1)
        ampc_cg_line(k, "const long long t = q / %lldLL, b = q %% %lldLL;", (long long)batch,
                     (long long)batch);
    else
        ampc_cg_line(k, "const long long b = q / %lldLL, t = q %% %lldLL;", (long long)steps,
                     (long long)steps);
    ampc_cg_line(k, "const long long len = ampc::to_index(%s[b]);", pl);
    ampc_cg_open(k, "if (len < 0 || len > %lldLL)", (long long)steps);
    ampc_cg_line(k, "%s[i] = ampc::zero<%s>();", py, ctype(y));
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    ampc_cg_line(k, "const long long st = t < len ? len - 1 - t : t;");
    if (ba == 1)
        ampc_cg_line(k, "%s[i] = %s[(st * %lldLL + b) * %lldLL + w];", py, px, (long long)batch,
                     (long long)inner);
    else
        ampc_cg_line(k, "%s[i] = %s[(b * %lldLL + st) * %lldLL + w];", py, px, (long long)steps,
                     (long long)inner);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* AffineGrid: grid[n, (d,) h, w, r] = theta[n, r, :] . (x, y, (z,) 1), x running along W, y
 * along H, z along D, each the pixel centre in [-1, 1] (align_corners: -1 + 2i / (size - 1),
 * else -1 + (2i + 1) / size); computed in double, as the reference. */
static ampc_status lower_affine_grid(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *th = n->inputs[0], *y = n->outputs[0];
    const bool align = ampc_grid_params_of(n).align;
    int32_t kd = y->shape.rank - 2;
    int64_t count = ampc_ir_numel(y), pts = prod(y->shape.dims, 1, 1 + kd);
    if (!count) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "affine_grid");
    const char *pt = ampc_cg_param(k, th, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long rr = i %% %dLL, p = i / %dLL %% %lldLL, b = i / %lldLL;", kd,
                 kd, (long long)pts, (long long)(pts * kd));
    const char *c[3];
    ampc_cg_coords(k, y->shape.dims + 1, kd, "p", c);
    ampc_cg_line(k, "double acc = 0.0;");
    for (int32_t j = 0; j < kd; j++) {
        int64_t size = y->shape.dims[kd - j]; /* hom[j]: j = 0 runs along the last spatial dim */
        const char *ci = c[kd - 1 - j];
        char h[128];
        if (align && size > 1)
            snprintf(h, sizeof h, "-1.0 + 2.0 * (double)%s / %lld.0", ci, (long long)(size - 1));
        else if (align) snprintf(h, sizeof h, "-1.0");
        else snprintf(h, sizeof h, "-1.0 + (2.0 * (double)%s + 1.0) / %lld.0", ci, (long long)size);
        ampc_cg_line(k, "acc += ampc::to_f64(%s[(b * %dLL + rr) * %dLL + %d]) * (%s);", pt, kd,
                     kd + 1, j, h);
    }
    ampc_cg_line(k, "acc += ampc::to_f64(%s[(b * %dLL + rr) * %dLL + %d]);", pt, kd, kd + 1, kd);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc);", py, ctype(y));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

typedef ampc_tfidf_node tf_node;

/* Orders non-root nodes by (parent, token): each node's children become one sorted run. */
static const tf_node *sort_base;
static int by_parent_token(const void *a, const void *b) {
    const tf_node *x = &sort_base[*(const int64_t *)a], *y = &sort_base[*(const int64_t *)b];
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    return x->token < y->token ? -1 : x->token > y->token;
}

/* Emits `static const <type> name[] = {...};`, 12 entries a line (one 0 when empty). */
static void emit_table(ampc_cg_kernel *k, const char *type, const char *name, const int64_t *v,
                       int64_t cnt, const char *suffix) {
    ampc_cg_line(k, "static const %s %s[%lld] = {", type, name, (long long)(cnt ? cnt : 1));
    ampc_strbuf sb = {0};
    if (!cnt) ampc_sb_puts(&sb, "0");
    for (int64_t i = 0; i < cnt; i++) {
        ampc_sb_printf(&sb, "%lld%s%s", (long long)v[i], suffix, i + 1 < cnt ? "," : "");
        if ((i + 1) % 12 == 0 || i + 1 == cnt) {
            ampc_cg_line(k, "    %s", sb.data);
            sb.len = 0;
            sb.data[0] = 0;
        } else {
            ampc_sb_putc(&sb, ' ');
        }
    }
    if (!cnt) ampc_cg_line(k, "    %s", sb.data);
    ampc_sb_free(&sb);
    ampc_cg_line(k, "};");
}

static ampc_status lower_tfidf(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_tfidf p = ampc_tfidf_of(g, n);
    const int64_t *idx = p.indexes, lo = p.min_len, hi = p.max_len, skips = p.skips;
    const float *wts = p.weights;
    const char *mode = p.mode;
    int64_t rows = x->shape.rank == 2 ? x->shape.dims[0] : 1;
    int64_t cols = x->shape.rank ? x->shape.dims[x->shape.rank - 1] : 1;
    int64_t out_size = y->shape.dims[y->shape.rank - 1];
    if (ampc_ir_numel(y) == 0) return AMPC_OK;

    /* The trie, as the reference walks it (ir/tfidf.h). */
    ampc_tfidf_trie t;
    if (!ampc_tfidf_trie_build(&p, &t))
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory building the n-gram table");
    /* Child runs: ord = non-root nodes sorted by (parent, token); first[] = CSR offsets; a
     * node's output coordinate is the ngram_indexes entry of its id, or -1. */
    int64_t nn = t.n, nc = nn - 1;
    int64_t *ord = ampc_xcalloc((size_t)AMPC_MAX(nc, 1), sizeof *ord);
    int64_t *tok = ampc_xcalloc((size_t)AMPC_MAX(nc, 1), sizeof *tok);
    int64_t *first = ampc_xcalloc((size_t)nn + 1, sizeof *first);
    int64_t *oc = ampc_xcalloc((size_t)nn, sizeof *oc);
    for (int64_t i = 0; i < nc; i++) ord[i] = i + 1;
    sort_base = t.nodes;
    if (nc > 1) qsort(ord, (size_t)nc, sizeof *ord, by_parent_token);
    for (int64_t i = 0; i < nc; i++) {
        tok[i] = t.nodes[ord[i]].token;
        first[t.nodes[ord[i]].parent + 1]++;
    }
    for (int64_t i = 0; i < nn; i++) first[i + 1] += first[i];
    for (int64_t i = 0; i < nn; i++) oc[i] = t.nodes[i].id ? idx[t.nodes[i].id - 1] : -1;

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "tfidf");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    emit_table(k, "int", "tf_first", first, nn + 1, "");
    emit_table(k, "long long", "tf_tok", tok, nc, "LL");
    emit_table(k, "int", "tf_node", ord, nc, "");
    emit_table(k, "int", "tf_coord", oc, nn, "");
    bool tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
    if (!tf && wts) {
        ampc_cg_line(k, "static const float tf_w[%lld] = {", (long long)out_size);
        for (int64_t i = 0; i < out_size; i++)
            ampc_cg_line(k, "    %s%s", ampc_cg_f32(wts[i]).s, i + 1 < out_size ? "," : "");
        ampc_cg_line(k, "};");
    }
    ampc_cg_grid_loop(k, rows);
    ampc_cg_line(k, "float *yr = %s + i * %lldLL;", py, (long long)out_size);
    ampc_cg_line(k, "const %s *xr = %s + i * %lldLL;", ampc_cg_ctype(x->dtype), px, (long long)cols);
    ampc_cg_line(k, "for (long long o = 0; o < %lldLL; o++) yr[o] = 0.0f;", (long long)out_size);
    ampc_cg_line(k, "long long first = %lldLL;", (long long)lo);
    ampc_cg_open(k, "for (long long skip = 1; skip <= %lldLL; skip++)", (long long)skips);
    ampc_cg_open(k, "for (long long s0 = 0; s0 < %lldLL; s0++)", (long long)cols);
    ampc_cg_line(k, "if (s0 + skip * (first - 1) >= %lldLL) break;", (long long)cols);
    ampc_cg_line(k, "int node = 0;");
    ampc_cg_line(k, "long long size = 1;");
    ampc_cg_open(k, "for (long long e = s0; size <= %lldLL && e < %lldLL; e += skip, size++)", (long long)hi,
                 (long long)cols);
    ampc_cg_line(k, "node = ampc::tf_child(tf_first, tf_tok, tf_node, node, (long long)xr[e]);");
    ampc_cg_line(k, "if (node < 0) break;");
    ampc_cg_line(k, "if (size >= first && tf_coord[node] >= 0) yr[tf_coord[node]] += 1.0f;");
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_open(k, "if (first == 1)");
    ampc_cg_line(k, "first = 2;");
    ampc_cg_line(k, "if (first > %lldLL) break;", (long long)hi);
    ampc_cg_close(k);
    ampc_cg_close(k);
    if (!tf) {
        const char *w = wts ? "(double)tf_w[o]" : "1.0";
        ampc_cg_open(k, "for (long long o = 0; o < %lldLL; o++)", (long long)out_size);
        ampc_cg_line(k, "const double f = (double)yr[o];");
        if (idf) ampc_cg_line(k, "yr[o] = (float)(f > 0.0 ? %s : 0.0);", w);
        else ampc_cg_line(k, "yr[o] = (float)(%s * f);", w);
        ampc_cg_close(k);
    }
    ampc_cg_close(k);
    ampc_tfidf_trie_free(&t);
    free(ord), free(tok), free(first), free(oc);
    return ampc_cg_kernel_end(k, rows, 64);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

/* Lowers one LOWER_INDEX node into its copy and kernel steps (none when its outputs are empty);
 * AMPC_E_UNSUPPORTED naming the node for DeformConv, and for the few shapes a kernel cannot take
 * (see lower_top_k, lower_compress); AMPC_E_EVAL for a constant index out of range. */
ampc_status ampc_cg_lower_index(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_GATHER: return lower_gather(cg, n);
    case AMPC_OP_GATHER_ELEMENTS: return lower_gather_elements(cg, n);
    case AMPC_OP_GATHER_ND: return lower_gather_nd(cg, n);
    case AMPC_OP_SCATTER_ELEMENTS:
    case AMPC_OP_SCATTER: return lower_scatter_elements(cg, n);
    case AMPC_OP_SCATTER_ND: return lower_scatter_nd(cg, n);
    case AMPC_OP_TENSOR_SCATTER: return lower_tensor_scatter(cg, n);
    case AMPC_OP_ONE_HOT: return lower_one_hot(cg, n);
    case AMPC_OP_TOP_K: return lower_top_k(cg, n);
    case AMPC_OP_COMPRESS: return lower_compress(cg, n);
    case AMPC_OP_REVERSE_SEQUENCE: return lower_reverse_sequence(cg, n);
    case AMPC_OP_AFFINE_GRID: return lower_affine_grid(cg, n);
    case AMPC_OP_GRID_SAMPLE: return ampc_cg_lower_resize(cg, n);
    case AMPC_OP_TFIDF_VECTORIZER: return lower_tfidf(cg, n);
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
}

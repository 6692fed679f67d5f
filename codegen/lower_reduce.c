/*
 * lower_reduce.c — generated kernels for the LOWER_REDUCE family: the reductions (ReduceSum,
 * Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare), ArgMax / ArgMin, and the scans
 * CumSum / CumProd. Det (lower_linalg.c) and DynamicQuantizeLinear (lower_quant.c) are rows of
 * this kind lowered by their families.
 *
 * Reductions: the input's dims are split into kept and reduced ones, neighbours of the same kind
 * merged (size-1 dims dropped), so the common cases become [outer, R, inner] and any axes set
 * is handled without a transpose: the output element's base offset decomposes its flat index
 * over the kept dims, and each reduced element adds its offset over the reduced dims (strides
 * baked in). Each output is a "row" of R elements, handled by one thread (short rows, or many
 * outputs along a strided axis), one warp (contiguous rows up to 1024) or one block (long rows):
 * see make_rows; rows along a strided axis whose neighbours are neighbouring elements (a
 * channels-last tensor pooled over H and W) take 32 a block, several threads down each
 * (lower_columns). Accumulation, identities, empty groups and the final step (mean, root, log)
 * mirror ir/ref/reduce.c; the combine and warp/block helpers are in kernels/reduce.cuh.
 *
 * ArgMax / ArgMin use the same rows around their axis with a (value, index) total order that
 * reproduces the reference's first/last and NaN rules. CumSum / CumProd scan each line along
 * the axis: one thread per line, or one block per contiguous line of 64 and more elements with
 * a block-wide scan carrying the running total from chunk to chunk.
 */
#include "codegen.h"
#include "ir/index.h"

#include "ir/reduce.h"
#include "ir/ref/ref.h"

#include <stdio.h>
#include <string.h>

/* ---- rows: the launch shapes of the row kernels (codegen.h) --------------------------------- */

ampc_cg_rows ampc_cg_rows_make(int64_t n_rows, int64_t len, bool contiguous) {
    ampc_cg_rows r = {n_rows, 1, 1};
    if (contiguous ? len < 32 : (len < 256 || n_rows >= 2048)) return r;
    if (contiguous && len <= 1024) r.w = 32, r.per_block = 8;
    else r.w = len <= 4096 ? 128 : 512;
    return r;
}

const char *ampc_cg_rows_tid(const ampc_cg_rows *r) { return r->w == 1 ? "0" : "threadIdx.x"; }

void ampc_cg_rows_open(ampc_cg_kernel *k, const ampc_cg_rows *r) {
    if (r->w == 1) {
        ampc_cg_grid_loop(k, r->n);
        ampc_cg_line(k, "const long long row = i;");
    } else {
        ampc_cg_open(k, "for (long long row = (long long)blockIdx.x * %d + threadIdx.y; row < %lldLL; "
                        "row += (long long)gridDim.x * %d)",
                     r->per_block, (long long)r->n, r->per_block);
    }
}

ampc_status ampc_cg_rows_end(ampc_cg_kernel *k, const ampc_cg_rows *r) {
    if (r->w == 1) return ampc_cg_kernel_end(k, r->n, 256);
    int64_t blocks = (r->n + r->per_block - 1) / r->per_block;
    if (blocks > 65536) blocks = 65536; /* the row loop strides over the rest */
    const uint32_t grid[3] = {(uint32_t)blocks, 1, 1};
    const uint32_t block[3] = {(uint32_t)r->w, (uint32_t)r->per_block, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

/* ---- kept / reduced dims -------------------------------------------------------------------- */

/* A list of dims, outermost first, with their strides in the input (elements). */
typedef struct dims {
    int32_t n;
    int64_t size[AMPC_MAX_RANK], stride[AMPC_MAX_RANK];
} dims;

/* Splits shape s into the kept (on[d] false) and reduced dims, dropping size-1 dims and merging
 * neighbours of the same kind (adjacent once size-1 dims are gone, so they merge exactly). */
static void split_dims(const ampc_shape *s, const bool *on, dims *kept, dims *red) {
    int64_t st[AMPC_MAX_RANK], acc = 1;
    for (int32_t d = s->rank - 1; d >= 0; d--) st[d] = acc, acc *= s->dims[d];
    kept->n = red->n = 0;
    int last = -1; /* kind of the previous dim kept in a list: 0 kept, 1 reduced */
    for (int32_t d = 0; d < s->rank; d++) {
        if (s->dims[d] == 1) continue;
        dims *l = on[d] ? red : kept;
        if (last == (int)on[d]) { /* merge into the previous entry */
            l->size[l->n - 1] *= s->dims[d];
            l->stride[l->n - 1] = st[d];
        } else {
            l->size[l->n] = s->dims[d];
            l->stride[l->n] = st[d];
            l->n++;
        }
        last = on[d];
    }
}

/* Emits the offset of flat index `idx` over the dims of l (row-major); returns its variable
 * ("0LL" for no dims). */
static const char *emit_offset(ampc_cg_kernel *k, const dims *l, const char *idx) {
    if (l->n == 0) return "0LL";
    const char *off = ampc_cg_local(k, "o");
    if (l->n == 1) {
        ampc_cg_line(k, "const long long %s = %s * %lldLL;", off, idx, (long long)l->stride[0]);
        return off;
    }
    const char *rem = ampc_cg_local(k, "q");
    ampc_cg_line(k, "long long %s = 0, %s = %s;", off, rem, idx);
    for (int32_t j = l->n - 1; j > 0; j--) {
        ampc_cg_line(k, "%s += (%s %% %lldLL) * %lldLL;", off, rem, (long long)l->size[j],
                     (long long)l->stride[j]);
        ampc_cg_line(k, "%s /= %lldLL;", rem, (long long)l->size[j]);
    }
    ampc_cg_line(k, "%s += %s * %lldLL;", off, rem, (long long)l->stride[0]);
    return off;
}

/* Opens the loop over the reduced elements of the current row (base offset `base`) and declares
 * their input offset, whose name it returns; *scopes receives the scopes to close. A thread a
 * row nests one loop per reduced dim (no divisions); a shared row strides a flat index over
 * them. */
static const char *open_elems(ampc_cg_kernel *k, const dims *red, int64_t group, const ampc_cg_rows *r,
                              const char *base, int32_t *scopes) {
    const char *e = ampc_cg_local(k, "e");
    if (r->w == 1) {
        ampc_strbuf sum = {0};
        ampc_sb_puts(&sum, base);
        for (int32_t j = 0; j < red->n; j++) {
            const char *v = ampc_cg_local(k, "j");
            ampc_cg_open(k, "for (long long %s = 0; %s < %lldLL; %s++)", v, v, (long long)red->size[j], v);
            ampc_sb_printf(&sum, " + %s * %lldLL", v, (long long)red->stride[j]);
        }
        if (red->n == 0) /* one element (every reduced dim is 1) or none (an empty group) */
            ampc_cg_open(k, "for (int z = 0; z < %d; z++)", group ? 1 : 0);
        *scopes = red->n ? red->n : 1;
        ampc_cg_line(k, "const long long %s = %s;", e, sum.data);
        ampc_sb_free(&sum);
        return e;
    }
    int64_t total = 1;
    for (int32_t j = 0; j < red->n; j++) total *= red->size[j];
    const char *ri = ampc_cg_local(k, "r");
    ampc_cg_open(k, "for (long long %s = threadIdx.x; %s < %lldLL; %s += %d)", ri, ri, (long long)total,
                 ri, r->w);
    const char *off = emit_offset(k, red, ri);
    ampc_cg_line(k, "const long long %s = %s + %s;", e, base, off);
    *scopes = 1;
    return e;
}

static void close_scopes(ampc_cg_kernel *k, int32_t n) {
    while (n-- > 0) ampc_cg_close(k);
}

/* ---- Reduce* -------------------------------------------------------------------------------- */

/* Literals of an integer dtype's extremes in the accumulation type (Max's and Min's identities,
 * as ir/ref/reduce.c's int_min / int_max). */
static const char *int_lowest(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_I64: return "(-9223372036854775807LL - 1)";
    case AMPC_DTYPE_I32: return "(-2147483647LL - 1)";
    case AMPC_DTYPE_I16: return "(-32768LL)";
    case AMPC_DTYPE_I8: return "(-128LL)";
    case AMPC_DTYPE_U64: return "0ull";
    default: return "0LL"; /* other unsigned types and bool */
    }
}

static const char *int_highest(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_I64: return "9223372036854775807LL";
    case AMPC_DTYPE_I32: return "2147483647LL";
    case AMPC_DTYPE_I16: return "32767LL";
    case AMPC_DTYPE_I8: return "127LL";
    case AMPC_DTYPE_U64: return "18446744073709551615ull";
    case AMPC_DTYPE_U32: return "4294967295LL";
    case AMPC_DTYPE_U16: return "65535LL";
    case AMPC_DTYPE_U8: return "255LL";
    default: return "1LL"; /* bool */
    }
}

/* ---- split reductions: few long rows ----------------------------------------------------------
 * A row of many elements takes one block; a few such rows (a whole tensor reduced to a scalar:
 * T5's overflow check sums every element of its activations) leave most of the GPU idle. Each row
 * is then split into `parts` chunks, one block each, whose partial results go to the step's
 * scratch (ampc_cg_scratch); a second kernel combines each row's partials in order and applies
 * the final step. The combine is the reduction's own, so the result is the unsplit one's up to
 * the order of the float sums. */

/* What one reduction accumulates: the accumulation and load types, identity, combine functor,
 * element map (of v) and final step (of acc). */
typedef struct reduction_kinds {
    const char *at, *ct, *id, *comb, *map, *fin;
} reduction_kinds;

/* The chunks a row of `group` elements is split into among `rows_n` rows: enough blocks to fill
 * the GPU (about 512: four on each of 132 SMs), chunks of at least 8192 elements; 1: no split. */
static int32_t split_parts(int64_t rows_n, int64_t group) {
    if (rows_n >= 256 || group < 65536) return 1;
    int64_t want = (512 + rows_n - 1) / rows_n, most = group / 8192;
    int64_t p = want < most ? want : most;
    return (int32_t)(p > 1024 ? 1024 : p < 1 ? 1 : p);
}

static ampc_status lower_split(ampc_cg *cg, const ampc_node *n, const reduction_kinds *rk,
                               const dims *kept, const dims *red, int64_t group, int32_t parts) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t rows_n = ampc_ir_numel(y), chunk = (group + parts - 1) / parts;
    const size_t asz = strcmp(rk->at, "float") ? 8 : 4;
    ampc_rt_ref part = ampc_cg_scratch(cg, rows_n * parts * (int64_t)asz);
    /* 1. block (row, chunk): the chunk's elements, 512 threads, into part[row * parts + chunk] */
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "reduce_part");
    const char *px = ampc_cg_param(k, x, false), *pp = ampc_cg_param_ref(k, part, rk->at, true);
    ampc_cg_line(k, "const long long row = blockIdx.x / %d, c0 = (long long)(blockIdx.x %% %d) * "
                    "%lldLL;", parts, parts, (long long)chunk);
    const char *base = emit_offset(k, kept, "row");
    ampc_cg_line(k, "const long long c1 = c0 + %lldLL < %lldLL ? c0 + %lldLL : %lldLL;",
                 (long long)chunk, (long long)group, (long long)chunk, (long long)group);
    ampc_cg_line(k, "%s acc = %s;", rk->at, rk->id);
    ampc_cg_open(k, "for (long long r = c0 + threadIdx.x; r < c1; r += 512)");
    const char *off = emit_offset(k, red, "r");
    ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[%s + %s]);", rk->ct, rk->ct, px, base, off);
    ampc_cg_line(k, "acc = %s(acc, (%s)(%s));", rk->comb, rk->at, rk->map);
    ampc_cg_close(k);
    ampc_cg_line(k, "acc = ampc::row_allreduce<512>(acc, %s, %s);", rk->comb, rk->id);
    ampc_cg_line(k, "if (threadIdx.x == 0) %s[blockIdx.x] = acc;", pp);
    const uint32_t grid[3] = {(uint32_t)(rows_n * parts), 1, 1}, block[3] = {512, 1, 1};
    ampc_status st = ampc_cg_kernel_end_launch(k, grid, block, 0);
    if (st != AMPC_OK) return st;
    /* 2. a warp a row: its partials in order, then the final step */
    k = ampc_cg_kernel_begin(cg, n, "reduce_combine");
    pp = ampc_cg_param_ref(k, part, rk->at, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_line(k, "const long long row = (long long)blockIdx.x * 8 + threadIdx.y;");
    ampc_cg_line(k, "if (row >= %lldLL) return;", (long long)rows_n);
    ampc_cg_line(k, "%s acc = %s;", rk->at, rk->id);
    ampc_cg_open(k, "for (int c = threadIdx.x; c < %d; c += 32)", parts);
    ampc_cg_line(k, "acc = %s(acc, %s[row * %d + c]);", rk->comb, pp, parts);
    ampc_cg_close(k);
    ampc_cg_line(k, "acc = ampc::row_allreduce<32>(acc, %s, %s);", rk->comb, rk->id);
    ampc_cg_line(k, "if (threadIdx.x == 0) %s[row] = ampc::cvt<%s>(%s);", py,
                 ampc_cg_ctype(y->dtype), rk->fin);
    const uint32_t grid2[3] = {(uint32_t)((rows_n + 7) / 8), 1, 1}, block2[3] = {32, 8, 1};
    return ampc_cg_kernel_end_launch(k, grid2, block2, 0);
}

/* Rows along a strided axis whose neighbouring rows are neighbouring elements (the innermost
 * kept dim is x's last: a channels-last [N, H, W, C] pooled over H and W), fewer than a thread
 * a row needs to fill the GPU: a block takes 32 rows, one a lane, with c->ys threads down each
 * row, and the rows' elements are cut into c->parts chunks, a chunk a block along y. */
typedef struct columns {
    int32_t ys, parts;
    int64_t chunk;
} columns;

/* The columns for this shape, or ys 0 when it is not one (lower_reduction's other launches). */
static columns column_shape(const dims *kept, const dims *red, int64_t rows_n, int64_t group) {
    columns c = {0, 1, group};
    if (kept->n == 0 || red->n == 0 || kept->stride[kept->n - 1] != 1 || group < 64 || rows_n >= 65536)
        return c;
    const int64_t blocks = (rows_n + 31) / 32, want = 65536; /* threads: a quarter of an H100 */
    c.ys = 4;
    while (c.ys < 32 && blocks * 32 * c.ys < want && c.ys * 8 <= group) c.ys *= 2;
    int64_t parts = (want + blocks * 32 * c.ys - 1) / (blocks * 32 * c.ys), most = group / 256;
    parts = parts < most ? parts : most;
    c.parts = (int32_t)(parts > 64 ? 64 : parts < 1 ? 1 : parts);
    c.chunk = (group + c.parts - 1) / c.parts;
    return c;
}

static ampc_status lower_columns(ampc_cg *cg, const ampc_node *n, const reduction_kinds *rk,
                                 const dims *kept, const dims *red, int64_t group, columns c) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t rows_n = ampc_ir_numel(y);
    const size_t asz = strcmp(rk->at, "float") ? 8 : 4;
    ampc_rt_ref part = c.parts > 1 ? ampc_cg_scratch(cg, rows_n * c.parts * (int64_t)asz) : (ampc_rt_ref){0};
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, c.parts > 1 ? "reduce_part" : ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false);
    const char *py = c.parts > 1 ? ampc_cg_param_ref(k, part, rk->at, true) : ampc_cg_param(k, y, true);
    ampc_cg_line(k, "__shared__ %s part[%d][33];", rk->at, c.ys);
    ampc_cg_line(k, "const long long row = (long long)blockIdx.x * 32 + threadIdx.x;");
    ampc_cg_line(k, "const long long c0 = (long long)blockIdx.y * %lldLL;", (long long)c.chunk);
    ampc_cg_line(k, "const long long c1 = c0 + %lldLL < %lldLL ? c0 + %lldLL : %lldLL;", (long long)c.chunk,
                 (long long)group, (long long)c.chunk, (long long)group);
    ampc_cg_line(k, "%s acc = %s;", rk->at, rk->id);
    ampc_cg_open(k, "if (row < %lldLL)", (long long)rows_n);
    const char *base = emit_offset(k, kept, "row");
    ampc_cg_line(k, "#pragma unroll 4");
    ampc_cg_open(k, "for (long long r = c0 + threadIdx.y; r < c1; r += %d)", c.ys);
    const char *off = emit_offset(k, red, "r");
    ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[%s + %s]);", rk->ct, rk->ct, px, base, off);
    ampc_cg_line(k, "acc = %s(acc, (%s)(%s));", rk->comb, rk->at, rk->map);
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_line(k, "part[threadIdx.y][threadIdx.x] = acc;");
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_open(k, "if (threadIdx.y == 0 && row < %lldLL)", (long long)rows_n);
    ampc_cg_line(k, "for (int j = 1; j < %d; j++) acc = %s(acc, part[j][threadIdx.x]);", c.ys, rk->comb);
    if (c.parts > 1) ampc_cg_line(k, "%s[blockIdx.y * %lldLL + row] = acc;", py, (long long)rows_n);
    else ampc_cg_line(k, "%s[row] = ampc::cvt<%s>(%s);", py, ampc_cg_ctype(y->dtype), rk->fin);
    ampc_cg_close(k);
    const uint32_t grid[3] = {(uint32_t)((rows_n + 31) / 32), (uint32_t)c.parts, 1},
                   block[3] = {32, (uint32_t)c.ys, 1};
    ampc_status st = ampc_cg_kernel_end_launch(k, grid, block, 0);
    if (st != AMPC_OK || c.parts == 1) return st;
    /* the chunks of each row in order, then the final step */
    k = ampc_cg_kernel_begin(cg, n, "reduce_combine");
    const char *pp = ampc_cg_param_ref(k, part, rk->at, false);
    py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, rows_n);
    ampc_cg_line(k, "const long long row = i;");
    ampc_cg_line(k, "%s acc = %s;", rk->at, rk->id);
    ampc_cg_line(k, "for (int c = 0; c < %d; c++) acc = %s(acc, %s[c * %lldLL + row]);", c.parts, rk->comb,
                 pp, (long long)rows_n);
    ampc_cg_line(k, "%s[row] = ampc::cvt<%s>(%s);", py, ampc_cg_ctype(y->dtype), rk->fin);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, rows_n, 256);
}

static ampc_status lower_reduction(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_opcode op = n->op;
    const int64_t out_count = ampc_ir_numel(y);
    if (out_count == 0) return AMPC_OK;
    bool on[AMPC_MAX_RANK];
    const ampc_value *t = n->n_inputs > 1 ? n->inputs[1] : NULL;
    AMPC_ASSERT(!t || t->data); /* a compile-time input */
    ampc_reduce_dims(n, t ? t->data : NULL, t ? t->dtype : AMPC_DTYPE_I64, t ? ampc_ir_numel(t) : 0,
                     x->shape.rank, on);
    int64_t group = 1;
    for (int32_t d = 0; d < x->shape.rank; d++)
        if (on[d]) group *= x->shape.dims[d];
    dims kept, red;
    split_dims(&x->shape, on, &kept, &red);
    if (group == 0) red.n = 0; /* an empty group: the loop below never runs */

    /* Types: `at` accumulates, `ct` is what an element loads as. Floats (and the integer
     * reductions that end in a root or a log) accumulate in float / double; integer sums and
     * products wrap in unsigned 64-bit; integer Max / Min compare in the signedness of x. */
    const bool lse = op == AMPC_OP_REDUCE_LOG_SUM_EXP;
    const bool xfl = ampc_dtype_is_float(x->dtype);
    const bool fl = xfl || op == AMPC_OP_REDUCE_L2 || op == AMPC_OP_REDUCE_LOG_SUM || lse;
    const bool u64 = x->dtype == AMPC_DTYPE_U64, minmax = op == AMPC_OP_REDUCE_MAX || op == AMPC_OP_REDUCE_MIN;
    const char *at = fl ? (xfl && x->dtype != AMPC_DTYPE_F64 ? "float" : "double")
                   : minmax && !u64 ? "long long"
                                    : "unsigned long long";
    const char *ct = fl ? at : u64 ? "unsigned long long" : "long long";

    /* Identity, combine functor, element map (of v) and final step (of acc). */
    char id[64], map[128], fin[128];
    const char *comb = "ampc::red_add()";
    if (op == AMPC_OP_REDUCE_PROD) {
        snprintf(id, sizeof id, "(%s)1", at);
        comb = "ampc::red_mul()";
    } else if (minmax) {
        bool mx = op == AMPC_OP_REDUCE_MAX;
        if (fl) snprintf(id, sizeof id, "%s(%s)INFINITY", mx ? "-" : "", at);
        else snprintf(id, sizeof id, "(%s)%s", at, mx ? int_lowest(x->dtype) : int_highest(x->dtype));
        comb = mx ? "ampc::red_max()" : "ampc::red_min()";
    } else {
        snprintf(id, sizeof id, "(%s)0", at);
    }
    switch (op) {
    case AMPC_OP_REDUCE_L1:
        if (fl) snprintf(map, sizeof map, "ampc::m_abs(v)");
        else if (u64) snprintf(map, sizeof map, "v");
        else snprintf(map, sizeof map, "(v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v)");
        break;
    case AMPC_OP_REDUCE_L2: case AMPC_OP_REDUCE_SUM_SQUARE:
        if (fl) snprintf(map, sizeof map, "v * v");
        else snprintf(map, sizeof map, "(unsigned long long)v * (unsigned long long)v");
        break;
    case AMPC_OP_REDUCE_LOG_SUM_EXP: snprintf(map, sizeof map, "ampc::m_exp(v - sh)"); break;
    default: snprintf(map, sizeof map, "(%s)v", at); break;
    }
    switch (op) {
    case AMPC_OP_REDUCE_MEAN:
        if (fl && group == 0) snprintf(fin, sizeof fin, "(%s)NAN", at); /* the mean of nothing */
        else if (fl) snprintf(fin, sizeof fin, "acc / (%s)%lld", at, (long long)group);
        else if (group == 0) snprintf(fin, sizeof fin, "0LL");
        else if (u64) snprintf(fin, sizeof fin, "acc / %lldull", (long long)group);
        else snprintf(fin, sizeof fin, "(long long)acc / %lldLL", (long long)group); /* truncates */
        break;
    case AMPC_OP_REDUCE_L2: snprintf(fin, sizeof fin, "ampc::m_sqrt(acc)"); break;
    case AMPC_OP_REDUCE_LOG_SUM: snprintf(fin, sizeof fin, "ampc::m_log(acc)"); break;
    case AMPC_OP_REDUCE_LOG_SUM_EXP: snprintf(fin, sizeof fin, "ampc::m_log(acc) + sh"); break;
    default: snprintf(fin, sizeof fin, "acc"); break;
    }
    const bool contiguous = red.n == 1 && red.stride[0] == 1;
    ampc_cg_rows r = ampc_cg_rows_make(out_count, group, contiguous);
    if (red.n == 0) r = (ampc_cg_rows){out_count, 1, 1};
    const int32_t parts = lse || r.w == 1 ? 1 : split_parts(out_count, group);
    const columns cols = lse || contiguous ? (columns){0, 1, group} : column_shape(&kept, &red, out_count, group);
    reduction_kinds kinds = {at, ct, id, comb, map, fin};
    if (cols.ys) return lower_columns(cg, n, &kinds, &kept, &red, group, cols);
    if (parts > 1) return lower_split(cg, n, &kinds, &kept, &red, group, parts);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_rows_open(k, &r);
    const char *base = emit_offset(k, &kept, "row");
    int32_t scopes;
    if (lse) {
        /* First pass: the group's maximum, made 0 when not finite (reference's shift). */
        ampc_cg_line(k, "%s sh = -(%s)INFINITY;", at, at);
        const char *e = open_elems(k, &red, group, &r, base, &scopes);
        ampc_cg_line(k, "sh = ampc::red_max()(sh, ampc::cvt<%s>(%s[%s]));", at, px, e);
        close_scopes(k, scopes);
        if (r.w > 1) ampc_cg_line(k, "sh = ampc::row_allreduce<%d>(sh, ampc::red_max(), -(%s)INFINITY);", r.w, at);
        ampc_cg_line(k, "if (ampc::is_inf(sh) || ampc::is_nan(sh)) sh = (%s)0;", at);
    }
    ampc_cg_line(k, "%s acc = %s;", at, id);
    const char *e = open_elems(k, &red, group, &r, base, &scopes);
    ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[%s]);", ct, ct, px, e);
    ampc_cg_line(k, "acc = %s(acc, (%s)(%s));", comb, at, map);
    close_scopes(k, scopes);
    /* A float result stored into integers goes through ampc::cvt: truncated and saturated to
     * the output type, NaN 0 (the reference's store, ampc_ref_sat_int). */
    if (r.w > 1) {
        ampc_cg_line(k, "acc = ampc::row_allreduce<%d>(acc, %s, %s);", r.w, comb, id);
        ampc_cg_line(k, "if (threadIdx.x == 0) %s[row] = ampc::cvt<%s>(%s);", py, ampc_cg_ctype(y->dtype),
                     fin);
    } else {
        ampc_cg_line(k, "%s[row] = ampc::cvt<%s>(%s);", py, ampc_cg_ctype(y->dtype), fin);
    }
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* ---- ArgMax, ArgMin ------------------------------------------------------------------------- */


/* Emits the base offset of row `row` of a tensor viewed as [outer, len, inner] around an axis
 * (element j of the row is at base + j * inner) and returns its name. */
static const char *emit_axis_base(ampc_cg_kernel *k, int64_t len, int64_t inner) {
    if (inner == 1) ampc_cg_line(k, "const long long b = row * %lldLL;", (long long)len);
    else
        ampc_cg_line(k, "const long long b = (row / %lldLL) * %lldLL + row %% %lldLL;", (long long)inner,
                     (long long)(len * inner), (long long)inner);
    return "b";
}

static ampc_status lower_arg(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int32_t rank = x->shape.rank;
    int64_t axis = ampc_axis_attr(n);
    const int32_t ax = (int32_t)(axis < 0 ? axis + rank : axis);
    const bool last = ampc_index_params_of(n).select_last;
    const int64_t len = x->shape.dims[ax], inner = ampc_cg_dims_prod(&x->shape, ax + 1, rank);
    const int64_t count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    const char *ct = ampc_cg_compute_type(x->dtype);
    const bool mx = n->op == AMPC_OP_ARG_MAX;
    ampc_cg_rows r = ampc_cg_rows_make(count, len, inner == 1);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_rows_open(k, &r);
    const char *b = emit_axis_base(k, len, inner);
    ampc_cg_line(k, "%s bv = (%s)0;", ct, ct);
    ampc_cg_line(k, "long long bi = -1;");
    ampc_cg_open(k, "for (long long j = %s; j < %lldLL; j += %d)", ampc_cg_rows_tid(&r), (long long)len, r.w);
    ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[%s + j * %lldLL]);", ct, ct, px, b, (long long)inner);
    ampc_cg_line(k, "if (ampc::arg_better<%s, %s>(bv, bi, v, j)) bv = v, bi = j;", mx ? "true" : "false",
                 last ? "true" : "false");
    ampc_cg_close(k);
    ampc_cg_line(k, "ampc::row_argreduce<%d, %s, %s>(bv, bi);", r.w, mx ? "true" : "false",
                 last ? "true" : "false");
    ampc_cg_line(k, "%s%s[row] = bi;", r.w > 1 ? "if (threadIdx.x == 0) " : "", py);
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* ---- CumSum, CumProd ------------------------------------------------------------------------ */

static ampc_status lower_scan(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0], *axv = n->inputs[1];
    const int32_t rank = x->shape.rank;
    AMPC_ASSERT(axv && axv->data);
    const int64_t axis = ampc_ref_load_i64(axv->data, axv->dtype, 0);
    const int32_t ax = (int32_t)(axis < 0 ? axis + rank : axis);
    const ampc_index_params ip = ampc_index_params_of(n);
    const bool excl = ip.exclusive, rev = ip.reverse;
    const bool prod = n->op == AMPC_OP_CUMPROD;
    const int64_t len = x->shape.dims[ax], inner = ampc_cg_dims_prod(&x->shape, ax + 1, rank);
    const int64_t count = ampc_ir_numel(x);
    if (count == 0) return AMPC_OK;
    /* Floats run in float (double for f64); integers wrap in unsigned 64-bit, like the reference's
     * uint64 running value. */
    const char *at = !ampc_dtype_is_float(x->dtype) ? "unsigned long long"
                   : x->dtype == AMPC_DTYPE_F64    ? "double"
                                                   : "float";
    const char *comb = prod ? "ampc::red_mul()" : "ampc::red_add()";
    char id[48];
    snprintf(id, sizeof id, "(%s)%d", at, prod ? 1 : 0);
    const char *yt = ampc_cg_ctype(y->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);

    if (inner == 1 && len >= 64) {
        /* A block per line: chunks of w elements scanned together, the carry between them. */
        ampc_cg_rows r = {count / len, len >= 1024 ? 256 : 64, 1};
        ampc_cg_rows_open(k, &r);
        ampc_cg_line(k, "const long long b = row * %lldLL;", (long long)len);
        ampc_cg_line(k, "%s carry = %s;", at, id);
        ampc_cg_open(k, "for (long long c = 0; c < %lldLL; c += %d)", (long long)len, r.w);
        ampc_cg_line(k, "const long long p = c + threadIdx.x;");
        if (rev) ampc_cg_line(k, "const long long e = b + (%lldLL - 1 - p);", (long long)len);
        else ampc_cg_line(k, "const long long e = b + p;");
        ampc_cg_line(k, "const %s v = p < %lldLL ? ampc::cvt<%s>(%s[e]) : %s;", at, (long long)len, at, px, id);
        ampc_cg_line(k, "%s ex, tot;", at);
        ampc_cg_line(k, "const %s in = ampc::block_scan(v, %s, %s, ex, tot);", at, comb, id);
        ampc_cg_line(k, "if (p < %lldLL) %s[e] = ampc::cvt<%s>(%s(carry, %s));", (long long)len, py, yt, comb,
                     excl ? "ex" : "in");
        ampc_cg_line(k, "carry = %s(carry, tot);", comb);
        ampc_cg_close(k);
        ampc_cg_close(k);
        return ampc_cg_rows_end(k, &r);
    }

    /* A thread per line, walking it in order. */
    ampc_cg_rows r = {count / len, 1, 1};
    ampc_cg_rows_open(k, &r);
    emit_axis_base(k, len, inner);
    ampc_cg_line(k, "%s acc = %s;", at, id);
    ampc_cg_open(k, "for (long long s = 0; s < %lldLL; s++)", (long long)len);
    if (rev) ampc_cg_line(k, "const long long e = b + (%lldLL - 1 - s) * %lldLL;", (long long)len, (long long)inner);
    else ampc_cg_line(k, "const long long e = b + s * %lldLL;", (long long)inner);
    if (excl) ampc_cg_line(k, "%s[e] = ampc::cvt<%s>(acc);", py, yt);
    ampc_cg_line(k, "acc = %s(acc, ampc::cvt<%s>(%s[e]));", comb, at, px);
    if (!excl) ampc_cg_line(k, "%s[e] = ampc::cvt<%s>(acc);", py, yt);
    ampc_cg_close(k);
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

ampc_status ampc_cg_lower_reduce(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_REDUCE_SUM: case AMPC_OP_REDUCE_MEAN: case AMPC_OP_REDUCE_MAX:
    case AMPC_OP_REDUCE_MIN: case AMPC_OP_REDUCE_PROD: case AMPC_OP_REDUCE_L1:
    case AMPC_OP_REDUCE_L2: case AMPC_OP_REDUCE_LOG_SUM: case AMPC_OP_REDUCE_LOG_SUM_EXP:
    case AMPC_OP_REDUCE_SUM_SQUARE:
        return lower_reduction(cg, n);
    case AMPC_OP_ARG_MAX: case AMPC_OP_ARG_MIN: return lower_arg(cg, n);
    case AMPC_OP_CUMSUM: case AMPC_OP_CUMPROD: return lower_scan(cg, n);
    case AMPC_OP_DET: return ampc_cg_lower_linalg(cg, n);
    case AMPC_OP_DYNAMIC_QUANTIZE_LINEAR: return ampc_cg_lower_quant(cg, n);
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
}

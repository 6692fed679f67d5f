/*
 * lower_linalg.c — generated kernels for the linear-algebra family (ir/infer/linalg.c,
 * ir/ref/linalg.c): Einsum (a LOWER_CONTRACT row, dispatched from lower_contract.c) and Det (a
 * LOWER_REDUCE row, dispatched from lower_reduce.c). Each mirrors its reference kernel:
 *
 *   Einsum: a thread an output element; the loop nest is ir/einsum.h's, the reference's own: the
 *     summed dims nested in the reference's order, each operand's offset built from its steps.
 *   Det: a thread a matrix, LU with partial pivoting in f64 in a local array (n <= 64).
 */
#include "codegen.h"
#include "ir/einsum.h"

#include <stdio.h>
#include <string.h>

/* ---- Einsum ---------------------------------------------------------------------------------- */

static ampc_status lower_einsum(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *y = n->outputs[0];
    const int32_t nin = n->n_inputs;
    const ampc_shape *shapes[AMPC_EINSUM_MAX_INPUTS];
    for (int32_t j = 0; j < nin; j++) shapes[j] = &n->inputs[j]->shape;
    ampc_einsum e;
    ampc_einsum_of(n, shapes, &e);
    /* the loop dims ("..." dims, then every label in use) and each operand's steps along them */
    ampc_einsum_loops l;
    ampc_einsum_loops_of(&e, shapes, &y->shape, &l);
    const int32_t nl = l.n, n_out = l.n_out, *out_loop = l.out_loop;
    const int64_t *ext = l.ext;
    bool free_dim[AMPC_EINSUM_MAX_LOOP] = {false};
    for (int32_t a = 0; a < n_out; a++) free_dim[out_loop[a]] = true;

    int64_t count = ampc_ir_numel(y);
    bool fl = ampc_dtype_is_float(y->dtype);
    const char *ct = fl ? ampc_cg_compute_type(y->dtype) : "unsigned long long";
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "einsum");
    const char *px[AMPC_EINSUM_MAX_INPUTS];
    for (int32_t j = 0; j < nin; j++) px[j] = ampc_cg_param(k, n->inputs[j], false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    /* The output coordinates fix the free loop dims; each operand's base offset follows. */
    ampc_cg_line(k, "long long t_ = i;");
    ampc_strbuf base[AMPC_EINSUM_MAX_INPUTS];
    memset(base, 0, sizeof base);
    for (int32_t a = n_out - 1; a >= 0; a--) {
        ampc_cg_line(k, "const long long f%d_ = t_ %% %lldLL;", a, (long long)y->shape.dims[a]);
        if (a) ampc_cg_line(k, "t_ /= %lldLL;", (long long)y->shape.dims[a]);
        for (int32_t j = 0; j < nin; j++)
            if (l.step[j][out_loop[a]])
                ampc_sb_printf(&base[j], " + f%d_ * %lldLL", a, (long long)l.step[j][out_loop[a]]);
    }
    ampc_cg_line(k, "%s acc_ = 0;", ct);
    for (int32_t j = 0; j < nin; j++) {
        ampc_cg_line(k, "const long long b%d_ = 0%s;", j, base[j].data ? base[j].data : "");
        ampc_sb_free(&base[j]);
    }
    /* The summed dims, nested in loop-dim order (the reference's summation order). */
    int32_t opened = 0;
    ampc_strbuf off[AMPC_EINSUM_MAX_INPUTS];
    memset(off, 0, sizeof off);
    for (int32_t d = 0; d < nl; d++) {
        if (free_dim[d]) continue;
        ampc_cg_open(k, "for (long long s%d_ = 0; s%d_ < %lldLL; s%d_++)", d, d, (long long)ext[d], d);
        opened++;
        for (int32_t j = 0; j < nin; j++)
            if (l.step[j][d]) ampc_sb_printf(&off[j], " + s%d_ * %lldLL", d, (long long)l.step[j][d]);
    }
    ampc_strbuf prod = {0};
    for (int32_t j = 0; j < nin; j++) {
        if (fl)
            ampc_sb_printf(&prod, "%sampc::cvt<%s>(%s[b%d_%s])", j ? " * " : "", ct, px[j], j,
                           off[j].data ? off[j].data : "");
        else
            ampc_sb_printf(&prod, "%s(unsigned long long)(long long)%s[b%d_%s]", j ? " * " : "",
                           px[j], j, off[j].data ? off[j].data : "");
        ampc_sb_free(&off[j]);
    }
    ampc_cg_line(k, "acc_ += %s;", prod.data ? prod.data : (fl ? "1" : "1ull"));
    ampc_sb_free(&prod);
    for (int32_t d = 0; d < opened; d++) ampc_cg_close(k);
    if (fl) ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, ampc_cg_ctype(y->dtype));
    else ampc_cg_line(k, "%s[i] = (%s)acc_;", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- Det ------------------------------------------------------------------------------------ */

enum { DET_MAX_N = 64 };

static ampc_status lower_det(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    int64_t m = x->shape.dims[x->shape.rank - 1], count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    if (m > DET_MAX_N) {
        char why[128];
        snprintf(why, sizeof why, "for %lldx%lld matrices yet (at most %dx%d)", (long long)m,
                 (long long)m, DET_MAX_N, DET_MAX_N);
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no generated GPU kernel %s", ampc_op_get(n->op)->onnx, why);
    }
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "det");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    if (m == 0) {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(1.0);", py, ampc_cg_ctype(y->dtype));
        ampc_cg_close(k);
        return ampc_cg_kernel_end(k, count, 64);
    }
    const long long M = (long long)m;
    ampc_cg_line(k, "double a[%lld];", M * M);
    ampc_cg_line(k, "for (int e = 0; e < %lld; e++) a[e] = ampc::to_f64(%s[i * %lldLL + e]);", M * M, px,
                 M * M);
    ampc_cg_line(k, "double det = 1.0;");
    ampc_cg_open(k, "for (int c = 0; c < %lld && det != 0.0; c++)", M);
    ampc_cg_line(k, "int piv = c;");
    ampc_cg_line(k, "for (int r = c + 1; r < %lld; r++) if (fabs(a[r * %lld + c]) > fabs(a[piv * %lld + c])) "
                    "piv = r;",
                 M, M, M);
    ampc_cg_open(k, "if (a[piv * %lld + c] == 0.0)", M);
    ampc_cg_line(k, "det = 0.0;");
    ampc_cg_line(k, "break;");
    ampc_cg_close(k);
    ampc_cg_open(k, "if (piv != c)");
    ampc_cg_open(k, "for (int j = 0; j < %lld; j++)", M);
    ampc_cg_line(k, "const double tmp = a[c * %lld + j];", M);
    ampc_cg_line(k, "a[c * %lld + j] = a[piv * %lld + j];", M, M);
    ampc_cg_line(k, "a[piv * %lld + j] = tmp;", M);
    ampc_cg_close(k);
    ampc_cg_line(k, "det = -det;");
    ampc_cg_close(k);
    ampc_cg_line(k, "det *= a[c * %lld + c];", M);
    ampc_cg_open(k, "for (int r = c + 1; r < %lld; r++)", M);
    ampc_cg_line(k, "const double f = a[r * %lld + c] / a[c * %lld + c];", M, M);
    /* __dmul_rn / __dsub_rn: no contraction into an fma, as the reference's separate steps. */
    ampc_cg_line(k, "for (int j = c + 1; j < %lld; j++) a[r * %lld + j] = __dsub_rn(a[r * %lld + j], "
                    "__dmul_rn(f, a[c * %lld + j]));",
                 M, M, M, M);
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(det);", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 64);
}

/* ---- entry ---------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_linalg(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_EINSUM: return lower_einsum(cg, n);
    case AMPC_OP_DET: return lower_det(cg, n);
    default: return ampc_cg_unsupported(cg, n, "yet; it runs on the reference evaluator only");
    }
}

/*
 * linalg.c — reference kernels for Einsum and Det, and the Einsum equation parser that inference
 * (ir/infer/linalg.c) shares through ampc_ref_einsum_shape.
 *
 * Einsum is evaluated by its definition: one loop over the full index space of every subscript
 * (and of the "..." dims), multiplying the operands' elements at each point and adding the
 * product into the output element the output subscripts select. A subscript repeated within an
 * operand walks its diagonal (its strides add up); a dim of 1 broadcasts (stride 0). Floats
 * accumulate in double, integers in wrapping int64.
 *
 * Det factors each matrix by LU with partial pivoting in double; the determinant is the product
 * of the pivots, negated once per row swap.
 */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the Einsum equation -------------------------------------------------------------------- */

enum {
    EINSUM_LABELS = 52,   /* a-z, A-Z */
    EINSUM_ELLIPSIS = 52, /* the label standing for "..." */
    EINSUM_MAX_INPUTS = 16,
    EINSUM_MAX_TERM = 2 * AMPC_MAX_RANK, /* subscripts per term (a scalar's term is empty) */
};

typedef struct einsum_term {
    int32_t n; /* labels in order, EINSUM_ELLIPSIS for "..." */
    int32_t labels[EINSUM_MAX_TERM];
    bool ellipsis;
} einsum_term;

typedef struct einsum {
    int32_t n_in;
    einsum_term in[EINSUM_MAX_INPUTS], out;
    int64_t dim[EINSUM_LABELS];        /* each label's extent (-1: unused) */
    int32_t in_ell[EINSUM_MAX_INPUTS]; /* how many dims "..." covers in each input */
    int32_t ell_rank;                  /* the broadcast "..." rank */
    int64_t ell_dims[AMPC_MAX_RANK];
} einsum;

static int32_t label_of(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

static char label_char(int32_t l) { return (char)(l < 26 ? 'a' + l : 'A' + l - 26); }

/* Parses the subscripts of one term, s[0..len-1] (blanks ignored). */
static bool parse_term(const char *s, size_t len, einsum_term *t, char *why, size_t why_len) {
    t->n = 0;
    t->ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') continue;
        int32_t l = label_of(s[i]);
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') {
                snprintf(why, why_len, "a '.' that does not start \"...\"");
                return false;
            }
            if (t->ellipsis) {
                snprintf(why, why_len, "\"...\" twice in one term");
                return false;
            }
            t->ellipsis = true;
            l = EINSUM_ELLIPSIS;
            i += 2;
        } else if (l < 0) {
            snprintf(why, why_len, "the character '%c', which is not a letter, '.', ',' or \"->\"",
                     s[i]);
            return false;
        }
        if (t->n >= EINSUM_MAX_TERM) {
            snprintf(why, why_len, "a term with more than %d subscripts", EINSUM_MAX_TERM);
            return false;
        }
        t->labels[t->n++] = l;
    }
    return true;
}

/* Parses the equation for n operands: the input terms and the output term (explicit after "->",
 * or implicit: "..." when any input has it, then the labels used exactly once, in ASCII order as
 * numpy orders them). */
static bool parse(const char *eq, int32_t n, einsum *e, char *why, size_t why_len) {
    memset(e, 0, sizeof *e);
    const char *arrow = strstr(eq, "->");
    size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int32_t k = 0;
    for (size_t start = 0, i = 0; i <= lhs; i++) {
        if (i < lhs && eq[i] != ',') continue;
        if (k >= n || k >= EINSUM_MAX_INPUTS) {
            snprintf(why, why_len, "more terms than inputs");
            return false;
        }
        if (!parse_term(eq + start, i - start, &e->in[k++], why, why_len)) return false;
        start = i + 1;
    }
    if (k != n) {
        snprintf(why, why_len, "%d terms", k);
        return false;
    }
    e->n_in = k;
    int32_t uses[EINSUM_LABELS] = {0};
    bool any_ellipsis = false;
    for (int32_t j = 0; j < k; j++) {
        any_ellipsis |= e->in[j].ellipsis;
        for (int32_t m = 0; m < e->in[j].n; m++)
            if (e->in[j].labels[m] != EINSUM_ELLIPSIS) uses[e->in[j].labels[m]]++;
    }
    if (!arrow) {
        if (any_ellipsis) e->out.labels[e->out.n++] = EINSUM_ELLIPSIS, e->out.ellipsis = true;
        for (char c = 'A'; c <= 'z'; c++) {
            int32_t l = label_of(c);
            if (l >= 0 && uses[l] == 1) e->out.labels[e->out.n++] = l;
        }
        return true;
    }
    if (strstr(arrow + 2, "->") || strchr(arrow + 2, ',')) {
        snprintf(why, why_len, "more than one output term");
        return false;
    }
    if (!parse_term(arrow + 2, strlen(arrow + 2), &e->out, why, why_len)) return false;
    bool seen[EINSUM_LABELS] = {false};
    for (int32_t i = 0; i < e->out.n; i++) {
        int32_t l = e->out.labels[i];
        if (l == EINSUM_ELLIPSIS) continue;
        if (seen[l] || !uses[l]) {
            snprintf(why, why_len, "output subscript '%c' %s", label_char(l),
                     seen[l] ? "twice" : "that no input has");
            return false;
        }
        seen[l] = true;
    }
    return true;
}

/* Fixes each label's extent and the "..." dims from the operand shapes: a label's dims must
 * agree (or be 1, which broadcasts), the "..." dims broadcast numpy-style. */
static bool bind(einsum *e, const ampc_shape *const *shapes, char *why, size_t why_len) {
    for (int32_t l = 0; l < EINSUM_LABELS; l++) e->dim[l] = -1;
    for (int32_t j = 0; j < e->n_in; j++) {
        const einsum_term *t = &e->in[j];
        int32_t letters = t->n - t->ellipsis, r = shapes[j]->rank;
        if (r < letters || (!t->ellipsis && r != letters)) {
            snprintf(why, why_len, "input %d has rank %d, but its term has %d subscripts%s", j, r,
                     letters, t->ellipsis ? " and \"...\"" : "");
            return false;
        }
        e->in_ell[j] = r - letters;
        e->ell_rank = AMPC_MAX(e->ell_rank, r - letters);
    }
    for (int32_t d = 0; d < e->ell_rank; d++) e->ell_dims[d] = 1;
    for (int32_t j = 0; j < e->n_in; j++) {
        const einsum_term *t = &e->in[j];
        for (int32_t m = 0, axis = 0; m < t->n; m++) {
            int32_t l = t->labels[m];
            if (l == EINSUM_ELLIPSIS) {
                for (int32_t q = 0; q < e->in_ell[j]; q++, axis++) {
                    int64_t v = shapes[j]->dims[axis];
                    int64_t *o = &e->ell_dims[e->ell_rank - e->in_ell[j] + q];
                    if (v != *o && v != 1 && *o != 1) {
                        snprintf(why, why_len,
                                 "the \"...\" dims do not broadcast: input %d has "
                                 "%lld where another input has %lld",
                                 j, (long long)v, (long long)*o);
                        return false;
                    }
                    if (v != 1) *o = v;
                }
                continue;
            }
            int64_t v = shapes[j]->dims[axis++];
            if (e->dim[l] >= 0 && e->dim[l] != v && v != 1 && e->dim[l] != 1) {
                snprintf(why, why_len, "subscript '%c' is %lld in input %d but %lld before",
                         label_char(l), (long long)v, j, (long long)e->dim[l]);
                return false;
            }
            if (e->dim[l] < 0 || e->dim[l] == 1) e->dim[l] = v;
        }
    }
    return true;
}

static bool out_shape(const einsum *e, ampc_shape *y, char *why, size_t why_len) {
    y->rank = 0;
    for (int32_t i = 0; i < e->out.n; i++) {
        int32_t l = e->out.labels[i], add = l == EINSUM_ELLIPSIS ? e->ell_rank : 1;
        if (y->rank + add > AMPC_MAX_RANK) {
            snprintf(why, why_len, "an output of rank above ampc's maximum %d", AMPC_MAX_RANK);
            return false;
        }
        if (l == EINSUM_ELLIPSIS)
            for (int32_t d = 0; d < e->ell_rank; d++) y->dims[y->rank++] = e->ell_dims[d];
        else
            y->dims[y->rank++] = e->dim[l];
    }
    return true;
}

/* Parses and binds an Einsum equation for inference (ir/infer/linalg.c): the output shape, or false
 * with the reason (*bad_equation: the equation itself is malformed). */
bool ampc_ref_einsum_shape(const char *eq, int32_t n, const ampc_shape *const *shapes,
                           ampc_shape *out, bool *bad_equation, char *why, size_t why_len) {
    einsum e;
    *bad_equation = true;
    if (n > EINSUM_MAX_INPUTS) {
        snprintf(why, why_len, "more than %d inputs", EINSUM_MAX_INPUTS);
        return false;
    }
    if (!parse(eq, n, &e, why, why_len)) return false;
    *bad_equation = false;
    return bind(&e, shapes, why, why_len) && out_shape(&e, out, why, why_len);
}

/* ---- Einsum --------------------------------------------------------------------------------- */

ampc_status ampc_ref_einsum(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    einsum e;
    char why[160];
    const ampc_shape *shapes[EINSUM_MAX_INPUTS];
    for (int32_t j = 0; j < n->n_inputs; j++) shapes[j] = &in[j]->shape;
    bool ok = parse(ampc_ir_attr_string(g, n, "equation", ""), n->n_inputs, &e, why, sizeof why) &&
              bind(&e, shapes, why, sizeof why);
    AMPC_ASSERT(ok); /* inference accepted the same equation and shapes */
    /* The loop dims: the "..." dims, then every label in use. */
    enum { MAX_LOOP = AMPC_MAX_RANK + EINSUM_LABELS };
    int64_t ext[MAX_LOOP], st[EINSUM_MAX_INPUTS + 1][MAX_LOOP];
    int32_t nl = 0, loop_of[EINSUM_LABELS];
    memset(st, 0, sizeof st);
    for (int32_t d = 0; d < e.ell_rank; d++) ext[nl++] = e.ell_dims[d];
    for (int32_t l = 0; l < EINSUM_LABELS; l++)
        if (e.dim[l] >= 0) loop_of[l] = nl, ext[nl++] = e.dim[l];
    /* Each operand's stride along each loop dim (row 0..n_in-1), and the output's (row n_in). */
    for (int32_t j = 0; j <= e.n_in; j++) {
        const einsum_term *t = j < e.n_in ? &e.in[j] : &e.out;
        const ampc_shape *s = j < e.n_in ? &in[j]->shape : &out[0]->shape;
        int32_t ell = j < e.n_in ? e.in_ell[j] : e.ell_rank;
        int64_t strides[AMPC_MAX_RANK];
        ampc_ref_strides(s, strides);
        for (int32_t m = 0, axis = 0; m < t->n; m++) {
            int32_t l = t->labels[m];
            if (l == EINSUM_ELLIPSIS) {
                for (int32_t q = 0; q < ell; q++, axis++)
                    if (s->dims[axis] != 1) st[j][e.ell_rank - ell + q] += strides[axis];
                continue;
            }
            if (s->dims[axis] != 1 || ext[loop_of[l]] == 1) st[j][loop_of[l]] += strides[axis];
            axis++;
        }
    }
    ampc_tensor *y = out[0];
    bool fl = ampc_dtype_is_float(y->dtype);
    int64_t ny = ampc_shape_numel(&y->shape), total = 1;
    for (int32_t d = 0; d < nl; d++) total *= ext[d];
    double *accf = fl ? calloc((size_t)(ny ? ny : 1), sizeof *accf) : NULL;
    uint64_t *acci = fl ? NULL : calloc((size_t)(ny ? ny : 1), sizeof *acci);
    if (fl ? !accf : !acci) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    int64_t idx[MAX_LOOP] = {0}, off[EINSUM_MAX_INPUTS + 1] = {0};
    for (int64_t p = 0; p < total; p++) {
        if (fl) {
            double v = 1;
            for (int32_t j = 0; j < e.n_in; j++)
                v *= ampc_ref_load_f64(in[j]->data, in[j]->dtype, off[j]);
            accf[off[e.n_in]] += v;
        } else {
            uint64_t v = 1;
            for (int32_t j = 0; j < e.n_in; j++)
                v *= (uint64_t)ampc_ref_load_i64(in[j]->data, in[j]->dtype, off[j]);
            acci[off[e.n_in]] += v;
        }
        for (int32_t d = nl - 1; d >= 0; d--) {
            for (int32_t j = 0; j <= e.n_in; j++) off[j] += st[j][d];
            if (++idx[d] < ext[d]) break;
            for (int32_t j = 0; j <= e.n_in; j++) off[j] -= st[j][d] * ext[d];
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < ny; i++) {
        if (fl)
            ampc_ref_store_f64(y->data, y->dtype, i, accf[i]);
        else
            ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)acci[i]);
    }
    free(accf);
    free(acci);
    return AMPC_OK;
}

/* ---- Det ------------------------------------------------------------------------------------ */

ampc_status ampc_ref_det(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank;
    int64_t m = x->shape.dims[r - 1], count = ampc_shape_numel(&out[0]->shape);
    double *a = malloc((size_t)(m > 0 ? m * m : 1) * sizeof *a);
    if (!a)
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory factoring a %lldx%lld matrix",
                         (long long)m, (long long)m);
    for (int64_t b = 0; b < count; b++) {
        for (int64_t i = 0; i < m * m; i++)
            a[i] = ampc_ref_load_f64(x->data, x->dtype, b * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t piv = c;
            for (int64_t i = c + 1; i < m; i++)
                if (fabs(a[i * m + c]) > fabs(a[piv * m + c])) piv = i;
            if (a[piv * m + c] == 0) {
                det = 0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[piv * m + j];
                    a[piv * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t i = c + 1; i < m; i++) {
                double f = a[i * m + c] / a[c * m + c];
                for (int64_t j = c + 1; j < m; j++) a[i * m + j] -= f * a[c * m + j];
            }
        }
        ampc_ref_store_f64(out[0]->data, out[0]->dtype, b, det);
    }
    free(a);
    return AMPC_OK;
}

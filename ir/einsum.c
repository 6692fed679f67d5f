/*
 * einsum.c — Einsum's equation: the parser, the binding to shapes and the loop nest (einsum.h).
 */
#include "ir/einsum.h"

#include <stdio.h>
#include <string.h>

static int32_t label_of(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

static char label_char(int32_t l) { return (char)(l < 26 ? 'a' + l : 'A' + l - 26); }

/* Parses the subscripts of one term, s[0..len-1] (blanks ignored). */
static bool parse_term(const char *s, size_t len, ampc_einsum_term *t, char *why, size_t why_len) {
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
            l = AMPC_EINSUM_ELLIPSIS;
            i += 2;
        } else if (l < 0) {
            snprintf(why, why_len, "the character '%c', which is not a letter, '.', ',' or \"->\"",
                     s[i]);
            return false;
        }
        if (t->n >= AMPC_EINSUM_MAX_TERM) {
            snprintf(why, why_len, "a term with more than %d subscripts", AMPC_EINSUM_MAX_TERM);
            return false;
        }
        t->labels[t->n++] = l;
    }
    return true;
}

/* Parses the equation for n operands: the input terms and the output term (explicit after "->",
 * or implicit: "..." when any input has it, then the labels used exactly once, in ASCII order as
 * numpy orders them). */
bool ampc_einsum_parse(const char *eq, int32_t n, ampc_einsum *e, char *why, size_t why_len) {
    memset(e, 0, sizeof *e);
    const char *arrow = strstr(eq, "->");
    size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int32_t k = 0;
    for (size_t start = 0, i = 0; i <= lhs; i++) {
        if (i < lhs && eq[i] != ',') continue;
        if (k >= n || k >= AMPC_EINSUM_MAX_INPUTS) {
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
    int32_t uses[AMPC_EINSUM_LABELS] = {0};
    bool any_ellipsis = false;
    for (int32_t j = 0; j < k; j++) {
        any_ellipsis |= e->in[j].ellipsis;
        for (int32_t m = 0; m < e->in[j].n; m++)
            if (e->in[j].labels[m] != AMPC_EINSUM_ELLIPSIS) uses[e->in[j].labels[m]]++;
    }
    if (!arrow) {
        if (any_ellipsis) e->out.labels[e->out.n++] = AMPC_EINSUM_ELLIPSIS, e->out.ellipsis = true;
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
    bool seen[AMPC_EINSUM_LABELS] = {false};
    for (int32_t i = 0; i < e->out.n; i++) {
        int32_t l = e->out.labels[i];
        if (l == AMPC_EINSUM_ELLIPSIS) continue;
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
bool ampc_einsum_bind(ampc_einsum *e, const ampc_shape *const *shapes, char *why, size_t why_len) {
    for (int32_t l = 0; l < AMPC_EINSUM_LABELS; l++) e->dim[l] = -1;
    for (int32_t j = 0; j < e->n_in; j++) {
        const ampc_einsum_term *t = &e->in[j];
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
        const ampc_einsum_term *t = &e->in[j];
        for (int32_t m = 0, axis = 0; m < t->n; m++) {
            int32_t l = t->labels[m];
            if (l == AMPC_EINSUM_ELLIPSIS) {
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

bool ampc_einsum_out_shape(const ampc_einsum *e, ampc_shape *y, char *why, size_t why_len) {
    y->rank = 0;
    for (int32_t i = 0; i < e->out.n; i++) {
        int32_t l = e->out.labels[i], add = l == AMPC_EINSUM_ELLIPSIS ? e->ell_rank : 1;
        if (y->rank + add > AMPC_MAX_RANK) {
            snprintf(why, why_len, "an output of rank above ampc's maximum %d", AMPC_MAX_RANK);
            return false;
        }
        if (l == AMPC_EINSUM_ELLIPSIS)
            for (int32_t d = 0; d < e->ell_rank; d++) y->dims[y->rank++] = e->ell_dims[d];
        else
            y->dims[y->rank++] = e->dim[l];
    }
    return true;
}

void ampc_einsum_of(const ampc_node *n, const ampc_shape *const *shapes, ampc_einsum *e) {
    char why[160];
    bool ok = n->n_inputs <= AMPC_EINSUM_MAX_INPUTS &&
              ampc_einsum_parse(ampc_attr_string_or(n, "equation", ""), n->n_inputs, e, why,
                                sizeof why) &&
              ampc_einsum_bind(e, shapes, why, sizeof why);
    AMPC_ASSERT(ok); /* inference accepted the same equation and shapes */
}

void ampc_einsum_loops_of(const ampc_einsum *e, const ampc_shape *const *in, const ampc_shape *y,
                          ampc_einsum_loops *l) {
    memset(l, 0, sizeof *l);
    int32_t loop_of[AMPC_EINSUM_LABELS];
    for (int32_t d = 0; d < e->ell_rank; d++) l->ext[l->n++] = e->ell_dims[d];
    for (int32_t c = 0; c < AMPC_EINSUM_LABELS; c++)
        if (e->dim[c] >= 0) loop_of[c] = l->n, l->ext[l->n++] = e->dim[c];
    for (int32_t j = 0; j <= e->n_in; j++) {
        const ampc_einsum_term *t = j < e->n_in ? &e->in[j] : &e->out;
        const ampc_shape *s = j < e->n_in ? in[j] : y;
        const int32_t ell = j < e->n_in ? e->in_ell[j] : e->ell_rank;
        int64_t strides[AMPC_MAX_RANK], acc = 1;
        for (int32_t d = s->rank - 1; d >= 0; d--) strides[d] = acc, acc *= s->dims[d];
        for (int32_t m = 0, axis = 0; m < t->n; m++) {
            const int32_t c = t->labels[m];
            if (c == AMPC_EINSUM_ELLIPSIS) {
                for (int32_t q = 0; q < ell; q++, axis++) {
                    if (s->dims[axis] != 1) l->step[j][e->ell_rank - ell + q] += strides[axis];
                    if (j == e->n_in) l->out_loop[l->n_out++] = e->ell_rank - ell + q;
                }
                continue;
            }
            if (s->dims[axis] != 1 || l->ext[loop_of[c]] == 1)
                l->step[j][loop_of[c]] += strides[axis];
            if (j == e->n_in) l->out_loop[l->n_out++] = loop_of[c];
            axis++;
        }
    }
}

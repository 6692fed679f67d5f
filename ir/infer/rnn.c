/*
 * rnn.c — inference for the recurrent layers RNN, GRU and LSTM (opset 7 on; layout from 14).
 *
 * The three share one form, G being the gate count (RNN 1, GRU 3, LSTM 4):
 *   X              [seq_length, batch_size, input_size]   (layout 1: [batch, seq, input])
 *   W              [num_directions, G*hidden_size, input_size]
 *   R              [num_directions, G*hidden_size, hidden_size]
 *   B (optional)   [num_directions, 2*G*hidden_size]
 *   sequence_lens  [batch_size], i32 (i64 accepted), a compile-time constant with every entry in
 *                  [0, seq_length]; absent: every sequence has the full length
 *   initial_h, initial_c (LSTM), all optional:
 *                  [num_directions, batch_size, hidden_size]   (layout 1: [batch, dirs, hidden])
 *   P (LSTM)       [num_directions, 3*hidden_size]
 * Outputs: Y [seq_length, num_directions, batch_size, hidden_size] (layout 1: [batch, seq, dirs,
 * hidden]); Y_h and Y_c (LSTM) shaped like initial_h. Everything is of X's float dtype.
 *
 * Attributes checked here: direction (forward, reverse, bidirectional), layout (0 or 1),
 * hidden_size (optional; must agree with R), clip (> 0), activations (A names per direction:
 * RNN 1, GRU 2, LSTM 3; a unidirectional node may carry the bidirectional count, as the ONNX
 * default list does, and uses the first A), activation_alpha/beta (floats; consumed in order by
 * the activations that take them, see ir/rnn.h), linear_before_reset (GRU) and input_forget
 * (LSTM), 0 or 1.
 */
#include "infer.h"

#include "ir/rnn.h"

#include <stdio.h>
#include <string.h>

/* Per-op constants of the shared form. */
typedef struct rnn_form {
    int32_t gates;        /* G: weight rows per hidden unit */
    int32_t acts;         /* activation functions per direction */
    const char *act_list; /* their roles, for messages */
} rnn_form;

static rnn_form form_of(ampc_opcode op) {
    switch (op) {
    case AMPC_OP_GRU: return (rnn_form){3, 2, "f for the gates z and r, g for the hidden gate"};
    case AMPC_OP_LSTM:
        return (rnn_form){4, 3, "f for the gates, g for the cell input, h for the output"};
    default: return (rnn_form){1, 1, "f"};
    }
}

/* Reads an int attribute; false when it is mistyped (the reader has already reported it). */
static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return g->diag.n + g->diag.dropped == before;
}

/* Input i, or NULL when absent. */
static const ampc_value *opt_input(const ampc_node *n, int32_t i) {
    return i < n->n_inputs ? n->inputs[i] : NULL;
}

/* Checks that input i (its ONNX role `role`) has the shape want[0..rank-1]; `form` spells the
 * expected shape symbolically for the message. */
static bool check_shape(ampc_graph *g, const ampc_node *n, int32_t i, const char *role,
                        const int64_t *want, int32_t rank, const char *form) {
    const ampc_value *v = n->inputs[i];
    ampc_shape w = {.rank = rank};
    for (int32_t d = 0; d < rank; d++) w.dims[d] = want[d];
    if (ampc_shape_eq(&v->shape, &w)) return true;
    char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must have shape %s (%s), got %s", i, v->name,
              role, ampc_shape_str(&w, a, sizeof a), form, ampc_shape_str(&v->shape, b, sizeof b));
    return false;
}

/* Inputs 0..2 (X, W, R) must be rank 3. */
static bool check_rank3(ampc_graph *g, const ampc_node *n, int32_t i, const char *role) {
    const ampc_value *v = n->inputs[i];
    if (v->shape.rank == 3) return true;
    char s[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must have rank 3, got %s", i, v->name, role,
              ampc_shape_str(&v->shape, s, sizeof s));
    return false;
}

/* The activations attribute: its kind, count and names. */
static ampc_status check_activations(ampc_graph *g, const ampc_node *n, rnn_form f, int32_t dirs) {
    const ampc_attr *a = ampc_ir_attr_find(n, "activations");
    if (!a) return AMPC_OK;
    if (a->kind != AMPC_ATTR_STRINGS)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'activations' must be a list of strings");
    const int32_t want = f.acts * dirs;
    if (a->n != want && !(dirs == 1 && a->n == 2 * f.acts))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'activations' must list %d activation function%s (%d per "
                         "direction: %s), got %d",
                         want, want == 1 ? "" : "s", f.acts, f.act_list, a->n);
    for (int32_t i = 0; i < a->n; i++) {
        ampc_rnn_act_kind kind;
        char names[200];
        if (!ampc_rnn_act_lookup(a->strings[i], &kind))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'activations' entry %d '%s' is not an activation ONNX "
                             "defines for recurrent ops (%s)",
                             i, a->strings[i], ampc_rnn_act_names(names, sizeof names));
    }
    return AMPC_OK;
}

/* The scalar attributes; sets *dirs and *layout. */
static ampc_status check_attrs(ampc_graph *g, const ampc_node *n, rnn_form f, int32_t *dirs,
                               int32_t *layout) {
    int32_t before = g->diag.n + g->diag.dropped;
    const char *dir = ampc_ir_attr_string(g, n, "direction", "forward");
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR;
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse"))
        *dirs = 1;
    else if (!strcmp(dir, "bidirectional"))
        *dirs = 2;
    else
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'direction' must be forward, reverse or bidirectional, got "
                         "'%s'",
                         dir);
    int64_t lay, flag;
    if (!read_int(g, n, "layout", 0, &lay)) return AMPC_E_ATTR;
    if (lay != 0 && lay != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'layout' must be 0 or 1, got %lld",
                         (long long)lay);
    *layout = (int32_t)lay;
    const char *flag_name = n->op == AMPC_OP_GRU    ? "linear_before_reset"
                            : n->op == AMPC_OP_LSTM ? "input_forget"
                                                    : NULL;
    if (flag_name) {
        if (!read_int(g, n, flag_name, 0, &flag)) return AMPC_E_ATTR;
        if (flag != 0 && flag != 1)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld",
                             flag_name, (long long)flag);
    }
    const ampc_attr *clip = ampc_ir_attr_find(n, "clip");
    if (clip) {
        if (clip->kind != AMPC_ATTR_FLOAT)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'clip' must be of type float");
        if (!(clip->f > 0))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'clip' (the cell clip threshold) must be positive, got %g",
                             (double)clip->f);
    }
    int32_t cnt;
    ampc_ir_attr_floats(g, n, "activation_alpha", &cnt);
    ampc_ir_attr_floats(g, n, "activation_beta", &cnt);
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR;
    return check_activations(g, n, f, *dirs);
}

/* Shape and dtype inference shared by RNN, GRU and LSTM (the form is in the file comment): checks
 * every input and attribute, then sets Y, Y_h and (LSTM) Y_c. */
ampc_status ampc_infer_rnn(ampc_graph *g, ampc_node *n) {
    static const char *const roles[8] = {"X",         "W",         "R", "B", "sequence_lens",
                                         "initial_h", "initial_c", "P"};
    const rnn_form f = form_of(n->op);
    const ampc_value *x = n->inputs[0], *r = n->inputs[2];
    int32_t dirs = 1, layout = 0;

    /* dtypes: one float type for every tensor but sequence_lens */
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    for (int32_t i = 1; i < n->n_inputs; i++) {
        if (!n->inputs[i] || i == 4) continue;
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    }
    const ampc_value *lens = opt_input(n, 4);
    if (lens && lens->dtype != AMPC_DTYPE_I32 && lens->dtype != AMPC_DTYPE_I64)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE,
                         "input 4 '%s' (sequence_lens) must be i32 or i64, got %s", lens->name,
                         ampc_dtype_name(lens->dtype));
    if (!check_rank3(g, n, 0, "X") || !check_rank3(g, n, 1, "W") || !check_rank3(g, n, 2, "R"))
        return AMPC_E_SHAPE;
    ampc_status st = check_attrs(g, n, f, &dirs, &layout);
    if (st != AMPC_OK) return st;

    /* sizes: X gives seq_length, batch and input size; R gives the hidden size */
    const int64_t seq = x->shape.dims[layout ? 1 : 0], batch = x->shape.dims[layout ? 0 : 1];
    const int64_t in_size = x->shape.dims[2], hidden = r->shape.dims[2];
    int64_t hs_attr;
    if (!read_int(g, n, "hidden_size", hidden, &hs_attr)) return AMPC_E_ATTR;
    if (hs_attr != hidden) {
        char s[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'hidden_size' %lld disagrees with input 2 '%s' (R) %s, whose "
                         "last dim is the hidden size %lld",
                         (long long)hs_attr, r->name, ampc_shape_str(&r->shape, s, sizeof s),
                         (long long)hidden);
    }
    char form[96];
    const int64_t gh = f.gates * hidden;
    const char *rows = f.gates == 1 ? "" : f.gates == 3 ? "3*" : "4*"; /* G*hidden_size */
    snprintf(form, sizeof form, "[num_directions, %shidden_size, hidden_size]", rows);
    if (!check_shape(g, n, 2, roles[2], (int64_t[]){dirs, gh, hidden}, 3, form))
        return AMPC_E_SHAPE;
    snprintf(form, sizeof form, "[num_directions, %shidden_size, input_size]", rows);
    if (!check_shape(g, n, 1, roles[1], (int64_t[]){dirs, gh, in_size}, 3, form))
        return AMPC_E_SHAPE;
    if (opt_input(n, 3)) {
        snprintf(form, sizeof form, "[num_directions, %d*hidden_size]", 2 * f.gates);
        if (!check_shape(g, n, 3, roles[3], (int64_t[]){dirs, 2 * gh}, 2, form))
            return AMPC_E_SHAPE;
    }
    if (lens) {
        if (!check_shape(g, n, 4, roles[4], (int64_t[]){batch}, 1, "[batch_size]"))
            return AMPC_E_SHAPE;
        for (int64_t b = 0; lens->data && b < batch; b++) {
            int64_t len = lens->dtype == AMPC_DTYPE_I32 ? ((const int32_t *)lens->data)[b]
                                                        : ((const int64_t *)lens->data)[b];
            if (len < 0 || len > seq)
                return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                                 "input 4 '%s' (sequence_lens) entry %lld is %lld, outside [0, "
                                 "%lld] (0 to seq_length)",
                                 lens->name, (long long)b, (long long)len, (long long)seq);
        }
    }
    ampc_shape state = {.rank = 3, .dims = {dirs, batch, hidden}};
    if (layout) state.dims[0] = batch, state.dims[1] = dirs;
    const char *state_form = layout ? "[batch_size, num_directions, hidden_size]"
                                    : "[num_directions, batch_size, hidden_size]";
    for (int32_t i = 5; i <= 6; i++) {
        if (i == 6 && n->op != AMPC_OP_LSTM) break;
        if (opt_input(n, i) && !check_shape(g, n, i, roles[i], state.dims, 3, state_form))
            return AMPC_E_SHAPE;
    }
    if (n->op == AMPC_OP_LSTM && opt_input(n, 7) &&
        !check_shape(g, n, 7, roles[7], (int64_t[]){dirs, 3 * hidden}, 2,
                     "[num_directions, 3*hidden_size]"))
        return AMPC_E_SHAPE;

    ampc_shape y = {.rank = 4, .dims = {seq, dirs, batch, hidden}};
    if (layout) y.dims[0] = batch, y.dims[1] = seq, y.dims[2] = dirs;
    ampc_infer_set(n, 0, x->dtype, &y);
    for (int32_t i = 1; i < n->n_outputs; i++) ampc_infer_set(n, i, x->dtype, &state);
    return AMPC_OK;
}

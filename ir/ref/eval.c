/*
 * eval.c — the reference interpreter: element access helpers, the broadcasting iterator, single
 * node folding (used while building and by the fold pass) and whole-graph evaluation with buffers
 * freed after their last use.
 */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- element access ------------------------------------------------------------------------- */

double ampc_ref_load_f64(const void *p, ampc_dtype t, int64_t i) {
    switch (t) {
    case AMPC_DTYPE_F32: return ((const float *)p)[i];
    case AMPC_DTYPE_F64: return ((const double *)p)[i];
    case AMPC_DTYPE_F16: return ampc_f16_to_f32(((const uint16_t *)p)[i]);
    case AMPC_DTYPE_BF16: return ampc_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMPC_DTYPE_U64: return (double)((const uint64_t *)p)[i];
    default: return (double)ampc_ref_load_i64(p, t, i);
    }
}

int64_t ampc_ref_load_i64(const void *p, ampc_dtype t, int64_t i) {
    switch (t) {
    case AMPC_DTYPE_I64: return ((const int64_t *)p)[i];
    case AMPC_DTYPE_I32: return ((const int32_t *)p)[i];
    case AMPC_DTYPE_I16: return ((const int16_t *)p)[i];
    case AMPC_DTYPE_I8: return ((const int8_t *)p)[i];
    case AMPC_DTYPE_U64: return (int64_t)((const uint64_t *)p)[i];
    case AMPC_DTYPE_U32: return ((const uint32_t *)p)[i];
    case AMPC_DTYPE_U16: return ((const uint16_t *)p)[i];
    case AMPC_DTYPE_U8: return ((const uint8_t *)p)[i];
    case AMPC_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: {
        return ampc_ref_sat_int(ampc_ref_load_f64(p, t, i), AMPC_DTYPE_I64);
    }
    }
}

void ampc_ref_store_f64(void *p, ampc_dtype t, int64_t i, double v) {
    switch (t) {
    case AMPC_DTYPE_F32: ((float *)p)[i] = (float)v; return;
    case AMPC_DTYPE_F64: ((double *)p)[i] = v; return;
    case AMPC_DTYPE_F16: {
        /* Round once: double -> f16 through f32 could round twice; exact when v is an f32. */
        float f = (float)v;
        ((uint16_t *)p)[i] = ampc_f32_to_f16(f);
        return;
    }
    case AMPC_DTYPE_BF16: ((uint16_t *)p)[i] = ampc_f32_to_bf16((float)v); return;
    case AMPC_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case AMPC_DTYPE_U64:
        ((uint64_t *)p)[i] = isnan(v) || v <= 0 ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)v;
        return;
    default: ampc_ref_store_i64(p, t, i, ampc_ref_sat_int(v, t)); return;
    }
}

int64_t ampc_ref_sat_int(double v, ampc_dtype t) {
    int64_t lo, hi; /* t's range */
    switch (t) {
    case AMPC_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case AMPC_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
    case AMPC_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case AMPC_DTYPE_U16: lo = 0, hi = UINT16_MAX; break;
    case AMPC_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case AMPC_DTYPE_U32: lo = 0, hi = UINT32_MAX; break;
    default: lo = INT64_MIN, hi = INT64_MAX; break;
    }
    /* (double)hi is hi or, for i64, 2^63: below it the truncation fits; (double)lo is exact. */
    if (isnan(v)) return 0;
    if (v >= (double)hi) return hi;
    if (v <= (double)lo) return lo;
    return (int64_t)v; /* truncation toward zero, as ONNX Cast does */
}

void ampc_ref_store_i64(void *p, ampc_dtype t, int64_t i, int64_t v) {
    switch (t) {
    case AMPC_DTYPE_I64: ((int64_t *)p)[i] = v; return;
    case AMPC_DTYPE_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; return;
    case AMPC_DTYPE_I16: ((int16_t *)p)[i] = (int16_t)(uint16_t)(uint64_t)v; return;
    case AMPC_DTYPE_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v; return;
    case AMPC_DTYPE_U64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case AMPC_DTYPE_U32: ((uint32_t *)p)[i] = (uint32_t)(uint64_t)v; return;
    case AMPC_DTYPE_U16: ((uint16_t *)p)[i] = (uint16_t)(uint64_t)v; return;
    case AMPC_DTYPE_U8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; return;
    case AMPC_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    default: ampc_ref_store_f64(p, t, i, (double)v); return;
    }
}

void ampc_ref_strides(const ampc_shape *s, int64_t strides[AMPC_MAX_RANK]) {
    int64_t st = 1;
    for (int32_t d = s->rank - 1; d >= 0; d--) {
        strides[d] = st;
        st *= s->dims[d];
    }
}

/* ---- broadcasting iterator ------------------------------------------------------------------ */

void ampc_bcast_iter_init(ampc_bcast_iter *it, const ampc_shape *out, const ampc_shape *const *ins,
                          int32_t k) {
    AMPC_ASSERT(k <= AMPC_ITER_MAX_OPERANDS);
    memset(it, 0, sizeof *it);
    it->rank = out->rank;
    it->k = k;
    memcpy(it->dims, out->dims, sizeof it->dims);
    for (int32_t j = 0; j < k; j++) {
        const ampc_shape *s = ins[j];
        int64_t st[AMPC_MAX_RANK];
        ampc_ref_strides(s, st);
        for (int32_t d = 0; d < out->rank; d++) {
            int32_t sd = d - (out->rank - s->rank);
            it->strides[j][d] = sd < 0 || s->dims[sd] == 1 ? 0 : st[sd];
        }
    }
}

void ampc_bcast_iter_next(ampc_bcast_iter *it) {
    for (int32_t d = it->rank - 1; d >= 0; d--) {
        if (++it->idx[d] < it->dims[d]) {
            for (int32_t j = 0; j < it->k; j++) it->off[j] += it->strides[j][d];
            return;
        }
        it->idx[d] = 0;
        for (int32_t j = 0; j < it->k; j++) it->off[j] -= it->strides[j][d] * (it->dims[d] - 1);
    }
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* Runs node n on tensors bound to its inputs; outputs are allocated in the graph arena (folding)
 * or with calloc (evaluation, freed by the caller). */
/* f rounded as TF32 tensor cores read an f32 operand: the sign, the 8 exponent bits and the top
 * 10 of the 23 mantissa bits; the low 13 dropped (toward zero). Infinities and NaN stay. */
static float tf32_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u &= ~0x1fffu;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* TF32 copies of the f32 operands (inputs 0 and 1: A and B, X and W) of contraction or
 * convolution n, put in place of in[] in `use` (their data in *owned, freed by the caller); the
 * other inputs as they are. */
static ampc_status tf32_operands(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 const ampc_tensor **use, ampc_tensor owned[2]) {
    for (int32_t j = 0; j < n->n_inputs; j++) use[j] = in[j];
    for (int32_t j = 0; j < 2 && j < n->n_inputs; j++) {
        if (!in[j] || in[j]->dtype != AMPC_DTYPE_F32) continue;
        int64_t k = ampc_shape_numel(&in[j]->shape);
        float *d = malloc((size_t)(k > 0 ? k : 1) * sizeof *d);
        if (!d) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory rounding operands to TF32");
        for (int64_t i = 0; i < k; i++) d[i] = tf32_of(((const float *)in[j]->data)[i]);
        owned[j] = (ampc_tensor){AMPC_DTYPE_F32, in[j]->shape, d};
        use[j] = &owned[j];
    }
    return AMPC_OK;
}

static ampc_status run_node(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *out, bool in_arena) {
    ampc_tensor **outp = ampc_xmalloc((size_t)(n->n_outputs + 1) * sizeof *outp);
    for (int32_t i = 0; i < n->n_outputs; i++) {
        const ampc_value *v = n->outputs[i];
        size_t nb = ampc_ir_nbytes(v);
        out[i] = (ampc_tensor){v->dtype, v->shape, NULL};
        out[i].data = in_arena ? ampc_arena_alloc(&g->arena, nb ? nb : 1) : calloc(1, nb ? nb : 1);
        if (!out[i].data) {
            if (!in_arena)
                for (int32_t j = 0; j < i; j++) free(out[j].data);
            free(outp);
            return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory allocating output %d '%s' (%zu bytes)",
                             i, v->name, nb);
        }
        outp[i] = &out[i];
    }
    ampc_status st;
    if (g->ref_tf32 && ampc_op_has(n->op, T_CONTRACT | T_CONV)) { /* copies only where emulated */
        const ampc_tensor **use = ampc_xcalloc((size_t)n->n_inputs + 1, sizeof *use);
        ampc_tensor owned[2] = {{0}, {0}};
        st = tf32_operands(g, n, in, use, owned);
        if (st == AMPC_OK) st = ampc_op_get(n->op)->ref(g, n, use, outp);
        free(owned[0].data);
        free(owned[1].data);
        free(use);
    } else {
        st = ampc_op_get(n->op)->ref(g, n, in, outp);
    }
    free(outp);
    if (st != AMPC_OK && !in_arena)
        for (int32_t i = 0; i < n->n_outputs; i++) free(out[i].data);
    return st;
}

ampc_status ampc_ref_fold_node(ampc_graph *g, ampc_node *n) {
    ampc_tensor *tin = ampc_xcalloc((size_t)n->n_inputs + 1, sizeof *tin);
    ampc_tensor *tout = ampc_xcalloc((size_t)n->n_outputs + 1, sizeof *tout);
    const ampc_tensor **pin = ampc_xcalloc((size_t)n->n_inputs + 1, sizeof *pin);
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) {
            pin[i] = NULL;
            continue;
        }
        AMPC_ASSERT(v->data || ampc_op_has(n->op, T_SHAPEONLY)); /* Shape reads no data */
        tin[i] = (ampc_tensor){v->dtype, v->shape, v->data};
        pin[i] = &tin[i];
    }
    ampc_status st = run_node(g, n, pin, tout, true);
    for (int32_t i = 0; st == AMPC_OK && i < n->n_outputs; i++) n->outputs[i]->data = tout[i].data;
    free(tin);
    free(tout);
    free(pin);
    return st;
}

ampc_status ampc_graph_evaluate(ampc_graph *g, const ampc_tensor *inputs, int32_t n_inputs,
                                ampc_tensor *outputs, int32_t n_outputs) {
    if (!g || (n_inputs && !inputs) || (n_outputs && !outputs)) return AMPC_E_INVALID_ARG;
    if (ampc_graph_status(g) != AMPC_OK) return ampc_graph_status(g);
    for (int32_t i = 0; i < g->n_values; i++) /* diagnostics may have been cleared since */
        if (g->values[i]->flags & AMPC_VALUE_POISON)
            return AMPC_FAIL(g, g->values[i]->producer, AMPC_E_VERIFY,
                             "value '%s' comes from a node that failed to build; fix the graph "
                             "before evaluating it", g->values[i]->name);
    if (n_inputs != g->n_inputs)
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "graph '%s' has %d inputs, got %d", g->name,
                         g->n_inputs, n_inputs);
    if (n_outputs != g->n_outputs)
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "graph '%s' has %d outputs, %d were asked for",
                         g->name, g->n_outputs, n_outputs);
    for (int32_t i = 0; i < n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        char want[AMPC_TYPE_STR_MAX], got[AMPC_SHAPE_STR_MAX];
        if (inputs[i].dtype != v->dtype || !ampc_shape_eq(&inputs[i].shape, &v->shape))
            return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "input %d '%s' must be %s, got %s%s", i,
                             v->name, ampc_value_type_str(v, want, sizeof want),
                             ampc_dtype_name(inputs[i].dtype),
                             ampc_shape_str(&inputs[i].shape, got, sizeof got));
        if (!inputs[i].data && ampc_shape_numel(&inputs[i].shape))
            return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "input %d '%s' has no data (NULL)", i,
                             v->name);
    }

    /* A value the evaluator would allocate that exceeds the machine's memory is refused before
     * anything is allocated (calloc could succeed lazily and the process die filling it). */
    int64_t host = ampc_host_memory_bytes();
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t j = 0; j < n->n_outputs; j++) {
            const ampc_value *v = n->outputs[j];
            int64_t nb = (int64_t)ampc_ir_nbytes(v);
            if (v->data || nb <= host) continue;
            char t[AMPC_TYPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_OOM,
                             "value '%s' %s takes %lld bytes (%.3g GiB), more than this machine's "
                             "%.3g GiB of memory: the reference evaluator cannot hold it", v->name,
                             ampc_value_type_str(v, t, sizeof t), (long long)nb, nb / 1073741824.0,
                             host / 1073741824.0);
        }
    }

    /* Each value's buffer: constants and inputs are borrowed; node outputs are owned until their
     * last use (use counts), graph outputs are handed to the caller. */
    int32_t nv = g->n_values;
    ampc_tensor *buf = ampc_xcalloc((size_t)nv, sizeof *buf);
    int32_t *uses = ampc_xcalloc((size_t)nv, sizeof *uses);
    bool *owned = ampc_xcalloc((size_t)nv, sizeof *owned);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j]) uses[n->inputs[j]->id]++;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) uses[g->outputs[i]->id] += 1 << 20; /* pinned */
    for (int32_t i = 0; i < nv; i++) {
        const ampc_value *v = g->values[i];
        if (v->data) buf[i] = (ampc_tensor){v->dtype, v->shape, v->data};
    }
    for (int32_t i = 0; i < n_inputs; i++) buf[g->inputs[i]->id] = inputs[i];

    /* Per-node scratch sized for the widest node (Concat and Sum take any number of inputs). */
    int32_t widest = 1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        widest = AMPC_MAX(widest, g->nodes[i]->n_inputs);
        widest = AMPC_MAX(widest, g->nodes[i]->n_outputs);
    }
    ampc_tensor *tout = ampc_xcalloc((size_t)widest, sizeof *tout);
    const ampc_tensor **pin = ampc_xcalloc((size_t)widest, sizeof *pin);
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t j = 0; j < n->n_inputs; j++) pin[j] = n->inputs[j] ? &buf[n->inputs[j]->id] : NULL;
        bool known = true; /* outputs already known (folded while building): no work */
        for (int32_t j = 0; j < n->n_outputs; j++) known &= n->outputs[j]->data != NULL;
        if (!known) {
            st = run_node(g, n, pin, tout, false);
            if (st != AMPC_OK) break;
            for (int32_t j = 0; j < n->n_outputs; j++) {
                int32_t id = n->outputs[j]->id;
                buf[id] = tout[j];
                owned[id] = true;
            }
        }
        for (int32_t j = 0; j < n->n_inputs; j++) {
            if (!n->inputs[j]) continue;
            int32_t id = n->inputs[j]->id;
            if (--uses[id] == 0 && owned[id]) {
                free(buf[id].data);
                buf[id].data = NULL;
                owned[id] = false;
            }
        }
        for (int32_t j = 0; j < n->n_outputs; j++) { /* outputs nobody reads */
            int32_t id = n->outputs[j]->id;
            if (uses[id] == 0 && owned[id]) {
                free(buf[id].data);
                buf[id].data = NULL;
                owned[id] = false;
            }
        }
    }
    if (st == AMPC_OK) {
        for (int32_t i = 0; i < n_outputs; i++) {
            int32_t id = g->outputs[i]->id;
            outputs[i] = buf[id];
            size_t nb = (size_t)ampc_shape_numel(&buf[id].shape) * ampc_dtype_size(buf[id].dtype);
            if (owned[id]) {
                owned[id] = false; /* ownership moves to the caller */
            } else {
                /* A constant, an input or a repeated output: hand out a copy. */
                outputs[i].data = malloc(nb ? nb : 1);
                if (!outputs[i].data) {
                    for (int32_t j = 0; j < i; j++) ampc_tensor_free(&outputs[j]);
                    st = AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory copying output %d", i);
                    break;
                }
                if (nb) memcpy(outputs[i].data, buf[id].data, nb);
            }
        }
    }
    for (int32_t i = 0; i < nv; i++)
        if (owned[i]) free(buf[i].data);
    free(buf);
    free(uses);
    free(owned);
    free(tout);
    free(pin);
    return st;
}

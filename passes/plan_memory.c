/*
 * plan_memory.c — the plan-memory pass: decides where every value lives on the device.
 *
 *   1. Constants (values with data and no producer) go to the weights blob, packed in value
 *      order.
 *   2. Every other value gets arena bytes. A view (T_VIEW: Reshape, Flatten, Squeeze...) shares
 *      the bytes of its input; an elementwise node may write its output over an input of the
 *      same shape whose last use it is (in place), unless that input is a graph input or output.
 *      Values that share bytes form one buffer.
 *   3. Each buffer is live from the node that defines it to the last node that reads any of its
 *      values; a buffer holding a graph input or output is live for the whole run, so no other
 *      value ever shares its bytes and the runtime may point its steps at the caller's own
 *      buffers instead (runtime/io_bind.c). A data-dependent Loop's region (ampc.LoopBegin to
 *      ampc.LoopEnd) runs again while the loop goes on, so what it reads from before it lives to
 *      its end.
 *   A value marked AMPC_VALUE_FUSED (fuse_elementwise.c) gets no bytes: it lives in registers of
 *   the kernel of its chain's last node, which reads the chain's other inputs, so a node of the
 *   chain counts as reading them at that last node's position.
 *   4. Buffers are placed largest first, each at the lowest 256-aligned offset that no placed
 *      buffer with an overlapping lifetime occupies; the arena size is the highest end.
 *
 * The result is stored in the IR (value->mem_space, ->mem_offset, graph->arena_bytes,
 * ->weights_bytes), so codegen and `ampc inspect` read one decision. Deterministic: ties break by
 * value id.
 */
#include "passes.h"
#include "ir/subgraph.h"

#include <stdlib.h>
#include <string.h>

typedef struct buffer {
    int32_t root;         /* value id owning the bytes */
    int32_t start, end;   /* lifetime in node positions (inclusive); inputs start at -1 */
    int64_t bytes, offset;
} buffer;

static int64_t align_up(int64_t x) { return (x + AMPC_MEM_ALIGN - 1) & ~(int64_t)(AMPC_MEM_ALIGN - 1); }

static bool is_constant(const ampc_value *v) { return v->data && !v->producer; }

/* Union-find over value ids: values that share bytes. */
static int32_t find(int32_t *parent, int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
}

static int cmp_buffers(const void *pa, const void *pb) {
    const buffer *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->root < b->root ? -1 : a->root > b->root;
}

static int cmp_offsets(const void *pa, const void *pb) {
    const buffer *const *a = pa, *const *b = pb;
    return (*a)->offset < (*b)->offset ? -1 : (*a)->offset > (*b)->offset;
}

/* Whether node n (at position pos) may write its single output over input x, whose buffer's
 * values carry the graph input/output flags buf_flags (x may be a view of a graph input). */
static bool can_reuse(const ampc_node *n, const ampc_value *x, const int32_t *last_use,
                      int32_t buf_flags, int32_t pos) {
    if (!ampc_op_has(n->op, T_ELEMWISE) || n->n_outputs != 1) return false;
    const ampc_value *y = n->outputs[0];
    if (!x || is_constant(x) || x->dtype != y->dtype || !ampc_shape_eq(&x->shape, &y->shape))
        return false;
    if (y->flags & AMPC_VALUE_OUTPUT) return false;
    if (buf_flags & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT)) return false;
    return last_use[x->id] == pos;
}

/* Whether the kernel of node n reads buffer root r other than element for element: through a
 * view, a lookup or a Concat in its fused chain (fuse-elementwise). Writing n's output over r
 * would then overwrite elements other threads have still to read. */
static bool reads_elsewhere(const ampc_node *n, int32_t *parent, int32_t r) {
    for (int32_t j = 0; j < n->n_inputs; j++) {
        const ampc_value *v = n->inputs[j];
        const ampc_node *p = v ? v->producer : NULL;
        if (!p || !(v->flags & AMPC_VALUE_FUSED)) continue;
        const bool head = ampc_op_is_strided_view(p->op) || p->op == AMPC_OP_GATHER;
        const int32_t srcs = p->op == AMPC_OP_CONCAT ? p->n_inputs : head ? 1 : 0;
        for (int32_t k = 0; k < srcs; k++) {
            const ampc_value *src = p->inputs[k];
            if (src && !(src->flags & AMPC_VALUE_FUSED) && !is_constant(src) &&
                find(parent, src->id) == r)
                return true;
        }
        if (reads_elsewhere(p, parent, r)) return true;
    }
    return false;
}

/* A data-dependent Loop's region, ampc.LoopBegin to its ampc.LoopEnd (ir/subgraph.h), runs again
 * while the loop goes on: a value defined before the region (or by its LoopBegin) and read in it
 * is read again by the next iteration, so it lives to the region's end. A value computed inside
 * the region and read after it would not exist when the loop runs no iteration: a pass that
 * made one is at fault (AMPC_E_INTERNAL). */
static ampc_status extend_over_loops(ampc_graph *g, const int32_t *def, int32_t *last) {
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ampc_node *n = g->nodes[k];
        const ampc_node *b = n->dead || n->op != AMPC_OP_LOOP_END ? NULL : ampc_loop_begin_of(n);
        if (!b || !n->n_outputs) continue;
        const int32_t begin = def[b->outputs[0]->id], end = def[n->outputs[0]->id];
        for (int32_t i = 0; i < g->n_values; i++) {
            if (def[i] <= begin && last[i] > begin && last[i] < end) last[i] = end;
            if (def[i] > begin && def[i] < end && last[i] > end)
                return AMPC_FAIL(g, n, AMPC_E_INTERNAL, "value '%s' is computed inside the region "
                                 "of the Loop this ends and read after it",
                                 g->values[i]->name);
        }
    }
    return AMPC_OK;
}

ampc_status ampc_pass_plan_memory(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    int32_t nv = g->n_values;
    int32_t *parent = ampc_xmalloc((size_t)(nv + 1) * sizeof *parent);
    int32_t *def = ampc_xmalloc((size_t)(nv + 1) * sizeof *def);
    int32_t *last = ampc_xmalloc((size_t)(nv + 1) * sizeof *last);
    int32_t *root_flags = ampc_xcalloc((size_t)nv + 1, sizeof *root_flags);
    uint8_t *space = ampc_xcalloc((size_t)nv + 1, 1);
    int64_t *offset = ampc_xcalloc((size_t)nv + 1, sizeof *offset);
    int64_t weights = 0;

    /* 1. constants */
    for (int32_t i = 0; i < nv; i++) {
        const ampc_value *v = g->values[i];
        parent[i] = i;
        def[i] = -1;
        last[i] = -1;
        root_flags[i] = (int32_t)(v->flags & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT));
        if (is_constant(v) && !(v->flags & AMPC_VALUE_INPUT)) {
            space[i] = AMPC_MEM_WEIGHTS;
            offset[i] = weights;
            weights = align_up(weights + (int64_t)ampc_ir_nbytes(v));
        }
    }

    /* Lifetimes of individual values: last use per value (pass 1), so in-place decisions can
     * ask whether a node is an input's last reader. A node of a fused chain reads at the
     * position of the last of the kernels that compute it (at[k]): its chain's last node, or,
     * for a view every reader reads through, the latest of its readers' (reached[v]: the
     * latest position reading v, complete once the walk backwards reaches v's producer). */
    int32_t *at = ampc_xmalloc((size_t)(g->n_nodes + 1) * sizeof *at);
    int32_t *reached = ampc_xmalloc((size_t)(nv + 1) * sizeof *reached);
    int32_t pos = 0;
    for (int32_t k = 0; k < g->n_nodes; k++) at[k] = g->nodes[k]->dead ? -1 : pos++;
    for (int32_t i = 0; i < nv; i++) reached[i] = -1;
    for (int32_t k = g->n_nodes - 1; k >= 0; k--) {
        const ampc_node *n = g->nodes[k];
        if (n->dead) continue;
        if (n->n_outputs == 1 && (n->outputs[0]->flags & AMPC_VALUE_FUSED))
            at[k] = reached[n->outputs[0]->id];
        for (int32_t j = 0; j < n->n_inputs; j++) {
            const ampc_value *in = n->inputs[j];
            if (in && at[k] > reached[in->id]) reached[in->id] = at[k];
        }
    }
    pos = 0;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ampc_node *n = g->nodes[k];
        if (n->dead) continue;
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] && at[k] > last[n->inputs[j]->id]) last[n->inputs[j]->id] = at[k];
        for (int32_t j = 0; j < n->n_outputs; j++) def[n->outputs[j]->id] = pos;
        pos++;
    }
    free(at);
    free(reached);
    const ampc_status loops = extend_over_loops(g, def, last);
    int32_t end = pos;
    for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]->id] = end;
    /* The last use of each buffer, kept per root as values join it. */
    int32_t *root_last = ampc_xmalloc((size_t)(nv + 1) * sizeof *root_last);
    memcpy(root_last, last, (size_t)nv * sizeof *last);

    /* 2. sharing: views alias their input, elementwise nodes may work in place */
    pos = 0;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ampc_node *n = g->nodes[k];
        if (n->dead) continue;
        const ampc_value *y = n->n_outputs ? n->outputs[0] : NULL;
        const ampc_value *x = n->n_inputs ? n->inputs[0] : NULL;
        if (y && x && ampc_op_has(n->op, T_VIEW) &&
            !(y->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) &&
            ampc_ir_nbytes(x) == ampc_ir_nbytes(y)) {
            if (space[x->id] == AMPC_MEM_WEIGHTS) {
                space[y->id] = AMPC_MEM_WEIGHTS; /* a view of a constant reads the weights */
                offset[y->id] = offset[x->id];
            } else {
                int32_t r = find(parent, x->id);
                parent[y->id] = r;
                root_flags[r] |= (int32_t)(y->flags & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT));
                if (last[y->id] > root_last[r]) root_last[r] = last[y->id];
            }
        } else if (y && !(y->flags & AMPC_VALUE_FUSED)) {
            for (int32_t j = 0; j < n->n_inputs; j++) {
                const ampc_value *in = n->inputs[j];
                if (!in || space[in->id] == AMPC_MEM_WEIGHTS || (in->flags & AMPC_VALUE_FUSED))
                    continue;
                int32_t r = find(parent, in->id);
                /* the whole buffer (every value sharing it) must end here */
                if (root_last[r] == pos && can_reuse(n, in, last, root_flags[r], pos) &&
                    !reads_elsewhere(n, parent, r)) {
                    parent[y->id] = r;
                    if (last[y->id] > root_last[r]) root_last[r] = last[y->id];
                    break;
                }
            }
        }
        pos++;
    }

    /* 3. buffers: one per root, lifetime the union of its values' */
    buffer *bufs = ampc_xcalloc((size_t)nv + 1, sizeof *bufs);
    int32_t *buf_of = ampc_xmalloc((size_t)(nv + 1) * sizeof *buf_of);
    int32_t nb = 0;
    for (int32_t i = 0; i < nv; i++) buf_of[i] = -1;
    for (int32_t i = 0; i < nv; i++) {
        const ampc_value *v = g->values[i];
        if (space[i] == AMPC_MEM_WEIGHTS || (v->flags & (AMPC_VALUE_POISON | AMPC_VALUE_FUSED)))
            continue;
        int32_t r = find(parent, i);
        if (buf_of[r] < 0) {
            buf_of[r] = nb;
            bufs[nb++] = (buffer){r, def[r], def[r], 0, 0};
        }
        buffer *b = &bufs[buf_of[r]];
        int32_t s = (v->flags & AMPC_VALUE_INPUT) ? -1 : def[i];
        int32_t e = last[i] < s ? s : last[i];
        if (s < b->start) b->start = s;
        if (e > b->end) b->end = e;
        int64_t bytes = (int64_t)ampc_ir_nbytes(v);
        if (bytes > b->bytes) b->bytes = bytes;
    }
    for (int32_t i = 0; i < nb; i++)
        if (root_flags[bufs[i].root] & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT))
            bufs[i].start = -1, bufs[i].end = end;

    /* 4. placement, largest first */
    qsort(bufs, (size_t)nb, sizeof *bufs, cmp_buffers);
    for (int32_t i = 0; i < nb; i++) buf_of[bufs[i].root] = i;
    buffer **live = ampc_xmalloc((size_t)(nb + 1) * sizeof *live);
    int64_t arena = 0;
    for (int32_t i = 0; i < nb; i++) {
        buffer *b = &bufs[i];
        int32_t k = 0;
        for (int32_t j = 0; j < i; j++)
            if (bufs[j].start <= b->end && b->start <= bufs[j].end) live[k++] = &bufs[j];
        qsort(live, (size_t)k, sizeof *live, cmp_offsets);
        int64_t at = 0, need = align_up(b->bytes ? b->bytes : 1);
        for (int32_t j = 0; j < k; j++) {
            if (live[j]->offset >= at + need) break;
            int64_t e = align_up(live[j]->offset + (live[j]->bytes ? live[j]->bytes : 1));
            if (e > at) at = e;
        }
        b->offset = at;
        if (at + need > arena) arena = at + need;
    }

    *changed = g->arena_bytes != arena || g->weights_bytes != weights;
    for (int32_t i = 0; i < nv; i++) {
        ampc_value *v = g->values[i];
        uint8_t sp = space[i];
        int64_t off = offset[i];
        if (sp != AMPC_MEM_WEIGHTS && !(v->flags & (AMPC_VALUE_POISON | AMPC_VALUE_FUSED))) {
            sp = AMPC_MEM_ARENA;
            off = bufs[buf_of[find(parent, i)]].offset;
        }
        *changed |= v->mem_space != sp || v->mem_offset != off;
        v->mem_space = sp;
        v->mem_offset = off;
    }
    g->arena_bytes = arena;
    g->weights_bytes = weights;
    free(live);
    free(bufs);
    free(buf_of);
    free(parent);
    free(def);
    free(last);
    free(root_last);
    free(root_flags);
    free(space);
    free(offset);
    return loops;
}

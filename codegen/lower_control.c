/*
 * lower_control.c — control flow in a GPU plan (ir/infer/control.c, ir/ref/control.c).
 *
 * A GPU build's flatten-control pass (passes/flatten_control.c) writes the control flow that is
 * known when compiling into the graph (unrolled loops and scans, an If's branches selected by
 * Where), which needs no step of its own. A Loop whose stop depends on data, whose trip count is
 * computed at run time or is too long to unroll becomes its body between an ampc.LoopBegin and an
 * ampc.LoopEnd (ir/subgraph.h), whose steps make the plan run the body's steps again:
 *
 *   LoopBegin   copies of the first carried values into the loop's state s_j; a one-thread kernel
 *               setting iter = 0 and go = (M > 0) && cond; a jump past the loop when go is 0.
 *   (the body's steps, which read iter and s_j)
 *   LoopEnd     copies of what the body returns (o_j) into s_j; a one-thread kernel setting
 *               iter += 1 and go = cond_out && iter < M; the jump back to the body's first step
 *               while go is set (at most the graph's max_loop_iterations iterations, else the run
 *               fails naming the Loop); then, where the entry jump lands, copies of s_j into the
 *               Loop's outputs.
 *
 * The copies into the state are one parallel assignment: a returned value whose bytes are another
 * state's, the iteration number's or go's (a body that returns its carried values swapped, or
 * its iteration number, through views) goes through scratch first, and so does cond_out when a
 * copy overwrites it. An If, Loop or Scan the flatten-control pass leaves (bodies holding control
 * flow or a random op, a Loop with scan outputs too long to unroll) has no GPU lowering: its row's
 * kind is REFERENCE.
 */
#include "codegen.h"
#include "ir/subgraph.h"

#include <stdio.h>
#include <string.h>

static int64_t align16(int64_t x) { return (x + 15) & ~(int64_t)15; }

static bool overlaps(ampc_rt_ref a, ampc_rt_ref b) {
    return a.space == AMPC_RT_ARENA && b.space == AMPC_RT_ARENA && a.bytes > 0 && b.bytes > 0 &&
           a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

static bool same_ref(ampc_rt_ref a, ampc_rt_ref b) {
    return a.space == b.space && a.offset == b.offset && a.bytes == b.bytes;
}

/* Whether ref r shares bytes with one of LoopBegin b's outputs other than output `except`. */
static bool overlaps_marks(ampc_cg *cg, const ampc_node *b, ampc_rt_ref r, int32_t except) {
    for (int32_t i = 0; i < b->n_outputs; i++)
        if (i != except && overlaps(r, ampc_cg_ref(cg, b->outputs[i]))) return true;
    return false;
}

/* The one-thread kernel of a mark: iter = 0 (first) or iter + 1; go = whether the condition at
 * cond (absent: true) holds and iter < M (absent: no bound). */
static ampc_status lower_counter(ampc_cg *cg, const ampc_node *n, const ampc_node *b,
                                 const ampc_value *m, ampc_rt_ref cond, bool first) {
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, first ? "loop_begin" : "loop_next");
    const char *pi = ampc_cg_param(k, b->outputs[AMPC_LOOP_ITER], true);
    const char *pg = ampc_cg_param(k, b->outputs[AMPC_LOOP_GO], true);
    const char *pm = m ? ampc_cg_param(k, m, false) : NULL;
    const char *pc = cond.bytes ? ampc_cg_param_ref(k, cond, "unsigned char", false) : NULL;
    ampc_cg_grid_loop(k, 1);
    if (first) ampc_cg_line(k, "const long long it = 0;");
    else ampc_cg_line(k, "const long long it = %s[0] + 1;", pi);
    ampc_cg_line(k, "%s[0] = it;", pi);
    char c[64] = "true", lim[64] = "true";
    if (pc) snprintf(c, sizeof c, "%s[0] != 0", pc);
    if (pm) snprintf(lim, sizeof lim, "it < (long long)%s[0]", pm);
    ampc_cg_line(k, "%s[0] = (%s) && (%s);", pg, c, lim);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, 1, 32);
}

static ampc_status lower_begin(ampc_cg *cg, const ampc_node *n) {
    const int32_t N = ampc_loop_carried(n);
    for (int32_t j = 0; j < N; j++) {
        ampc_status st = ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, n->inputs[2 + j]),
                                           ampc_cg_ref(cg, n->outputs[AMPC_LOOP_STATE + j]));
        if (st != AMPC_OK) return st;
    }
    const ampc_value *cond = n->inputs[1];
    ampc_status st = lower_counter(cg, n, n, n->inputs[0],
                                   cond ? ampc_cg_ref(cg, cond) : (ampc_rt_ref){0}, true);
    return st != AMPC_OK ? st : ampc_cg_loop_open(cg, n, ampc_cg_ref(cg, n->outputs[AMPC_LOOP_GO]));
}

static ampc_status lower_end(ampc_cg *cg, const ampc_node *n) {
    const ampc_node *b = ampc_loop_begin_of(n);
    const int32_t N = ampc_loop_carried(n);
    ampc_graph *g = ampc_cg_graph(cg);
    if (!b || ampc_loop_carried(b) != N)
        return AMPC_FAIL(g, n, AMPC_E_INTERNAL, "a LoopEnd without its LoopBegin");
    /* what goes through scratch: returned values whose bytes a copy overwrites, the condition */
    ampc_rt_ref src[256], dst[256];
    bool staged[256];
    if (N > 256)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "%d loop-carried values, at most 256", N);
    int64_t at = 0;
    for (int32_t j = 0; j < N; j++) {
        src[j] = ampc_cg_ref(cg, n->inputs[4 + j]);
        dst[j] = ampc_cg_ref(cg, b->outputs[AMPC_LOOP_STATE + j]);
        staged[j] = !same_ref(src[j], dst[j]) &&
                    (overlaps(src[j], dst[j]) ||
                     overlaps_marks(cg, b, src[j], AMPC_LOOP_STATE + j));
        if (staged[j]) at = align16(at) + src[j].bytes;
    }
    const ampc_value *cv = n->inputs[3];
    ampc_rt_ref cond = cv ? ampc_cg_ref(cg, cv) : (ampc_rt_ref){0};
    const bool stage_cond = cv && overlaps_marks(cg, b, cond, -1);
    const int64_t cond_at = align16(at);
    if (stage_cond) at = cond_at + cond.bytes;
    const ampc_rt_ref scratch = at ? ampc_cg_scratch(cg, at) : (ampc_rt_ref){0};
    ampc_status st = AMPC_OK;
    int64_t off = 0;
    for (int32_t j = 0; j < N && st == AMPC_OK; j++) {
        if (!staged[j]) continue;
        off = align16(off);
        ampc_rt_ref tmp = {AMPC_RT_ARENA, scratch.offset + off, src[j].bytes};
        st = ampc_cg_step_copy(cg, n, src[j], tmp);
        src[j] = tmp;
        off += tmp.bytes;
    }
    if (st == AMPC_OK && stage_cond) {
        ampc_rt_ref tmp = {AMPC_RT_ARENA, scratch.offset + cond_at, cond.bytes};
        st = ampc_cg_step_copy(cg, n, cond, tmp);
        cond = tmp;
    }
    for (int32_t j = 0; j < N && st == AMPC_OK; j++) st = ampc_cg_step_copy(cg, n, src[j], dst[j]);
    if (st == AMPC_OK) st = lower_counter(cg, n, b, n->inputs[2], cond, false);
    const int64_t limit = g->max_loop_iterations > 0 ? g->max_loop_iterations
                                                     : AMPC_DEFAULT_MAX_LOOP_ITERATIONS;
    if (st == AMPC_OK)
        st = ampc_cg_loop_close(cg, n, ampc_cg_ref(cg, b->outputs[AMPC_LOOP_GO]), limit);
    for (int32_t j = 0; j < N && st == AMPC_OK; j++)
        st = ampc_cg_step_copy(cg, n, dst[j], ampc_cg_ref(cg, n->outputs[j]));
    return st;
}

ampc_status ampc_cg_lower_control(ampc_cg *cg, const ampc_node *n) {
    if (n->op == AMPC_OP_LOOP_BEGIN) return lower_begin(cg, n);
    if (n->op == AMPC_OP_LOOP_END) return lower_end(cg, n);
    return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_INTERNAL, "%s is not a Loop's mark",
                     ampc_op_get(n->op)->onnx);
}

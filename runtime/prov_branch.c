/*
 * prov_branch.c — jumps (AMPC_RT_STEP_BRANCH, runtime/plan.h): the entry and the back edge of a
 * Loop whose stop depends on data (codegen/lower_control.c). A jump's launch copies its flag into
 * pinned host memory and waits for the stream; rt_model_launch_steps then asks rt_branch_next
 * which step comes next. A plan with a jump runs its steps one by one (model.c turns the CUDA
 * graph off for it: a capture cannot wait for a flag).
 */
#include "runtime/internal.h"

#include <stdlib.h>

typedef struct branch_state {
    const void *flag; /* device */
    int32_t *host;    /* pinned: the flag as the last launch read it */
} branch_state;

static ampc_status branch_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                   rt_err *e) {
    (void)ctx;
    const ampc_rt_branch *b = &s->branch;
    if (rt_check_ref(p, b->flag, "jump flag", false, false, e) != AMPC_OK) return e->status;
    if (b->flag.space != AMPC_RT_ARENA || b->flag.bytes != 4 || b->flag.offset % 4 != 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "a jump's flag must be one int32 in the arena, got "
                       "%lld bytes at offset %lld", (long long)b->flag.bytes,
                       (long long)b->flag.offset);
    if (b->target < 0 || b->target > p->n_steps)
        return rt_fail(e, AMPC_E_INVALID_ARG, "a jump to step %d of a plan of %d steps",
                       b->target, p->n_steps);
    if (b->limit < 1)
        return rt_fail(e, AMPC_E_INVALID_ARG, "a jump's iteration limit is %lld, expected >= 1",
                       (long long)b->limit);
    if (p->n_ranks > 1)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "a jump in a plan of %d GPUs", p->n_ranks);
    return AMPC_OK;
}

static ampc_status branch_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                               rt_err *e) {
    *workspace = 0;
    branch_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    *state = st;
    st->flag = rt_ref_ptr(ctx, s->branch.flag);
    RT_CUDA(e, cudaHostAlloc((void **)&st->host, sizeof *st->host, cudaHostAllocDefault));
    *st->host = 0;
    return AMPC_OK;
}

static ampc_status branch_rebind(rt_ctx *ctx, const ampc_rt_step *s, void *state, rt_err *e) {
    (void)e;
    ((branch_state *)state)->flag = rt_ref_ptr(ctx, s->branch.flag);
    return AMPC_OK;
}

static ampc_status branch_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx;
    branch_state *st = state;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    RT_CUDA(e, cudaStreamIsCapturing(stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "a jump (a Loop whose stop depends on data) waits "
                       "for its flag on the host, which a CUDA graph capture cannot");
    RT_CUDA(e, cudaMemcpyAsync(st->host, st->flag, sizeof *st->host, cudaMemcpyDeviceToHost,
                               stream));
    RT_CUDA(e, cudaStreamSynchronize(stream));
    return AMPC_OK;
}

static void branch_release(rt_ctx *ctx, void *state) {
    (void)ctx;
    branch_state *st = state;
    if (st && st->host) (void)cudaFreeHost(st->host);
    free(st);
}

int32_t rt_branch_next(const ampc_rt_step *s, int32_t i, const void *state, int64_t *back,
                       rt_err *e) {
    const ampc_rt_branch *b = &s->branch;
    const bool set = *((const branch_state *)state)->host != 0;
    if (set != (b->jump_if_set != 0)) {
        if (b->target <= i) *back = 0; /* the loop is done */
        return i + 1;
    }
    if (b->target > i) return b->target;
    if (++*back >= b->limit) {
        rt_fail(e, AMPC_E_EVAL, "the loop ran more than %lld iterations (its stop depends on "
                "data); compile with a higher --max-loop-iterations to allow more",
                (long long)b->limit);
        return -1;
    }
    return b->target;
}

const rt_provider rt_provider_branch = {
    .name = "jump",
    .supports = branch_supports,
    .plan = branch_plan,
    .launch = branch_launch,
    .release = branch_release,
    .rebind = branch_rebind,
};

/*
 * check.c — validating a plan on the host, before any GPU work: the version, every ref against
 * the buffer it points into, the graph inputs and outputs, the kernel images, and each step
 * against its provider's static rules. A plan is produced by ampc's code generator, so a failure
 * here is usually a codegen bug; the message names the step and the broken rule so it is quick
 * to find. Runs without a GPU (codegen's tests call it through ampc_rt_plan_check).
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <string.h>

static const char *space_name(uint8_t s) {
    return s == AMPC_RT_ARENA ? "arena" : s == AMPC_RT_WEIGHTS ? "weights" : "?";
}

ampc_status rt_check_ref(const ampc_rt_plan *p, ampc_rt_ref r, const char *what, bool writable,
                         bool optional, rt_err *e) {
    if (r.bytes == 0 && optional) return AMPC_OK;
    if (r.space != AMPC_RT_ARENA && r.space != AMPC_RT_WEIGHTS)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has space %u, expected 0 (arena) or 1 (weights)",
                       what, r.space);
    if (writable && r.space == AMPC_RT_WEIGHTS)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s is written but lies in the read-only weights",
                       what);
    int64_t cap = r.space == AMPC_RT_ARENA ? p->arena_bytes : p->weights_bytes, end;
    if (r.offset < 0 || r.bytes < 0 || __builtin_add_overflow(r.offset, r.bytes, &end) || end > cap)
        return rt_fail(e, AMPC_E_INVALID_ARG,
                       "%s [%lld, +%lld bytes) lies outside the %s (%lld bytes)", what,
                       (long long)r.offset, (long long)r.bytes, space_name(r.space),
                       (long long)cap);
    return AMPC_OK;
}

ampc_status rt_check_ref_size(ampc_rt_ref r, const char *what, int64_t need, int64_t align,
                              rt_err *e) {
    if (r.bytes < need)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s holds %lld bytes, its shape needs %lld", what,
                       (long long)r.bytes, (long long)need);
    if (align > 1 && r.offset % align != 0)
        return rt_fail(e, AMPC_E_INVALID_ARG,
                       "%s starts at offset %lld, not a multiple of its element size %lld", what,
                       (long long)r.offset, (long long)align);
    return AMPC_OK;
}

/* A graph input or output descriptor: a name, a real dtype, a shape whose bytes are exactly the
 * ref's (runs copy ref.bytes), and inputs in the arena (every run writes them). */
static ampc_status check_io(const ampc_rt_plan *p, const ampc_rt_io *io, bool is_out, int32_t i,
                            rt_err *e) {
    const char *kind = is_out ? "output" : "input";
    char what[160], sh[200];
    snprintf(what, sizeof what, "%s %d '%s'", kind, i, io->name ? io->name : "");
    if (io->name == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has no name", what);
    size_t es = rt_dtype_size(io->dtype);
    if (es == 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has dtype %d, not a valid ampc_dtype", what,
                       (int)io->dtype);
    int64_t n, bytes;
    if (!rt_shape_numel(&io->shape, &n) || __builtin_mul_overflow(n, (int64_t)es, &bytes))
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has an invalid shape (rank %d)", what,
                       io->shape.rank);
    if (io->ref.bytes != bytes)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has a ref of %lld bytes, but %s %s needs %lld",
                       what, (long long)io->ref.bytes, rt_dtype_name(io->dtype),
                       rt_shape_str(&io->shape, sh, sizeof sh), (long long)bytes);
    /* inputs are written by every run; an output may be a constant read from the weights */
    if (!is_out && io->ref.space != AMPC_RT_ARENA && bytes > 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s lies in the weights; inputs live in the arena",
                       what);
    /* the model's io of a batch split describe the caller's whole tensors: the ranks' own io
     * (checked with each rank) say where their rows go */
    if ((p->split_batch || p->micro_batches > 0) && p->ranks != NULL) return AMPC_OK;
    return rt_check_ref(p, io->ref, what, false, true, e);
}

/* The images: units exist, data is there, PTX is NUL-terminated, every unit has one. */
static ampc_status check_images(const ampc_rt_plan *p, rt_err *e) {
    if (p->n_units < 0 || p->n_images < 0 || (p->n_images > 0 && p->images == NULL))
        return rt_fail(e, AMPC_E_INVALID_ARG, "plan has %d units and %d images (images %s)",
                       p->n_units, p->n_images, p->images ? "set" : "NULL");
    for (int32_t i = 0; i < p->n_images; i++) {
        const ampc_rt_image *im = &p->images[i];
        if (im->unit < 0 || im->unit >= p->n_units)
            return rt_fail(e, AMPC_E_INVALID_ARG, "image %d names unit %d; the plan has %d units",
                           i, im->unit, p->n_units);
        if (im->kind != AMPC_RT_IMAGE_PTX && im->kind != AMPC_RT_IMAGE_CUBIN)
            return rt_fail(e, AMPC_E_INVALID_ARG, "image %d has kind %u, expected 0 (PTX) or 1 "
                           "(cubin)", i, im->kind);
        if (im->data == NULL || im->size <= 0)
            return rt_fail(e, AMPC_E_INVALID_ARG, "image %d (unit %d) is empty", i, im->unit);
        if (im->kind == AMPC_RT_IMAGE_PTX && memchr(im->data, 0, (size_t)im->size) == NULL)
            return rt_fail(e, AMPC_E_INVALID_ARG, "image %d (unit %d): PTX text is not "
                           "NUL-terminated within its %lld bytes", i, im->unit,
                           (long long)im->size);
    }
    for (int32_t u = 0; u < p->n_units; u++) {
        bool found = false;
        for (int32_t i = 0; i < p->n_images && !found; i++) found = p->images[i].unit == u;
        if (!found)
            return rt_fail(e, AMPC_E_INVALID_ARG, "unit %d has no image (neither PTX nor cubin)", u);
    }
    return AMPC_OK;
}

/* Everything but the steps' provider rules. */
static ampc_status check_plan_shell(const ampc_rt_plan *p, rt_err *e) {
    if (p->version != AMPC_RT_PLAN_VERSION)
        return rt_fail(e, AMPC_E_INVALID_ARG, "plan version %d: this runtime reads version %d "
                       "(regenerate the model with this ampc)", p->version, AMPC_RT_PLAN_VERSION);
    if (p->arena_bytes < 0 || p->weights_bytes < 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "plan has arena_bytes %lld and weights_bytes %lld",
                       (long long)p->arena_bytes, (long long)p->weights_bytes);
    if (p->weights_bytes > 0 && p->weights == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "plan has %lld bytes of weights but no weights data",
                       (long long)p->weights_bytes);
    if (p->n_steps < 0 || (p->n_steps > 0 && p->steps == NULL) || p->n_inputs < 0 ||
        (p->n_inputs > 0 && p->inputs == NULL) || p->n_outputs < 0 ||
        (p->n_outputs > 0 && p->outputs == NULL))
        return rt_fail(e, AMPC_E_INVALID_ARG, "plan has %d steps, %d inputs and %d outputs but an "
                       "array is missing", p->n_steps, p->n_inputs, p->n_outputs);
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (check_io(p, &p->inputs[i], false, i, e) != AMPC_OK) return e->status;
    for (int32_t i = 0; i < p->n_outputs; i++)
        if (check_io(p, &p->outputs[i], true, i, e) != AMPC_OK) return e->status;
    return check_images(p, e);
}

void rt_step_prefix(rt_err *e, const ampc_rt_step *s, int32_t i) {
    if (s->label && *s->label)
        rt_err_prefix(e, "step %d (%s): ", i, s->label);
    else
        rt_err_prefix(e, "step %d: ", i);
}

int64_t rt_span_bytes(int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols,
                      int64_t elem) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
    int64_t a, b, c;
    if (__builtin_mul_overflow(batch - 1, stride, &a) ||
        __builtin_mul_overflow(rows - 1, ld, &b) || __builtin_add_overflow(a, b, &c) ||
        __builtin_add_overflow(c, cols, &c) || __builtin_mul_overflow(c, elem, &c))
        return INT64_MAX;
    return c;
}

const rt_provider *rt_provider_for(uint8_t kind) {
    static const rt_provider *const providers[] = {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) \
    [AMPC_RT_STEP_##KIND] = &rt_provider_##provider,
#include "runtime/steps.def"
    };
    return kind < AMPC_RT_STEP_KINDS ? providers[kind] : NULL;
}

/* The whole static check: the plan's shell, then each step through its provider's supports()
 * with no context (no GPU, no library needed). The first failure wins and is prefixed with the
 * step; malformed plans (AMPC_E_INVALID_ARG) also get "invalid plan: " so that a codegen bug
 * reads as one. */
/* Rank r's plan against the model's: the same inputs and outputs (every rank takes them) and
 * the same all-reduces in the same order (each pairs with the other ranks'). */
static ampc_status check_rank_peer(const ampc_rt_plan *p, const ampc_rt_plan *q, int32_t r,
                                   rt_err *e) {
    if (q->rank != r || q->n_ranks != p->n_ranks || q->ranks != NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "ranks[%d] says it is rank %d of %d (ranks %s), "
                       "expected rank %d of %d with ranks NULL", r, q->rank, q->n_ranks,
                       q->ranks ? "set" : "NULL", r, p->n_ranks);
    bool same = q->n_inputs == p->n_inputs && q->n_outputs == p->n_outputs;
    for (int32_t i = 0; same && i < p->n_inputs + p->n_outputs; i++) {
        const ampc_rt_io *a = i < p->n_inputs ? &p->inputs[i] : &p->outputs[i - p->n_inputs];
        const ampc_rt_io *b = i < p->n_inputs ? &q->inputs[i] : &q->outputs[i - p->n_inputs];
        same = a->dtype == b->dtype && a->ref.bytes == b->ref.bytes &&
               a->shape.rank == b->shape.rank &&
               !memcmp(a->shape.dims, b->shape.dims, (size_t)a->shape.rank * sizeof *a->shape.dims);
    }
    if (!same)
        return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d's inputs or outputs differ from rank 0's",
                       r);
    int32_t i = 0, j = 0;
    for (;;) {
        while (i < p->n_steps && p->steps[i].kind != AMPC_RT_STEP_ALLREDUCE) i++;
        while (j < q->n_steps && q->steps[j].kind != AMPC_RT_STEP_ALLREDUCE) j++;
        if (i == p->n_steps || j == q->n_steps) break;
        const ampc_rt_allreduce *a = &p->steps[i].allreduce, *b = &q->steps[j].allreduce;
        if (a->dtype != b->dtype || a->count != b->count)
            return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d's step %d (all-reduce of %lld %s) "
                           "pairs with rank 0's step %d, an all-reduce of %lld %s", r, j,
                           (long long)b->count, rt_dtype_name(b->dtype), i, (long long)a->count,
                           rt_dtype_name(a->dtype));
        i++, j++;
    }
    if (i != p->n_steps || j != q->n_steps)
        return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d has a different number of all-reduce "
                       "steps than rank 0", r);
    return AMPC_OK;
}

static ampc_status check_parts_io(const ampc_rt_plan *p, const ampc_rt_plan *q, int32_t r,
                                  int64_t n, const char *parts, rt_err *e);

/* Rank r's plan against the model's when the ranks split the batch: each input and output is
 * the model's with dim 0 (and the bytes) divided by the number of ranks, and no rank has an
 * all-reduce (the ranks never talk). */
static ampc_status check_batch_peer(const ampc_rt_plan *p, const ampc_rt_plan *q, int32_t r,
                                    rt_err *e) {
    if (q->rank != r || q->n_ranks != p->n_ranks || q->ranks != NULL || !q->split_batch)
        return rt_fail(e, AMPC_E_INVALID_ARG, "ranks[%d] says it is rank %d of %d (ranks %s, "
                       "split_batch %u), expected rank %d of %d with ranks NULL and split_batch 1",
                       r, q->rank, q->n_ranks, q->ranks ? "set" : "NULL", q->split_batch, r,
                       p->n_ranks);
    ampc_status st = check_parts_io(p, q, r, p->n_ranks, "ranks", e);
    if (st != AMPC_OK) return st;
    for (int32_t j = 0; j < q->n_steps; j++)
        if (q->steps[j].kind == AMPC_RT_STEP_ALLREDUCE || q->steps[j].kind == AMPC_RT_STEP_PEER_COPY)
            return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d's step %d is an %s, but the "
                           "ranks split the batch and never exchange data", r, j,
                           q->steps[j].kind == AMPC_RT_STEP_ALLREDUCE ? "all-reduce" : "peer copy");
    return AMPC_OK;
}

/* Rank r's inputs and outputs against the model's when the caller's tensors are n parts of
 * them (`parts` says of what): each is the model's with dim 0 (and the bytes) divided by n. */
static ampc_status check_parts_io(const ampc_rt_plan *p, const ampc_rt_plan *q, int32_t r,
                                  int64_t n, const char *parts, rt_err *e) {
    if (q->n_inputs != p->n_inputs || q->n_outputs != p->n_outputs)
        return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d has %d inputs and %d outputs, the model "
                       "%d and %d", r, q->n_inputs, q->n_outputs, p->n_inputs, p->n_outputs);
    for (int32_t i = 0; i < p->n_inputs + p->n_outputs; i++) {
        const ampc_rt_io *a = i < p->n_inputs ? &p->inputs[i] : &p->outputs[i - p->n_inputs];
        const ampc_rt_io *b = i < p->n_inputs ? &q->inputs[i] : &q->outputs[i - p->n_inputs];
        int64_t rows = 0, bytes = 0; /* the rank's dim 0 and bytes times n, unless they overflow */
        bool whole = n == 1 && a->shape.rank == 0; /* one part: a scalar is fine */
        bool same = a->dtype == b->dtype && a->shape.rank == b->shape.rank &&
                    (whole || (a->shape.rank > 0 &&
                               !__builtin_mul_overflow(n, b->shape.dims[0], &rows) &&
                               !__builtin_mul_overflow(n, b->ref.bytes, &bytes) &&
                               a->shape.dims[0] == rows && a->ref.bytes == bytes));
        for (int32_t d = 1; same && d < a->shape.rank; d++)
            same = a->shape.dims[d] == b->shape.dims[d];
        if (!same) {
            char sa[200], sb[200];
            return rt_fail(e, AMPC_E_INVALID_ARG, "%s '%s' is %s for the model and %s for rank "
                           "%d, expected dim 0 divided by the %lld %s and nothing else changed",
                           i < p->n_inputs ? "input" : "output", a->name ? a->name : "",
                           rt_shape_str(&a->shape, sa, sizeof sa),
                           rt_shape_str(&b->shape, sb, sizeof sb), r, (long long)n, parts);
        }
    }
    return AMPC_OK;
}

/* Rank r's plan against the model's in a pipeline: one micro-batch of every input and output,
 * no all-reduce, and peer copies only first and only from rank r - 1 (rank 0 has none). */
static ampc_status check_pipe_peer(const ampc_rt_plan *p, const ampc_rt_plan *q, int32_t r,
                                   rt_err *e) {
    if (q->rank != r || q->n_ranks != p->n_ranks || q->ranks != NULL || q->split_batch ||
        q->micro_batches != p->micro_batches)
        return rt_fail(e, AMPC_E_INVALID_ARG, "ranks[%d] says it is rank %d of %d (ranks %s, "
                       "split_batch %u, micro_batches %d), expected rank %d of %d with ranks "
                       "NULL, split_batch 0 and micro_batches %d", r, q->rank, q->n_ranks,
                       q->ranks ? "set" : "NULL", q->split_batch, q->micro_batches, r,
                       p->n_ranks, p->micro_batches);
    ampc_status st = check_parts_io(p, q, r, p->micro_batches, "micro-batches", e);
    if (st != AMPC_OK) return st;
    bool computed = false;
    for (int32_t j = 0; j < q->n_steps; j++) {
        const ampc_rt_step *s = &q->steps[j];
        if (s->kind == AMPC_RT_STEP_ALLREDUCE)
            return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d's step %d is an all-reduce, but a "
                           "pipeline's stages only hand values on", r, j);
        if (s->kind != AMPC_RT_STEP_PEER_COPY) {
            computed = true;
            continue;
        }
        if (computed || r == 0 || s->peer.from != r - 1)
            return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d's step %d copies from rank %d%s; a "
                           "stage's peer copies come first and from the stage before it (rank "
                           "%d)", r, j, s->peer.from, computed ? " after computing steps" : "",
                           r - 1);
        /* the copy reads the sender's arena: its bounds, not this rank's */
        char what[64];
        snprintf(what, sizeof what, "step %d's peer copy src (rank %d's arena)", j, r - 1);
        if (rt_check_ref(&p->ranks[r - 1], s->peer.src, what, false, false, e) != AMPC_OK)
            return e->status;
    }
    return AMPC_OK;
}

/* The steps of one plan through their providers' static rules. */
static ampc_status check_steps(const ampc_rt_plan *p, rt_err *e) {
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_provider *pv = rt_provider_for(p->steps[i].kind);
        if (pv == NULL)
            rt_fail(e, AMPC_E_INVALID_ARG, "unknown step kind %u", p->steps[i].kind);
        else if (pv->supports(NULL, p, &p->steps[i], e) == AMPC_OK)
            continue;
        rt_step_prefix(e, &p->steps[i], i);
        if (e->status == AMPC_E_INVALID_ARG) rt_err_prefix(e, "invalid plan: ");
        return e->status;
    }
    return AMPC_OK;
}

/* A multi-GPU plan: every rank's plan whole, then against rank 0's. */
static ampc_status check_ranks(const ampc_rt_plan *p, rt_err *e) {
    if (p->n_ranks < 0 || (p->n_ranks > 1 && p->rank != 0 && p->ranks != NULL) ||
        p->rank < 0 || (p->rank > 0 && p->rank >= p->n_ranks))
        return rt_fail(e, AMPC_E_INVALID_ARG, "invalid plan: rank %d of %d ranks", p->rank,
                       p->n_ranks);
    if (p->split_batch && p->n_ranks < 2)
        return rt_fail(e, AMPC_E_INVALID_ARG, "invalid plan: split_batch over %d ranks: a batch "
                       "split has 2 ranks or more", p->n_ranks);
    if (p->micro_batches < 0 || (p->micro_batches > 0 && (p->n_ranks < 2 || p->split_batch)))
        return rt_fail(e, AMPC_E_INVALID_ARG, "invalid plan: %d micro-batches over %d ranks%s: a "
                       "pipeline has 2 ranks or more and does not split the batch over them",
                       p->micro_batches, p->n_ranks, p->split_batch ? " with split_batch" : "");
    for (int32_t r = 0; p->ranks != NULL && r < p->n_ranks; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        ampc_status st = check_plan_shell(q, e);
        if (st == AMPC_OK)
            st = p->split_batch      ? check_batch_peer(p, q, r, e)
                 : p->micro_batches ? check_pipe_peer(p, q, r, e)
                                    : check_rank_peer(p, q, r, e);
        if (st != AMPC_OK) {
            rt_err_prefix(e, "invalid plan: rank %d: ", r);
            return e->status;
        }
        if (check_steps(q, e) != AMPC_OK) {
            rt_err_prefix(e, "rank %d: ", r);
            return e->status;
        }
    }
    return AMPC_OK;
}

ampc_status rt_plan_check(const ampc_rt_plan *p, rt_err *e) {
    if (check_plan_shell(p, e) != AMPC_OK) {
        rt_err_prefix(e, "invalid plan: ");
        return e->status;
    }
    if (check_steps(p, e) != AMPC_OK) return e->status;
    return check_ranks(p, e);
}

ampc_status ampc_rt_plan_check(const ampc_rt_plan *plan, char **err) {
    rt_err e = {0};
    if (plan == NULL)
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_plan_check: plan is NULL");
    else
        rt_plan_check(plan, &e);
    return rt_err_give(&e, err);
}

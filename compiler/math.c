/*
 * math.c — what a build computes differently from the model as written (see math.h).
 */
#include "compiler/math.h"

#include <string.h>

/* The type node n computes in: its first float output's. */
static ampc_dtype float_out(const ampc_node *n) {
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (ampc_dtype_is_float(n->outputs[i]->dtype)) return n->outputs[i]->dtype;
    return AMPC_DTYPE_UNDEFINED;
}

/* Whether step s multiplies f32 operands with TF32 math. */
static bool tf32_step(const ampc_rt_step *s) {
    if (s->kind == AMPC_RT_STEP_GEMM)
        return s->gemm.dtype_ab == AMPC_DTYPE_F32 && s->gemm.math == AMPC_RT_MATH_TF32;
    return s->kind == AMPC_RT_STEP_CONV && s->conv.dtype == AMPC_DTYPE_F32 &&
           s->conv.math == AMPC_RT_MATH_TF32;
}

/* The f32 contractions and convolutions of g (what runs on TF32 math without a plan to ask). */
static int32_t tf32_graph(const ampc_graph *g) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *x = g->nodes[i];
        n += !x->dead && ampc_op_has(x->op, T_CONTRACT | T_CONV) && x->n_inputs > 1 &&
             x->inputs[0] && x->inputs[0]->dtype == AMPC_DTYPE_F32;
    }
    return n;
}

/* The plan's TF32 steps counted by node: the GEMMs of one batched product count once. */
static int32_t tf32_nodes(const ampc_rt_plan *p) {
    int32_t n = 0;
    const char *last = NULL;
    for (int32_t i = 0; p && i < p->n_steps; i++) {
        const ampc_rt_step *s = &p->steps[i];
        if (!tf32_step(s)) continue;
        n += !(last && s->label && !strcmp(last, s->label));
        last = s->label;
    }
    return n;
}

void ampc_math_collect(const ampc_graph *g, const ampc_pipeline_report *r, const ampc_rt_plan *p,
                       bool tf32, ampc_math_facts *f) {
    memset(f, 0, sizeof *f);
    f->tf32 = p ? tf32_nodes(p) : tf32 ? tf32_graph(g) : 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->prec_why == PREC_WHY_NONE || n->op == AMPC_OP_CAST) continue;
        ampc_dtype t = float_out(n); /* the casts at the edges of the low part are not counted */
        if (t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16) {
            f->low = t;
            f->low_nodes++;
        } else if (t == AMPC_DTYPE_F32) {
            f->kept_f32++;
        }
    }
    double sum = 0;
    for (int32_t i = 0; r && i < r->n_sparse_layers; i++) {
        const ampc_sparse_layer *l = &r->sparse_layers[i];
        if (l->status != SPARSE_WHY_PRUNED) continue;
        double e = l->energy_removed;
        f->energy_min = f->pruned ? AMPC_MIN(f->energy_min, e) : e;
        f->energy_max = f->pruned ? AMPC_MAX(f->energy_max, e) : e;
        sum += e;
        f->pruned++;
    }
    f->energy_mean = f->pruned ? sum / f->pruned : 0;
    f->tanh_gelus = r ? r->n_tanh_gelus : 0;
    f->folded_scales = r ? r->n_folded_scales : 0;
}

static const char *plural(int32_t n, const char *one, const char *many) {
    return n == 1 ? one : many;
}

char *ampc_math_text(const ampc_math_facts *f) {
    ampc_strbuf sb = {0};
    ampc_sb_puts(&sb, "");
    const char *sep = "";
    if (f->tf32) {
        ampc_sb_printf(&sb, "TF32 for %d f32 %s (--precision fp32: off)", f->tf32,
                       plural(f->tf32, "matmul/convolution", "matmuls/convolutions"));
        sep = "; ";
    }
    if (f->low_nodes) {
        ampc_sb_printf(&sb, "%s%s for %d %s declared f32 (%d kept in f32)", sep,
                       ampc_dtype_name(f->low), f->low_nodes, plural(f->low_nodes, "node", "nodes"),
                       f->kept_f32);
        sep = "; ";
    }
    if (f->tanh_gelus) {
        ampc_sb_printf(&sb, "%sGELU's tanh form for %d erf %s (--fast-gelu)", sep, f->tanh_gelus,
                       plural(f->tanh_gelus, "GELU", "GELUs"));
        sep = "; ";
    }
    if (f->pruned) {
        ampc_sb_printf(&sb, "%s2:4 pruning of %d %s (--sparsity prune): %.1f%% to %.1f%% of a "
                       "layer's weight energy removed, %.1f%% on average", sep, f->pruned,
                       plural(f->pruned, "layer", "layers"), 100 * f->energy_min,
                       100 * f->energy_max, 100 * f->energy_mean);
        sep = "; ";
    }
    if (f->folded_scales)
        ampc_sb_printf(&sb, "%s%d scalar %s folded into constant weights", sep, f->folded_scales,
                       plural(f->folded_scales, "product", "products"));
    return ampc_sb_take(&sb);
}

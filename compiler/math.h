/*
 * math.h — what a build computes differently from the model as written, for the `math:` line
 * every compile prints, --report's "math", the library's math string and `ampc inspect`.
 *
 * "Differently" means: the result can differ from computing every op of the model in its
 * declared storage type with one rounding per op. Accumulation order does not count; what does:
 *   - TF32 for f32 matmuls and convolutions (on by default; --precision fp32 turns it off);
 *   - a lower precision for nodes the model declares f32 (--precision fp16|bf16|auto);
 *   - GELU's tanh form computed for an erf GELU (--fast-gelu);
 *   - 2:4 pruning of weights (--sparsity prune), with the weight energy it removed;
 *   - scalar products folded into constant weights (fold-scale: rounded once where the model
 *     rounds twice; listed so that every rewrite of constants is visible).
 */
#ifndef AMPC_COMPILER_MATH_H
#define AMPC_COMPILER_MATH_H

#include "ampc.h"
#include "ir/ir.h"
#include "passes/passes.h" /* ampc_pipeline_report */
#include "runtime/plan.h"

typedef struct ampc_math_facts {
    int32_t tf32;            /* f32 matmuls/convolutions (plan steps, by node) on TF32 math */
    ampc_dtype low;          /* f16 or bf16 when low_nodes > 0 */
    int32_t low_nodes;       /* nodes the precision pass moved from f32 to the low type */
    int32_t kept_f32;        /* nodes it left in f32 (policy, --keep-fp32, range, auto) */
    int32_t tanh_gelus;      /* erf GELUs computed in GELU's tanh form */
    int32_t pruned;          /* layers whose weights 2:4 pruning changed */
    double energy_min, energy_max, energy_mean; /* fraction of a layer's weight energy removed */
    int32_t folded_scales;   /* scalar products folded into weights */
} ampc_math_facts;

/* The facts of optimised graph g, what its pipeline run reported (r; NULL: nothing) and its
 * plan p. Without a plan (an optimised graph not yet
 * compiled: `ampc inspect`, --emit ir) the TF32 count is every f32 contraction and convolution
 * when `tf32`; a plan counts its GEMM and convolution steps on TF32 math, which leaves out the
 * few products code generation runs in its own f32 kernel. */
void ampc_math_collect(const ampc_graph *g, const ampc_pipeline_report *r, const ampc_rt_plan *p,
                       bool tf32, ampc_math_facts *f);
/* One line listing them ("TF32 for 12 f32 matmuls/convolutions; f16 for 80 nodes ..."), or ""
 * when the build computes exactly what the model says; malloc'ed. */
char *ampc_math_text(const ampc_math_facts *f);
#endif /* AMPC_COMPILER_MATH_H */

/*
 * pipeline.c — the pass registry and the runner behind ampc_graph_optimize.
 *
 * The table below is the pipeline: passes run in its order. The runner checks its options first
 * (every name it is given must be a registered pass), verifies the input graph, then runs each
 * pass that is not disabled, tracing one line per pass (name, changed, milliseconds), verifying
 * after it when asked, and dumping the IR after the pass named by dump_after. It stops at the
 * first failure; the diagnostics say which pass failed or left the graph invalid.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const ampc_pass_info pass_table[] = {
    /* control flow first, so that every later pass sees the bodies' nodes */
    {"flatten-control", ampc_pass_flatten_control,
     "for a GPU build, write If, Loop and Scan nodes whose control flow is known when compiling "
     "into the graph: unrolled loops and scans, a branch taken or both selected by Where"},
    /* the batch split first: every later pass (folding the shape arithmetic too) sees one GPU's
     * share of the batch */
    {"partition-data", ampc_pass_partition_data,
     "with --gpus N --partition data, make the graph one GPU's share (B/N rows) of the batch; "
     "with --partition pipeline, one micro-batch"},
    /* ONNX ops a GPU build computes as other ops, written out on one GPU's share of the batch
     * (the shapes they bake are its) and before the passes that fuse what they write */
    {"onnx-attention", ampc_pass_onnx_attention,
     "for a GPU build, make each ONNX Attention an ampc.FusedAttention, with its mask, causal and "
     "window rules, key lengths and present caches as nodes"},
    {"onnx-rotary", ampc_pass_onnx_rotary,
     "for a GPU build, write each ONNX RotaryEmbedding as slices of its pairs, products with the "
     "cached angles and joins"},
    {"onnx-deform-conv", ampc_pass_onnx_deform_conv,
     "for a GPU build, write each 2-D ONNX DeformConv as a GridSample per offset group and a "
     "MatMul by the weights"},
    /* canonicalise: rewrite equivalent forms into one (goes first, when it lands) */
    {"fold", ampc_pass_fold, "evaluate nodes whose inputs are all constant into constants"},
    {"cse", ampc_pass_cse, "merge identical nodes and identical small constants"},
    {"simplify", ampc_pass_simplify,
     "drop Expands to their input's own shape, Concats of one non-empty input, Pads by nothing "
     "and Slices of everything; a Gather of a whole axis in order is a Reshape, a Concat of Slices "
     "of one tensor a Gather"},
    {"fuse-norm", ampc_pass_fuse_norm,
     "turn the RMS norm written out (x / Sqrt(ReduceMean(x^2) + eps)) into one RMSNormalization"},
    /* precision, sparsity, fuse, layout: decisions that read a clean, folded graph */
    {"precision", ampc_pass_precision,
     "with --precision fp16|bf16, move f32 tensors to the low type as the op table's policy says"},
    {"sparsity", ampc_pass_sparsity,
     "with --sparsity verify|prune, mark (prune: make) 2:4 sparse constant weights of matmuls/convs"},
    {"fuse-gelu", ampc_pass_fuse_gelu,
     "turn GELU written out with Erf (x * 0.5 * (1 + erf(x / sqrt 2))) into one Gelu"},
    {"fuse-softmax", ampc_pass_fuse_softmax,
     "turn Softmax guarded by Where(IsNaN(s), 0, s) into one ampc.SafeSoftmax"},
    {"partition", ampc_pass_partition,
     "with --gpus N --partition tensor, split matmul pairs and attention (by heads) across the "
     "GPUs, one all-reduce each"},
    {"fuse-conv", ampc_pass_fuse_conv,
     "fold a residual Add and a ReLU after a Conv into one ampc.FusedConv"},
    {"fuse-attention", ampc_pass_fuse_attention,
     "turn MatMul(Q, K^T), scale, mask, softmax and MatMul(., V) into one ampc.FusedAttention"},
    {"fuse-qkv", ampc_pass_fuse_qkv,
     "join the Q, K and V projections of an ampc.FusedAttention into one MatMul it reads"},
    {"fuse-matmul", ampc_pass_fuse_matmul,
     "fold a bias Add, a residual Add and a ReLU after a MatMul into one ampc.FusedMatMul"},
    {"fold-scale", ampc_pass_fold_scale,
     "fold a scalar product after a matmul with constant weights into the weights"},
    {"layout", ampc_pass_layout,
     "run 2-D f16/bf16 convolutions, and what runs between them, channels-last (transposes where "
     "it changes; --layout nchw: off)"},
    {"fold-transpose", ampc_pass_fold_transpose,
     "make a Transpose of a Transpose one Transpose, or none when they cancel"},
    {"row-gather", ampc_pass_row_gather,
     "make a run of Transposes, Gathers and reshapes that keep the last dim one Gather of rows "
     "(torch.roll and window partitions: one copy, or none where an elementwise op reads it)"},
    /* the pipeline cut weighs the nodes that will run (after fusion and layout), before the
     * memory plan, which then sees the order the GPUs run them in */
    {"partition-pipeline", ampc_pass_partition_pipeline,
     "with --gpus N --partition pipeline, cut the graph into N stages balanced by cost, one per "
     "GPU, with peer copies at the cuts"},
    {"dce", ampc_pass_dce, "remove nodes that no graph output depends on"},
    {"fuse-elementwise", ampc_pass_fuse_elementwise,
     "compute chains of elementwise ops of one shape in one kernel (values between them never "
     "stored)"},
    {"plan-memory", ampc_pass_plan_memory,
     "place constants in the weights blob and every other value in the arena (liveness)"},
};

const ampc_pass_info *ampc_pass_list(int32_t *count) {
    *count = AMPC_ARRAY_LEN(pass_table);
    return pass_table;
}

const ampc_pass_info *ampc_pass_find(const char *name) {
    for (int32_t i = 0; name && i < AMPC_ARRAY_LEN(pass_table); i++)
        if (!strcmp(pass_table[i].name, name)) return &pass_table[i];
    return NULL;
}

char *ampc_pass_names(void) {
    ampc_strbuf sb = {0};
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(pass_table); i++)
        ampc_sb_printf(&sb, "%s%s", i ? ", " : "", pass_table[i].name);
    return ampc_sb_take(&sb);
}

void ampc_pipeline_print(FILE *f) {
    if (!f) return;
    fprintf(f, "ampc pass pipeline (in order):\n");
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(pass_table); i++)
        fprintf(f, "  %2d. %-12s %s\n", i + 1, pass_table[i].name, pass_table[i].description);
}

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Records "unknown pass 'x' <where>; the passes are: fold, cse, dce". */
static ampc_status unknown_pass(ampc_graph *g, const char *name, const char *where) {
    char *names = ampc_pass_names();
    ampc_status st =
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "unknown pass '%s' %s; the passes are: %s",
                  name ? name : "(null)", where, names);
    free(names);
    return st;
}

static ampc_status verify_after(ampc_graph *g, const char *what) {
    if (ampc_ir_verify(g) == AMPC_OK) return AMPC_OK;
    return AMPC_FAIL(g, NULL, AMPC_E_VERIFY, "the graph is invalid %s (verifier messages above)",
                     what);
}

/* Runs pass p in context cx (or notes it skipped), then trace, verify and dump as the options
 * say. */
static ampc_status run_one(ampc_graph *g, const ampc_pass_ctx *cx, const ampc_pass_info *p,
                           bool skip) {
    const ampc_pipeline_options *o = cx->opt;
    ampc_status st = AMPC_OK;
    ampc_pass_record *rec = NULL;
    if (o->record && o->n_records && *o->n_records < o->max_records) {
        rec = &o->record[(*o->n_records)++];
        *rec = (ampc_pass_record){.name = p->name, .ran = !skip,
                                  .nodes_before = ampc_graph_node_count(g)};
        rec->nodes_after = rec->nodes_before;
    }
    if (skip) {
        if (o->trace) fprintf(o->trace, "pass %-12s disabled\n", p->name);
    } else {
        int32_t before = g->diag.n;
        bool changed = false;
        double t0 = now_ms();
        st = p->run(g, cx, &changed);
        double ms = now_ms() - t0;
        if (rec) {
            rec->changed = changed;
            rec->status = st;
            rec->ms = ms;
            rec->nodes_after = ampc_graph_node_count(g);
        }
        if (o->trace) {
            if (st == AMPC_OK)
                fprintf(o->trace, "pass %-12s changed %-3s %9.3f ms\n", p->name,
                        changed ? "yes" : "no", ms);
            else
                fprintf(o->trace, "pass %-12s failed (%s) %9.3f ms\n", p->name, ampc_status_str(st),
                        ms);
        }
        if (st != AMPC_OK) {
            if (g->diag.n == before) /* a pass must say why; make sure something does */
                AMPC_FAIL(g, NULL, st, "pass '%s' failed (%s)", p->name, ampc_status_str(st));
            return st;
        }
        if (o->verify) {
            char what[64];
            snprintf(what, sizeof what, "after pass '%s'", p->name);
            if ((st = verify_after(g, what)) != AMPC_OK) return st;
        }
    }
    if (o->dump_after && !strcmp(o->dump_after, p->name)) {
        FILE *f = o->dump_file ? o->dump_file : stderr;
        fprintf(f, "// IR after pass '%s'%s\n", p->name, skip ? " (disabled)" : "");
        st = ampc_graph_print(g, f, false);
        if (st != AMPC_OK)
            return AMPC_FAIL(g, NULL, st, "cannot write the IR dump after '%s'", p->name);
    }
    return AMPC_OK;
}

/* Checks the names the options give; the graph must be free of errors. */
static ampc_status check_options(ampc_graph *g, const ampc_pipeline_options *o) {
    if (ampc_graph_status(g) != AMPC_OK) return ampc_graph_status(g);
    if (o->n_disable < 0 || (o->n_disable && !o->disable))
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "disable list: %d names but no array",
                         o->n_disable);
    for (int32_t i = 0; i < o->n_disable; i++)
        if (!ampc_pass_find(o->disable[i]))
            return unknown_pass(g, o->disable[i], "in the list of passes to disable");
    if (o->dump_after && !ampc_pass_find(o->dump_after))
        return unknown_pass(g, o->dump_after, "to dump the IR after");
    if (o->gpus < 0 || (o->partition != AMPC_PARTITION_NONE && o->gpus < 2) ||
        (o->gpus > 1 && o->partition == AMPC_PARTITION_NONE))
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "partition: %d GPUs with %s; a partition "
                         "needs 2 GPUs or more and 2 GPUs or more need a partition", o->gpus,
                         o->partition == AMPC_PARTITION_NONE ? "no partition" : "a partition");
    if (o->micro_batches < 0 || (o->micro_batches > 0 && o->partition != AMPC_PARTITION_PIPELINE))
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%d micro-batches: micro-batches are "
                         "for --partition pipeline, and at least 1", o->micro_batches);
    if (o->verify) return verify_after(g, "before the first pass");
    return AMPC_OK;
}

static bool disabled(const ampc_pipeline_options *o, const char *name) {
    for (int32_t i = 0; i < o->n_disable; i++)
        if (!strcmp(o->disable[i], name)) return true;
    return false;
}

const ampc_pipeline_options *ampc_pass_opt(const ampc_pass_ctx *cx) {
    static const ampc_pipeline_options defaults = {0};
    return cx && cx->opt ? cx->opt : &defaults;
}

/* The context of one run: o's options and report, the report emptied. */
static ampc_pass_ctx context_of(const ampc_pipeline_options *o) {
    if (o->report) *o->report = (ampc_pipeline_report){0};
    return (ampc_pass_ctx){.opt = o, .report = o->report};
}

ampc_status ampc_pipeline_run(ampc_graph *g, const ampc_pipeline_options *o) {
    ampc_status st = check_options(g, o);
    if (o->n_records) *o->n_records = 0;
    const ampc_pass_ctx cx = context_of(o);
    for (int32_t i = 0; st == AMPC_OK && i < AMPC_ARRAY_LEN(pass_table); i++)
        st = run_one(g, &cx, &pass_table[i], disabled(o, pass_table[i].name));
    return st;
}

ampc_status ampc_pipeline_run_pass(ampc_graph *g, const char *name,
                                   const ampc_pipeline_options *o) {
    const ampc_pass_info *p = ampc_pass_find(name);
    if (!p) return unknown_pass(g, name, "to run");
    ampc_status st = check_options(g, o);
    const ampc_pass_ctx cx = context_of(o);
    if (st == AMPC_OK) st = run_one(g, &cx, p, false);
    return st;
}

ampc_status ampc_graph_optimize(ampc_graph *g, const ampc_pipeline_options *o) {
    if (!g) return AMPC_E_INVALID_ARG;
    ampc_pipeline_options defaults = {.verify = true};
    return ampc_pipeline_run(g, o ? o : &defaults);
}

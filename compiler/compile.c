/*
 * compile.c — the JIT driver behind ampc_compile (include/ampc.h): pass pipeline (with the
 * memory plan) -> codegen -> NVRTC -> a module holding the plan and its images; the runtime
 * loads the module on the first run, so compiling needs no GPU.
 */
#include "ampc.h"
#include "ampc_runtime.h"
#include "codegen/codegen.h"
#include "compiler/math.h"
#include "compiler/module.h"
#include "compiler/nvrtc.h"
#include "compiler/tool.h"
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>


/* The pipeline (with the memory plan) and code generation of ampc_compile: *cg its output, and
 * *report what the passes decided (the caller's report when its pipeline options name one). */
static ampc_status generate(ampc_graph *g, const ampc_compile_options *opts,
                            ampc_pipeline_report *report, ampc_cg_output **cg) {
    ampc_pipeline_options po = {.verify = true};
    if (opts->pipeline) po = *opts->pipeline;
    po.gpu_build = true;
    if (!po.report) po.report = report;
    ampc_status st = ampc_graph_optimize(g, &po);
    if (po.report != report) *report = *po.report;
    if (st != AMPC_OK) return st;
    /* Code generation needs the memory plan even when the pipeline skipped it (idempotent). */
    bool changed;
    st = ampc_pass_plan_memory(g, NULL, &changed);
    if (st != AMPC_OK) return st;
    ampc_cg_options co = {.math = opts->no_tf32 ? AMPC_RT_MATH_DEFAULT : AMPC_RT_MATH_TF32,
                          .no_l2_prefetch = opts->no_l2_prefetch, .gemm_kernel = po.gemm_kernel};
    return ampc_cg_generate(g, &co, cg);
}

ampc_status ampc_compile_check(ampc_graph *g, const ampc_compile_options *o, int32_t *steps) {
    if (!g) return AMPC_E_INVALID_ARG;
    ampc_compile_options opts = {0};
    if (o) opts = *o;
    ampc_cg_output *cg = NULL;
    ampc_pipeline_report report = {0};
    ampc_status st = generate(g, &opts, &report, &cg);
    if (st == AMPC_OK && steps) *steps = cg->plan.n_steps;
    ampc_cg_output_free(cg);
    return st;
}

ampc_status ampc_compile(ampc_graph *g, const ampc_compile_options *o, ampc_module **out) {
    if (!g || !out) return AMPC_E_INVALID_ARG;
    *out = NULL;
    ampc_compile_options opts = {0};
    if (o) opts = *o;
    ampc_cg_output *cg = NULL;
    ampc_pipeline_report report = {0};
    ampc_status st = generate(g, &opts, &report, &cg);
    if (st != AMPC_OK) return st;

    ampc_nvrtc_unit *units = ampc_xcalloc((size_t)cg->n_units + 1, sizeof *units);
    for (int32_t u = 0; u < cg->n_units; u++) units[u] = (ampc_nvrtc_unit){cg->unit_names[u], cg->sources[u]};
    int32_t default_arch = ampc_nvrtc_default_arch();
    ampc_nvrtc_options no = {
        .archs = opts.archs ? opts.archs : &default_arch,
        .n_archs = opts.archs ? opts.n_archs : 1,
        .cache_dir = opts.cache_dir,
        .progress = opts.progress,
        .user = opts.progress_user,
    };
    ampc_rt_image *images = NULL;
    int32_t n_images = 0;
    char *err = NULL;
    st = ampc_nvrtc_compile(units, cg->n_units, &no, &images, &n_images, &err);
    free(units);
    if (st != AMPC_OK) {
        AMPC_FAIL(g, NULL, st, "%s", err ? err : "NVRTC failed");
        free(err);
        ampc_cg_output_free(cg);
        return st;
    }
    ampc_module *m = ampc_xcalloc(1, sizeof *m);
    m->cg = cg;
    m->images = images;
    m->n_images = n_images;
    m->device = opts.device;
    ampc_math_facts facts;
    ampc_math_collect(g, &report, &cg->plan, !opts.no_tf32, &facts);
    m->math = ampc_math_text(&facts);
    cg->plan.images = images;
    cg->plan.n_images = n_images;
    for (int32_t r = 0; r < cg->n_ranks && cg->rank_plans; r++) { /* a multi-GPU plan */
        cg->rank_plans[r].images = images;
        cg->rank_plans[r].n_images = n_images;
    }
    *out = m;
    return AMPC_OK;
}

static ampc_status fail(ampc_module *m, ampc_status st, char *msg) {
    free(m->errors);
    m->errors = msg ? msg : ampc_xstrdup(ampc_status_str(st));
    return st;
}

ampc_status ampc_module_run(ampc_module *m, const ampc_tensor *inputs, int32_t n_inputs,
                            ampc_tensor *outputs, int32_t n_outputs, void *stream) {
    if (!m) return AMPC_E_INVALID_ARG;
    char *err = NULL;
    if (!m->model) {
        ampc_status st = ampc_rt_model_create(&m->cg->plan, m->device, &m->model, &err);
        if (st != AMPC_OK) return fail(m, st, err);
    }
    ampc_status st = ampc_rt_model_run(m->model, inputs, n_inputs, outputs, n_outputs, stream, &err);
    if (st != AMPC_OK) return fail(m, st, err);
    free(m->errors);
    m->errors = NULL;
    return AMPC_OK;
}

const char *ampc_module_errors(const ampc_module *m) { return m && m->errors ? m->errors : ""; }
const char *ampc_module_math(const ampc_module *m) { return m && m->math ? m->math : ""; }
int32_t ampc_module_unit_count(const ampc_module *m) { return m ? m->cg->n_units : 0; }

const char *ampc_module_cuda(const ampc_module *m, int32_t i) {
    return m && i >= 0 && i < m->cg->n_units ? m->cg->sources[i] : NULL;
}

const char *ampc_module_ptx(const ampc_module *m, int32_t i) {
    for (int32_t k = 0; m && k < m->n_images; k++)
        if (m->images[k].unit == i && m->images[k].kind == AMPC_RT_IMAGE_PTX)
            return m->images[k].data;
    return NULL;
}

int32_t ampc_module_step_count(const ampc_module *m) { return m ? m->cg->plan.n_steps : 0; }
int64_t ampc_module_arena_bytes(const ampc_module *m) { return m ? m->cg->plan.arena_bytes : 0; }
const ampc_rt_plan *ampc_module_plan(const ampc_module *m) { return &m->cg->plan; }

void ampc_module_destroy(ampc_module *m) {
    if (!m) return;
    ampc_rt_model_destroy(m->model);
    ampc_nvrtc_images_free(m->images, m->n_images);
    ampc_cg_output_free(m->cg);
    free(m->errors);
    free(m->math);
    free(m);
}

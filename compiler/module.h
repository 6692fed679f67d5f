/*
 * module.h — what a compiled module holds (the JIT driver, compile.c, builds it; the library
 * writer, artifact.c, serialises it): the code generator's output with its plan, whose images
 * NVRTC filled in, and the model the first ampc_module_run loads.
 */
#ifndef AMPC_COMPILER_MODULE_H
#define AMPC_COMPILER_MODULE_H

#include "ampc.h"
#include "ampc_runtime.h"
#include "codegen/codegen.h"

struct ampc_module {
    ampc_cg_output *cg;      /* plan (cg->plan.images = images) and sources */
    ampc_rt_image *images;
    int32_t n_images;
    int32_t device;
    ampc_rt_model *model;    /* loaded on first run */
    char *errors;
    char *math;              /* what it computes differently from the model (compiler/math.h) */
};

#endif

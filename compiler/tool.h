/*
 * tool.h — the compiler's internals that the `ampc` command line (cli/) uses beyond the public
 * headers, and the one internal header cli/ includes (scripts/check-structure.sh holds it to
 * that).
 *
 * The public API (include/ampc.h, include/ampc_runtime.h) is what a program embedding ampc
 * needs; the tool also shows and checks what a program has no use for: a graph's values and
 * ops (--bind, inspect, run --reference), tensors element by element, a plan's steps and images
 * (inspect, -v, one process a GPU), the library writer's file names, the numerics checks of
 * --precision auto and --sparsity prune, the `math:` line, and NVRTC's facts for `doctor`.
 * Those come from the layer headers below, named here once so that the tool's reach into the
 * compiler is one list.
 */
#ifndef AMPC_COMPILER_TOOL_H
#define AMPC_COMPILER_TOOL_H

#include "ampc.h"
#include "ampc_runtime.h"
#include "compiler/artifact.h"       /* library and header paths, stale temporaries, toolchain */
#include "compiler/auto_precision.h" /* --precision auto's search */
#include "compiler/check.h"          /* a build's outputs against the reference evaluator */
#include "compiler/math.h"           /* the `math:` line */
#include "compiler/nvrtc.h"          /* --arch names, NVRTC's version, the kernel cache */
#include "ir/ir.h"                   /* graphs, values, ops; the string builder (ir/base.h) */
#include "ir/ref/ref.h"              /* tensor elements as doubles */
#include "passes/passes.h"           /* what the passes decided (ampc_pipeline_report) */
#include "runtime/plan.h"            /* a plan's steps and images */

/* The plan of a compiled module (its steps, images, inputs and outputs); valid while m lives. */
const ampc_rt_plan *ampc_module_plan(const ampc_module *m);

#endif

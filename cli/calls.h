/*
 * calls.h — timing whole calls of a loaded model for `ampc run --iterations` (calls.c).
 */
#ifndef AMPC_CLI_CALLS_H
#define AMPC_CLI_CALLS_H

#include "ampc_runtime.h"

/* Copies the inputs into device buffers, gives the outputs device buffers of their shapes, and
 * prints the median latency of `iterations` calls of ampc_rt_model_enqueue on them (after
 * `warmup` calls) and the host time inside the call. False (after printing why) on failure. */
bool ampc_cli_time_calls(ampc_rt_model *m, const ampc_tensor *in, int32_t ni,
                         const ampc_tensor *out, int32_t no, int32_t iterations, int32_t warmup);

#endif

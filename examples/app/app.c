/*
 * app.c — a C program that links a model compiled by ampc: the MLP of examples/mlp, written as
 * mlp.so + mlp.h by `mlp --library mlp.so`. It needs nothing of ampc at run time but the
 * library (and the CUDA runtime the library uses).
 *
 *   app            runs the model on GPU 0 with a fixed input and prints the logits; without a
 *                  GPU it prints the library's "no CUDA device" error and exits 1
 */
#include "mlp.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const mlp_tensor_info *xi = &mlp_inputs[0], *yi = &mlp_outputs[0];
    float *x = malloc((size_t)xi->bytes), *y = malloc((size_t)yi->bytes);
    if (!x || !y) return 1;
    for (int64_t i = 0; i < xi->bytes / 4; i++) x[i] = (float)((i * 7) % 13 - 6) / 6.0f;

    mlp_model *m = NULL;
    char *err = NULL;
    int rc = mlp_create(0, &m, &err);
    if (rc == 0) {
        const void *in[mlp_N_INPUTS] = {x};
        void *out[mlp_N_OUTPUTS] = {y};
        rc = mlp_run(m, in, out, NULL, &err);
    }
    if (rc != 0) {
        fprintf(stderr, "app: %s\n", err);
        free(err);
    } else {
        printf("app: %s %s[%lld,%lld] on the GPU:\n", yi->name, yi->dtype_name,
               (long long)yi->dims[0], (long long)yi->dims[1]);
        for (int64_t r = 0; r < yi->dims[0] && r < 4; r++) {
            printf("  sample %lld:", (long long)r);
            for (int64_t c = 0; c < yi->dims[1]; c++) printf(" %+.4f", y[r * yi->dims[1] + c]);
            printf("\n");
        }
    }
    mlp_destroy(m);
    free(x);
    free(y);
    return rc == 0 ? 0 : 1;
}

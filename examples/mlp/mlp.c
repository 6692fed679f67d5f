/*
 * mlp.c — the seed network (Linear 784->128, ReLU, Linear 128->10) built with ampc's C DSL and
 * evaluated with the reference evaluator.
 *
 * Weights are drawn like PyTorch's nn.Linear default (uniform in +-1/sqrt(fan_in)) from a fixed
 * seed, so every run prints the same logits. The program also computes the network with plain
 * loops and prints the largest difference, a check that the graph means what the code says.
 *
 *   build/bin/mlp [batch]                    (default batch 4)
 *   build/bin/mlp [batch] --library mlp.so   also compile the graph into mlp.so + mlp.h, the
 *                                            library examples/app links
 */
#include <ampc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 784, HIDDEN = 128, OUT = 10 };

/* xorshift64*: a small deterministic generator, uniform in [-bound, bound). */
static float uniform(uint64_t *s, float bound) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    uint64_t r = *s * 2685821657736338717ull;
    return bound * (2.0f * (float)((r >> 40) * (1.0 / 16777216.0)) - 1.0f);
}

static float *random_array(uint64_t *s, size_t n, float bound) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n && a; i++) a[i] = uniform(s, bound);
    return a;
}

/* y = x @ w^T + b for one row: the definition of nn.Linear. */
static void linear(const float *x, const float *w, const float *b, float *y, int in, int out) {
    for (int o = 0; o < out; o++) {
        double acc = b[o];
        for (int i = 0; i < in; i++) acc += (double)x[i] * w[(size_t)o * in + i];
        y[o] = (float)acc;
    }
}

/* Compiles the graph for the GPU (PTX, which runs on every GPU of compute capability 8.0 or
 * newer) and writes it as a shared library with its header. */
static bool write_library(ampc_graph *g, const char *path) {
    static const int32_t ptx_only = 0;
    ampc_compile_options co = {.archs = &ptx_only, .n_archs = 0};
    ampc_module *m = NULL;
    char *err = NULL;
    bool ok = ampc_compile(g, &co, &m) == AMPC_OK;
    if (!ok) fprintf(stderr, "mlp: compiling for the GPU failed:\n%s\n", ampc_graph_errors(g));
    if (ok && ampc_module_write_library(m, path, NULL, &err) != AMPC_OK) {
        fprintf(stderr, "mlp: %s: %s\n", path, err ? err : "");
        ok = false;
    }
    if (ok) printf("  wrote %s and its header (batch %lld)\n", path, (long long)ampc_value_shape(ampc_graph_input(g, 0)).dims[0]);
    free(err);
    ampc_module_destroy(m);
    return ok;
}

int main(int argc, char **argv) {
    int64_t batch = 4;
    const char *library = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--library") && i + 1 < argc) {
            library = argv[++i];
        } else if ((batch = atoll(argv[i])) < 1 || batch > 4096) {
            fprintf(stderr, "usage: mlp [batch 1..4096] [--library FILE.so] (got '%s')\n", argv[i]);
            return 2;
        }
    }
    uint64_t seed = 0x5eed;
    float *w1 = random_array(&seed, (size_t)HIDDEN * IN, 1 / sqrtf(IN));
    float *b1 = random_array(&seed, HIDDEN, 1 / sqrtf(IN));
    float *w2 = random_array(&seed, (size_t)OUT * HIDDEN, 1 / sqrtf(HIDDEN));
    float *b2 = random_array(&seed, OUT, 1 / sqrtf(HIDDEN));
    float *x = random_array(&seed, (size_t)batch * IN, 1.0f);
    if (!w1 || !b1 || !w2 || !b2 || !x) return 1;

    /* The graph: Gemm with transB=1 is exactly nn.Linear. */
    ampc_graph *g = ampc_graph_create("mlp");
    int64_t xd[2] = {batch, IN}, w1d[2] = {HIDDEN, IN}, b1d[1] = {HIDDEN};
    int64_t w2d[2] = {OUT, HIDDEN}, b2d[1] = {OUT};
    ampc_value *in = ampc_input(g, "x", AMPC_DTYPE_F32, 2, xd);
    ampc_value *h = ampc_gemm(g, in, ampc_constant(g, "fc1.weight", AMPC_DTYPE_F32, 2, w1d, w1),
                              ampc_constant(g, "fc1.bias", AMPC_DTYPE_F32, 1, b1d, b1), false, true);
    ampc_value *y = ampc_gemm(g, ampc_relu(g, h),
                              ampc_constant(g, "fc2.weight", AMPC_DTYPE_F32, 2, w2d, w2),
                              ampc_constant(g, "fc2.bias", AMPC_DTYPE_F32, 1, b2d, b2), false, true);
    ampc_output(g, y, "logits");
    if (ampc_graph_status(g) != AMPC_OK) {
        fprintf(stderr, "mlp: building the graph failed:\n%s\n", ampc_graph_errors(g));
        return 1;
    }

    ampc_tensor xt = {AMPC_DTYPE_F32, {2, {batch, IN}}, x}, out;
    if (ampc_graph_evaluate(g, &xt, 1, &out, 1) != AMPC_OK) {
        fprintf(stderr, "mlp: evaluation failed:\n%s\n", ampc_graph_errors(g));
        return 1;
    }
    const float *logits = out.data;
    printf("ampc %s — MLP 784-128-10, batch %lld, reference evaluator (CPU)\n",
           AMPC_VERSION_STRING, (long long)batch);
    double max_diff = 0;
    for (int64_t r = 0; r < batch; r++) {
        float hid[HIDDEN], want[OUT];
        linear(x + r * IN, w1, b1, hid, IN, HIDDEN);
        for (int i = 0; i < HIDDEN; i++) hid[i] = hid[i] > 0 ? hid[i] : 0;
        linear(hid, w2, b2, want, HIDDEN, OUT);
        int best = 0;
        for (int o = 0; o < OUT; o++) {
            double d = fabs((double)logits[r * OUT + o] - want[o]);
            if (d > max_diff) max_diff = d;
            if (logits[r * OUT + o] > logits[r * OUT + best]) best = o;
        }
        if (r < 8) {
            printf("  sample %lld: class %d, logits", (long long)r, best);
            for (int o = 0; o < OUT; o++) printf(" %+.4f", logits[r * OUT + o]);
            printf("\n");
        }
    }
    printf("  max |ampc - plain C loops| = %.3g\n", max_diff);
    ampc_tensor_free(&out);
    if (library && !write_library(g, library)) max_diff = INFINITY;
    ampc_graph_destroy(g);
    free(w1), free(b1), free(w2), free(b2), free(x);
    return max_diff < 1e-4 ? 0 : 1;
}

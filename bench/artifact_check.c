/*
 * artifact_check.c — a C program linking one compiled model through its generated header (built
 * with -DMODEL=<name> -include <name>.h): reads each input from DIR/<file>.in<k>.bin, runs the
 * model, and writes each output to DIR/<file>.gpu<k>.bin for bench/artifact-check.sh to compare
 * with onnxruntime's. Also times 100 runs (host to host, including the copies).
 *
 *   artifact_check DIR FILE
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(MODEL, x)

static void *read_all(const char *path, long want) {
    FILE *f = fopen(path, "rb");
    void *p = malloc((size_t)want + 1);
    long n = f && p ? (long)fread(p, 1, (size_t)want + 1, f) : -1;
    if (f) fclose(f);
    if (n != want) {
        fprintf(stderr, "artifact_check: %s: expected %ld bytes, read %ld\n", path, want, n);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    char path[4096], *err = NULL;
    const void *in[M(_N_INPUTS)];
    void *out[M(_N_OUTPUTS)];
    for (int i = 0; i < M(_N_INPUTS); i++) {
        snprintf(path, sizeof path, "%s/%s.in%d.bin", argv[1], argv[2], i);
        in[i] = read_all(path, (long)M(_inputs)[i].bytes);
    }
    for (int i = 0; i < M(_N_OUTPUTS); i++) out[i] = malloc((size_t)M(_outputs)[i].bytes);
    M(_model) *m = NULL;
    if (M(_create)(0, &m, &err) || M(_run)(m, in, out, NULL, &err)) {
        fprintf(stderr, "artifact_check: %s\n", err);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 100; k++)
        if (M(_run)(m, in, out, NULL, &err)) {
            fprintf(stderr, "artifact_check: %s\n", err);
            return 1;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s: %d inputs, %d outputs; 100 runs host to host: %.3f ms each\n", argv[2],
           M(_N_INPUTS), M(_N_OUTPUTS),
           ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 100);
    for (int i = 0; i < M(_N_OUTPUTS); i++) {
        snprintf(path, sizeof path, "%s/%s.gpu%d.bin", argv[1], argv[2], i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out[i], 1, (size_t)M(_outputs)[i].bytes, f) != (size_t)M(_outputs)[i].bytes) return 1;
        fclose(f);
    }
    M(_destroy)(m);
    return 0;
}

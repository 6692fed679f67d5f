/*
 * mpi_run.c — one process per GPU under MPI: each process loads one rank of a library compiled
 * with `ampc MODEL --gpus N --partition tensor -o model.so` and runs it; the NCCL id travels from
 * rank 0 to the others with MPI_Bcast (the ampc runtime itself never links MPI).
 *
 *     mpirun -np 2 ampc-mpi-run model.so [iterations]
 *
 * Every process fills the inputs the same way (f32/f16 inputs with a cosine, others with zeros),
 * runs its rank, then rank 0 runs the same library in one process over all N GPUs (the
 * reference), broadcasts its outputs, and every rank prints one line: its largest difference
 * from the reference and its median latency. Exit status 0 when every rank matches.
 */
#include <ampc_runtime.h>
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m | 1024), (int)e - 25);
    return s ? -v : v;
}

static uint16_t float_to_half(float f) { /* inputs in [-1, 1]: normal or zero, no rounding care */
    uint16_t s = signbit(f) ? 0x8000 : 0;
    f = fabsf(f);
    if (f < 6.1e-5f) return s;
    int e;
    float m = frexpf(f, &e); /* f = m 2^e, m in [0.5, 1) */
    return (uint16_t)(s | (uint16_t)((e + 14) << 10) | (uint16_t)((int)(m * 2048) & 1023));
}

static size_t dtype_size(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_F64: case AMPC_DTYPE_I64: return 8;
    case AMPC_DTYPE_F32: case AMPC_DTYPE_I32: return 4;
    case AMPC_DTYPE_F16: case AMPC_DTYPE_BF16: case AMPC_DTYPE_I16: return 2;
    default: return 1;
    }
}

/* The model's tensors (inputs or outputs), allocated; inputs filled. */
static ampc_tensor *tensors(const ampc_rt_model *m, bool outputs, int32_t n) {
    ampc_tensor *t = calloc((size_t)n + 1, sizeof *t);
    for (int32_t i = 0; i < n; i++) {
        ampc_rt_model_io(m, outputs, i, NULL, &t[i].dtype, &t[i].shape);
        size_t count = 1;
        for (int32_t d = 0; d < t[i].shape.rank; d++) count *= (size_t)t[i].shape.dims[d];
        t[i].data = calloc(count + 1, dtype_size(t[i].dtype));
        for (size_t k = 0; !outputs && k < count; k++) {
            float v = cosf(0.113f * (float)k + (float)i);
            if (t[i].dtype == AMPC_DTYPE_F32) ((float *)t[i].data)[k] = v;
            if (t[i].dtype == AMPC_DTYPE_F16) ((uint16_t *)t[i].data)[k] = float_to_half(v);
        }
    }
    return t;
}

static size_t bytes_of(const ampc_tensor *t) {
    size_t count = 1;
    for (int32_t d = 0; d < t->shape.rank; d++) count *= (size_t)t->shape.dims[d];
    return count * dtype_size(t->dtype);
}

static double value(const ampc_tensor *t, size_t k) {
    if (t->dtype == AMPC_DTYPE_F32) return ((const float *)t->data)[k];
    if (t->dtype == AMPC_DTYPE_F16) return half_to_float(((const uint16_t *)t->data)[k]);
    return ((const unsigned char *)t->data)[k]; /* other types: compared byte by byte */
}

static size_t count_of(const ampc_tensor *t) {
    return t->dtype == AMPC_DTYPE_F32 || t->dtype == AMPC_DTYPE_F16 ? bytes_of(t) / dtype_size(t->dtype)
                                                                    : bytes_of(t);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of `iterations` timed launches, or -1 on failure (printed). */
static double median_ms(ampc_rt_model *m, int iterations, int rank) {
    double *ms = calloc((size_t)iterations + 1, sizeof *ms);
    char *err = NULL;
    double med = -1;
    if (ampc_rt_model_time(m, iterations, ms, &err) == AMPC_OK) {
        qsort(ms, (size_t)iterations, sizeof *ms, cmp_double);
        med = ms[iterations / 2];
    } else {
        fprintf(stderr, "rank %d: timing: %s\n", rank, err);
    }
    free(err);
    free(ms);
    return med;
}

static int fail(int rank, const char *what, char *err) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, err ? err : "");
    free(err);
    MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks may be waiting in NCCL or MPI */
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1, local = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node; /* the processes of this machine: the local rank picks the GPU */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np N %s MODEL.so [iterations]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int iterations = argc > 2 ? atoi(argv[2]) : 100;
    if (iterations < 1) iterations = 1;
    char *err = NULL;
    ampc_rt_artifact *lib = NULL;
    if (ampc_rt_load(argv[1], &lib, &err) != AMPC_OK) return fail(rank, "loading", err);
    const ampc_rt_plan *plan = ampc_rt_artifact_plan(lib);
    if (ampc_rt_plan_n_ranks(plan) != size) {
        if (rank == 0)
            fprintf(stderr, "%s is partitioned over %d GPUs: run it with mpirun -np %d (got %d)\n",
                    argv[1], ampc_rt_plan_n_ranks(plan), ampc_rt_plan_n_ranks(plan), size);
        MPI_Finalize();
        return 2;
    }

    /* rank 0 makes the group's NCCL id; MPI carries it to the others */
    ampc_rt_nccl_id id;
    memset(&id, 0, sizeof id);
    int made = rank != 0 || ampc_rt_nccl_id_create(&id, &err) == AMPC_OK;
    if (!made) return fail(rank, "making the NCCL id", err);
    MPI_Bcast(id.bytes, (int)sizeof id.bytes, MPI_BYTE, 0, MPI_COMM_WORLD);

    ampc_rt_model *m = NULL;
    if (ampc_rt_model_create_rank(plan, local, rank, size, &id, &m, &err) != AMPC_OK)
        return fail(rank, "creating the rank", err);
    int32_t ni = ampc_rt_model_n_inputs(m), no = ampc_rt_model_n_outputs(m);
    ampc_tensor *in = tensors(m, false, ni), *out = tensors(m, true, no);
    if (ampc_rt_model_run(m, in, ni, out, no, NULL, &err) != AMPC_OK)
        return fail(rank, "running", err);
    double ms = median_ms(m, iterations, rank); /* every rank times: each launch is collective */
    ampc_rt_model_destroy(m);

    /* the reference: the same library in one process over every GPU, on rank 0 */
    m = NULL;
    ampc_tensor *ref = calloc((size_t)no + 1, sizeof *ref);
    double ms_one = -1;
    for (int32_t i = 0; i < no; i++) {
        ref[i] = out[i];
        ref[i].data = calloc(1, bytes_of(&out[i]) + 1);
    }
    int ok_ref = 1;
    if (rank == 0) {
        ok_ref = ampc_rt_model_create(plan, 0, &m, &err) == AMPC_OK &&
                 ampc_rt_model_run(m, in, ni, ref, no, NULL, &err) == AMPC_OK;
        if (!ok_ref) fprintf(stderr, "rank 0: the single-process reference: %s\n", err);
        else ms_one = median_ms(m, iterations, 0);
        free(err);
        err = NULL;
        ampc_rt_model_destroy(m);
    }
    MPI_Bcast(&ok_ref, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&ms_one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int32_t i = 0; i < no; i++)
        MPI_Bcast(ref[i].data, (int)bytes_of(&ref[i]), MPI_BYTE, 0, MPI_COMM_WORLD);

    double worst = 0, scale = 0;
    for (int32_t i = 0; i < no; i++)
        for (size_t k = 0; k < count_of(&out[i]); k++) {
            worst = fmax(worst, fabs(value(&out[i], k) - value(&ref[i], k)));
            scale = fmax(scale, fabs(value(&ref[i], k)));
        }
    int match = ok_ref && worst <= 1e-3 * fmax(scale, 1e-30) && !isnan(worst);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(host, &len);
    printf("rank %d of %d (%s, device %d): %d outputs, max |diff| vs one process %.3g "
           "(largest |value| %.3g) %s; median %.4f ms per run (one process over %d GPUs: "
           "%.4f ms)\n", rank, size, host, local, no, worst, scale, match ? "MATCH" : "DIFFER",
           ms, size, ms_one);
    fflush(stdout);
    int all = 0;
    MPI_Allreduce(&match, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", all ? "all ranks match" : "some ranks differ");
    for (int32_t i = 0; i < ni; i++) free(in[i].data);
    for (int32_t i = 0; i < no; i++) free(out[i].data), free(ref[i].data);
    free(in);
    free(out);
    free(ref);
    ampc_rt_unload(lib);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return all ? 0 : 1;
}

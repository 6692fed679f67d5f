/*
 * test_runtime.c — the runtime (runtime/, include/ampc_runtime.h).
 *
 * Without a GPU (every machine): "no CUDA device" is an ordinary error with a clear message from
 * the device queries and from model creation; the provider libraries open by soname and report
 * their versions; every static plan rule (version, refs, images, kernel geometry, matmul and
 * convolution limits such as symmetric pads) fails with its exact message, the same through
 * ampc_rt_plan_check and ampc_rt_model_create.
 *
 * With a GPU (skipped here with the runtime's own "no CUDA device: ..." reason): hand-built plans
 * run a kernel compiled by NVRTC plus copy and memset steps (CUDA-graph replay, identical bits over
 * three runs, profiling, a user stream, device and pinned buffers), reject bad arguments before
 * touching memory, pick the cubin over the PTX, report kernel/plan mismatches; cuBLASLt matmuls
 * (plain, transposed with padded pitches, batched with a shared operand, C and beta, bias + ReLU,
 * TF32, f16, bf16, f64) and cuDNN convolutions (2-D with stride/dilation/groups, bias + ReLU fused
 * and not, residual, 1-D, 3-D, depthwise, transposed, f16) are checked against plain CPU loops,
 * reporting the worst element; a convolution's choice comes back from the tuning cache.
 * The tuning cache's file (runtime/tune_cache.c) keeps entries across processes, skips lines that
 * do not parse, and costs nothing when off or unwritable.
 */
#define _GNU_SOURCE /* dlopen flags */
#include "support.h"

#include "compiler/nvrtc.h"
#include "runtime/internal.h" /* rt_lib: opening provider libraries with fakes */
#include "runtime/runtime.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The CUDA driver maps memory inside AddressSanitizer's shadow gap; without this option every
 * cudaMalloc fails in sanitized builds on a GPU machine. */
const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

/* ---- helpers ----------------------------------------------------------------------------------- */

static ampc_rt_ref ref(uint8_t space, int64_t offset, int64_t bytes) {
    return (ampc_rt_ref){space, offset, bytes};
}
#define ARENA(off, bytes) ref(AMPC_RT_ARENA, (off), (bytes))
#define WEIGHTS(off, bytes) ref(AMPC_RT_WEIGHTS, (off), (bytes))

/* Whether the CUDA driver library is installed (independent of the runtime under test). */
static bool have_driver(void) { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != NULL; }


/* Asserts a status and that the message (*errp, read after the call) contains `needle`; frees
 * the message and clears *errp. */
static void expect_err(ampc_status got, char **errp, ampc_status want, const char *needle) {
    char *err = *errp;
    *errp = NULL;
    cr_assert_eq(got, want, "status %d (%s), expected %d; message: %s", got, ampc_status_str(got),
                 want, err ? err : "(none)");
    cr_assert_not_null(err, "a failure must come with a message");
    cr_assert(strstr(err, needle) != NULL, "message\n  %s\ndoes not contain\n  %s", err, needle);
    free(err);
}

/* A small valid plan: input x f32 [2, 3] at arena 0, output y at arena 256, one copy step. */
typedef struct tplan {
    ampc_rt_plan p;
    ampc_rt_step steps[4];
    ampc_rt_io in[2], out[2];
    ampc_rt_image img[2];
    ampc_rt_arg args[8];
} tplan;

static void base_plan(tplan *t) {
    memset(t, 0, sizeof *t);
    t->in[0] = (ampc_rt_io){"x", AMPC_DTYPE_F32, SHAPE(2, 3), ARENA(0, 24)};
    t->out[0] = (ampc_rt_io){"y", AMPC_DTYPE_F32, SHAPE(2, 3), ARENA(256, 24)};
    t->steps[0].kind = AMPC_RT_STEP_COPY;
    t->steps[0].label = "Identity 'id'";
    t->steps[0].copy.src = ARENA(0, 24);
    t->steps[0].copy.dst = ARENA(256, 24);
    t->p = (ampc_rt_plan){.version = AMPC_RT_PLAN_VERSION, .name = "tiny", .arena_bytes = 512,
                          .n_steps = 1, .n_inputs = 1, .n_outputs = 1, .steps = t->steps,
                          .inputs = t->in, .outputs = t->out};
}

/* Asserts ampc_rt_plan_check and ampc_rt_model_create (which checks before looking for a GPU)
 * both fail with `want` and a message containing `needle`. */
static void expect_plan_error(const tplan *t, ampc_status want, const char *needle) {
    char *err = NULL;
    expect_err(ampc_rt_plan_check(&t->p, &err), &err, want, needle);
    ampc_rt_model *m = (ampc_rt_model *)1;
    err = NULL;
    expect_err(ampc_rt_model_create(&t->p, 0, &m, &err), &err, want, needle);
    cr_assert_null(m, "a failed create leaves *out NULL");
}

/* ---- without a GPU ----------------------------------------------------------------------------- */

Test(runtime_host, device_count_without_driver) {
    if (have_driver()) t_skip_only_without("a CUDA driver", "the no-driver path is not reachable");
    int32_t n = 42;
    char *err = NULL;
    expect_err(ampc_rt_device_count(&n, &err), &err, AMPC_E_NO_DEVICE,
               "no CUDA device: the NVIDIA driver is not installed or not loaded "
               "(cudaGetDeviceCount: cudaErrorInsufficientDriver");
    cr_assert_eq(n, 0);
    /* the error is not sticky: asking again gives the same answer, and err may be NULL */
    cr_assert_eq(ampc_rt_device_count(&n, NULL), AMPC_E_NO_DEVICE);
    cr_assert_eq(n, 0);
}

Test(runtime_host, device_count_is_consistent) {
    int32_t n = -1;
    char *err = NULL;
    ampc_status s = ampc_rt_device_count(&n, &err);
    if (s == AMPC_OK) {
        cr_assert_geq(n, 1);
        cr_assert_null(err, "success leaves *err NULL");
    } else {
        cr_assert_eq(s, AMPC_E_NO_DEVICE);
        cr_assert_eq(n, 0);
        cr_assert(strncmp(err, "no CUDA device: ", 16) == 0, "%s", err);
        free(err);
    }
    expect_err(ampc_rt_device_count(NULL, &err), &err, AMPC_E_INVALID_ARG, "count is NULL");
}

Test(runtime_host, device_info_without_driver) {
    if (have_driver()) t_skip_only_without("a CUDA driver", "the no-driver path is not reachable");
    ampc_rt_device_info info;
    memset(&info, 0x5a, sizeof info);
    char *err = NULL;
    expect_err(ampc_rt_device_info_get(0, &info, &err), &err, AMPC_E_NO_DEVICE, "no CUDA device: ");
    cr_assert_eq(info.major, 0, "info is zeroed on failure");
    cr_assert_eq(info.name[0], '\0');
    expect_err(ampc_rt_device_info_get(0, NULL, &err), &err, AMPC_E_INVALID_ARG, "info is NULL");
}

Test(runtime_host, model_create_without_driver) {
    if (have_driver()) t_skip_only_without("a CUDA driver", "the no-driver path is not reachable");
    tplan t;
    base_plan(&t);
    char *err = NULL;
    ampc_rt_model *m = (ampc_rt_model *)1;
    expect_err(ampc_rt_model_create(&t.p, 0, &m, &err), &err, AMPC_E_NO_DEVICE,
               "no CUDA device: the NVIDIA driver is not installed or not loaded");
    cr_assert_null(m);
    /* the same plan is valid: only the device is missing */
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    cr_assert_null(err);
}

Test(runtime_host, null_arguments) {
    tplan t;
    base_plan(&t);
    char *err = NULL;
    ampc_rt_model *m = (ampc_rt_model *)1;
    expect_err(ampc_rt_model_create(NULL, 0, &m, &err), &err, AMPC_E_INVALID_ARG,
               "ampc_rt_model_create: plan is NULL");
    cr_assert_null(m);
    expect_err(ampc_rt_model_create(&t.p, 0, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "ampc_rt_model_create: out is NULL");
    expect_err(ampc_rt_plan_check(NULL, &err), &err, AMPC_E_INVALID_ARG, "plan is NULL");
    float y[6];
    ampc_tensor out = {AMPC_DTYPE_F32, SHAPE(2, 3), y};
    expect_err(ampc_rt_model_run(NULL, NULL, 0, &out, 1, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "the model is NULL");
    double ms[1];
    expect_err(ampc_rt_model_profile(NULL, NULL, 0, &out, 1, NULL, ms, &err), &err,
               AMPC_E_INVALID_ARG, "the model is NULL");
    /* queries answer for a NULL model without crashing */
    cr_assert_eq(ampc_rt_model_n_steps(NULL), 0);
    cr_assert_eq(ampc_rt_model_n_inputs(NULL), 0);
    cr_assert_eq(ampc_rt_model_n_outputs(NULL), 0);
    cr_assert_str_eq(ampc_rt_model_step_label(NULL, 0), "");
    cr_assert_str_eq(ampc_rt_model_step_provider(NULL, 0), "");
    cr_assert_eq(ampc_rt_model_device_bytes(NULL), 0);
    cr_assert(!ampc_rt_model_io(NULL, false, 0, NULL, NULL, NULL));
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(NULL, &why), AMPC_RT_GRAPH_OFF);
    cr_assert_str_eq(why, "");
    cr_assert_eq(ampc_rt_model_graph_nodes(NULL), -1);
    ampc_rt_model_destroy(NULL);
}

Test(runtime_host, provider_libraries_open_by_soname) {
    for (int lib = 0; lib < AMPC_RT_LIB_COUNT; lib++) {
        static const char *const names[] = {"cuBLASLt", "cuDNN", "cuSPARSELt"};
        static const char *const files[] = {"libcublasLt.so.1", "libcudnn.so.9", "libcusparseLt"};
        static const int64_t mins[] = {120000, 90000, 800};
        const char *name = names[lib], *file = files[lib];
        int64_t v = -1, min = mins[lib];
        char *path = NULL, *err = NULL;
        ampc_status s = ampc_rt_library_version((ampc_rt_library)lib, &v, &path, &err);
        if (s != AMPC_OK) {
            /* not installed: the message must say which library and what is needed */
            cr_assert_eq(s, AMPC_E_CUDA);
            cr_assert(strstr(err, name) && strstr(err, "or newer"), "%s", err);
            cr_assert_eq(v, 0);
            cr_assert_null(path);
            free(err);
            continue;
        }
        cr_assert_null(err);
        cr_assert_geq(v, min, "%s version %lld", name, (long long)v);
        cr_assert_lt(v, 1000000, "%s version %lld is not major*10000+minor*100+patch", name,
                     (long long)v);
        cr_assert(strstr(path, file) != NULL, "%s loaded from %s", name, path);
        free(path);
        /* a second ask answers from the loaded library; path may be NULL */
        int64_t v2 = 0;
        cr_assert_eq(ampc_rt_library_version((ampc_rt_library)lib, &v2, NULL, NULL), AMPC_OK);
        cr_assert_eq(v2, v);
    }
    char *err = NULL;
    int64_t v = 7;
    expect_err(ampc_rt_library_version(AMPC_RT_LIB_COUNT, &v, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "unknown provider library 3 (expected 0 to 2)");
    cr_assert_eq(v, 0);
}

/* A provider library that binds nothing, reporting version fake_version. */
static int64_t fake_version;
static const char *fake_missing;
static bool fake_bind(void *h, const char **missing, int64_t *version) {
    (void)h;
    *version = fake_version;
    *missing = fake_missing;
    return fake_missing == NULL;
}

Test(runtime_host, provider_library_missing_old_or_incomplete) {
    static const char *const absent[] = {"libampc-absent.so.1", "libampc-absent.so.0", NULL};
    rt_lib lib = {.name = "cuFake", .sonames = absent, .min_version = 10203, .bind = fake_bind};
    rt_err e = {0};
    char *err = NULL;
    cr_assert_eq(rt_lib_open(&lib, &e), AMPC_E_CUDA);
    rt_err_give(&e, &err);
    cr_assert(strstr(err, "cuFake not found: tried libampc-absent.so.1 (libampc-absent.so.1: "
                          "cannot open shared object file") != NULL, "%s", err);
    cr_assert(strstr(err, "libampc-absent.so.0 (") != NULL, "%s", err);
    cr_assert(strstr(err, "ampc needs cuFake 1.2.3 or newer for this plan's steps: install it, or "
                          "add the folder holding it to LD_LIBRARY_PATH") != NULL, "%s", err);
    free(err);
    /* the failure is remembered: a second ask gives the same message */
    cr_assert_eq(rt_lib_open(&lib, &e), AMPC_E_CUDA);
    rt_err_give(&e, &err);
    cr_assert(strstr(err, "cuFake not found") != NULL, "%s", err);
    free(err);

    /* found (any library the process has will do) but too old */
    static const char *const libc[] = {"libc.so.6", NULL};
    rt_lib old = {.name = "cuFake", .sonames = libc, .min_version = 10203, .bind = fake_bind};
    fake_version = 10105;
    cr_assert_eq(rt_lib_open(&old, &e), AMPC_E_CUDA);
    rt_err_give(&e, &err);
    cr_assert(strstr(err, "libc.so.6 is version 1.1.5: ampc needs cuFake 1.2.3 or newer") != NULL,
              "%s", err);
    free(err);

    /* new enough but lacking a function */
    rt_lib partial = {.name = "cuFake", .sonames = libc, .min_version = 10203, .bind = fake_bind};
    fake_version = 20000;
    fake_missing = "cufakeCreate";
    cr_assert_eq(rt_lib_open(&partial, &e), AMPC_E_CUDA);
    rt_err_give(&e, &err);
    cr_assert(strstr(err, "(version 2.0.0) lacks the function cufakeCreate: ampc needs cuFake "
                          "1.2.3 or newer") != NULL, "%s", err);
    free(err);

    /* and the good case */
    rt_lib good = {.name = "cuFake", .sonames = libc, .min_version = 10203, .bind = fake_bind};
    fake_missing = NULL;
    cr_assert_eq(rt_lib_open(&good, &e), AMPC_OK);
    cr_assert_eq(good.version, 20000);
    cr_assert(strstr(good.path, "libc.so.6") != NULL, "%s", good.path);
    free(good.path);
    free(lib.fail);
    free(old.fail);
    free(partial.fail);
}

Test(runtime_host, plan_version) {
    tplan t;
    base_plan(&t);
    t.p.version = AMPC_RT_PLAN_VERSION + 1;
    char want[96];
    snprintf(want, sizeof want, "invalid plan: plan version %d: this runtime reads version %d",
             AMPC_RT_PLAN_VERSION + 1, AMPC_RT_PLAN_VERSION);
    expect_plan_error(&t, AMPC_E_INVALID_ARG, want);
}

Test(runtime_host, plan_refs_outside_their_space) {
    tplan t;
    base_plan(&t);
    t.steps[0].copy.dst = ARENA(496, 24);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: step 0 (Identity 'id'): copy destination [496, +24 bytes) "
                      "lies outside the arena (512 bytes)");
    base_plan(&t);
    t.steps[0].copy.src = WEIGHTS(0, 24); /* the plan has no weights */
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "copy source [0, +24 bytes) lies outside the weights (0 bytes)");
    base_plan(&t);
    t.steps[0].copy.src = ref(5, 0, 24);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "copy source has space 5, expected 0 (arena) or 1 (weights)");
}

Test(runtime_host, plan_steps_never_write_the_weights) {
    tplan t;
    base_plan(&t);
    static const float w[64];
    t.p.weights = w;
    t.p.weights_bytes = sizeof w;
    t.steps[0].kind = AMPC_RT_STEP_MEMSET;
    t.steps[0].label = "Zeros 'z'";
    t.steps[0].memset.dst = WEIGHTS(0, 64);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: step 0 (Zeros 'z'): memset destination is written but lies "
                      "in the read-only weights");
}

Test(runtime_host, plan_copy_rules) {
    tplan t;
    base_plan(&t);
    t.steps[0].copy.dst = ARENA(256, 16);
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "copy of 24 bytes into a destination of 16");
    base_plan(&t);
    t.steps[0].copy.dst = ARENA(16, 24);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "copy source [0, +24) and destination [16, +24) overlap");
    base_plan(&t);
    t.steps[0].label = NULL; /* an unlabelled step is named by its index alone */
    t.steps[0].kind = 9;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "invalid plan: step 0: unknown step kind 9");
}

Test(runtime_host, plan_inputs_and_outputs) {
    tplan t;
    base_plan(&t);
    t.in[0].ref.bytes = 8;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: input 0 'x' has a ref of 8 bytes, but f32 [2, 3] needs 24");
    base_plan(&t);
    t.out[0].dtype = (ampc_dtype)99;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "output 0 'y' has dtype 99, not a valid ampc_dtype");
    base_plan(&t);
    t.out[0].name = NULL;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "output 0 '' has no name");
    base_plan(&t);
    t.p.n_inputs = 2; /* in[1] is all zeros: no name */
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "input 1 '' has no name");
}

Test(runtime_host, plan_images) {
    tplan t;
    base_plan(&t);
    t.p.n_units = 1;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "invalid plan: unit 0 has no image (neither PTX nor cubin)");
    static const char not_terminated[4] = {'a', 'b', 'c', 'd'};
    t.img[0] = (ampc_rt_image){0, AMPC_RT_IMAGE_PTX, 80, not_terminated, 4};
    t.p.images = t.img;
    t.p.n_images = 1;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "image 0 (unit 0): PTX text is not NUL-terminated within its 4 bytes");
    t.img[0] = (ampc_rt_image){3, AMPC_RT_IMAGE_CUBIN, 90, "x", 2};
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "image 0 names unit 3; the plan has 1 units");
}

/* A kernel step y = a * x + b over the base plan's buffers. */
static void kernel_plan(tplan *t) {
    base_plan(t);
    static const char ptx[] = "// not loaded without a GPU\n";
    t->img[0] = (ampc_rt_image){0, AMPC_RT_IMAGE_PTX, 80, ptx, sizeof ptx};
    t->p.images = t->img;
    t->p.n_images = 1;
    t->p.n_units = 1;
    t->args[0] = (ampc_rt_arg){.kind = AMPC_RT_ARG_PTR, .ref = ARENA(0, 24)};
    t->args[1] = (ampc_rt_arg){.kind = AMPC_RT_ARG_PTR, .ref = ARENA(256, 24)};
    t->args[2] = (ampc_rt_arg){.kind = AMPC_RT_ARG_F32, .f32 = 2.0f};
    t->args[3] = (ampc_rt_arg){.kind = AMPC_RT_ARG_F32, .f32 = 1.0f};
    t->args[4] = (ampc_rt_arg){.kind = AMPC_RT_ARG_I32, .i32 = 6};
    t->steps[0] = (ampc_rt_step){.kind = AMPC_RT_STEP_KERNEL, .label = "Axpb 'k'",
                                 .kernel = {0, "axpb", {1, 1, 1}, {128, 1, 1}, 0, 5, t->args}};
}

Test(runtime_host, plan_kernel_rules) {
    tplan t;
    kernel_plan(&t);
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    t.steps[0].kernel.unit = 3;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: step 0 (Axpb 'k'): kernel names unit 3; the plan has 1 units");
    kernel_plan(&t);
    t.steps[0].kernel.block[1] = 16;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "kernel 'axpb' has block (128, 16, 1): each dimension must be >= 1 and the "
                      "product <= 1024");
    kernel_plan(&t);
    t.steps[0].kernel.grid[1] = 70000;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "kernel 'axpb' has grid (1, 70000, 1)");
    kernel_plan(&t);
    t.args[1].ref = ARENA(500, 24);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "kernel 'axpb' argument 1 [500, +24 bytes) lies outside the arena");
    kernel_plan(&t);
    t.args[2].kind = 7;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "kernel 'axpb' argument 2 has kind 7");
    kernel_plan(&t);
    t.steps[0].kernel.name = "";
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "kernel has no name");
}

/* A GEMM step D[2x4] = A[2x3] @ B[3x4] with everything in the weights but D. */
static void gemm_plan(tplan *t) {
    base_plan(t);
    static const float w[64];
    t->p.weights = w;
    t->p.weights_bytes = sizeof w;
    t->out[0] = (ampc_rt_io){"d", AMPC_DTYPE_F32, SHAPE(2, 4), ARENA(256, 32)};
    t->p.n_inputs = 0;
    ampc_rt_gemm g = {.m = 2, .n = 4, .k = 3, .batch = 1, .lda = 3, .ldb = 4, .ldc = 4, .ldd = 4,
                      .dtype_ab = AMPC_DTYPE_F32, .dtype_cd = AMPC_DTYPE_F32,
                      .dtype_bias = AMPC_DTYPE_F32, .alpha = 1, .a = WEIGHTS(0, 24),
                      .b = WEIGHTS(64, 48), .d = ARENA(256, 32), .bias = WEIGHTS(128, 16)};
    t->steps[0] = (ampc_rt_step){.kind = AMPC_RT_STEP_GEMM, .label = "MatMul 'mm'", .gemm = g};
}

/* The work behind `ampc run --profile`'s throughput column, counted by hand. */
Test(runtime_host, step_work_counts_flops_and_bytes) {
    double flops, bytes;
    ampc_rt_gemm g = {.m = 64, .n = 32, .k = 16, .batch = 3, .a = WEIGHTS(0, 6144),
                      .b = WEIGHTS(8192, 3072), .c = ARENA(0, 24576), .d = ARENA(0, 24576),
                      .bias = WEIGHTS(12288, 128)};
    ampc_rt_step s = {.kind = AMPC_RT_STEP_GEMM, .gemm = g};
    rt_step_work(&s, &flops, &bytes);
    cr_assert_float_eq(flops, 2.0 * 64 * 32 * 16 * 3, 0);
    cr_assert_float_eq(bytes, 6144 + 3072 + 24576 + 128, 0, "C and D are one buffer: once");
    /* 3x3 convolution, 8 -> 16 channels in 2 groups, 2 x 5 x 6 outputs, with a residual */
    ampc_rt_conv c = {.spatial = 2, .n = 2, .c_in = 8, .c_out = 16, .groups = 2,
                      .in = {5, 6}, .out = {5, 6}, .kernel = {3, 3}, .has_residual = true,
                      .x = ARENA(0, 960), .w = WEIGHTS(0, 1152), .z = ARENA(1024, 1920),
                      .y = ARENA(4096, 1920)};
    s = (ampc_rt_step){.kind = AMPC_RT_STEP_CONV, .conv = c};
    rt_step_work(&s, &flops, &bytes);
    cr_assert_float_eq(flops, 2.0 * 2 * 16 * 30 * (4 * 9), 0);
    cr_assert_float_eq(bytes, 960 + 1152 + 1920 + 1920, 0);
    c.transpose = true; /* per input element: c_out / groups * 9 multiply-adds */
    s.conv = c;
    rt_step_work(&s, &flops, &bytes);
    cr_assert_float_eq(flops, 2.0 * 2 * 8 * 30 * (8 * 9), 0);
    ampc_rt_arg args[4] = {{.kind = AMPC_RT_ARG_PTR, .ref = ARENA(0, 400)},
                           {.kind = AMPC_RT_ARG_I32, .i32 = 7},
                           {.kind = AMPC_RT_ARG_PTR, .ref = ARENA(512, 100)},
                           {.kind = AMPC_RT_ARG_PTR, .ref = ARENA(0, 400)}};
    s = (ampc_rt_step){.kind = AMPC_RT_STEP_KERNEL, .kernel = {.n_args = 4, .args = args}};
    rt_step_work(&s, &flops, &bytes);
    cr_assert_float_eq(flops, 0, 0);
    cr_assert_float_eq(bytes, 500, 0, "an in-place kernel names its buffer twice: once");
    s = (ampc_rt_step){.kind = AMPC_RT_STEP_COPY, .copy = {ARENA(0, 100), ARENA(128, 100)}};
    rt_step_work(&s, &flops, &bytes);
    cr_assert_float_eq(bytes, 200, 0, "a copy reads and writes");
    cr_assert_not(ampc_rt_model_step_work(NULL, 0, &flops, &bytes));
    cr_assert_float_eq(flops + bytes, 0, 0);
}

Test(runtime_host, plan_gemm_rules) {
    tplan t;
    gemm_plan(&t);
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    t.steps[0].gemm.epilogue = AMPC_RT_EPI_BIAS_GELU;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED,
                      "step 0 (MatMul 'mm'): matmul epilogue BIAS_GELU: cuBLASLt's GELU epilogue "
                      "is the tanh approximation, the plan asks for the erf form");
    gemm_plan(&t);
    t.steps[0].gemm.dtype_ab = AMPC_DTYPE_I8;
    t.steps[0].gemm.dtype_cd = AMPC_DTYPE_I32;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED, "matmul of i8 operands into i32: cuBLASLt runs");
    gemm_plan(&t);
    t.steps[0].gemm.lda = 2;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: step 0 (MatMul 'mm'): matmul A has row pitch 2, less than its "
                      "3 columns");
    gemm_plan(&t);
    t.steps[0].gemm.trans_b = true; /* B stored 4 x 3: pitch 4 leaves the last row short */
    t.steps[0].gemm.b = WEIGHTS(64, 40);
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "matmul B holds 40 bytes, its shape needs 60");
    gemm_plan(&t);
    t.steps[0].gemm.a = WEIGHTS(2, 24);
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "matmul A starts at offset 2, not a multiple of its element size 4");
    gemm_plan(&t);
    t.steps[0].gemm.epilogue = AMPC_RT_EPI_BIAS;
    t.steps[0].gemm.dtype_bias = AMPC_DTYPE_F16;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED,
                      "matmul bias is f16, D is f32: the bias must have D's dtype");
    gemm_plan(&t);
    t.steps[0].gemm.k = 0;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED, "matmul with k = 0 (an empty contraction)");
    gemm_plan(&t);
    t.steps[0].gemm.batch = 2;
    t.steps[0].gemm.stride_a = 6;
    t.steps[0].gemm.a = WEIGHTS(0, 48);
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "matmul D has batch stride 0 with batch 2");
    gemm_plan(&t);
    t.steps[0].gemm.c = WEIGHTS(0, 32); /* C = the weights at 0, D elsewhere: fine */
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    t.steps[0].gemm.c = ARENA(256, 32); /* C = D with another pitch */
    t.steps[0].gemm.ldc = 5;
    t.steps[0].gemm.c = ARENA(256, 36);
    t.p.arena_bytes = 512;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "matmul C and D are the same buffer with different pitches (ldc 5, ldd 4");
    gemm_plan(&t);
    t.steps[0].gemm.m = 0; /* an empty result: nothing to check beyond D's ref */
    t.steps[0].gemm.lda = 0;
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
}

/* A Conv step: x [1, 2, 8, 8] -> y [1, 4, 4, 4], kernel 3x3, stride 2, pads 1. */
static void conv_plan(tplan *t) {
    base_plan(t);
    static const float w[512];
    t->p.weights = w;
    t->p.weights_bytes = sizeof w;
    t->p.arena_bytes = 1024;
    t->p.n_inputs = 0;
    t->out[0] = (ampc_rt_io){"y", AMPC_DTYPE_F32, SHAPE(1, 4, 4, 4), ARENA(0, 256)};
    ampc_rt_conv c = {.spatial = 2, .n = 1, .c_in = 2, .c_out = 4, .groups = 1, .in = {8, 8},
                      .out = {4, 4}, .kernel = {3, 3}, .stride = {2, 2}, .dilation = {1, 1},
                      .pad_begin = {1, 1}, .pad_end = {1, 1}, .dtype = AMPC_DTYPE_F32,
                      .x = WEIGHTS(0, 512), .w = WEIGHTS(1024, 288), .y = ARENA(0, 256)};
    t->steps[0] = (ampc_rt_step){.kind = AMPC_RT_STEP_CONV, .label = "Conv 'c'", .conv = c};
}

Test(runtime_host, plan_conv_rules) {
    tplan t;
    conv_plan(&t);
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    t.steps[0].conv.pad_begin[1] = 0;
    t.steps[0].conv.pad_end[1] = 2;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED,
                      "step 0 (Conv 'c'): convolution pads must be symmetric for cuDNN: spatial "
                      "dim 1 has pad_begin 0 and pad_end 2 (pad the input first)");
    conv_plan(&t);
    t.steps[0].conv.out[0] = 5;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "invalid plan: step 0 (Conv 'c'): convolution spatial dim 0: the plan says "
                      "out 5, the input 8, kernel 3, stride 2, dilation 1 and pads 1/1 give 4");
    conv_plan(&t);
    t.steps[0].conv.groups = 3;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "convolution has n=1 c_in=2 c_out=4 groups=3: channels must be >= 1 and "
                      "divisible by groups");
    conv_plan(&t);
    t.steps[0].conv.dtype = AMPC_DTYPE_I32;
    expect_plan_error(&t, AMPC_E_UNSUPPORTED, "convolution of i32: cuDNN runs f32, f16, bf16 and f64");
    conv_plan(&t);
    t.steps[0].conv.w = WEIGHTS(1024, 280);
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "conv w holds 280 bytes, its shape needs 288");
    conv_plan(&t);
    t.steps[0].conv.has_bias = true; /* bias ref left empty */
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "conv bias holds 0 bytes, its shape needs 16");
    conv_plan(&t);
    t.steps[0].conv.spatial = 4;
    expect_plan_error(&t, AMPC_E_INVALID_ARG, "convolution with 4 spatial dims, expected 1 to 3");
    /* ConvTranspose: x [1, 2, 8, 8], w [2, 4, 3, 3] -> y [1, 4, 16, 16] with stride 2, pads 1,
     * output_padding 1: (8-1)*2 + 1 + 3 - 2 = 16 */
    conv_plan(&t);
    ampc_rt_conv *c = &t.steps[0].conv;
    c->transpose = true;
    c->out[0] = c->out[1] = 16;
    c->output_padding[0] = c->output_padding[1] = 1;
    c->y = ARENA(0, 4096);
    t.p.arena_bytes = 4096;
    t.out[0] = (ampc_rt_io){"y", AMPC_DTYPE_F32, SHAPE(1, 4, 16, 16), ARENA(0, 4096)};
    cr_assert_eq(ampc_rt_plan_check(&t.p, &err), AMPC_OK, "%s", err);
    c->out[1] = 15;
    expect_plan_error(&t, AMPC_E_INVALID_ARG,
                      "ConvTranspose spatial dim 1: the plan says out 15, the input 8, kernel 3, "
                      "stride 2, dilation 1 and pads 1/1 give 16");
}

/* ---- with a GPU: building blocks ---------------------------------------------------------------- */

/* Deterministic values in [-1, 1). */
/* ---- the tuning cache (runtime/tune_cache.c) ------------------------------------------------- */

/* A fresh cache file path for one test (removed first), set as AMPC_TUNE_CACHE. */
static const char *fresh_cache(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/ampc-test-tune-%ld-%s/tuning.txt", (long)getpid(), name);
    remove(path);
    setenv("AMPC_TUNE_CACHE", path, 1);
    rt_tune_forget();
    return path;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(tune_cache, entries_survive_the_process_and_the_last_one_wins) {
    const char *path = fresh_cache("roundtrip");
    char v[64];
    cr_assert_not(rt_tune_get("gpu|conv a", v, sizeof v), "an empty cache has nothing");
    rt_tune_put("gpu|conv a", "algo=1 math=0 graph=-");
    rt_tune_put("gpu|conv b", "algo=2 math=1 graph=A3");
    rt_tune_put("gpu|conv a", "algo=6 math=1 graph=F0");
    rt_tune_forget(); /* as a new process would, from the file */
    cr_assert(rt_tune_get("gpu|conv a", v, sizeof v));
    cr_assert_str_eq(v, "algo=6 math=1 graph=F0");
    cr_assert(rt_tune_get("gpu|conv b", v, sizeof v));
    cr_assert_str_eq(v, "algo=2 math=1 graph=A3");
    cr_assert_not(rt_tune_get("gpu|conv b", v, 8), "a value longer than the buffer is a miss");
    char *text = slurp(path);
    cr_assert_not_null(text, "the file %s was written", path);
    cr_assert_not_null(strstr(text, "gpu|conv a\talgo=6 math=1 graph=F0\n"), "%s", text);
    free(text);
    unsetenv("AMPC_TUNE_CACHE");
    rt_tune_forget();
}

Test(tune_cache, lines_that_do_not_parse_are_skipped) {
    const char *path = fresh_cache("junk");
    rt_tune_put("k0", "v0"); /* makes the folder */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "# a comment\nno tab here\n\tno key\nno value\t\ntwo\ttabs\there\n");
    for (int i = 0; i < 2000; i++) fputc('x', f); /* a line too long to be an entry */
    fprintf(f, "\tlong\nk1\tv1\nk2\tv2");  /* the last line lacks its newline: cut short */
    fclose(f);
    rt_tune_forget();
    char v[64];
    cr_assert(rt_tune_get("k1", v, sizeof v));
    cr_assert_str_eq(v, "v1");
    const char *bad[] = {"no tab here", "", "no value", "two", "k2", "# a comment", "k0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_not(rt_tune_get(bad[i], v, sizeof v), "'%s' is no entry", bad[i]);
    rt_tune_put("k\tbad", "v"); /* a key or value with a tab or newline is not stored */
    rt_tune_put("k3", "v\n3");
    rt_tune_forget();
    cr_assert_not(rt_tune_get("k3", v, sizeof v));
    unsetenv("AMPC_TUNE_CACHE");
    rt_tune_forget();
}

Test(tune_cache, off_and_unwritable_cost_nothing_but_the_timing) {
    setenv("AMPC_TUNE_CACHE", "off", 1);
    rt_tune_forget();
    char v[64];
    rt_tune_put("k", "v");
    cr_assert_not(rt_tune_get("k", v, sizeof v), "off keeps nothing");
    setenv("AMPC_TUNE_CACHE", "/proc/ampc-cannot-write-here/tuning.txt", 1);
    rt_tune_forget();
    rt_tune_put("k", "v"); /* the file cannot be written: silent */
    cr_assert(rt_tune_get("k", v, sizeof v), "the entry still holds in this process");
    unsetenv("AMPC_TUNE_CACHE");
    rt_tune_forget();
}

Test(tune_cache, the_timing_mode_is_cold_unless_asked_hot) {
    const char *set[] = {NULL, "1", "0", "yes", ""};
    const char *want[] = {"cold", "cold", "hot", "cold", "cold"};
    for (int i = 0; i < 5; i++) {
        if (set[i]) setenv("AMPC_TUNE_COLD", set[i], 1);
        else unsetenv("AMPC_TUNE_COLD");
        ampc_rt_options o;
        ampc_rt_options_init(&o);
        rt_ctx ctx = {.opts = &o};
        cr_assert_str_eq(rt_tune_mode(&ctx), want[i], "AMPC_TUNE_COLD=%s", set[i] ? set[i] : "(unset)");
    }
    unsetenv("AMPC_TUNE_COLD");
}

/* The environment's overrides read as docs/options.md says, each kind of value: a switch with an
 * automatic default, a word among several, a character held, a positive number of seconds,
 * verbosity levels. */
Test(options, environment_overrides_read_as_documented) {
    static const struct {
        const char *var, *value;
        int field; /* 0 sparse, 1 cudnn_graph, 2 cudnn_verbose, 3 gemm_tune, 4 cudnn_heur_b,
                      5 multi_gpu_graphs, 6 gemm_kernel */
        int want;
    } cases[] = {
        {"AMPC_SPARSE", NULL, 0, -1},          {"AMPC_SPARSE", "kernel", 0, 3},
        {"AMPC_SPARSE", "cusparselt", 0, 2},   {"AMPC_SPARSE", "0", 0, 0},
        {"AMPC_SPARSE", "fast", 0, -1},        {"AMPC_CUDNN_GRAPH", NULL, 1, -1},
        {"AMPC_CUDNN_GRAPH", "1", 1, 1},       {"AMPC_CUDNN_GRAPH", "x", 1, -2},
        {"AMPC_CUDNN_VERBOSE", NULL, 2, 0},    {"AMPC_CUDNN_VERBOSE", "0", 2, 0},
        {"AMPC_CUDNN_VERBOSE", "2", 2, 2},     {"AMPC_CUDNN_VERBOSE", "yes", 2, 1},
        {"AMPC_GEMM_TUNE", "1", 3, 1},         {"AMPC_GEMM_TUNE", "2", 3, 0},
        {"AMPC_CUDNN_HEUR", "AB", 4, 1},       {"AMPC_CUDNN_HEUR", "A", 4, 0},
        {"AMPC_MULTI_GPU_GRAPHS", "0", 5, 0},  {"AMPC_MULTI_GPU_GRAPHS", "on", 5, -1},
        {"AMPC_GEMM_KERNEL", "1", 6, 1},       {"AMPC_GEMM_KERNEL", "7", 6, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].value) setenv(cases[i].var, cases[i].value, 1);
        else unsetenv(cases[i].var);
        ampc_rt_options o;
        ampc_rt_options_init(&o);
        const int got[] = {o.sparse, o.cudnn_graph, o.cudnn_verbose, o.gemm_tune, o.cudnn_heur_b,
                           o.multi_gpu_graphs, o.gemm_kernel};
        cr_assert_eq(got[cases[i].field], cases[i].want, "%s=%s: got %d", cases[i].var,
                     cases[i].value ? cases[i].value : "(unset)", got[cases[i].field]);
        unsetenv(cases[i].var);
    }
    const char *secs[] = {NULL, "12.5", "-1", "x"};
    const double want[] = {300, 12.5, 300, 300};
    for (int i = 0; i < 4; i++) {
        if (secs[i]) setenv("AMPC_NCCL_TIMEOUT_S", secs[i], 1);
        else unsetenv("AMPC_NCCL_TIMEOUT_S");
        ampc_rt_options o;
        ampc_rt_options_init(&o);
        cr_assert_float_eq(o.nccl_timeout_s, want[i], 1e-12, "AMPC_NCCL_TIMEOUT_S=%s",
                           secs[i] ? secs[i] : "(unset)");
    }
    unsetenv("AMPC_NCCL_TIMEOUT_S");
}

static double rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

static void put(ampc_dtype t, void *base, int64_t i, double v) {
    switch (t) {
    case AMPC_DTYPE_F32: ((float *)base)[i] = (float)v; break;
    case AMPC_DTYPE_F16: ((uint16_t *)base)[i] = ampc_f32_to_f16((float)v); break;
    case AMPC_DTYPE_BF16: ((uint16_t *)base)[i] = ampc_f32_to_bf16((float)v); break;
    case AMPC_DTYPE_F64: ((double *)base)[i] = v; break;
    default: cr_assert_fail("put: dtype %d", t);
    }
}

static double get(ampc_dtype t, const void *base, int64_t i) {
    switch (t) {
    case AMPC_DTYPE_F32: return ((const float *)base)[i];
    case AMPC_DTYPE_F16: return ampc_f16_to_f32(((const uint16_t *)base)[i]);
    case AMPC_DTYPE_BF16: return ampc_bf16_to_f32(((const uint16_t *)base)[i]);
    case AMPC_DTYPE_F64: return ((const double *)base)[i];
    default: cr_assert_fail("get: dtype %d", t);
    }
    return 0;
}

/* A growing weights blob; every piece starts at a multiple of 256 bytes. */
typedef struct blob {
    unsigned char *data;
    int64_t size;
} blob;

static int64_t blob_add(blob *b, int64_t bytes) {
    int64_t off = (b->size + 255) / 256 * 256;
    b->data = realloc(b->data, (size_t)(off + bytes + 1));
    cr_assert_not_null(b->data);
    memset(b->data + b->size, 0, (size_t)(off + bytes - b->size));
    b->size = off + bytes;
    return off;
}

/* Fills n random values of dtype t at offset off of the blob. */
static void blob_fill(blob *b, int64_t off, ampc_dtype t, int64_t n, uint64_t *seed) {
    for (int64_t i = 0; i < n; i++) put(t, b->data + off, i, rnd(seed));
}

/* Asserts |got - want| <= tol * scale (+ a denormal floor) everywhere, reporting the worst. */
static void expect_near(const char *what, ampc_dtype t, const void *got, const double *want,
                        const double *scale, int64_t n, double tol) {
    int64_t worst = -1;
    double worst_ratio = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = get(t, got, i), err = fabs(g - want[i]), lim = tol * scale[i] + 1e-30;
        if (!(err <= lim) && (worst < 0 || !(err / lim <= worst_ratio))) {
            worst = i;
            worst_ratio = err / lim;
        }
    }
    if (worst >= 0)
        cr_assert_fail("%s: worst element %lld: got %.9g, expected %.9g (error %.3g, allowed "
                       "%.3g = %.2g x %.3g)", what, (long long)worst, get(t, got, worst),
                       want[worst], fabs(get(t, got, worst) - want[worst]), tol * scale[worst],
                       tol, scale[worst]);
}

static ampc_rt_model *create_ok(const ampc_rt_plan *p) {
    ampc_rt_model *m = NULL;
    char *err = NULL;
    ampc_status s = ampc_rt_model_create(p, 0, &m, &err);
    cr_assert_eq(s, AMPC_OK, "create: %s", err ? err : "");
    cr_assert_not_null(m);
    cr_assert_null(err);
    return m;
}

static void run_ok(ampc_rt_model *m, const ampc_tensor *in, int32_t n_in, ampc_tensor *out,
                   int32_t n_out, void *stream) {
    char *err = NULL;
    ampc_status s = ampc_rt_model_run(m, in, n_in, out, n_out, stream, &err);
    cr_assert_eq(s, AMPC_OK, "run: %s", err ? err : "");
    cr_assert_null(err);
}

/* ---- with a GPU: kernels, copies, memsets, graphs, validation ------------------------------------ */

static const char axpb_source[] =
    "extern \"C\" __global__ void axpb(const float *x, float *y, float a, float b, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + b;\n"
    "}\n";

/* Compiles axpb to PTX for compute_80 and, when arch > 0, a cubin for that architecture. */
static ampc_rt_image *compile_axpb(int32_t arch, int32_t *n) {
    ampc_nvrtc_unit u = {"axpb.cu", axpb_source};
    int32_t archs[1] = {arch};
    ampc_nvrtc_options o = {.archs = archs, .n_archs = arch > 0 ? 1 : 0, .cache_dir = ""};
    ampc_rt_image *img = NULL;
    char *err = NULL;
    ampc_status s = ampc_nvrtc_compile(&u, 1, &o, &img, n, &err);
    cr_assert_eq(s, AMPC_OK, "NVRTC: %s", err ? err : "");
    return img;
}

enum { N = 1000, NZ = 10 };

/* x f32 [N] -> kernel axpb(x, t, 2, 1) -> copy t to u; memset z f32 [NZ]. Outputs u and z. */
typedef struct pipe {
    ampc_rt_plan p;
    ampc_rt_step steps[3];
    ampc_rt_io in[1], out[2];
    ampc_rt_arg args[5];
    ampc_rt_image *img;
    int32_t n_img;
} pipe_plan;

static void make_pipe(pipe_plan *q, int32_t arch) {
    memset(q, 0, sizeof *q);
    q->img = compile_axpb(arch, &q->n_img);
    int64_t nb = N * 4;
    q->in[0] = (ampc_rt_io){"x", AMPC_DTYPE_F32, SHAPE(N), ARENA(0, nb)};
    q->out[0] = (ampc_rt_io){"u", AMPC_DTYPE_F32, SHAPE(N), ARENA(8192, nb)};
    q->out[1] = (ampc_rt_io){"z", AMPC_DTYPE_F32, SHAPE(NZ), ARENA(12288, NZ * 4)};
    q->args[0] = (ampc_rt_arg){.kind = AMPC_RT_ARG_PTR, .ref = ARENA(0, nb)};
    q->args[1] = (ampc_rt_arg){.kind = AMPC_RT_ARG_PTR, .ref = ARENA(4096, nb)};
    q->args[2] = (ampc_rt_arg){.kind = AMPC_RT_ARG_F32, .f32 = 2.0f};
    q->args[3] = (ampc_rt_arg){.kind = AMPC_RT_ARG_F32, .f32 = 1.0f};
    q->args[4] = (ampc_rt_arg){.kind = AMPC_RT_ARG_I32, .i32 = N};
    q->steps[0] = (ampc_rt_step){.kind = AMPC_RT_STEP_KERNEL, .label = "Axpb 'k'",
                                 .kernel = {0, "axpb", {(N + 127) / 128, 1, 1}, {128, 1, 1}, 0, 5,
                                            q->args}};
    q->steps[1] = (ampc_rt_step){.kind = AMPC_RT_STEP_COPY, .label = "Identity 'id'",
                                 .copy = {ARENA(4096, nb), ARENA(8192, nb)}};
    q->steps[2] = (ampc_rt_step){.kind = AMPC_RT_STEP_MEMSET, .label = "Zeros 'z'",
                                 .memset = {ARENA(12288, NZ * 4)}};
    q->p = (ampc_rt_plan){.version = AMPC_RT_PLAN_VERSION, .name = "pipe", .arena_bytes = 12544,
                          .n_units = 1, .n_images = q->n_img, .n_steps = 3, .n_inputs = 1,
                          .n_outputs = 2, .images = q->img, .steps = q->steps, .inputs = q->in,
                          .outputs = q->out};
}

static void free_pipe(pipe_plan *q) { ampc_nvrtc_images_free(q->img, q->n_img); }

/* A zeroed z for checks of plans whose z output is not requested. */
static const float *z_unused(void) {
    static const float z[NZ];
    return z;
}

static void fill_x(float *x) {
    uint64_t s = 1;
    for (int i = 0; i < N; i++) x[i] = (float)rnd(&s) * 100.0f;
}

/* u == 2x + 1 exactly (2x is exact, so one rounding either way), z == 0. */
static void expect_pipe(const float *x, const float *u, const float *z) {
    for (int i = 0; i < N; i++)
        cr_assert_eq(u[i], 2.0f * x[i] + 1.0f, "u[%d] = %.9g, expected %.9g", i, u[i],
                     2.0f * x[i] + 1.0f);
    for (int i = 0; i < NZ; i++) cr_assert_eq(z[i], 0.0f, "z[%d] = %g", i, z[i]);
}

Test(runtime_gpu, kernel_copy_memset_and_graph_replay) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q); /* the model keeps what it needs */
    cr_assert_eq(ampc_rt_model_n_steps(m), 3);
    cr_assert_str_eq(ampc_rt_model_step_provider(m, 0), "kernel");
    cr_assert_str_eq(ampc_rt_model_step_provider(m, 1), "copy");
    cr_assert_str_eq(ampc_rt_model_step_provider(m, 2), "memset");
    cr_assert_str_eq(ampc_rt_model_step_label(m, 1), "Identity 'id'");
    cr_assert_eq(ampc_rt_model_device_bytes(m), 12544);
    const char *name;
    ampc_shape sh;
    cr_assert(ampc_rt_model_io(m, true, 1, &name, NULL, &sh));
    cr_assert_str_eq(name, "z");
    cr_assert_eq(sh.dims[0], NZ);
    cr_assert_eq(ampc_rt_model_graph_status(m, NULL), AMPC_RT_GRAPH_PENDING);
    cr_assert_eq(ampc_rt_model_graph_nodes(m), -1, "no graph before the first run");

    static float x[N], u[3][N], z[3][NZ];
    fill_x(x);
    memset(z, 0xff, sizeof z);
    for (int r = 0; r < 3; r++) {
        ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
        ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), u[r]}, {AMPC_DTYPE_F32, SHAPE(NZ), z[r]}};
        run_ok(m, &in, 1, out, 2, NULL);
        const char *why = NULL;
        cr_assert_eq(ampc_rt_model_graph_status(m, &why), AMPC_RT_GRAPH_ON,
                     "runs should replay a CUDA graph: %s", why);
        cr_assert_eq(ampc_rt_model_graph_nodes(m), 3, "a kernel, a copy and a memset node");
        expect_pipe(x, u[r], z[r]);
        if (r > 0) cr_assert_arr_eq(u[r], u[0], sizeof u[0], "run %d differs from run 0", r);
    }
    ampc_rt_model_destroy(m);
}

/* Enqueued runs on a stream of the caller's: device buffers, no wait; after the stream is
 * synchronised the outputs are what a run gives, run after run. */
Test(runtime_gpu, enqueue_returns_before_the_outputs_and_they_arrive) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    static float x[N], u[N], z[NZ];
    fill_x(x);
    float *dx = NULL, *du = NULL, *dz = NULL;
    cudaStream_t s = NULL;
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&du, sizeof u), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dz, sizeof z), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(cudaMemset(du, 0xff, sizeof u), cudaSuccess);
        ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), dx};
        ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), du}, {AMPC_DTYPE_F32, SHAPE(NZ), dz}};
        char *err = NULL;
        ampc_status st = ampc_rt_model_enqueue(m, &in, 1, out, 2, s, &err);
        cr_assert_eq(st, AMPC_OK, "enqueue: %s", err ? err : "");
        cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
        cr_assert_eq(cudaMemcpy(u, du, sizeof u, cudaMemcpyDeviceToHost), cudaSuccess);
        cr_assert_eq(cudaMemcpy(z, dz, sizeof z, cudaMemcpyDeviceToHost), cudaSuccess);
        expect_pipe(x, u, z);
    }
    /* The checks are run's: a wrong shape touches nothing. */
    ampc_tensor bad = {AMPC_DTYPE_F32, SHAPE(N - 1), dx};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), du}, {AMPC_DTYPE_F32, SHAPE(NZ), dz}};
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_enqueue(m, &bad, 1, out, 2, s, &err), AMPC_E_SHAPE);
    free(err);
    cudaStreamDestroy(s);
    cudaFree(dx), cudaFree(du), cudaFree(dz);
    ampc_rt_model_destroy(m);
}

/* Runs whose tensors are all device memory replay one graph holding the copies; the copies
 * follow the caller's buffers when they move between runs, and a run on host memory in between
 * (copies on the stream) changes nothing. */
Test(runtime_gpu, device_buffers_that_move_between_runs) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    static float x[2][N], u[N], z[NZ];
    float *dx[2] = {NULL, NULL}, *du[2] = {NULL, NULL}, *dz = NULL;
    fill_x(x[0]);
    for (int i = 0; i < N; i++) x[1][i] = -3 * x[0][i] + 0.5f;
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(cudaMalloc((void **)&dx[k], sizeof x[k]), cudaSuccess);
        cr_assert_eq(cudaMalloc((void **)&du[k], sizeof u), cudaSuccess);
        cr_assert_eq(cudaMemcpy(dx[k], x[k], sizeof x[k], cudaMemcpyHostToDevice), cudaSuccess);
    }
    cr_assert_eq(cudaMalloc((void **)&dz, sizeof z), cudaSuccess);
    /* input buffer, output buffer, host buffers instead */
    static const int runs[][3] = {{0, 0, 0}, {0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                  {1, 0, 1}, {0, 1, 0}, {1, 1, 0}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        int a = runs[r][0], b = runs[r][1];
        bool host = runs[r][2];
        cr_assert_eq(cudaMemset(du[b], 0xff, sizeof u), cudaSuccess);
        memset(u, 0xff, sizeof u);
        ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), host ? (void *)x[a] : (void *)dx[a]};
        ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), host ? (void *)u : (void *)du[b]},
                              {AMPC_DTYPE_F32, SHAPE(NZ), host ? (void *)z : (void *)dz}};
        run_ok(m, &in, 1, out, 2, NULL);
        if (!host) {
            cr_assert_eq(cudaMemcpy(u, du[b], sizeof u, cudaMemcpyDeviceToHost), cudaSuccess);
            cr_assert_eq(cudaMemcpy(z, dz, sizeof z, cudaMemcpyDeviceToHost), cudaSuccess);
        }
        expect_pipe(x[a], u, z);
    }
    cr_assert_eq(ampc_rt_model_graph_status(m, NULL), AMPC_RT_GRAPH_ON);
    for (int k = 0; k < 2; k++) cudaFree(dx[k]), cudaFree(du[k]);
    cudaFree(dz);
    ampc_rt_model_destroy(m);
}

/* Device buffers are bound in place (io_bind.c): six buffer sets, more than the graphs kept,
 * twice over, then a set one float off 256-byte alignment (copied instead); every result right,
 * the input buffers never written. */
Test(runtime_gpu, device_buffers_bound_in_place) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    const char *why = "unset";
    cr_assert(ampc_rt_model_io_in_place(m, &why), "%s", why);
    cr_assert_null(why);
    enum { SETS = 7, STEP = 64 }; /* STEP floats: 256 bytes */
    static float x[N], u[N], z[NZ], back[N];
    fill_x(x);
    float *dx = NULL, *du = NULL, *dz = NULL;
    size_t room = (N + STEP * SETS) * sizeof(float);
    cr_assert_eq(cudaMalloc((void **)&dx, room), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&du, room), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dz, NZ * sizeof(float) + 256), cudaSuccess);
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < SETS; k++) {
            size_t off = k == SETS - 1 ? STEP * (size_t)k + 1 : STEP * (size_t)k;
            cr_assert_eq(cudaMemcpy(dx + off, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
            cr_assert_eq(cudaMemset(du, 0xff, room), cudaSuccess);
            cr_assert_eq(cudaMemset(dz, 0xff, NZ * sizeof(float)), cudaSuccess);
            ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), dx + off};
            ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), du + off},
                                  {AMPC_DTYPE_F32, SHAPE(NZ), dz}};
            run_ok(m, &in, 1, out, 2, NULL);
            cr_assert_eq(cudaMemcpy(u, du + off, sizeof u, cudaMemcpyDeviceToHost), cudaSuccess);
            cr_assert_eq(cudaMemcpy(z, dz, sizeof z, cudaMemcpyDeviceToHost), cudaSuccess);
            expect_pipe(x, u, z);
            cr_assert_eq(cudaMemcpy(back, dx + off, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
            cr_assert_arr_eq(back, x, sizeof x, "set %d: the input buffer was written", k);
        }
    cr_assert(ampc_rt_model_io_in_place(m, NULL));
    cudaFree(dx), cudaFree(du), cudaFree(dz);
    ampc_rt_model_destroy(m);
}

Test(runtime_gpu, in_place_off_by_environment) {
    t_skip_without_gpu();
    setenv("AMPC_ZERO_COPY", "0", 1);
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    const char *why = NULL;
    cr_assert_not(ampc_rt_model_io_in_place(m, &why));
    cr_assert_str_eq(why, "turned off by the zero_copy option (AMPC_ZERO_COPY=0)");
    static float x[N], u[N], z[NZ];
    fill_x(x);
    float *dx = NULL, *du = NULL, *dz = NULL;
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&du, sizeof u), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dz, sizeof z), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), dx};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), du}, {AMPC_DTYPE_F32, SHAPE(NZ), dz}};
    for (int r = 0; r < 3; r++) run_ok(m, &in, 1, out, 2, NULL);
    cr_assert_eq(cudaMemcpy(u, du, sizeof u, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(cudaMemcpy(z, dz, sizeof z, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_pipe(x, u, z);
    cudaFree(dx), cudaFree(du), cudaFree(dz);
    ampc_rt_model_destroy(m);
}

/* The same switches given as options, the environment unset: the model follows its options,
 * and a model made afterwards without options is back to the defaults. */
Test(runtime_gpu, options_given_at_creation) {
    t_skip_without_gpu();
    unsetenv("AMPC_CUDA_GRAPHS");
    unsetenv("AMPC_ZERO_COPY");
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_options o;
    ampc_rt_options_init(&o);
    cr_assert(o.cuda_graphs && o.zero_copy, "the defaults");
    o.cuda_graphs = false, o.zero_copy = false;
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create_opts(&q.p, 0, &o, &m, &err), AMPC_OK, "%s", err);
    o.cuda_graphs = true; /* the model keeps its own copy */
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(m, &why), AMPC_RT_GRAPH_OFF);
    cr_assert_str_eq(why, "turned off by the cuda_graphs option (AMPC_CUDA_GRAPHS=0)");
    cr_assert_not(ampc_rt_model_io_in_place(m, &why));
    cr_assert_str_eq(why, "turned off by the zero_copy option (AMPC_ZERO_COPY=0)");
    static float x[N], u[N], z[NZ];
    fill_x(x);
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), u}, {AMPC_DTYPE_F32, SHAPE(NZ), z}};
    for (int r = 0; r < 2; r++) run_ok(m, &in, 1, out, 2, NULL);
    expect_pipe(x, u, z);
    cr_assert_eq(ampc_rt_model_graph_status(m, NULL), AMPC_RT_GRAPH_OFF);
    ampc_rt_model_destroy(m);
    m = create_ok(&q.p);
    cr_assert(ampc_rt_model_io_in_place(m, NULL), "a model without options: the defaults");
    for (int r = 0; r < 2; r++) run_ok(m, &in, 1, out, 2, NULL);
    cr_assert_eq(ampc_rt_model_graph_status(m, NULL), AMPC_RT_GRAPH_ON);
    expect_pipe(x, u, z);
    ampc_rt_model_destroy(m);
    free_pipe(&q);
}

Test(runtime_gpu, graphs_off_by_environment_and_profile) {
    t_skip_without_gpu();
    setenv("AMPC_CUDA_GRAPHS", "0", 1);
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(m, &why), AMPC_RT_GRAPH_OFF);
    cr_assert_str_eq(why, "turned off by the cuda_graphs option (AMPC_CUDA_GRAPHS=0)");
    static float x[N], u[N], z[NZ];
    fill_x(x);
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), u}, {AMPC_DTYPE_F32, SHAPE(NZ), z}};
    run_ok(m, &in, 1, out, 2, NULL);
    expect_pipe(x, u, z);
    memset(u, 0, sizeof u);
    double ms[3] = {-1, -1, -1};
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_profile(m, &in, 1, out, 2, NULL, ms, &err), AMPC_OK, "%s", err);
    expect_pipe(x, u, z);
    for (int i = 0; i < 3; i++) cr_assert(ms[i] >= 0 && ms[i] < 1000, "step %d took %g ms", i, ms[i]);
    expect_err(ampc_rt_model_profile(m, &in, 1, out, 2, NULL, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "step_ms is NULL, expected room for 3 values");
    ampc_rt_model_destroy(m);
}

Test(runtime_gpu, user_stream_device_and_pinned_buffers) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    static float x[N], u[N];
    fill_x(x);
    float *dx = NULL, *du = NULL, *pz = NULL;
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&du, sizeof u), cudaSuccess);
    cr_assert_eq(cudaMallocHost((void **)&pz, NZ * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
    for (int i = 0; i < NZ; i++) pz[i] = 7;
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), dx};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), du}, {AMPC_DTYPE_F32, SHAPE(NZ), pz}};
    for (int r = 0; r < 2; r++) { /* capture, then replay on the user's stream */
        run_ok(m, &in, 1, out, 2, s);
        cr_assert_eq(cudaMemcpy(u, du, sizeof u, cudaMemcpyDeviceToHost), cudaSuccess);
        expect_pipe(x, u, pz);
    }
    cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
    cudaFree(dx);
    cudaFree(du);
    cudaFreeHost(pz);
    ampc_rt_model_destroy(m);
}

Test(runtime_gpu, inputs_are_validated_before_any_copy) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    static float x[N + 1], u[N], z[NZ + 1];
    fill_x(x);
    memset(u, 0x7f, sizeof u); /* a sentinel: a rejected run must not write the outputs */
    char *err = NULL;
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), u}, {AMPC_DTYPE_F32, SHAPE(NZ), z}};
    ampc_tensor bad = in;
    bad.dtype = AMPC_DTYPE_F16;
    expect_err(ampc_rt_model_run(m, &bad, 1, out, 2, NULL, &err), &err, AMPC_E_DTYPE,
               "input 0 'x' has dtype f16, expected f32");
    bad = in;
    bad.shape = SHAPE(N + 1);
    expect_err(ampc_rt_model_run(m, &bad, 1, out, 2, NULL, &err), &err, AMPC_E_SHAPE,
               "input 0 'x' has shape [1001], expected [1000]");
    bad.shape = SHAPE(1, N);
    expect_err(ampc_rt_model_run(m, &bad, 1, out, 2, NULL, &err), &err, AMPC_E_SHAPE,
               "input 0 'x' has shape [1, 1000], expected [1000]");
    bad = in;
    bad.data = NULL;
    expect_err(ampc_rt_model_run(m, &bad, 1, out, 2, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "input 0 'x' has NULL data, expected a buffer of 4000 bytes (f32 [1000])");
    ampc_tensor two[2] = {in, in};
    expect_err(ampc_rt_model_run(m, two, 2, out, 2, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "got 2 inputs, the model takes 1 ('x')");
    expect_err(ampc_rt_model_run(m, NULL, 1, out, 2, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "got 1 inputs (and a NULL array), the model takes 1 ('x')");
    expect_err(ampc_rt_model_run(m, &in, 1, out, 1, NULL, &err), &err, AMPC_E_INVALID_ARG,
               "got 1 outputs, the model gives 2 ('u', 'z')");
    ampc_tensor badout[2] = {out[0], {AMPC_DTYPE_F32, SHAPE(NZ + 1), z}};
    expect_err(ampc_rt_model_run(m, &in, 1, badout, 2, NULL, &err), &err, AMPC_E_SHAPE,
               "output 1 'z' has shape [11], expected [10]");
    badout[1] = (ampc_tensor){AMPC_DTYPE_I32, SHAPE(NZ), z};
    expect_err(ampc_rt_model_run(m, &in, 1, badout, 2, NULL, &err), &err, AMPC_E_DTYPE,
               "output 1 'z' has dtype i32, expected f32");
    uint32_t sentinel;
    memcpy(&sentinel, &u[0], 4);
    cr_assert_eq(sentinel, 0x7f7f7f7fu, "a rejected run wrote output 0");
    run_ok(m, &in, 1, out, 2, NULL); /* and the model still works */
    expect_pipe(x, u, z);
    ampc_rt_model_destroy(m);
}

Test(runtime_gpu, cubin_preferred_and_bad_ptx_reported) {
    ampc_rt_device_info d = t_skip_without_gpu();
    int32_t arch = d.major * 10 + d.minor;
    pipe_plan q;
    make_pipe(&q, arch);
    cr_assert_eq(q.n_img, 2, "PTX and one cubin");
    /* break the PTX: creation succeeds only if the cubin is the image loaded */
    static const char junk[] = "this is not PTX";
    ampc_rt_image imgs[2] = {q.img[0], q.img[1]};
    cr_assert_eq(imgs[0].kind, AMPC_RT_IMAGE_PTX);
    imgs[0].data = junk;
    imgs[0].size = sizeof junk;
    q.p.images = imgs;
    ampc_rt_model *m = create_ok(&q.p);
    static float x[N], u[N], z[NZ];
    fill_x(x);
    ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
    ampc_tensor out[2] = {{AMPC_DTYPE_F32, SHAPE(N), u}, {AMPC_DTYPE_F32, SHAPE(NZ), z}};
    run_ok(m, &in, 1, out, 2, NULL);
    expect_pipe(x, u, z);
    ampc_rt_model_destroy(m);
    /* only the broken PTX: the driver rejects it and the message says which image */
    q.p.n_images = 1;
    char *err = NULL;
    char want[128];
    /* the driver loads lazily (CUDA 12+): the broken image is rejected when the first kernel is
     * taken from it, and the message names the unit and its image */
    snprintf(want, sizeof want, "could not be loaded from unit 0 (PTX for compute_80)");
    expect_err(ampc_rt_model_create(&q.p, 0, &m, &err), &err, AMPC_E_CUDA, want);
    /* only a cubin for another architecture */
    imgs[0] = q.img[1];
    imgs[0].sm = arch == 80 ? 86 : 80;
    snprintf(want, sizeof want, "unit 0 has no image that runs on sm_%d: it has cubin for sm_%d",
             arch, imgs[0].sm);
    expect_err(ampc_rt_model_create(&q.p, 0, &m, &err), &err, AMPC_E_UNSUPPORTED, want);
    free_pipe(&q);
}

Test(runtime_gpu, kernel_parameters_checked_at_load) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    q.steps[0].kernel.n_args = 3;
    expect_err(ampc_rt_model_create(&q.p, 0, &m, &err), &err, AMPC_E_INVALID_ARG,
               "step 0 (Axpb 'k'): kernel 'axpb' takes more than the 3 parameters the plan passes");
    q.steps[0].kernel.n_args = 5;
    q.args[4] = (ampc_rt_arg){.kind = AMPC_RT_ARG_I64, .i64 = N};
    expect_err(ampc_rt_model_create(&q.p, 0, &m, &err), &err, AMPC_E_INVALID_ARG,
               "kernel 'axpb' parameter 4 is 4 bytes, the plan passes a i64 (8 bytes)");
    q.args[4] = (ampc_rt_arg){.kind = AMPC_RT_ARG_I32, .i32 = N};
    q.steps[0].kernel.name = "nope";
    expect_err(ampc_rt_model_create(&q.p, 0, &m, &err), &err, AMPC_E_CUDA,
               "kernel 'nope' not found in unit 0 (PTX for compute_80): cudaLibraryGetKernel");
    cr_assert_null(m);
    free_pipe(&q);
}

/* ---- with a GPU: cuBLASLt ------------------------------------------------------------------------ */

typedef struct gcase {
    int64_t m, n, k, batch;
    bool ta, tb;
    int64_t pad;    /* extra elements at the end of each stored row of A, B and C */
    bool share_b;   /* B's batch stride 0: one B for every batch */
    ampc_dtype ab, cd;
    uint8_t math, epi;
    bool with_c;
    float alpha, beta;
    double tol;     /* allowed error relative to sum |alpha a b| + |beta c| + |bias| */
} gcase;

/* Builds a one-GEMM plan (A, B, C, bias in the weights; D the output), runs it twice (the second
 * run replays the graph) and checks D against a double-precision loop. */
static void check_gemm(const gcase *g) {
    t_skip_without_gpu();
    size_t eab = ampc_dtype_size(g->ab), ecd = ampc_dtype_size(g->cd);
    int64_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k, lda = ac + g->pad;
    int64_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n, ldb = bc + g->pad;
    int64_t ldc = g->n + g->pad, sa = ar * lda, sb = g->share_b ? 0 : br * ldb, sc = g->m * ldc;
    int64_t na = g->batch * sa, nb = g->share_b ? br * ldb : g->batch * sb, nc = g->batch * sc;
    bool bias = g->epi == AMPC_RT_EPI_BIAS || g->epi == AMPC_RT_EPI_BIAS_RELU;
    bool relu = g->epi == AMPC_RT_EPI_RELU || g->epi == AMPC_RT_EPI_BIAS_RELU;
    blob w = {0};
    uint64_t seed = 42;
    int64_t oa = blob_add(&w, na * (int64_t)eab), ob = blob_add(&w, nb * (int64_t)eab);
    int64_t oc = blob_add(&w, nc * (int64_t)ecd), obias = blob_add(&w, g->n * (int64_t)ecd);
    blob_fill(&w, oa, g->ab, na, &seed);
    blob_fill(&w, ob, g->ab, nb, &seed);
    blob_fill(&w, oc, g->cd, nc, &seed);
    blob_fill(&w, obias, g->cd, g->n, &seed);
    int64_t nd = g->batch * g->m * g->n, dbytes = nd * (int64_t)ecd;

    ampc_rt_gemm gm = {.m = g->m, .n = g->n, .k = g->k, .batch = g->batch, .trans_a = g->ta,
                       .trans_b = g->tb, .lda = lda, .ldb = ldb, .ldc = ldc, .ldd = g->n,
                       .stride_a = sa, .stride_b = sb, .stride_c = sc, .stride_d = g->m * g->n,
                       .dtype_ab = g->ab, .dtype_cd = g->cd, .dtype_bias = g->cd, .math = g->math,
                       .epilogue = g->epi, .alpha = g->alpha, .beta = g->beta,
                       .a = WEIGHTS(oa, na * (int64_t)eab), .b = WEIGHTS(ob, nb * (int64_t)eab),
                       .c = g->with_c ? WEIGHTS(oc, nc * (int64_t)ecd) : ref(0, 0, 0),
                       .d = ARENA(0, dbytes),
                       .bias = bias ? WEIGHTS(obias, g->n * (int64_t)ecd) : ref(0, 0, 0)};
    ampc_rt_step step = {.kind = AMPC_RT_STEP_GEMM, .label = "Gemm 'g'", .gemm = gm};
    ampc_rt_io out = {"d", g->cd, g->batch > 1 ? SHAPE(g->batch, g->m, g->n) : SHAPE(g->m, g->n),
                      ARENA(0, dbytes)};
    ampc_rt_plan p = {.version = AMPC_RT_PLAN_VERSION, .name = "gemm",
                      .arena_bytes = dbytes > 0 ? dbytes : 256, .weights = w.data,
                      .weights_bytes = w.size, .n_steps = 1, .n_outputs = 1, .steps = &step,
                      .outputs = &out};
    ampc_rt_model *m = create_ok(&p);
    cr_assert_str_eq(ampc_rt_model_step_provider(m, 0), "cuBLASLt");

    double *want = calloc((size_t)nd + 1, sizeof *want), *scale = calloc((size_t)nd + 1, sizeof *scale);
    const unsigned char *A = w.data + oa, *B = w.data + ob, *C = w.data + oc, *Bi = w.data + obias;
    for (int64_t b = 0; b < g->batch; b++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                double acc = 0, mag = 0;
                for (int64_t q = 0; q < g->k; q++) {
                    double av = get(g->ab, A, b * sa + (g->ta ? q * lda + i : i * lda + q));
                    double bv = get(g->ab, B, b * sb + (g->tb ? j * ldb + q : q * ldb + j));
                    acc += av * bv;
                    mag += fabs(av * bv);
                }
                double v = g->alpha * acc;
                mag *= fabs(g->alpha);
                if (g->with_c) {
                    double cv = get(g->cd, C, b * sc + i * ldc + j);
                    v += g->beta * cv;
                    mag += fabs(g->beta * cv);
                }
                if (bias) {
                    v += get(g->cd, Bi, j);
                    mag += fabs(get(g->cd, Bi, j));
                }
                if (relu && v < 0) v = 0;
                int64_t o = (b * g->m + i) * g->n + j;
                want[o] = v;
                scale[o] = mag > 0 ? mag : 1;
            }
    unsigned char *d = malloc((size_t)dbytes + 1);
    for (int r = 0; r < 2; r++) {
        memset(d, 0x55, (size_t)dbytes);
        ampc_tensor t = {g->cd, out.shape, d};
        run_ok(m, NULL, 0, &t, 1, NULL);
        expect_near(r ? "D (graph replay)" : "D", g->cd, d, want, scale, nd, g->tol);
    }
    free(d);
    free(want);
    free(scale);
    free(w.data);
    ampc_rt_model_destroy(m);
}

Test(runtime_gpu, gemm_f32_plain) {
    check_gemm(&(gcase){.m = 37, .n = 23, .k = 41, .batch = 1, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .alpha = 1, .tol = 1e-5});
}

Test(runtime_gpu, gemm_f32_transposed_padded_pitch) {
    check_gemm(&(gcase){.m = 19, .n = 33, .k = 17, .batch = 1, .ta = true, .tb = true, .pad = 3,
                        .ab = AMPC_DTYPE_F32, .cd = AMPC_DTYPE_F32, .alpha = 1, .tol = 1e-5});
    check_gemm(&(gcase){.m = 8, .n = 5, .k = 12, .batch = 1, .tb = true, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .alpha = 1, .tol = 1e-5});
}

Test(runtime_gpu, gemm_f32_batched_shared_b_with_c) {
    check_gemm(&(gcase){.m = 16, .n = 24, .k = 20, .batch = 3, .share_b = true, .with_c = true,
                        .ab = AMPC_DTYPE_F32, .cd = AMPC_DTYPE_F32, .alpha = 2, .beta = 0.5f,
                        .tol = 1e-5});
}

Test(runtime_gpu, gemm_f32_bias_relu) {
    check_gemm(&(gcase){.m = 31, .n = 40, .k = 64, .batch = 1, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .epi = AMPC_RT_EPI_BIAS_RELU, .alpha = 1,
                        .tol = 1e-5});
    check_gemm(&(gcase){.m = 9, .n = 7, .k = 5, .batch = 2, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .epi = AMPC_RT_EPI_RELU, .alpha = 1, .tol = 1e-5});
    check_gemm(&(gcase){.m = 9, .n = 8, .k = 5, .batch = 1, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .epi = AMPC_RT_EPI_BIAS, .alpha = 1, .tol = 1e-5});
}

Test(runtime_gpu, gemm_tf32) {
    check_gemm(&(gcase){.m = 64, .n = 48, .k = 96, .batch = 1, .ab = AMPC_DTYPE_F32,
                        .cd = AMPC_DTYPE_F32, .math = AMPC_RT_MATH_TF32,
                        .epi = AMPC_RT_EPI_BIAS, .alpha = 1, .tol = 4e-3});
}

Test(runtime_gpu, gemm_f16) {
    check_gemm(&(gcase){.m = 32, .n = 64, .k = 48, .batch = 2, .ab = AMPC_DTYPE_F16,
                        .cd = AMPC_DTYPE_F16, .epi = AMPC_RT_EPI_BIAS_RELU, .alpha = 1,
                        .tol = 3e-3});
    check_gemm(&(gcase){.m = 24, .n = 40, .k = 32, .batch = 1, .ta = true, .ab = AMPC_DTYPE_F16,
                        .cd = AMPC_DTYPE_F32, .alpha = 1, .tol = 1e-5});
}

Test(runtime_gpu, gemm_bf16_and_f64) {
    check_gemm(&(gcase){.m = 32, .n = 32, .k = 64, .batch = 1, .ab = AMPC_DTYPE_BF16,
                        .cd = AMPC_DTYPE_BF16, .epi = AMPC_RT_EPI_BIAS, .alpha = 1, .tol = 1e-2});
    check_gemm(&(gcase){.m = 13, .n = 11, .k = 17, .batch = 2, .with_c = true,
                        .ab = AMPC_DTYPE_F64, .cd = AMPC_DTYPE_F64, .alpha = 1, .beta = 1,
                        .tol = 1e-12});
}

Test(runtime_gpu, gemm_empty_result_is_a_noop) {
    t_skip_without_gpu();
    ampc_rt_gemm gm = {.m = 0, .n = 4, .k = 3, .batch = 1, .lda = 3, .ldb = 4, .ldd = 4,
                       .dtype_ab = AMPC_DTYPE_F32, .dtype_cd = AMPC_DTYPE_F32, .alpha = 1,
                       .d = ARENA(0, 256)};
    ampc_rt_step step = {.kind = AMPC_RT_STEP_GEMM, .label = "Gemm 'e'", .gemm = gm};
    ampc_rt_io out = {"d", AMPC_DTYPE_F32, SHAPE(0, 4), ARENA(0, 0)};
    ampc_rt_plan p = {.version = AMPC_RT_PLAN_VERSION, .name = "empty", .arena_bytes = 256,
                      .n_steps = 1, .n_outputs = 1, .steps = &step, .outputs = &out};
    ampc_rt_model *m = create_ok(&p);
    ampc_tensor t = {AMPC_DTYPE_F32, SHAPE(0, 4), NULL}; /* no bytes: NULL data is fine */
    run_ok(m, NULL, 0, &t, 1, NULL);
    ampc_rt_model_destroy(m);
}

/* ---- with a GPU: cuDNN --------------------------------------------------------------------------- */

typedef struct ccase {
    int spatial;
    int64_t n, cin, cout, groups;
    int64_t in[3], k[3], stride[3], dil[3], pad[3], opad[3];
    bool transpose, bias, relu, residual;
    ampc_dtype dt;
    uint8_t math;
    double tol;
} ccase;

/* Builds a one-convolution plan (x, w, bias, z in the weights; y the output), runs it twice and
 * checks y against a direct loop (spatial dims lifted to 3 with unit extents). */
static void check_conv(const ccase *c) {
    t_skip_without_gpu();
    int64_t out[3] = {1, 1, 1}, in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1},
            dl[3] = {1, 1, 1}, pd[3] = {0, 0, 0};
    int off = 3 - c->spatial;
    for (int i = 0; i < c->spatial; i++) {
        in[off + i] = c->in[i];
        k[off + i] = c->k[i];
        st[off + i] = c->stride[i];
        dl[off + i] = c->dil[i];
        pd[off + i] = c->pad[i];
        int64_t span = c->dil[i] * (c->k[i] - 1) + 1;
        out[off + i] = c->transpose ? (c->in[i] - 1) * c->stride[i] + c->opad[i] + span - 2 * c->pad[i]
                                    : (c->in[i] + 2 * c->pad[i] - span) / c->stride[i] + 1;
    }
    int64_t cin_g = c->cin / c->groups, cout_g = c->cout / c->groups;
    int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
    int64_t nx = c->n * c->cin * isz, ny = c->n * c->cout * osz;
    int64_t nw = (c->transpose ? c->cin * cout_g : c->cout * cin_g) * ksz;
    size_t es = ampc_dtype_size(c->dt);
    blob w = {0};
    uint64_t seed = 7;
    int64_t ox = blob_add(&w, nx * (int64_t)es), ow = blob_add(&w, nw * (int64_t)es);
    int64_t ob = blob_add(&w, c->cout * (int64_t)es), oz = blob_add(&w, ny * (int64_t)es);
    blob_fill(&w, ox, c->dt, nx, &seed);
    blob_fill(&w, ow, c->dt, nw, &seed);
    blob_fill(&w, ob, c->dt, c->cout, &seed);
    blob_fill(&w, oz, c->dt, ny, &seed);
    const unsigned char *X = w.data + ox, *W = w.data + ow, *Bv = w.data + ob, *Z = w.data + oz;

    double *want = calloc((size_t)ny, sizeof *want), *scale = calloc((size_t)ny, sizeof *scale);
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t ci = 0; ci < c->cin; ci++) {
            int64_t g = ci / cin_g;
            for (int64_t i0 = 0; i0 < (c->transpose ? in[0] : out[0]); i0++)
                for (int64_t i1 = 0; i1 < (c->transpose ? in[1] : out[1]); i1++)
                    for (int64_t i2 = 0; i2 < (c->transpose ? in[2] : out[2]); i2++)
                        for (int64_t col = 0; col < cout_g; col++)
                            for (int64_t k0 = 0; k0 < k[0]; k0++)
                                for (int64_t k1 = 0; k1 < k[1]; k1++)
                                    for (int64_t k2 = 0; k2 < k[2]; k2++) {
                                        int64_t co = g * cout_g + col, kk = (k0 * k[1] + k1) * k[2] + k2;
                                        /* forward: (i0,i1,i2) is the output position, p the input;
                                         * transpose: (i0,i1,i2) is the input position, p the output */
                                        int64_t p0 = i0 * st[0] - pd[0] + k0 * dl[0];
                                        int64_t p1 = i1 * st[1] - pd[1] + k1 * dl[1];
                                        int64_t p2 = i2 * st[2] - pd[2] + k2 * dl[2];
                                        const int64_t *lim = c->transpose ? out : in;
                                        if (p0 < 0 || p1 < 0 || p2 < 0 || p0 >= lim[0] || p1 >= lim[1] ||
                                            p2 >= lim[2])
                                            continue;
                                        int64_t xo, yo, wo;
                                        if (c->transpose) {
                                            xo = ((n * c->cin + ci) * in[0] + i0) * in[1] * in[2] + i1 * in[2] + i2;
                                            yo = ((n * c->cout + co) * out[0] + p0) * out[1] * out[2] + p1 * out[2] + p2;
                                            wo = (ci * cout_g + col) * ksz + kk;
                                        } else {
                                            xo = ((n * c->cin + ci) * in[0] + p0) * in[1] * in[2] + p1 * in[2] + p2;
                                            yo = ((n * c->cout + co) * out[0] + i0) * out[1] * out[2] + i1 * out[2] + i2;
                                            wo = (co * cin_g + (ci - g * cin_g)) * ksz + kk;
                                        }
                                        double prod = get(c->dt, X, xo) * get(c->dt, W, wo);
                                        want[yo] += prod;
                                        scale[yo] += fabs(prod);
                                    }
        }
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t co = 0; co < c->cout; co++)
            for (int64_t s = 0; s < osz; s++) {
                int64_t yo = (n * c->cout + co) * osz + s;
                if (c->residual) {
                    want[yo] += get(c->dt, Z, yo);
                    scale[yo] += fabs(get(c->dt, Z, yo));
                }
                if (c->bias) {
                    want[yo] += get(c->dt, Bv, co);
                    scale[yo] += fabs(get(c->dt, Bv, co));
                }
                if (c->relu && want[yo] < 0) want[yo] = 0;
                if (scale[yo] == 0) scale[yo] = 1;
            }

    int64_t ybytes = ny * (int64_t)es;
    ampc_rt_conv cv = {.spatial = c->spatial, .n = c->n, .c_in = c->cin, .c_out = c->cout,
                       .groups = c->groups, .dtype = c->dt, .math = c->math, .relu = c->relu,
                       .has_bias = c->bias, .has_residual = c->residual,
                       .transpose = c->transpose, .x = WEIGHTS(ox, nx * (int64_t)es),
                       .w = WEIGHTS(ow, nw * (int64_t)es),
                       .bias = c->bias ? WEIGHTS(ob, c->cout * (int64_t)es) : ref(0, 0, 0),
                       .z = c->residual ? WEIGHTS(oz, ybytes) : ref(0, 0, 0),
                       .y = ARENA(0, ybytes)};
    ampc_shape ys = {c->spatial + 2, {c->n, c->cout}};
    for (int i = 0; i < c->spatial; i++) {
        cv.in[i] = c->in[i];
        cv.out[i] = out[off + i];
        cv.kernel[i] = c->k[i];
        cv.stride[i] = c->stride[i];
        cv.dilation[i] = c->dil[i];
        cv.pad_begin[i] = cv.pad_end[i] = c->pad[i];
        cv.output_padding[i] = c->opad[i];
        ys.dims[2 + i] = out[off + i];
    }
    ampc_rt_step step = {.kind = AMPC_RT_STEP_CONV, .label = "Conv 'c'", .conv = cv};
    ampc_rt_io oio = {"y", c->dt, ys, ARENA(0, ybytes)};
    ampc_rt_plan p = {.version = AMPC_RT_PLAN_VERSION, .name = "conv", .arena_bytes = ybytes,
                      .weights = w.data, .weights_bytes = w.size, .n_steps = 1, .n_outputs = 1,
                      .steps = &step, .outputs = &oio};
    ampc_rt_model *m = create_ok(&p);
    cr_assert_str_eq(ampc_rt_model_step_provider(m, 0), "cuDNN");
    unsigned char *y = malloc((size_t)ybytes);
    for (int r = 0; r < 2; r++) {
        memset(y, 0x55, (size_t)ybytes);
        ampc_tensor t = {c->dt, ys, y};
        run_ok(m, NULL, 0, &t, 1, NULL);
        expect_near(r ? "y (graph replay)" : "y", c->dt, y, want, scale, ny, c->tol);
    }
    free(y);
    free(want);
    free(scale);
    free(w.data);
    ampc_rt_model_destroy(m);
}

/* f32 tolerances are 1e-4 of sum |x w|: cuDNN may pick FFT or Winograd algorithms, whose
 * rounding differs from a direct sum's; a wrong index or TF32 use is far above that. */
Test(runtime_gpu, conv2d_stride_dilation_groups_bias_relu) {
    /* f32 with bias and ReLU: the fused cudnnConvolutionBiasActivationForward */
    check_conv(&(ccase){.spatial = 2, .n = 2, .cin = 4, .cout = 6, .groups = 2, .in = {9, 11},
                        .k = {3, 3}, .stride = {2, 1}, .dil = {1, 2}, .pad = {1, 2},
                        .bias = true, .relu = true, .dt = AMPC_DTYPE_F32, .tol = 1e-4});
}

Test(runtime_gpu, conv2d_bias_residual_tf32) {
    /* bias and residual without ReLU: convolution then cudnnAddTensor twice */
    check_conv(&(ccase){.spatial = 2, .n = 1, .cin = 8, .cout = 8, .groups = 1, .in = {12, 10},
                        .k = {3, 3}, .stride = {1, 1}, .dil = {1, 1}, .pad = {1, 1}, .bias = true,
                        .residual = true, .dt = AMPC_DTYPE_F32, .math = AMPC_RT_MATH_TF32,
                        .tol = 4e-3});
}

Test(runtime_gpu, conv1d_relu_and_conv3d) {
    check_conv(&(ccase){.spatial = 1, .n = 2, .cin = 3, .cout = 5, .groups = 1, .in = {20},
                        .k = {4}, .stride = {3}, .dil = {2}, .pad = {2}, .relu = true,
                        .dt = AMPC_DTYPE_F32, .tol = 1e-4});
    check_conv(&(ccase){.spatial = 3, .n = 1, .cin = 2, .cout = 4, .groups = 1, .in = {5, 6, 7},
                        .k = {3, 2, 3}, .stride = {1, 2, 1}, .dil = {1, 1, 2}, .pad = {1, 0, 1},
                        .bias = true, .dt = AMPC_DTYPE_F32, .tol = 1e-4});
}

Test(runtime_gpu, conv2d_depthwise) {
    check_conv(&(ccase){.spatial = 2, .n = 2, .cin = 8, .cout = 8, .groups = 8, .in = {10, 10},
                        .k = {3, 3}, .stride = {2, 2}, .dil = {1, 1}, .pad = {1, 1}, .bias = true,
                        .relu = true, .dt = AMPC_DTYPE_F32, .tol = 1e-4});
}

Test(runtime_gpu, conv_transpose2d) {
    check_conv(&(ccase){.spatial = 2, .n = 1, .cin = 4, .cout = 6, .groups = 2, .in = {5, 7},
                        .k = {3, 3}, .stride = {2, 2}, .dil = {1, 1}, .pad = {1, 1},
                        .opad = {1, 0}, .transpose = true, .bias = true, .relu = true,
                        .dt = AMPC_DTYPE_F32, .tol = 1e-4});
}

Test(runtime_gpu, conv2d_f16) {
    check_conv(&(ccase){.spatial = 2, .n = 2, .cin = 8, .cout = 16, .groups = 1, .in = {8, 8},
                        .k = {3, 3}, .stride = {1, 1}, .dil = {1, 1}, .pad = {1, 1}, .bias = true,
                        .relu = true, .dt = AMPC_DTYPE_F16, .tol = 3e-3});
}

/* The tuning cache on a convolution: the first creation records cuDNN's choice, the second takes
 * it (and computes the same), and an entry whose algorithm does not exist sends the creation back
 * to the search, with a correct result and the entry rewritten. The key names how the candidates
 * were timed: a creation timing them hot (AMPC_TUNE_COLD=0) records an entry of its own. */
Test(runtime_gpu, conv_choice_from_the_tuning_cache) {
    t_skip_without_gpu();
    const char *path = fresh_cache("conv");
    const ccase c = {.spatial = 2, .n = 2, .cin = 8, .cout = 16, .groups = 1, .in = {8, 8},
                     .k = {3, 3}, .stride = {1, 1}, .dil = {1, 1}, .pad = {1, 1}, .bias = true,
                     .relu = true, .dt = AMPC_DTYPE_F16, .tol = 3e-3};
    check_conv(&c);
    char *text = slurp(path), *tab = text ? strstr(text, "cuDNN ") : NULL;
    cr_assert_not_null(tab, "the choice was recorded in %s:\n%s", path, text ? text : "(none)");
    char key[600];
    size_t len = strcspn(tab, "\t");
    cr_assert_lt(len, sizeof key);
    memcpy(key, tab, len);
    key[len] = '\0';
    free(text);
    cr_assert(len > 5 && !strcmp(key + len - 5, " cold"), "timed cold by default: '%s'", key);
    rt_tune_forget();
    check_conv(&c); /* from the cache */
    char v[128];
    cr_assert(rt_tune_get(key, v, sizeof v));
    rt_tune_put(key, "algo=999 math=0 graph=-");
    rt_tune_forget();
    check_conv(&c); /* the entry does not plan: searched again */
    rt_tune_forget();
    cr_assert(rt_tune_get(key, v, sizeof v));
    cr_assert_neq(strncmp(v, "algo=999", 8), 0, "the bad entry was replaced: %s", v);
    setenv("AMPC_TUNE_COLD", "0", 1);
    check_conv(&c); /* timed hot: recorded under a key of its own */
    unsetenv("AMPC_TUNE_COLD");
    rt_tune_forget();
    char hot[sizeof key];
    snprintf(hot, sizeof hot, "%.*s hot", (int)(len - 5), key);
    cr_assert(rt_tune_get(hot, v, sizeof v), "the hot timing's choice is under '%s'", hot);
    cr_assert(rt_tune_get(key, v, sizeof v), "the cold entry stays");
    unsetenv("AMPC_TUNE_CACHE");
    rt_tune_forget();
}

/* A model mixing a generated kernel, a matmul and a convolution: the graph (or its fallback)
 * gives the same bits run after run. */
Test(runtime_gpu, mixed_steps_repeatable) {
    t_skip_without_gpu();
    pipe_plan q;
    make_pipe(&q, 0);
    /* reuse the pipe's arena: add a matmul u[25x40] @ W[40x8] -> arena 16384, and a conv over
     * u seen as [1, 1, 25, 40] with a 3x3 kernel (pads 1) -> arena 20480 */
    blob w = {0};
    uint64_t seed = 3;
    int64_t ow = blob_add(&w, 40 * 8 * 4), ok = blob_add(&w, 9 * 4);
    blob_fill(&w, ow, AMPC_DTYPE_F32, 40 * 8, &seed);
    blob_fill(&w, ok, AMPC_DTYPE_F32, 9, &seed);
    ampc_rt_step steps[5] = {q.steps[0], q.steps[1], q.steps[2]};
    steps[3] = (ampc_rt_step){.kind = AMPC_RT_STEP_GEMM, .label = "MatMul 'm'",
                              .gemm = {.m = 25, .n = 8, .k = 40, .batch = 1, .lda = 40, .ldb = 8,
                                       .ldd = 8, .dtype_ab = AMPC_DTYPE_F32,
                                       .dtype_cd = AMPC_DTYPE_F32, .alpha = 1,
                                       .a = ARENA(8192, 4000), .b = WEIGHTS(ow, 1280),
                                       .d = ARENA(16384, 800)}};
    steps[4] = (ampc_rt_step){.kind = AMPC_RT_STEP_CONV, .label = "Conv 'c'",
                              .conv = {.spatial = 2, .n = 1, .c_in = 1, .c_out = 1, .groups = 1,
                                       .in = {25, 40}, .out = {25, 40}, .kernel = {3, 3},
                                       .stride = {1, 1}, .dilation = {1, 1}, .pad_begin = {1, 1},
                                       .pad_end = {1, 1}, .dtype = AMPC_DTYPE_F32, .relu = true,
                                       .x = ARENA(8192, 4000), .w = WEIGHTS(ok, 36),
                                       .y = ARENA(20480, 4000)}};
    ampc_rt_io outs[3] = {q.out[0], {"mm", AMPC_DTYPE_F32, SHAPE(25, 8), ARENA(16384, 800)},
                          {"cv", AMPC_DTYPE_F32, SHAPE(1, 1, 25, 40), ARENA(20480, 4000)}};
    q.p.steps = steps;
    q.p.n_steps = 5;
    q.p.outputs = outs;
    q.p.n_outputs = 3;
    q.p.arena_bytes = 24576;
    q.p.weights = w.data;
    q.p.weights_bytes = w.size;
    ampc_rt_model *m = create_ok(&q.p);
    free_pipe(&q);
    static float x[N], u[3][N], mm[3][200], cv[3][N];
    fill_x(x);
    for (int r = 0; r < 3; r++) {
        ampc_tensor in = {AMPC_DTYPE_F32, SHAPE(N), x};
        ampc_tensor out[3] = {{AMPC_DTYPE_F32, SHAPE(N), u[r]},
                              {AMPC_DTYPE_F32, SHAPE(25, 8), mm[r]},
                              {AMPC_DTYPE_F32, SHAPE(1, 1, 25, 40), cv[r]}};
        run_ok(m, &in, 1, out, 3, NULL);
        if (r == 0) continue;
        cr_assert_arr_eq(u[r], u[0], sizeof u[0], "u: run %d differs from run 0", r);
        cr_assert_arr_eq(mm[r], mm[0], sizeof mm[0], "mm: run %d differs from run 0", r);
        cr_assert_arr_eq(cv[r], cv[0], sizeof cv[0], "cv: run %d differs from run 0", r);
    }
    /* the matmul against a loop over the kernel's output: mm = u[25x40] @ W[40x8] */
    expect_pipe(x, u[0], z_unused());
    const float *W = (const float *)(const void *)(w.data + ow);
    for (int i = 0; i < 25; i++)
        for (int j = 0; j < 8; j++) {
            double acc = 0, mag = 0;
            for (int qq = 0; qq < 40; qq++) {
                acc += (double)u[0][i * 40 + qq] * W[qq * 8 + j];
                mag += fabs((double)u[0][i * 40 + qq] * W[qq * 8 + j]);
            }
            cr_assert(fabs(mm[0][i * 8 + j] - acc) <= 1e-5 * mag + 1e-30,
                      "mm[%d][%d] = %.9g, expected %.9g", i, j, mm[0][i * 8 + j], acc);
        }
    free(w.data);
    const char *why = NULL;
    ampc_rt_graph_status gs = ampc_rt_model_graph_status(m, &why);
    cr_assert(gs == AMPC_RT_GRAPH_ON || gs == AMPC_RT_GRAPH_OFF, "status %d", gs);
    if (gs == AMPC_RT_GRAPH_OFF) cr_log_warn("graph capture fell back: %s", why);
    ampc_rt_model_destroy(m);
}

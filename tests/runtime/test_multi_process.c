/*
 * test_multi_process.c — one process per GPU: a model compiled with --gpus 2 --partition tensor
 * loaded one rank per process (ampc_rt_model_create_rank), the NCCL id made by rank 0 and handed
 * over out of band.
 *
 * Without a GPU: the argument checks and their messages (NULLs, a rank out of range, n_ranks
 * not the plan's, a single-GPU plan, a rank's own plan, an id of zeros), the id file of
 * `ampc run --nccl-id-file` written and read back (and a stale or foreign one refused), and how
 * `ampc run` finds its rank (--rank/--ranks, Open MPI's environment).
 *
 * With 2 GPUs (runtime_test_multi_process on the 2-GPU machine; skips with the count otherwise):
 * two forked processes, each loading one rank on its GPU (rank 0 makes the id and sends it to
 * rank 1 through a pipe), give the outputs of the single-process 2-GPU model and of the
 * reference evaluator, twice, and time; a rank whose peer never comes fails at creation within
 * AMPC_NCCL_TIMEOUT_S instead of hanging. The test process forks before any CUDA call.
 */
#define _GNU_SOURCE /* setenv, mkdtemp */
#include "support.h"

#include "ampc_runtime.h"
#include "cli/cli.h"
#include "compiler/tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

enum { B = 64, K = 256, H = 768, N = 256 };

/* x @ W1 + b1 -> Relu -> @ W2 + 1: one matmul pair, split over the ranks. */
static ampc_graph *mlp(void) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(B, K));
    double *w1 = malloc(sizeof(double) * K * H), *b1 = malloc(sizeof(double) * H);
    double *w2 = malloc(sizeof(double) * H * N);
    for (int i = 0; i < K * H; i++) w1[i] = sin(i * 0.37) / 16;
    for (int i = 0; i < H; i++) b1[i] = 0.01 * (i % 11) - 0.05;
    for (int i = 0; i < H * N; i++) w2[i] = cos(i * 0.23) / 28;
    ampc_value *h = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(K, H), w1)),
                                          t_const_f32(g, SHAPE(H), b1)));
    ampc_value *y = ampc_add(g, ampc_matmul(g, h, t_const_f32(g, SHAPE(H, N), w2)),
                             ampc_scalar_f32(g, 1));
    ampc_output(g, y, "y");
    free(w1);
    free(b1);
    free(w2);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_module *compile(int32_t gpus) {
    ampc_pipeline_options po = {.verify = true, .gpus = gpus,
                                .partition = gpus > 1 ? AMPC_PARTITION_TENSOR : AMPC_PARTITION_NONE};
    ampc_compile_options o = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = mlp();
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static ampc_rt_nccl_id some_id(void) {
    ampc_rt_nccl_id id;
    for (size_t i = 0; i < sizeof id.bytes; i++) id.bytes[i] = (char)(i * 7 + 3);
    return id;
}

/* create_rank's status, its message in msg (freed by the caller), *out NULL on failure. */
static ampc_status create_rank(const ampc_rt_plan *p, int32_t rank, int32_t n,
                               const ampc_rt_nccl_id *id, char **msg) {
    ampc_rt_model *m = (ampc_rt_model *)&m; /* not NULL: the call must clear it */
    ampc_status st = ampc_rt_model_create_rank(p, 0, rank, n, id, &m, msg);
    if (st != AMPC_OK) cr_assert_null(m, "*out is NULL after a failure");
    else ampc_rt_model_destroy(m);
    return st;
}

static void expect_refused(ampc_status st, char **pmsg, const char *text) {
    char *msg = *pmsg; /* read here: the call that set it is an argument */
    *pmsg = NULL;
    cr_assert_eq(st, AMPC_E_INVALID_ARG, "status %d: %s", st, msg ? msg : "");
    cr_assert(msg && strstr(msg, text), "expected '%s' in: %s", text, msg ? msg : "(none)");
    free(msg);
}

/* ---- without a GPU --------------------------------------------------------------------------- */

Test(multi_process, create_rank_checks_its_arguments_before_the_gpu, .timeout = 120) {
    ampc_module *two = compile(2), *one = compile(1);
    const ampc_rt_plan *p = ampc_module_plan(two), *p1 = ampc_module_plan(one);
    ampc_rt_nccl_id id = some_id(), zero = {{0}};
    char *msg = NULL;
    ampc_rt_model *m = NULL;
    cr_assert_eq(ampc_rt_plan_n_ranks(p), 2);
    cr_assert_eq(ampc_rt_plan_n_ranks(p1), 1);
    cr_assert_eq(ampc_rt_plan_n_ranks(NULL), 0);
    expect_refused(ampc_rt_model_create_rank(NULL, 0, 0, 2, &id, &m, &msg), &msg, "plan is NULL");
    expect_refused(ampc_rt_model_create_rank(p, 0, 0, 2, &id, NULL, &msg), &msg, "out is NULL");
    expect_refused(create_rank(p, 0, 2, NULL, &msg), &msg, "id is NULL");
    expect_refused(create_rank(p, 1, 2, &zero, &msg), &msg, "the NCCL id is all zeros");
    expect_refused(create_rank(p, 2, 2, &id, &msg), &msg, "rank 2 is out of range: model 'mlp' "
                                                          "has ranks 0 to 1");
    expect_refused(create_rank(p, -1, 2, &id, &msg), &msg, "rank -1 is out of range");
    expect_refused(create_rank(p, 0, 3, &id, &msg), &msg, "partitioned over 2 GPUs, but n_ranks "
                                                          "is 3");
    expect_refused(create_rank(p1, 1, 2, &id, &msg), &msg, "compiled for one GPU (no --gpus), "
                                                           "but n_ranks is 2");
    expect_refused(create_rank(&p->ranks[1], 1, 2, &id, &msg), &msg, "this is rank 1's own plan");
    /* rank 0 of 1 of a single-GPU plan is an ordinary create: here, no GPU */
    ampc_rt_device_info info;
    if (ampc_rt_device_info_get(0, &info, NULL) != AMPC_OK) {
        cr_assert_eq(create_rank(p1, 0, 1, NULL, &msg), AMPC_E_NO_DEVICE, "%s", msg);
        cr_assert(strstr(msg, "no CUDA device"), "%s", msg);
        free(msg);
    }
    expect_refused(ampc_rt_nccl_id_create(NULL, &msg), &msg, "id is NULL");
    ampc_module_destroy(two);
    ampc_module_destroy(one);
}

static char *temp_dir(void) {
    char *d = strdup("/tmp/ampc-nccl-id-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

Test(multi_process, id_file_round_trip_and_stale_files) {
    char *dir = temp_dir(), path[256], *err = NULL;
    snprintf(path, sizeof path, "%s/id", dir);
    ampc_rt_nccl_id id = some_id(), got;
    cr_assert(ampc_cli_nccl_id_write(path, "ompi:42", &id, &err), "%s", err);
    cr_assert(ampc_cli_nccl_id_read(path, "ompi:42", 1, &got, &err), "%s", err);
    cr_assert_eq(memcmp(id.bytes, got.bytes, sizeof id.bytes), 0, "the id reads back");
    /* another job's file is waited past, then the wait times out naming it */
    cr_assert_not(ampc_cli_nccl_id_read(path, "ompi:43", 0.2, &got, &err));
    cr_assert(strstr(err, "no NCCL id in") && strstr(err, "job 'ompi:42', this is job "
                                                         "'ompi:43'"), "%s", err);
    free(err);
    /* no tag: taken when fresh */
    cr_assert(ampc_cli_nccl_id_write(path, "", &id, &err), "%s", err);
    cr_assert(ampc_cli_nccl_id_read(path, "", 1, &got, &err), "%s", err);
    /* a missing file times out with the flag's advice */
    remove(path);
    cr_assert_not(ampc_cli_nccl_id_read(path, "", 0.2, &got, &err));
    cr_assert(strstr(err, "rank 0 writes it when it starts"), "%s", err);
    free(err);
    /* something else is refused at once */
    FILE *f = fopen(path, "w");
    fputs("hello\nworld\n", f);
    fclose(f);
    cr_assert_not(ampc_cli_nccl_id_read(path, "", 5, &got, &err));
    cr_assert(strstr(err, "is not an NCCL id file written by ampc"), "%s", err);
    free(err);
    /* an unwritable place is an error naming it */
    snprintf(path, sizeof path, "%s/missing/id", dir);
    cr_assert_not(ampc_cli_nccl_id_write(path, "", &id, &err));
    cr_assert(strstr(err, "cannot write the NCCL id to"), "%s", err);
    free(err);
    snprintf(path, sizeof path, "%s/id", dir);
    remove(path);
    rmdir(dir);
    free(dir);
}

static void clear_launcher_env(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "PMIX_NAMESPACE",
                          "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

Test(multi_process, run_finds_its_rank_from_flags_and_mpirun) {
    clear_launcher_env();
    ampc_cli_options o = {.rank = -1, .ranks = -1};
    ampc_cli_rank r;
    char *err = NULL;
    cr_assert(ampc_cli_rank_resolve(&o, 2, &r, &err), "%s", err);
    cr_assert_not(r.on, "no flags, no launcher: one process drives every GPU");
    /* Open MPI's environment */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("PMIX_NAMESPACE", "prterun-host-123@1", 1);
    cr_assert_not(ampc_cli_rank_resolve(&o, 2, &r, &err));
    cr_assert(strstr(err, "rank 1 of 2 (Open MPI): one process per GPU needs --nccl-id-file"),
              "%s", err);
    free(err);
    o.nccl_id_file = "/tmp/id";
    cr_assert(ampc_cli_rank_resolve(&o, 2, &r, &err), "%s", err);
    cr_assert(r.on && r.rank == 1 && r.ranks == 2 && r.device == 1);
    cr_assert_str_eq(r.tag, "pmix:prterun-host-123@1");
    cr_assert_not(ampc_cli_rank_resolve(&o, 4, &r, &err));
    cr_assert(strstr(err, "Open MPI gives 2 processes, but the model is partitioned over 4 GPUs"),
              "%s", err);
    free(err);
    cr_assert_not(ampc_cli_rank_resolve(&o, 1, &r, &err));
    cr_assert(strstr(err, "but the model is compiled for one GPU"), "%s", err);
    free(err);
    /* mpirun -np 1: one process, as without mpirun */
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    cr_assert(ampc_cli_rank_resolve(&o, 2, &r, &err), "%s", err);
    cr_assert_not(r.on);
    /* the flags win over the environment; the device is the local rank */
    clear_launcher_env();
    o.rank = 0, o.ranks = 2;
    cr_assert(ampc_cli_rank_resolve(&o, 2, &r, &err), "%s", err);
    cr_assert(r.on && r.rank == 0 && r.device == 0 && !strcmp(r.source, "--rank/--ranks"));
    cr_assert_str_eq(r.tag, "");
    /* --rank 0 --ranks 1 of a one-GPU model is one process, as create_rank's rank 0 of 1 */
    o.ranks = 1;
    cr_assert(ampc_cli_rank_resolve(&o, 1, &r, &err), "%s", err);
    cr_assert_not(r.on);
}

Test(multi_process, a_batch_split_is_refused_before_waiting_for_the_id, .timeout = 60) {
    setenv("AMPC_NCCL_TIMEOUT_S", "5", 1);
    ampc_pipeline_options po = {.verify = true, .gpus = 2, .partition = AMPC_PARTITION_DATA};
    ampc_compile_options co = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = mlp();
    ampc_module *mod = NULL;
    cr_assert_eq(ampc_compile(g, &co, &mod), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    cr_assert(ampc_module_plan(mod)->split_batch);
    char *dir = temp_dir(), path[256], *err = NULL;
    snprintf(path, sizeof path, "%s/id", dir); /* never written: rank 1 must not wait for it */
    ampc_cli_rank r = {.on = true, .rank = 1, .ranks = 2, .device = 1, .source = "--rank/--ranks"};
    ampc_rt_model *m = NULL;
    cr_assert_eq(ampc_cli_model_create(ampc_module_plan(mod), &r, path, &m, &err), AMPC_E_UNSUPPORTED,
                 "%s", err ? err : "");
    cr_assert_null(m);
    cr_assert(err && strstr(err, "rank 1 of 2 (--rank/--ranks): model 'mlp' splits the batch "
                                 "over 2 GPUs"), "%s", err ? err : "(none)");
    free(err);
    rmdir(dir);
    free(dir);
    ampc_module_destroy(mod);
    unsetenv("AMPC_NCCL_TIMEOUT_S");
}

/* ---- with 2 GPUs ----------------------------------------------------------------------------- */

/* The number of CUDA devices, counted in a child so that this process makes no CUDA call
 * before it forks the ranks. */
static int count_gpus_in_child(void) {
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int32_t n = 0;
        if (ampc_rt_device_count(&n, NULL) != AMPC_OK) n = 0;
        ampc_rt_device_info info;
        if (n > 0 && (ampc_rt_device_info_get(0, &info, NULL) != AMPC_OK || !info.supported)) n = 0;
        _exit(n > 100 ? 100 : n);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

static void need_two_gpus(void) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    int n = count_gpus_in_child();
    if (n < 2) t_skip_needs_devices(2, n);
}

/* What the ranks report back (shared memory mapped before the fork). */
typedef struct rank_result {
    int ok[2];
    char msg[2][1024];
    float y[2][2][B * N]; /* per rank, per pass */
    double ms[2];
} rank_result;

static void fill_x(float *x, float phase) {
    for (int i = 0; i < B * K; i++) x[i] = (float)cos(i * 0.113 + phase);
}

/* One rank's process: compile, create its rank on device r (rank 0 makes the id and writes it
 * to `fd`, rank 1 reads it), run twice, time, report. */
static void rank_process(int r, int fd, rank_result *res) {
    ampc_module *two = compile(2);
    ampc_rt_nccl_id id;
    char *err = NULL;
    ampc_rt_model *m = NULL;
    float *x = malloc(sizeof(float) * B * K);
    bool ok = true;
    if (r == 0) {
        ok = ampc_rt_nccl_id_create(&id, &err) == AMPC_OK;
        ok = ok && write(fd, id.bytes, sizeof id.bytes) == (ssize_t)sizeof id.bytes;
    } else {
        ok = read(fd, id.bytes, sizeof id.bytes) == (ssize_t)sizeof id.bytes;
        if (!ok) err = strdup("rank 0 sent no NCCL id");
    }
    close(fd);
    ok = ok && ampc_rt_model_create_rank(ampc_module_plan(two), r, r, 2, &id, &m, &err) == AMPC_OK;
    for (int pass = 0; ok && pass < 2; pass++) {
        fill_x(x, pass * 0.5f);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
        ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), res->y[r][pass]);
        ok = ampc_rt_model_run(m, &in, 1, &out, 1, NULL, &err) == AMPC_OK;
    }
    double ms[10];
    ok = ok && ampc_rt_model_time(m, 10, ms, &err) == AMPC_OK;
    if (ok) res->ms[r] = ms[9];
    snprintf(res->msg[r], sizeof res->msg[r], "%s", err ? err : "");
    res->ok[r] = ok;
    ampc_rt_model_destroy(m);
    ampc_module_destroy(two);
    _exit(ok ? 0 : 1);
}

Test(multi_process, two_processes_match_one_process_and_the_reference, .timeout = 240) {
    need_two_gpus();
    setenv("AMPC_NCCL_TIMEOUT_S", "60", 1);
    rank_result *res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    cr_assert_neq(res, MAP_FAILED);
    memset(res, 0, sizeof *res);
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        cr_assert_neq(pid[r], -1);
        if (pid[r] == 0) {
            close(pipefd[r == 0 ? 0 : 1]);
            rank_process(r, pipefd[r == 0 ? 1 : 0], res);
        }
    }
    close(pipefd[0]);
    close(pipefd[1]);
    for (int r = 0; r < 2; r++) waitpid(pid[r], NULL, 0);
    for (int r = 0; r < 2; r++) cr_assert(res->ok[r], "rank %d: %s", r, res->msg[r]);
    /* now this process may use CUDA: one process over both GPUs, and the reference */
    ampc_module *two = compile(2);
    float *x = malloc(sizeof(float) * B * K), *y = malloc(sizeof(float) * B * N);
    for (int pass = 0; pass < 2; pass++) {
        fill_x(x, pass * 0.5f);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
        ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y), ref;
        cr_assert_eq(ampc_module_run(two, &in, 1, &out, 1, NULL), AMPC_OK, "%s",
                     ampc_module_errors(two));
        ampc_graph *g = mlp();
        cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &ref, 1), AMPC_OK, "%s", ampc_graph_errors(g));
        ampc_graph_destroy(g);
        for (int r = 0; r < 2; r++) {
            ampc_tensor got = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), res->y[r][pass]);
            char msg[512];
            cr_assert(t_tensors_close(&got, &out, 1e-5, 1e-5, "y (rank process vs one process)",
                                      msg, sizeof msg), "rank %d, pass %d: %s", r, pass, msg);
            cr_assert(t_tensors_close(&got, &ref, 1e-4, 1e-4, "y (rank process vs reference)",
                                      msg, sizeof msg), "rank %d, pass %d: %s", r, pass, msg);
        }
        ampc_tensor_free(&ref);
    }
    for (int r = 0; r < 2; r++) cr_assert_gt(res->ms[r], 0, "rank %d timed %g ms", r, res->ms[r]);
    free(x);
    free(y);
    ampc_module_destroy(two);
    munmap(res, sizeof *res);
}

/* Rank 0 of 2 alone: NCCL's setup waits for rank 1, which never comes; creation fails after
 * AMPC_NCCL_TIMEOUT_S with the rank and the advice, and does not hang. */
Test(multi_process, a_missing_peer_fails_creation_within_the_timeout, .timeout = 120) {
    need_two_gpus();
    setenv("AMPC_NCCL_TIMEOUT_S", "3", 1);
    ampc_module *two = compile(2);
    ampc_rt_nccl_id id;
    char *err = NULL;
    cr_assert_eq(ampc_rt_nccl_id_create(&id, &err), AMPC_OK, "%s", err);
    ampc_rt_model *m = NULL;
    cr_assert_eq(ampc_rt_model_create_rank(ampc_module_plan(two), 0, 0, 2, &id, &m, &err), AMPC_E_CUDA,
                 "%s", err ? err : "created without its peer");
    cr_assert_null(m);
    cr_assert(strstr(err, "rank 0 of 2: the NCCL communicator did not come up within 3 s"), "%s",
              err);
    free(err);
    ampc_module_destroy(two);
}

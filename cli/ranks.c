/*
 * ranks.c — `ampc run` of a multi-GPU library with one process per GPU: which rank this
 * process is (--rank/--ranks, else the launcher's environment), and the NCCL id handed from rank
 * 0 to the others through a file, so that ampc itself never links MPI.
 *
 * The id file is two lines, "ampc-nccl-id 1 <job tag>" and the 128 id bytes in hex, written to a
 * temporary file renamed over the path (a reader sees the whole file or none). The job tag is
 * the launcher's job id when it exports one (PMIx namespace, Open MPI's job id, Slurm's job and
 * step): a reader waits past a file of another job, which a crashed earlier run may have left.
 * Without a tag, a file older than a minute before the reader began waiting is taken as stale.
 * Rank 0 removes the file once its communicator is up (every rank has read it by then).
 *
 * Lives in the core library, not the executable, so that tests call it directly.
 */
#define _GNU_SOURCE /* vasprintf */
#include "cli/cli.h"
#include "compiler/tool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool ampc_cli_err(char **err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    if (err) {
        free(*err);
        *err = s;
    } else {
        free(s);
    }
    return false;
}

/* An environment variable as a non-negative integer; -1 when unset or not one. */
static int32_t env_int(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || *v == 0) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1 << 20 ? -1 : (int32_t)n;
}

/* The launchers whose environment names this process's rank: rank, size, local rank. */
static const struct launcher {
    const char *name, *rank, *size, *local;
} launchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI (MPICH)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* The launcher's job id, so that an id file of another job is told apart. */
static void job_tag(char *tag, size_t n) {
    const char *ns = getenv("PMIX_NAMESPACE"), *ompi = getenv("OMPI_MCA_ess_base_jobid");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (ns && *ns) snprintf(tag, n, "pmix:%s", ns);
    else if (ompi && *ompi) snprintf(tag, n, "ompi:%s", ompi);
    else if (job && *job) snprintf(tag, n, "slurm:%s.%s", job, step ? step : "");
    else tag[0] = 0;
    for (char *c = tag; *c; c++) /* one word on the file's first line */
        if (*c == ' ' || *c == '\n' || *c == '\t') *c = '_';
}

bool ampc_cli_rank_resolve(const ampc_cli_options *o, int32_t gpus, ampc_cli_rank *r,
                           char **err) {
    memset(r, 0, sizeof *r);
    if (err) *err = NULL;
    job_tag(r->tag, sizeof r->tag);
    if (o->rank >= 0) {
        r->rank = o->rank, r->ranks = o->ranks, r->source = "--rank/--ranks";
        int32_t local = -1;
        for (size_t i = 0; i < sizeof launchers / sizeof *launchers && local < 0; i++)
            local = env_int(launchers[i].local);
        r->device = local >= 0 ? local : o->rank; /* one machine: rank r on GPU r */
    } else {
        for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
            const struct launcher *l = &launchers[i];
            int32_t rank = env_int(l->rank), size = env_int(l->size);
            if (rank < 0 || size < 1) continue;
            if (rank >= size)
                return ampc_cli_err(err, "%s says this is rank %d of %d (%s, %s)", l->name, rank,
                               size, l->rank, l->size);
            int32_t local = env_int(l->local);
            r->rank = rank, r->ranks = size, r->source = l->name;
            r->device = local >= 0 ? local : rank;
            break;
        }
        if (r->source == NULL || r->ranks == 1) { /* one process: it drives every GPU */
            memset(r, 0, sizeof *r);
            return true;
        }
    }
    if (gpus <= 1 && r->ranks == 1) { /* --rank 0 --ranks 1 of a one-GPU model: one process */
        memset(r, 0, sizeof *r);
        return true;
    }
    if (gpus <= 1)
        return ampc_cli_err(err, "%s makes this process rank %d of %d, but the model is compiled for "
                       "one GPU: compile it with --gpus %d --partition tensor for one process "
                       "per GPU, or run it in one process", r->source, r->rank, r->ranks,
                       r->ranks);
    if (r->ranks != gpus)
        return ampc_cli_err(err, "%s gives %d processes, but the model is partitioned over %d GPUs: "
                       "start one process per GPU (mpirun -np %d)", r->source, r->ranks, gpus,
                       gpus);
    if (o->nccl_id_file == NULL)
        return ampc_cli_err(err, "rank %d of %d (%s): one process per GPU needs --nccl-id-file PATH "
                       "(rank 0 writes the NCCL id there, the others read it: a file every rank "
                       "can see)", r->rank, r->ranks, r->source);
    r->on = true;
    return true;
}

bool ampc_cli_nccl_id_write(const char *path, const char *tag, const ampc_rt_nccl_id *id,
                            char **err) {
    if (err) *err = NULL;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
        return ampc_cli_err(err, "out of host memory");
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL && fprintf(f, "ampc-nccl-id 1 %s\n", tag && *tag ? tag : "-") > 0;
    for (size_t i = 0; ok && i < sizeof id->bytes; i++)
        ok = fprintf(f, "%02x", (unsigned char)id->bytes[i]) == 2;
    if (ok) ok = fputc('\n', f) != EOF;
    if (f) ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        ampc_cli_err(err, "cannot write the NCCL id to '%s': %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok;
}

/* Reads an id file; 1: an id of job `tag`, 0: none yet or another job's (why says which),
 * -1: a file that is not an id file. */
static int read_id_file(const char *path, const char *tag, time_t not_before,
                        ampc_rt_nccl_id *id, char *why, size_t nwhy) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    struct stat st;
    char head[256] = {0}, hex[2 * sizeof id->bytes + 2] = {0};
    bool read = fgets(head, sizeof head, f) && fgets(hex, sizeof hex, f);
    bool fresh = fstat(fileno(f), &st) == 0 && st.st_mtime >= not_before;
    fclose(f);
    char file_tag[160] = {0};
    int version = 0;
    if (!read || sscanf(head, "ampc-nccl-id %d %159s", &version, file_tag) != 2 || version != 1)
        return -1;
    const char *want = tag && *tag ? tag : "-";
    if (strcmp(file_tag, want) != 0) {
        snprintf(why, nwhy, "it holds the id of job '%s', this is job '%s'", file_tag, want);
        return 0;
    }
    if (!strcmp(want, "-") && !fresh) {
        snprintf(why, nwhy, "it was written more than a minute before this rank started "
                 "waiting (a run that ended?)");
        return 0;
    }
    for (size_t i = 0; i < sizeof id->bytes; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        id->bytes[i] = (char)v;
    }
    return 1;
}

bool ampc_cli_nccl_id_read(const char *path, const char *tag, double timeout_s,
                           ampc_rt_nccl_id *id, char **err) {
    if (err) *err = NULL;
    memset(id, 0, sizeof *id);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    time_t not_before = time(NULL) - 60;
    char why[256] = "";
    for (;;) {
        int got = read_id_file(path, tag, not_before, id, why, sizeof why);
        if (got == 1) return true;
        if (got < 0)
            return ampc_cli_err(err, "'%s' is not an NCCL id file written by ampc (expected a line "
                           "\"ampc-nccl-id 1 JOB\" then 256 hex digits)", path);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - start.tv_sec) +
                        1e-9 * (double)(now.tv_nsec - start.tv_nsec);
        if (waited >= timeout_s)
            return ampc_cli_err(err, "no NCCL id in '%s' after %.0f s (AMPC_NCCL_TIMEOUT_S)%s%s: "
                           "rank 0 writes it when it starts; give every rank the same "
                           "--nccl-id-file on a file system they all see", path, waited,
                           why[0] ? ": " : "", why);
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
}

/* The runtime's nccl_timeout_s option (AMPC_NCCL_TIMEOUT_S, else 300 s): its wait for a run,
 * and here for the id. */
static double id_timeout_s(void) {
    ampc_rt_options o;
    ampc_rt_options_init(&o);
    return o.nccl_timeout_s;
}

ampc_status ampc_cli_model_create(const ampc_rt_plan *plan, const ampc_cli_rank *r,
                                  const char *id_file, ampc_rt_model **m, char **err) {
    if (!r->on) return ampc_rt_model_create(plan, 0, m, err);
    *m = NULL;
    /* refused before the id exchange: a rank other than 0 would otherwise wait for an id file
     * that rank 0, refused the same way, never leaves for long */
    if (plan->split_batch) {
        ampc_cli_err(err, "rank %d of %d (%s): model '%s' splits the batch over %d GPUs (--partition "
                "data), which runs from one process: run it without mpirun or --rank/--ranks",
                r->rank, r->ranks, r->source ? r->source : "", plan->name ? plan->name : "",
                plan->n_ranks);
        return AMPC_E_UNSUPPORTED;
    }
    ampc_rt_nccl_id id;
    if (r->rank == 0) {
        ampc_status st = ampc_rt_nccl_id_create(&id, err);
        if (st != AMPC_OK) return st;
        if (!ampc_cli_nccl_id_write(id_file, r->tag, &id, err)) return AMPC_E_IO;
    } else if (!ampc_cli_nccl_id_read(id_file, r->tag, id_timeout_s(), &id, err)) {
        return AMPC_E_IO;
    }
    ampc_status st = ampc_rt_model_create_rank(plan, r->device, r->rank, r->ranks, &id, m, err);
    /* rank 0's communicator is up only once every rank has joined, so all have read the file */
    if (r->rank == 0) remove(id_file);
    return st;
}

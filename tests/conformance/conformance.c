/*
 * conformance.c — the `ampc-conformance` tool: runs the ONNX backend test suites on the reference
 * evaluator (and, with --gpu, on the GPU through ampc_compile) and writes the results table
 * (docs/conformance.md) and the expectations the Criterion suite checks
 * (tests/conformance/expected.tsv).
 *
 *   ampc-conformance [--data ROOT] [--suite NAME]... [--markdown FILE] [--expect FILE]
 *                    [--gpu] [--gpu-out FILE] [--gpu-results FILE] [--tf32] [--tf32-out FILE]
 *                    [--tf32-results FILE] [--random] [--random-out FILE]
 *                    [--random-results FILE] [--cli] [--cli-out FILE] [--cli-results FILE]
 *                    [--shard K/N] [-v]
 *
 * ROOT defaults to $AMPC_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data (Debian's
 * libonnx-testdata). --gpu runs every case on the GPU as well and --gpu-out writes those results
 * (tests/conformance/gpu.tsv); --gpu-results reads such a file so that a run on a machine
 * without a GPU keeps the GPU column of the last GPU run. --gpu compiles with TF32 off and
 * compares at the suite's tolerances; --tf32, --tf32-out and --tf32-results do the same for the
 * build a user gets by default, TF32 on, compared at rtol 1e-2, atol 1e-4 for f32 outputs
 * (tests/conformance/gpu-tf32.tsv; see runner.h's CONF_GPU_DEFAULT). --random, --random-out and
 * --random-results do the same for the random-input comparison of the GPU with the reference
 * (tests/conformance/gpu-random.tsv; see runner.h's CONF_RANDOM). --cli, --cli-out and
 * --cli-results: every case through the command line, `ampc run --reference` (runner.h's
 * CONF_CLI; tests/conformance/cli.tsv). scripts/conformance.sh
 * regenerates the files with the right arguments. --shard K/N runs every N-th case only (from
 * the K-th), so N processes can share a machine; their --*-out files concatenate into one.
 */
#include "runner.h"

#include "ampc.h"
#include "ir/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The result columns: the reference evaluator (always run), the GPU on the test's data (TF32
 * off, and the default build, TF32 on), and the GPU against the reference on random inputs. The
 * GPU columns are run now or read back from a file a GPU run wrote; a case's status is -1 while
 * unknown, and a column neither run nor read is "not run". */
enum { COL_REF, COL_GPU, COL_TF32, COL_RANDOM, COL_CLI, N_COLS };
static const char *const col_file_label[N_COLS] = {"expected", "gpu", "gpu-tf32", "gpu-random", "cli"};
static const conf_mode col_mode[N_COLS] = {CONF_REFERENCE, CONF_GPU, CONF_GPU_DEFAULT, CONF_RANDOM,
                                           CONF_CLI};

typedef struct suite_result {
    const char *suite;
    char **names;
    conf_result *col[N_COLS];
    int n, counts[N_COLS][3];
} suite_result;

static const char *status_or_dash(const conf_result *r) {
    return (int)r->status < 0 ? "-" : conf_status_name(r->status);
}

/* What the markdown says beside the counts: the data root, and per column whether it has
 * results and where they come from. */
typedef struct md_info {
    const char *root;
    bool have[N_COLS];
    char source[N_COLS][512];
} md_info;

/* One column's counts of a summary row, the first n of pass, fail, unsupported ("not run" in
 * each cell when the column has no results). */
static void put_counts(FILE *f, const int c[3], int n, bool have) {
    for (int k = 0; k < n; k++)
        if (have) fprintf(f, " %d |", c[k]);
        else fprintf(f, " not run |");
}

/* One summary row: the reference's counts and pass rate, then every GPU column's. */
static void put_summary_row(FILE *f, const char *suite, int n, const int (*c)[3],
                            const md_info *mi) {
    fprintf(f, "| %s | %d | %d | %d | %d | %.1f %% |", suite, n, c[COL_REF][0], c[COL_REF][1],
            c[COL_REF][2], n ? 100.0 * c[COL_REF][0] / n : 0.0);
    put_counts(f, c[COL_GPU], 3, mi->have[COL_GPU]);
    put_counts(f, c[COL_TF32], 2, mi->have[COL_TF32]);
    put_counts(f, c[COL_RANDOM], 2, mi->have[COL_RANDOM]);
    put_counts(f, c[COL_CLI], 3, mi->have[COL_CLI]);
    fprintf(f, "\n");
}

/* The reason shown for a case: the first column that did not pass, the reference's first. */
static const char *case_reason(const suite_result *s, int j, char *buf, size_t cap) {
    const conf_result *r = &s->col[COL_REF][j], *gr = &s->col[COL_GPU][j],
                      *tr = &s->col[COL_TF32][j], *rr = &s->col[COL_RANDOM][j];
    if (r->status != CONF_PASS) return r->reason;
    if ((int)gr->status > 0) return gr->reason;
    if ((int)tr->status > 0) {
        snprintf(buf, cap, "default (TF32): %s", tr->reason);
        return buf;
    }
    if ((int)rr->status == CONF_FAIL) return rr->reason;
    const conf_result *cr = &s->col[COL_CLI][j];
    if ((int)cr->status > 0) {
        snprintf(buf, cap, "command line: %s", cr->reason);
        return buf;
    }
    return "";
}

/* docs/conformance.md: what each column means, the summary per suite, then every case. */
static void write_markdown(FILE *f, const suite_result *s, int ns, const md_info *mi) {
    double tf32_rtol, tf32_atol;
    conf_data_tolerance(CONF_GPU_DEFAULT, AMPC_DTYPE_F32, &tf32_rtol, &tf32_atol);
    fprintf(f, "# ONNX conformance\n\n"
               "The ONNX backend test suites run through ampc's importer and pass pipeline, then "
               "on the reference evaluator (CPU) and on the GPU (ampc_compile: generated CUDA "
               "kernels, cuBLASLt, cuDNN), compared with ONNX's tolerances (rtol %g, atol %g). "
               "Every test is counted; none is excluded. `node`, `pytorch-converted`, "
               "`pytorch-operator` and `simple` are Debian's `libonnx-testdata` (ONNX 1.12, "
               "opsets up to 17); `node-onnx1.23` is the node tests of the `onnx` 1.23 package "
               "(opsets up to 28), written out by `tests/conformance/gen_node_tests.py`.\n\n",
            CONF_RTOL, CONF_ATOL);
    fprintf(f, "Two GPU configurations run every case on the test's data. The *GPU* columns "
               "compile it with FP32 math (TF32 off, as `--precision fp32` does), so that only "
               "rounding and the order of sums separate it from the model as written, and hold "
               "it to the suite's own tolerances. The *default (TF32)* columns compile it as a "
               "build is by default, with TF32 tensor-core math for f32 matmuls and convolutions "
               "(10 of f32's 23 mantissa bits in their inputs; the compile's `math:` line reports "
               "it), and compare with the test data at rtol %g, atol %g for f32 outputs and at "
               "the suite's tolerances for every other dtype (f16, bf16 and f64 products do not "
               "use TF32; integers exactly). A case that fails only there shows that column's "
               "reason, marked *default (TF32)*.\n\n",
            tf32_rtol, tf32_atol);
    fprintf(f, "The *random* columns run each case again with every floating-point input replaced "
               "by random values drawn from the range of the test's own data, on the GPU (TF32 "
               "off) and on the reference evaluator, and compare the two (f32: rtol 1e-4, atol "
               "1e-5, or 1e-3 and 1e-4 for graphs with DFT or STFT, whose long sums the GPU "
               "accumulates in f32 and the reference in f64; f16: 4e-3, 1e-3; bf16: 2e-2, 1e-2; "
               "f64: 1e-9, 1e-12; integers exactly); a failure names the worst element.\n\n");
    fprintf(f, "The *command line* columns drive `ampc` as a user would: `ampc run model.onnx "
               "--reference --input NAME=input_K.pb ... --save-outputs DIR` for each data set, "
               "the outputs read back from DIR and compared at the suite's tolerances. `run` binds "
               "the inputs that must be known at compile time (an Unsqueeze's axes, a Reshape's "
               "shape) to the values given, as the in-process runner binds them; a case it cannot "
               "take says why in its message (*unsupported* when the message says the model is "
               "outside what ampc takes). Source: %s.\n\n",
            mi->source[COL_CLI]);
    fprintf(f, "Regenerate with `scripts/conformance.sh` (runs `ampc-conformance --markdown "
               "docs/conformance.md --expect tests/conformance/expected.tsv --gpu-results "
               "tests/conformance/gpu.tsv --tf32-results tests/conformance/gpu-tf32.tsv "
               "--random-results tests/conformance/gpu-random.tsv` on %s). The GPU columns come "
               "from: GPU, %s; default (TF32), %s; random, %s. scripts/gpu-check.sh writes the "
               "three files on the GPU machine (each one's first line names the GPU), compiling "
               "each case to compute_80 PTX. ampc %s.\n\n",
            strstr(mi->root, "libonnx-testdata") ? "the Debian data" : mi->root,
            mi->source[COL_GPU], mi->source[COL_TF32], mi->source[COL_RANDOM], AMPC_VERSION_STRING);
    fprintf(f, "| suite | tests | reference pass | fail | unsupported | pass rate | GPU pass | "
               "GPU fail | GPU unsupported | default (TF32) pass | default (TF32) fail | "
               "random pass | random fail | command line pass | command line fail | command line "
               "unsupported |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int tot[N_COLS][3] = {{0}}, n = 0;
    for (int i = 0; i < ns; i++) {
        put_summary_row(f, s[i].suite, s[i].n, s[i].counts, mi);
        for (int k = 0; k < N_COLS; k++)
            for (int j = 0; j < 3; j++) tot[k][j] += s[i].counts[k][j];
        n += s[i].n;
    }
    put_summary_row(f, "**all**", n, (const int(*)[3])tot, mi);
    fprintf(f, "\n");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "## %s\n\n| test | reference | GPU | default (TF32) | random | command line | "
                   "reason |\n|---|---|---|---|---|---|---|\n",
                s[i].suite);
        for (int j = 0; j < s[i].n; j++) {
            char buf[512];
            fprintf(f, "| %s | %s | %s | %s | %s | %s | %s |\n", s[i].names[j],
                    conf_status_name(s[i].col[COL_REF][j].status),
                    status_or_dash(&s[i].col[COL_GPU][j]), status_or_dash(&s[i].col[COL_TF32][j]),
                    status_or_dash(&s[i].col[COL_RANDOM][j]), status_or_dash(&s[i].col[COL_CLI][j]),
                    case_reason(&s[i], j, buf, sizeof buf));
        }
        fprintf(f, "\n");
    }
}

/* Writes one file atomically: the markdown, or one column's results as TSV (the reference's
 * are the expectations test_conformance.c checks). */
enum { OUT_MARKDOWN = -1 };

static bool write_file(const char *path, const suite_result *s, int ns, int what,
                       const md_info *mi) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "ampc-conformance: cannot write %s\n", tmp);
        return false;
    }
    if (what == OUT_MARKDOWN) {
        write_markdown(f, s, ns, mi);
    } else {
        fprintf(f, "# suite\ttest\t%s\treason (generated by ampc-conformance)\n", col_file_label[what]);
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < s[i].n; j++) {
                const conf_result *r = &s[i].col[what][j];
                if ((int)r->status < 0) continue;
                fprintf(f, "%s\t%s\t%s\t%s\n", s[i].suite, s[i].names[j],
                        conf_status_name(r->status), r->reason);
            }
    }
    bool ok = fclose(f) == 0 && rename(tmp, path) == 0;
    if (!ok) fprintf(stderr, "ampc-conformance: cannot write %s\n", path);
    return ok;
}

/* Reads results written by --gpu-out / --tf32-out / --random-out into column `col` of the
 * matching cases. */
static bool read_results(const char *path, suite_result *s, int ns, int col) {
    conf_row *rows;
    int n = conf_read_table(path, &rows);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < ns; i++) {
            if (strcmp(s[i].suite, rows[k].suite)) continue;
            for (int j = 0; j < s[i].n; j++)
                if (!strcmp(s[i].names[j], rows[k].name)) {
                    conf_result *r = &s[i].col[col][j];
                    r->status = rows[k].status;
                    snprintf(r->reason, sizeof r->reason, "%s", rows[k].reason);
                }
        }
    free(rows);
    return n >= 0;
}

int main(int argc, char **argv) {
    const char *root = conf_data_root(), *md = NULL, *only[8];
    const char *out_path[N_COLS] = {0}, *in_path[N_COLS] = {0};
    int n_only = 0, shard = 0, shards = 1, global = 0;
    bool verbose = false, run[N_COLS] = {[COL_REF] = true};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) root = argv[++i];
        else if (!strcmp(argv[i], "--markdown") && i + 1 < argc) md = argv[++i];
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) out_path[COL_REF] = argv[++i];
        else if (!strcmp(argv[i], "--suite") && i + 1 < argc && n_only < 8) only[n_only++] = argv[++i];
        else if (!strcmp(argv[i], "--gpu")) run[COL_GPU] = true;
        else if (!strcmp(argv[i], "--gpu-out") && i + 1 < argc) out_path[COL_GPU] = argv[++i];
        else if (!strcmp(argv[i], "--gpu-results") && i + 1 < argc) in_path[COL_GPU] = argv[++i];
        else if (!strcmp(argv[i], "--tf32")) run[COL_TF32] = true;
        else if (!strcmp(argv[i], "--tf32-out") && i + 1 < argc) out_path[COL_TF32] = argv[++i];
        else if (!strcmp(argv[i], "--tf32-results") && i + 1 < argc) in_path[COL_TF32] = argv[++i];
        else if (!strcmp(argv[i], "--random")) run[COL_RANDOM] = true;
        else if (!strcmp(argv[i], "--random-out") && i + 1 < argc) out_path[COL_RANDOM] = argv[++i];
        else if (!strcmp(argv[i], "--random-results") && i + 1 < argc) in_path[COL_RANDOM] = argv[++i];
        else if (!strcmp(argv[i], "--cli")) run[COL_CLI] = true;
        else if (!strcmp(argv[i], "--cli-out") && i + 1 < argc) out_path[COL_CLI] = argv[++i];
        else if (!strcmp(argv[i], "--cli-results") && i + 1 < argc) in_path[COL_CLI] = argv[++i];
        else if (!strcmp(argv[i], "--shard") && i + 1 < argc &&
                 sscanf(argv[++i], "%d/%d", &shard, &shards) == 2 && shards > 0 && shard >= 0 &&
                 shard < shards)
            continue;
        else if (!strcmp(argv[i], "-v")) verbose = true;
        else {
            fprintf(stderr, "usage: ampc-conformance [--data ROOT] [--suite NAME]... "
                            "[--markdown FILE] [--expect FILE] [--gpu] [--gpu-out FILE] "
                            "[--gpu-results FILE] [--tf32] [--tf32-out FILE] "
                            "[--tf32-results FILE] [--random] [--random-out FILE] "
                            "[--random-results FILE] [--cli] [--cli-out FILE] [--cli-results FILE] "
                            "[--shard K/N] [-v]\n");
            return 2;
        }
    }
    suite_result s[8] = {0};
    int ns = 0, total = 0;
    for (int i = 0; i < conf_n_suites; i++) {
        bool want = !n_only;
        for (int k = 0; k < n_only; k++) want |= !strcmp(only[k], conf_suites[i]);
        if (!want) continue;
        suite_result *r = &s[ns++];
        r->suite = conf_suites[i];
        const char *sroot = strcmp(r->suite, CONF_NEWER_SUITE) ? root : conf_generated_root();
        r->n = conf_list_cases(sroot, r->suite, &r->names);
        for (int c = 0; c < N_COLS; c++) {
            r->col[c] = ampc_xcalloc((size_t)r->n + 1, sizeof *r->col[c]);
            for (int j = 0; j < r->n; j++) r->col[c][j].status = (conf_status)-1;
        }
        for (int j = 0; j < r->n; j++, global++) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/%s/%s", sroot, r->suite, r->names[j]);
            if (global % shards != shard) { /* another shard's case: left out of every count */
                r->col[COL_REF][j].status = CONF_UNSUPPORTED;
                snprintf(r->col[COL_REF][j].reason, sizeof r->col[COL_REF][j].reason, "(other shard)");
                continue;
            }
            for (int c = 0; c < N_COLS; c++)
                if (run[c]) conf_run_case(dir, col_mode[c], &r->col[c][j]);
            if (!verbose) continue;
            printf("%s/%s: %s %s", r->suite, r->names[j], conf_status_name(r->col[COL_REF][j].status),
                   r->col[COL_REF][j].reason);
            for (int c = COL_GPU; c < N_COLS; c++)
                if (run[c]) printf(" | %s: %s", col_file_label[c], status_or_dash(&r->col[c][j]));
            printf("\n");
            for (int c = COL_GPU; c < N_COLS; c++)
                if (run[c] && r->col[c][j].status != CONF_PASS)
                    printf("    %s: %s\n", col_file_label[c], r->col[c][j].reason);
        }
        total += r->n;
    }
    if (!total) {
        fprintf(stderr, "ampc-conformance: no test cases under %s (install libonnx-testdata or set "
                        "AMPC_ONNX_TESTDATA)\n", root);
        return 1;
    }
    md_info mi = {.root = root};
    bool *have = mi.have;
    for (int c = 0; c < N_COLS; c++)
        have[c] = run[c] || (in_path[c] && read_results(in_path[c], s, ns, c));
    for (int i = 0; i < ns; i++) {
        for (int c = 0; c < N_COLS; c++)
            for (int j = 0; j < s[i].n; j++)
                if ((int)s[i].col[c][j].status >= 0) s[i].counts[c][s[i].col[c][j].status]++;
        const int(*k)[3] = s[i].counts;
        printf("%-18s %4d tests: %4d pass, %4d fail, %4d unsupported (%.1f %% pass)", s[i].suite,
               s[i].n, k[COL_REF][0], k[COL_REF][1], k[COL_REF][2],
               s[i].n ? 100.0 * k[COL_REF][0] / s[i].n : 0.0);
        if (have[COL_GPU])
            printf("; GPU %4d pass, %4d fail, %4d unsupported", k[COL_GPU][0], k[COL_GPU][1],
                   k[COL_GPU][2]);
        if (have[COL_TF32])
            printf("; default (TF32) %4d pass, %4d fail", k[COL_TF32][0], k[COL_TF32][1]);
        if (have[COL_RANDOM])
            printf("; random %4d pass, %4d fail", k[COL_RANDOM][0], k[COL_RANDOM][1]);
        if (have[COL_CLI])
            printf("; command line %4d pass, %4d fail, %4d unsupported", k[COL_CLI][0], k[COL_CLI][1],
                   k[COL_CLI][2]);
        printf("\n");
    }
    static const char *const run_flag[N_COLS] = {"", "--gpu", "--tf32", "--random", "--cli"};
    for (int c = COL_GPU; c < N_COLS; c++) {
        /* the file as the repository names it, not the absolute path the script passes */
        const char *file = in_path[c] && strstr(in_path[c], "tests/conformance/")
                               ? strstr(in_path[c], "tests/conformance/") : in_path[c];
        if (run[c]) snprintf(mi.source[c], sizeof mi.source[c], "this run (%s)", run_flag[c]);
        else if (have[c]) snprintf(mi.source[c], sizeof mi.source[c], "%s", file);
        else snprintf(mi.source[c], sizeof mi.source[c], "not run (no %s)",
                      file ? file : "results file given");
    }
    bool ok = true;
    if (md) ok &= write_file(md, s, ns, OUT_MARKDOWN, &mi);
    for (int c = 0; c < N_COLS; c++)
        if (out_path[c] && run[c]) ok &= write_file(out_path[c], s, ns, c, NULL);
    for (int i = 0; i < ns; i++) {
        conf_free_names(s[i].names, s[i].n);
        for (int c = 0; c < N_COLS; c++) free(s[i].col[c]);
    }
    return ok ? 0 : 1;
}

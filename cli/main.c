/*
 * main.c — the `ampc` command line.
 *
 *   ampc MODEL -o MODEL.so [--name NAME] [--arch sm_80,...] [--shape NAME=DxDxD] [--max-batch N]
 *              [--bind NAME=FILE]
 *              [--sparsity off|verify|prune] [--sparsity-layers GLOB]
 *              [--disable-pass PASS] [--dump-after PASS] [--print-pipeline] [-v]
 *   ampc MODEL --emit ir|cuda|ptx|c [-o FILE]
 *   ampc inspect MODEL [--precision fp16|bf16|auto] [--sparsity verify|prune]
 *   ampc doctor
 *   ampc run MODEL|MODEL.so [--reference] [--input NAME=FILE.npy|FILE.pb]... [--save-outputs DIR]
 *            [--iterations N] [--warmup N] [--profile] [--rank R --ranks N] [--nccl-id-file P]
 *
 * MODEL is an ONNX file or ampc IR text, told apart by content (the name only breaks a tie);
 * `run` and `inspect` also take a library (an ELF file). This file only parses options and prints; all work is done by the library (include/ampc.h), which never prints.
 */
#include "ampc.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char usage[] =
    "usage: ampc MODEL -o MODEL.so [options]  compile MODEL (.onnx or ampc IR text) into a\n"
    "                                         shared library and its header MODEL.h\n"
    "       ampc MODEL --emit ir|cuda|ptx|c   write the IR, CUDA C, PTX or the library's host C\n"
    "       ampc inspect MODEL                summary: inputs, outputs, ops, coverage, whether\n"
    "                                         -o builds it for the GPU (or why not); with\n"
    "                                         --precision fp16|bf16|auto each node's type and why,\n"
    "                                         with --sparsity verify|prune each layer's 2:4 status\n"
    "       ampc run MODEL|MODEL.so [--reference] [--input NAME=FILE]... [--save-outputs DIR]\n"
    "                [--iterations N] [--warmup N] [--profile] [--sparse-report]\n"
    "                [--rank R --ranks N] [--nccl-id-file PATH]\n"
    "                                         run on the GPU (--reference: the CPU evaluator)\n"
    "       ampc doctor                       GPUs, driver, CUDA libraries, what is missing\n"
    "       ampc --version | --help\n"
    "\n"
    "options:\n"
    "  -o FILE               output file: the library (MODEL.so), or --emit's ('-' for stdout)\n"
    "  --name NAME           the library's C prefix (default: from the file name)\n"
    "  --report FILE.json    what each pass did, the memory plan, every step's provider and\n"
    "                        precision (with -o or --emit cuda|ptx|c)\n"
    "  --precision MODE      fp32: f32 math everywhere; tf32 (default): f32 tensors, TF32\n"
    "                        tensor cores in matmuls and convolutions; fp16, bf16: f32 tensors\n"
    "                        move to that type as each op's policy allows (interface kept)\n"
    "                        auto: fp16 (or --auto-type bf16), with the nodes that add most\n"
    "                        error moved back to f32 until the outputs are within --tolerance\n"
    "                        (default 1e-2, relative to each output's largest magnitude) of\n"
    "                        the model on half the --calibrate samples; the build as it ships\n"
    "                        is then checked on the other half (and on the GPU when there is\n"
    "                        one): above the tolerance, nothing is written\n"
    "  --accept-error        auto: write the build even when its check misses --tolerance (the\n"
    "                        measured error is recorded in the library; `ampc inspect` shows it)\n"
    "  --keep-fp32 OP|NODE   with fp16/bf16/auto: keep an op type or a node in f32 (repeatable)\n"
    "  --calibrate DIR       samples for auto and --sparsity prune: DIR/<k>/<input>.npy (or .pb)\n"
    "                        for sample k = 0, 1, ...; or DIR/<input>.npy holding one sample or\n"
    "                        K stacked along a new leading axis (default: 2 random samples)\n"
    "  --layout nhwc|nchw    nhwc (default): 2-D f16/bf16 convolutions channels-last, with\n"
    "                        cuDNN's fused engines; nchw keeps them NCHW\n"
    "  --gemm-kernel         ampc's own tensor-core GEMM: the erf GELU fused into the GEMM,\n"
    "                        and each f16/bf16 GEMM timed against cuBLASLt at load\n"
    "  --no-l2-prefetch      the kernel before a GEMM or convolution does not ask L2 for its\n"
    "                        constant weight as it starts (default: it does)\n"
    "  --fast-gelu           CHANGES THE MODEL'S NUMBERS: an erf GELU after an f16/bf16 matmul\n"
    "                        runs as GELU's tanh form in cuBLASLt's epilogue (within 5e-4 of\n"
    "                        it; faster). Default: every erf GELU exact (--exact-gelu says so)\n"
    "  --gpus N --partition tensor\n"
    "                        split matmul pairs with constant weights over N GPUs (column-\n"
    "                        then row-parallel, one all-reduce each); -o builds one\n"
    "                        library holding a plan per GPU (NCCL), `ampc run` runs it on\n"
    "                        GPUs 0 to N-1; --emit ir shows the partition\n"
    "  --gpus N --partition data\n"
    "                        split the batch (dim 0 of every input and output) over N\n"
    "                        GPUs, weights replicated: each GPU runs the model for B/N\n"
    "                        rows; the library takes and gives the whole batch\n"
    "  --gpus N --partition pipeline [--micro-batches M]\n"
    "                        cut the graph into N stages balanced by estimated cost, stage s\n"
    "                        (and its weights) on GPU s, tensors crossing a cut sent by peer\n"
    "                        copies; the batch runs through them in M micro-batches (default:\n"
    "                        the largest divisor of the batch up to 4N); --report lists the\n"
    "                        stages\n"
    "  --sparsity MODE       2:4 structured sparsity of constant matmul/conv weights along K:\n"
    "                        off (default); verify: mark weights already 2:4 (sparse24 = 1);\n"
    "                        prune: keep the 2 largest |w| of every 4 and mark them, which\n"
    "                        CHANGES THE MODEL'S NUMBERS (--report gives the energy removed\n"
    "                        per layer). At load, each marked GEMM (f16/bf16) is timed dense\n"
    "                        (cuBLASLt) and sparse (cuSPARSELt, when installed) and the\n"
    "                        faster kept (docs/sparsity.md); auto is refused\n"
    "  --sparsity-layers GLOB  with prune: only nodes whose name matches GLOB (fnmatch)\n"
    "  --emit ir|cuda|ptx|c  write the optimised IR, the generated CUDA C, its PTX or host C\n"
    "  --arch sm_80,sm_90    cubin architectures (default: the GPU present, else sm_80)\n"
    "  --shape NAME=DxDx..   give the shape of an input with symbolic dims (repeatable)\n"
    "  --max-batch N         ONNX: dim 0 of each input that is symbolic or unset and that no\n"
    "                        --shape gives becomes N; the library then runs that batch exactly\n"
    "                        (shapes are static: a smaller batch is padded by the caller)\n"
    "  --max-loop-iterations N\n"
    "                        most iterations of one Loop in the CPU evaluator (run\n"
    "                        --reference, constant folding) and, fixed when compiling,\n"
    "                        of a data-dependent Loop on the GPU (default 1000000)\n"
    "  --disable-pass PASS   skip a pass of the pipeline (repeatable)\n"
    "  --dump-after PASS     print the IR after PASS to stderr\n"
    "  --print-pipeline      list the passes in order and exit\n"
    "  --input NAME=FILE     an input for `run` (.npy or ONNX TensorProto .pb); compiling the\n"
    "                        model, `run` binds the inputs that set a shape, axes, sizes or\n"
    "                        pads (Reshape's shape, Split's sizes...) to the given values\n"
    "  --bind NAME=FILE      compiling (-o, --emit, inspect): the value of such an input, made\n"
    "                        a constant of the build (the header no longer lists it); an input\n"
    "                        read only at run time is refused (repeatable)\n"
    "  --rank R --ranks N    `run` of a multi-GPU library, one process per GPU: this process is\n"
    "                        rank R of N and loads only its rank (read from mpirun's or Slurm's\n"
    "                        environment when not given; device = the local rank)\n"
    "  --nccl-id-file PATH   with one process per GPU: rank 0 writes the NCCL id there, the\n"
    "                        others wait for it (AMPC_NCCL_TIMEOUT_S, default 300 s)\n"
    "  --save-outputs DIR    write each output of `run` to DIR/<output name>.npy\n"
    "  --iterations N        `run`: time N launches with CUDA events (median, p90, p99)\n"
    "  --warmup N            `run`: untimed launches first (default 10)\n"
    "  --profile             `run`: GPU time of every step, largest first\n"
    "  --sparse-report       `run`: each 2:4 GEMM's dense and sparse time at load and the choice\n"
    "  -v                    one line per pass: name, changed, time\n";

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "ampc: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 1;
}

/* Pulls the value of option argv[*i] (either "--opt=value" or "--opt value"). */
static const char *opt_value(int argc, char **argv, int *i, const char *opt) {
    size_t n = strlen(opt);
    if (!strncmp(argv[*i], opt, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (*i + 1 < argc) return argv[++*i];
    fprintf(stderr, "ampc: option %s needs a value\n", opt);
    return NULL;
}

static bool is_opt(const char *arg, const char *opt) {
    size_t n = strlen(opt);
    return !strncmp(arg, opt, n) && (arg[n] == 0 || arg[n] == '=');
}

/* Parses argv into o; returns 0, or the process exit code on error. */
static int parse_args(int argc, char **argv, ampc_cli_options *o) {
    int i = 1;
    if (i < argc && (!strcmp(argv[i], "inspect") || !strcmp(argv[i], "run") ||
                     !strcmp(argv[i], "doctor")))
        o->command = argv[i++];
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            printf("ampc %s\n", AMPC_VERSION_STRING);
            exit(0);
        } else if (!strcmp(a, "-v")) {
            o->verbose = true;
        } else if (!strcmp(a, "--print-pipeline")) {
            o->print_pipeline = true;
        } else if (!strcmp(a, "--reference")) {
            o->reference = true;
        } else if (!strcmp(a, "-o")) {
            if (!(o->output = opt_value(argc, argv, &i, "-o"))) return 2;
        } else if (is_opt(a, "--emit")) {
            if (!(v = opt_value(argc, argv, &i, "--emit"))) return 2;
            if (strcmp(v, "ir") && strcmp(v, "cuda") && strcmp(v, "ptx") && strcmp(v, "c"))
                return fail("--emit %s is not available (available: ir, cuda, ptx, c)", v, ""), 2;
            o->emit = v;
        } else if (is_opt(a, "--arch")) {
            if (!(v = opt_value(argc, argv, &i, "--arch"))) return 2;
            o->arch = v;
        } else if (is_opt(a, "--shape")) {
            if (!(v = opt_value(argc, argv, &i, "--shape"))) return 2;
            if (o->n_shapes == AMPC_CLI_MAX_LIST) return fail("too many --shape options", "", ""), 2;
            o->shapes[o->n_shapes++] = v;
        } else if (is_opt(a, "--max-batch")) {
            if (!(v = opt_value(argc, argv, &i, "--max-batch"))) return 2;
            char *end;
            o->max_batch = strtoll(v, &end, 10);
            if (*end || o->max_batch < 1)
                return fail("--max-batch needs a positive integer, got '%s'", v, ""), 2;
        } else if (is_opt(a, "--max-loop-iterations")) {
            if (!(v = opt_value(argc, argv, &i, "--max-loop-iterations"))) return 2;
            char *end;
            errno = 0;
            o->max_loop_iterations = strtoll(v, &end, 10);
            if (*end || !*v || errno || o->max_loop_iterations < 1)
                return fail("--max-loop-iterations needs a positive integer, got '%s'", v, ""), 2;
        } else if (is_opt(a, "--disable-pass")) {
            if (!(v = opt_value(argc, argv, &i, "--disable-pass"))) return 2;
            if (o->n_disable == AMPC_CLI_MAX_LIST) return fail("too many --disable-pass", "", ""), 2;
            o->disable[o->n_disable++] = v;
        } else if (is_opt(a, "--dump-after")) {
            if (!(o->dump_after = opt_value(argc, argv, &i, "--dump-after"))) return 2;
        } else if (is_opt(a, "--bind")) {
            if (!(v = opt_value(argc, argv, &i, "--bind"))) return 2;
            if (o->n_binds == AMPC_CLI_MAX_LIST) return fail("too many --bind options", "", ""), 2;
            o->binds[o->n_binds++] = v;
        } else if (is_opt(a, "--input")) {
            if (!(v = opt_value(argc, argv, &i, "--input"))) return 2;
            if (o->n_inputs == AMPC_CLI_MAX_LIST) return fail("too many --input options", "", ""), 2;
            o->inputs[o->n_inputs++] = v;
        } else if (is_opt(a, "--precision")) {
            if (!(v = opt_value(argc, argv, &i, "--precision"))) return 2;
            if (strcmp(v, "fp32") && strcmp(v, "tf32") && strcmp(v, "fp16") && strcmp(v, "bf16") &&
                strcmp(v, "auto"))
                return fail("--precision %s is not available (available: fp32, tf32, fp16, bf16, "
                            "auto)", v, ""), 2;
            o->precision = v;
        } else if (is_opt(a, "--auto-type")) {
            if (!(v = opt_value(argc, argv, &i, "--auto-type"))) return 2;
            if (strcmp(v, "fp16") && strcmp(v, "bf16"))
                return fail("--auto-type %s: give fp16 or bf16", v, ""), 2;
            o->auto_type = v;
        } else if (!strcmp(a, "--accept-error")) {
            o->accept_error = true;
        } else if (is_opt(a, "--tolerance")) {
            if (!(v = opt_value(argc, argv, &i, "--tolerance"))) return 2;
            char *end;
            o->tolerance = strtod(v, &end);
            if (*end || !(o->tolerance > 0))
                return fail("--tolerance needs a positive number, got '%s'", v, ""), 2;
        } else if (is_opt(a, "--gpus")) {
            if (!(v = opt_value(argc, argv, &i, "--gpus"))) return 2;
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1024)
                return fail("--gpus needs a number of GPUs from 1 to 1024, got '%s'", v, ""), 2;
            o->gpus = (int32_t)n;
        } else if (is_opt(a, "--partition")) {
            if (!(v = opt_value(argc, argv, &i, "--partition"))) return 2;
            if (strcmp(v, "tensor") && strcmp(v, "data") && strcmp(v, "pipeline"))
                return fail("--partition %s: give tensor, data or pipeline", v, ""), 2;
            o->tensor_parallel = !strcmp(v, "tensor");
            o->data_parallel = !strcmp(v, "data");
            o->pipeline_parallel = !strcmp(v, "pipeline");
        } else if (is_opt(a, "--micro-batches")) {
            if (!(v = opt_value(argc, argv, &i, "--micro-batches"))) return 2;
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 65536)
                return fail("--micro-batches needs a number from 1 to 65536, got '%s'", v, ""), 2;
            o->micro_batches = (int32_t)n;
        } else if (!strcmp(a, "--gemm-kernel")) {
            o->gemm_kernel = true;
        } else if (!strcmp(a, "--no-l2-prefetch")) {
            o->no_l2_prefetch = true;
        } else if (!strcmp(a, "--fast-gelu")) {
            o->fast_gelu = true;
        } else if (!strcmp(a, "--exact-gelu")) {
            /* the default since --fast-gelu exists; accepted so that existing scripts run */
        } else if (is_opt(a, "--layout")) {
            if (!(v = opt_value(argc, argv, &i, "--layout"))) return 2;
            if (strcmp(v, "nchw") && strcmp(v, "nhwc"))
                return fail("--layout %s: give nchw or nhwc", v, ""), 2;
            o->nchw = !strcmp(v, "nchw");
        } else if (is_opt(a, "--sparsity")) {
            if (!(v = opt_value(argc, argv, &i, "--sparsity"))) return 2;
            if (!strcmp(v, "auto"))
                return fail("--sparsity auto (choosing which layers to prune) is not written: the "
                            "runtime's cost model only chooses dense or sparse at load for "
                            "weights already 2:4; give off, verify or prune%s%s",
                            "", ""), 2;
            if (strcmp(v, "off") && strcmp(v, "verify") && strcmp(v, "prune"))
                return fail("--sparsity %s is not available (available: off, verify, prune)", v,
                            ""), 2;
            o->sparsity = v;
        } else if (is_opt(a, "--sparsity-layers")) {
            if (!(o->sparsity_layers = opt_value(argc, argv, &i, "--sparsity-layers"))) return 2;
        } else if (is_opt(a, "--calibrate")) {
            if (!(o->calibrate = opt_value(argc, argv, &i, "--calibrate"))) return 2;
        } else if (is_opt(a, "--keep-fp32")) {
            if (!(v = opt_value(argc, argv, &i, "--keep-fp32"))) return 2;
            if (o->n_keep_fp32 == AMPC_CLI_MAX_LIST) return fail("too many --keep-fp32", "", ""), 2;
            o->keep_fp32[o->n_keep_fp32++] = v;
        } else if (is_opt(a, "--report")) {
            if (!(o->report = opt_value(argc, argv, &i, "--report"))) return 2;
        } else if (is_opt(a, "--name")) {
            if (!(o->name = opt_value(argc, argv, &i, "--name"))) return 2;
        } else if (!strcmp(a, "--profile")) {
            o->profile = true;
        } else if (!strcmp(a, "--sparse-report")) {
            o->sparse_report = true;
        } else if (is_opt(a, "--iterations") || is_opt(a, "--warmup")) {
            bool iters = is_opt(a, "--iterations");
            if (!(v = opt_value(argc, argv, &i, iters ? "--iterations" : "--warmup"))) return 2;
            char *end;
            long long n = strtoll(v, &end, 10);
            if (*end || n < (iters ? 1 : 0) || n > 1000000)
                return fail("%s needs a count between 1 and 1000000, got '%s'",
                            iters ? "--iterations" : "--warmup", v), 2;
            *(iters ? &o->iterations : &o->warmup) = (int32_t)n;
        } else if (is_opt(a, "--rank") || is_opt(a, "--ranks")) {
            bool one = is_opt(a, "--rank");
            if (!(v = opt_value(argc, argv, &i, one ? "--rank" : "--ranks"))) return 2;
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || !*v || n < (one ? 0 : 1) || n > 65536)
                return fail(one ? "%s needs a rank from 0, got '%s'"
                                : "%s needs a number of processes from 1, got '%s'",
                            one ? "--rank" : "--ranks", v), 2;
            *(one ? &o->rank : &o->ranks) = (int32_t)n;
        } else if (is_opt(a, "--nccl-id-file")) {
            if (!(o->nccl_id_file = opt_value(argc, argv, &i, "--nccl-id-file"))) return 2;
        } else if (is_opt(a, "--save-outputs")) {
            if (!(o->save_dir = opt_value(argc, argv, &i, "--save-outputs"))) return 2;
        } else if (a[0] == '-' && a[1]) {
            return fail("unknown option '%s' (see ampc --help)", a, ""), 2;
        } else if (!o->model) {
            o->model = a;
        } else {
            return fail("more than one model given: '%s' and '%s'", o->model, a), 2;
        }
    }
    if (o->sparsity_layers && (!o->sparsity || strcmp(o->sparsity, "prune")))
        return fail("--sparsity-layers '%s' applies to --sparsity prune (found --sparsity %s)",
                    o->sparsity_layers, o->sparsity ? o->sparsity : "off"), 2;
    if (o->reference && (o->iterations > 0 || o->profile || o->sparse_report))
        return fail("%s times the GPU; --reference runs the CPU evaluator, which is not timed: "
                    "drop one of them%s", o->iterations > 0 ? "--iterations"
                                          : o->profile  ? "--profile"
                                                        : "--sparse-report", ""), 2;
    if ((o->rank >= 0) != (o->ranks >= 0))
        return fail("%s without %s: give both (this process's rank and the number of "
                    "processes), or neither under mpirun", o->rank >= 0 ? "--rank" : "--ranks",
                    o->rank >= 0 ? "--ranks" : "--rank"), 2;
    if (o->rank >= 0 && o->rank >= o->ranks) {
        char r[16], n[16];
        snprintf(r, sizeof r, "%d", o->rank);
        snprintf(n, sizeof n, "%d", o->ranks);
        return fail("--rank %s is out of range for --ranks %s (ranks run from 0)", r, n), 2;
    }
    return 0;
}

/* The runtime's diagnostics (what AMPC_*_VERBOSE asks for), on stderr. */
static void log_line(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "ampc: %s\n", line);
}

int main(int argc, char **argv) {
    ampc_cli_terminal_install(); /* a model's names print as text, never as escape sequences */
    ampc_rt_set_log(log_line, NULL);
    ampc_cli_options o = {.warmup = 10, .rank = -1, .ranks = -1};
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.print_pipeline) {
        ampc_pipeline_print(stdout);
        return 0;
    }
    if (o.command && !strcmp(o.command, "doctor")) return ampc_cli_doctor(&o);
    if (!o.model) {
        fputs(usage, stderr);
        return 2;
    }
    if (o.command && !strcmp(o.command, "inspect")) return ampc_cli_inspect(&o);
    if (o.command && !strcmp(o.command, "run")) return ampc_cli_run(&o);
    return ampc_cli_compile(&o);
}

/*
 * test_cli.c — the `ampc` executable end to end: --version, --help, inspect, --emit ir with pass
 * options, run --reference with .npy inputs and outputs, and the messages of misuse. Each test
 * runs the binary built next to this suite and checks its exit status and output.
 */
#define _POSIX_C_SOURCE 200809L /* popen, mkdtemp */
#include "support.h"

#include "ampc_runtime.h"
#include "cli/paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* `ampc ARGS`, killed after 60 s: its exit status, its output in *out (t_ampc). */
#define ampc(out, ...) t_ampc((out), 60, __VA_ARGS__)



static const char model_text[] =
    "graph \"affine\" {\n"
    "  input %x : f32[2,3]\n"
    "  const %w : f32[3,2] = [1, 2, 3, 4, 5, 6]\n"
    "  const %two : f32[] = [2]\n"
    "  const %three : f32[] = [3]\n"
    "  %k : f32[] = Mul(%two, %three) @\"k\"\n"
    "  %y : f32[2,2] = MatMul(%x, %w) @\"mm\"\n"
    "  %z : f32[2,2] = Mul(%y, %k) @\"scale\"\n"
    "  %unused : f32[2,3] = Relu(%x) @\"dead\"\n"
    "  output %z\n"
    "}\n";

Test(cli, version_and_help) {
    char *out;
    cr_assert_eq(ampc(&out, "--version"), 0);
    cr_assert(strstr(out, "ampc " AMPC_VERSION_STRING), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "--help"), 0);
    cr_assert(strstr(out, "usage: ampc MODEL"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "--frobnicate x"), 2);
    cr_assert(strstr(out, "unknown option '--frobnicate'"), "%s", out);
    free(out);
}

Test(cli, inspect_ir_text) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    t_write_text(path, model_text);
    cr_assert_eq(ampc(&out, "inspect %s", path), 0, "%s", out);
    cr_assert(strstr(out, "graph 'affine': 4 nodes"), "%s", out);
    cr_assert(strstr(out, "MatMul"), "%s", out);
    cr_assert(strstr(out, "verifier: ok"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, emit_ir_runs_the_pipeline_and_honours_disable) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    t_write_text(path, model_text);
    cr_assert_eq(ampc(&out, "%s --emit ir", path), 0, "%s", out);
    cr_assert(strstr(out, "const %w_scaled : f32[3,2] = [6, 12, 18, 24, 30, 36]"),
              "fold turned k into the constant 6, fold-scale moved it into the weights:\n%s", out);
    cr_assert_null(strstr(out, "Relu"), "dce removed the dead node:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --disable-pass dce -v", path), 0, "%s", out);
    cr_assert(strstr(out, "Relu"), "with dce disabled the node stays:\n%s", out);
    cr_assert(strstr(out, "pass dce"), "-v traces the passes:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --disable-pass nosuch", path), 1);
    cr_assert(strstr(out, "unknown pass 'nosuch'"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* x @ W1 -> Relu -> @ W2: one pair, hidden width 4. */
static const char mlp_text[] =
    "graph \"mlp\" {\n"
    "  input %x : f32[2,3]\n"
    "  const %w1 : f32[3,4] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
    "  const %w2 : f32[4,2] = [1, 0, 0, 1, 1, 1, -1, 2]\n"
    "  %h : f32[2,4] = MatMul(%x, %w1) @\"first\"\n"
    "  %r : f32[2,4] = Relu(%h) @\"act\"\n"
    "  %y : f32[2,2] = MatMul(%r, %w2) @\"second\"\n"
    "  output %y\n"
    "}\n";

Test(cli, gpus_and_partition_split_a_matmul_pair) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/mlp.ir", d);
    t_write_text(path, mlp_text);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition tensor --emit ir", path), 0, "%s", out);
    cr_assert(strstr(out, "const %w1_rank1 : f32[3,2] = [3, 4, 7, 8, 11, 12]"), "%s", out);
    cr_assert(strstr(out, "const %w2_rank1 : f32[2,2] = [1, 1, -1, 2]"), "%s", out);
    cr_assert(strstr(out, "%y : f32[2,2] = ampc.AllReduce(%second_rank0, %second_rank1)"), "%s",
              out);
    cr_assert(strstr(out, "ampc: partition: mlp block at 'second' split: rank r: columns"), "%s",
              out);
    cr_assert(strstr(out, "ampc: partition: 1 block split over 2 GPUs"), "%s", out);
    free(out);
    /* nothing to split (one matmul): a warning, and the build is one GPU's */
    char one[512];
    snprintf(one, sizeof one, "%s/one.ir", d);
    t_write_text(one, "graph \"g\" {\n  input %x : f32[2,3]\n  const %w : f32[3,2] = [1, 2, 3, "
                      "4, 5, 6]\n  %y : f32[2,2] = MatMul(%x, %w)\n  output %y\n}\n");
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition tensor --emit ir", one), 0, "%s", out);
    cr_assert(strstr(out, "ampc: warning: --partition tensor split nothing over 2 GPUs"), "%s",
              out);
    cr_assert_null(strstr(out, "AllReduce"), "%s", out);
    free(out);
    /* -o builds one library with a plan per GPU; inspect shows the ranks and the all-reduce */
    char so[600];
    snprintf(so, sizeof so, "%s/mlp2.so", d);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition tensor -o %s", path, so), 0, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s", so), 0, "%s", out);
    cr_assert(strstr(out, "multi-GPU: 2 ranks (one GPU each)"), "%s", out);
    cr_assert(strstr(out, "1 all-reduces"), "%s", out);
    cr_assert(strstr(out, "NCCL           ampc.AllReduce 'second_allreduce'"), "%s", out);
    free(out);
    /* one process per GPU: the flags and what they are checked against (before any GPU) */
    cr_assert_eq(ampc(&out, "run %s --rank 2 --ranks 2", so), 2);
    cr_assert(strstr(out, "--rank 2 is out of range for --ranks 2"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --rank 0", so), 2);
    cr_assert(strstr(out, "--rank without --ranks"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --rank 0 --ranks 2", so), 1);
    cr_assert(strstr(out, "rank 0 of 2 (--rank/--ranks): one process per GPU needs "
                          "--nccl-id-file PATH"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --rank 0 --ranks 3 --nccl-id-file %s/id", so, d), 1);
    cr_assert(strstr(out, "--rank/--ranks gives 3 processes, but the model is partitioned over "
                          "2 GPUs"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --gpus 4", so), 1);
    cr_assert(strstr(out, "--gpus 4, but the model is partitioned over 2 GPUs"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition rows --emit ir", path), 2);
    cr_assert(strstr(out, "--partition rows: give tensor, data or pipeline"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 0 --partition tensor --emit ir", path), 2);
    cr_assert(strstr(out, "--gpus needs a number of GPUs from 1 to 1024, got '0'"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --emit ir", path), 1);
    cr_assert(strstr(out, "2 GPUs or more need a partition"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* --partition pipeline: the IR is one micro-batch cut into stages (ranks, a peer copy at the
 * cut); -o builds one library whose inspect shows the stages; --report lists them; a batch that
 * --micro-batches does not divide and more stages than nodes are refused with their names. */
Test(cli, partition_pipeline_cuts_the_graph_into_stages) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/mlp.ir", d);
    t_write_text(path, mlp_text);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition pipeline --emit ir", path), 0, "%s", out);
    cr_assert(strstr(out, "graph \"mlp\" micro_batches 2 stages 2 {"), "%s", out);
    cr_assert(strstr(out, "input %x : f32[1,3]"), "%s", out);
    cr_assert(strstr(out, "ampc.PeerCopy("), "%s", out);
    cr_assert(strstr(out, "{rank = 1, from = 0}"), "%s", out);
    free(out);
    char so[600], report[600];
    snprintf(so, sizeof so, "%s/mlpp.so", d);
    snprintf(report, sizeof report, "%s/report.json", d);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition pipeline -o %s --report %s", path, so,
                      report), 0, "%s", out);
    free(out);
    char *json = t_read_text(report);
    cr_assert(strstr(json, "\"pipeline\": {\"stages\": 2, \"micro_batches\": 2"), "%s", json);
    cr_assert(strstr(json, "\"stage\": 1"), "%s", json);
    cr_assert(strstr(json, "\"crossing\": 1"), "%s", json);
    free(json);
    cr_assert_eq(ampc(&out, "inspect %s", so), 0, "%s", out);
    cr_assert(strstr(out, "pipeline: 2 stages on 2 GPUs (devices 0 to 1), the batch of 2 in 2 "
                          "micro-batches of 1 rows"), "%s", out);
    cr_assert(strstr(out, "input"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition pipeline --micro-batches 4 --emit ir", path),
                 1);
    cr_assert(strstr(out, "input 'x'") && strstr(out, "not a multiple of the 4 micro-batches"),
              "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 8 --partition pipeline --emit ir", path), 1);
    cr_assert(strstr(out, "fewer than the 8 stages"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition tensor --micro-batches 2 --emit ir", path), 1);
    cr_assert(strstr(out, "micro-batches are for --partition pipeline"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* --partition data: the IR is one GPU's share of the batch (batch_split 2, x [1,3]); -o builds
 * one library whose inspect shows the split, the whole batch's io and one weights blob; a batch
 * that does not divide and an output without the batch are refused with their names. */
Test(cli, partition_data_splits_the_batch) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/mlp.ir", d);
    t_write_text(path, mlp_text);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition data --emit ir", path), 0, "%s", out);
    cr_assert(strstr(out, "graph \"mlp\" batch_split 2 {"), "%s", out);
    cr_assert(strstr(out, "input %x : f32[1,3]"), "%s", out);
    cr_assert(strstr(out, "%y : f32[1,2] = MatMul(%r, %w2)"), "%s", out);
    cr_assert_null(strstr(out, "AllReduce"), "%s", out);
    free(out);
    char so[600];
    snprintf(so, sizeof so, "%s/mlpd.so", d);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition data -o %s", path, so), 0, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s", so), 0, "%s", out);
    cr_assert(strstr(out, "data parallel: 2 GPUs (devices 0 to 1) split the batch of 2, 1 rows "
                          "each"), "%s", out);
    cr_assert(strstr(out, "one copy of the weights (512 bytes) for every rank, no all-reduce"),
              "%s", out);
    cr_assert(strstr(out, "x                        f32[2,3]  24 bytes"), "%s", out);
    cr_assert_null(strstr(out, "all-reduces"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --gpus 4 --partition data --emit ir", path), 1);
    cr_assert(strstr(out, "the batch (dim 0 of input 'x' [2,3]) is 2, not a multiple of the 4 "
                          "GPUs"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* A transformer MLP block: the pair, then + b2 and the residual + x. */
static const char block_text[] =
    "graph \"block\" {\n"
    "  input %x : f32[2,2]\n"
    "  const %w1 : f32[2,4] = [1, 2, 3, 4, 5, 6, 7, 8]\n"
    "  const %b1 : f32[4] = [0.5, -1, 0, 1]\n"
    "  const %w2 : f32[4,2] = [1, 0, 0, 1, 1, 1, -1, 2]\n"
    "  const %b2 : f32[2] = [10, 20]\n"
    "  %h : f32[2,4] = MatMul(%x, %w1) @\"first\"\n"
    "  %hb : f32[2,4] = Add(%h, %b1) @\"first_bias\"\n"
    "  %r : f32[2,4] = Relu(%hb) @\"act\"\n"
    "  %o : f32[2,2] = MatMul(%r, %w2) @\"second\"\n"
    "  %ob : f32[2,2] = Add(%o, %b2) @\"second_bias\"\n"
    "  %y : f32[2,2] = Add(%x, %ob) @\"residual\"\n"
    "  output %y\n"
    "}\n";

/* b2 and the residual go into rank 0's second matmul; the all-reduce writes the block's
 * output. */
Test(cli, partition_puts_bias_and_residual_on_rank_0) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/block.ir", d);
    t_write_text(path, block_text);
    cr_assert_eq(ampc(&out, "%s --gpus 2 --partition tensor --emit ir", path), 0, "%s", out);
    cr_assert(strstr(out, "= ampc.FusedMatMul(%act_rank0, %w2_rank0, %b2, %x) {rank = 0} "
                          "@\"second_rank0\""), "%s", out);
    cr_assert(strstr(out, "%second_rank1 : f32[2,2] = MatMul(%act_rank1, %w2_rank1) {rank = 1}"),
              "%s", out);
    cr_assert(strstr(out, "%y : f32[2,2] = ampc.AllReduce(%residual_rank0, %second_rank1)"), "%s",
              out);
    cr_assert_null(strstr(out, "Add("), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, precision_fp16_moves_the_graph_and_keeps_what_it_is_told) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    t_write_text(path, model_text);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp16", path), 0, "%s", out);
    cr_assert(strstr(out, "%y : f16[2,2] = MatMul(%x_to_f16, %w_f16_scaled)"), "%s", out);
    cr_assert(strstr(out, "%z : f32[2,2] = Cast(%y) {to = 1}"), "the output stays f32:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision bf16 --keep-fp32 mm", path), 0, "%s", out);
    cr_assert(strstr(out, "%z : f32[2,2] = MatMul(%x, %w_scaled)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp16 --keep-fp32 Softmax", path), 1);
    cr_assert(strstr(out, "keep-fp32 'Softmax' names no node and no op of graph 'affine'"), "%s", out);
    free(out);
    /* inspect --precision: each node's type and the reason. */
    cr_assert_eq(ampc(&out, "inspect %s --precision fp16", path), 0, "%s", out);
    cr_assert(strstr(out, "precision (fp16): 2 nodes in the low type, 1 in f32"), "%s", out);
    cr_assert(strstr(out, "mm                                       MatMul                 f16   policy: low"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp8", path), 2);
    cr_assert(strstr(out, "--precision fp8 is not available (available: fp32, tf32, fp16, bf16, auto)"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* BERT's FFN in small: MatMul -> Add(bias) -> Gelu (the erf form). */
static const char gelu_text[] =
    "graph \"ffn\" {\n"
    "  input %x : f32[2,3]\n"
    "  const %w : f32[3,2] = [1, 2, 3, 4, 5, 6]\n"
    "  const %b : f32[2] = [0.5, -0.5]\n"
    "  %y : f32[2,2] = MatMul(%x, %w) @\"mm\"\n"
    "  %a : f32[2,2] = Add(%y, %b) @\"bias\"\n"
    "  %z : f32[2,2] = Gelu(%a) @\"gelu\"\n"
    "  output %z\n"
    "}\n";

/* Under fp16 the erf GELU stays exact by default (--exact-gelu, still accepted, says the same);
 * with --fast-gelu it ends the matmul as its tanh form: the compile says so on stderr, inspect
 * says so, the report names the epilogue; under f32 it stays a node of its own either way. */
Test(cli, fp16_gelu_tanh_form_is_shown) {
    char *d = t_tmpdir("cli"), path[512], report[600], cuda[600], *out;
    snprintf(path, sizeof path, "%s/ffn.ir", d);
    snprintf(report, sizeof report, "%s/r.json", d);
    snprintf(cuda, sizeof cuda, "%s/ffn.cu", d);
    t_write_text(path, gelu_text);
    cr_assert_eq(ampc(&out, "inspect %s --precision fp16 --fast-gelu", path), 0, "%s", out);
    cr_assert(strstr(out, "GELU: 1 matmul ends in GELU's tanh form, in cuBLASLt's epilogue (an erf "
                          "GELU: within 5e-4 of it, asked for by --fast-gelu)"), "%s", out);
    free(out);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(ampc(&out, "inspect %s --precision fp16%s", path, k ? " --exact-gelu" : ""), 0,
                     "%s", out);
        cr_assert_null(strstr(out, "GELU:"), "%s", out);
        free(out);
        cr_assert_eq(ampc(&out, "%s --emit ir --precision fp16%s", path, k ? " --exact-gelu" : ""),
                     0, "%s", out);
        cr_assert(strstr(out, "= Gelu(") && !strstr(out, "GeluTanh") && !strstr(out, "tanh form"),
                  "the erf GELU is not exact by default:\n%s", out);
        cr_assert(strstr(out, "ampc: math: f16 for "), "%s", out);
        free(out);
    }
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp16 --fast-gelu", path), 0, "%s", out);
    cr_assert(strstr(out, "{activation = \"GeluTanh\"}"), "%s", out);
    cr_assert(strstr(out, "ampc: math: ") && strstr(out, "GELU's tanh form for 1 erf GELU "
                                                     "(--fast-gelu)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --fast-gelu", path), 0, "%s", out); /* tf32: f32 products */
    cr_assert(strstr(out, "= Gelu(") && !strstr(out, "tanh form"), "the f32 GELU was fused:\n%s",
              out);
    cr_assert(strstr(out, "ampc: math: TF32 for 1 f32 matmul/convolution"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit cuda -o %s --precision fp16 --fast-gelu --report %s", path,
                      cuda, report), 0, "%s", out);
    char *json = t_read_text(report);
    cr_assert(strstr(json, "\"epilogue\": \"BIAS_GELU_TANH\""), "%s", json);
    free(json);
    free(out);
    t_rmdir_all(d);
}

/* enc.fc's weight [8,2] is dense; dec.fc's K = 6 is not a multiple of 4. */
static const char sparse_text[] =
    "graph \"sp\" {\n"
    "  input %x : f32[2,8]\n"
    "  input %u : f32[2,6]\n"
    "  const %we : f32[8,2] = [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8]\n"
    "  const %wd : f32[6,2] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
    "  %h : f32[2,2] = MatMul(%x, %we) @\"enc.fc\"\n"
    "  %y : f32[2,2] = MatMul(%u, %wd) @\"dec.fc\"\n"
    "  output %h\n"
    "  output %y\n"
    "}\n";

Test(cli, sparsity_prune_marks_and_reports_the_layers) {
    char *d = t_tmpdir("cli"), path[512], report[600], cuda[600], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    snprintf(report, sizeof report, "%s/r.json", d);
    snprintf(cuda, sizeof cuda, "%s/m.cu", d);
    t_write_text(path, sparse_text);
    cr_assert_eq(ampc(&out, "%s --emit ir --sparsity prune", path), 0, "%s", out);
    /* Rows 0..3 of column 0 are 1, 3, 5, 7 -> 5, 7 stay; rows 4..7 -1..-7 -> -5, -7 stay. */
    cr_assert(strstr(out, "const %we_24 : f32[8,2] = [0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0, -5, -6, -7, -8]"),
              "%s", out);
    cr_assert(strstr(out, "%h : f32[2,2] = MatMul(%x, %we_24) {sparse24 = 1} @\"enc.fc\""), "%s", out);
    cr_assert(strstr(out, "%y : f32[2,2] = MatMul(%u, %wd) @\"dec.fc\""), "K = 6 stays dense:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --sparsity verify", path), 0, "%s", out);
    cr_assert_null(strstr(out, "sparse24"), "verify prunes nothing:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --sparsity prune --sparsity-layers 'dec.*'", path), 0, "%s", out);
    cr_assert_null(strstr(out, "sparse24"), "the glob leaves enc.fc alone:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s --sparsity prune", path), 0, "%s", out);
    cr_assert(strstr(out, "sparsity (prune): 1 of 2 layers 2:4 (1 pruned; f16/bf16 GEMMs among them run sparse where faster at load)"),
              "%s", out);
    cr_assert(strstr(out, "pruned to 2:4, 14.71% of the energy removed"), "60 / 408:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit cuda -o %s --sparsity prune --report %s", path, cuda, report),
                 0, "%s", out);
    free(out);
    char text[8192] = {0};
    FILE *f = fopen(report, "r");
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0, "the report is written");
    fclose(f);
    cr_assert(strstr(text, "\"sparsity\": \"prune\""), "%s", text);
    /* energy: all = 2 (1 + 9 + 25 + 49) + 2 (4 + 16 + 36 + 64) = 408, removed = 2 (1 + 9) +
     * 2 (4 + 16) = 60; 60 / 408 = 0.147059 */
    cr_assert(strstr(text, "{\"node\": \"enc.fc\", \"op\": \"MatMul\", \"shape\": \"[8,2]\", \"k\": 8, "
                           "\"status\": \"pruned to 2:4\", \"energy_removed\": 0.147059}"), "%s", text);
    cr_assert(strstr(text, "{\"node\": \"dec.fc\", \"op\": \"MatMul\", \"shape\": \"[6,2]\", \"k\": 6, "
                           "\"status\": \"not eligible: K is not a multiple of 4\", "
                           "\"energy_removed\": 0}"), "%s", text);
    t_rmdir_all(d);
}

Test(cli, sparsity_option_errors) {
    char *out;
    cr_assert_eq(ampc(&out, "m.ir --emit ir --sparsity half"), 2);
    cr_assert(strstr(out, "--sparsity half is not available (available: off, verify, prune)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "m.ir --emit ir --sparsity auto"), 2);
    cr_assert(strstr(out, "--sparsity auto (choosing which layers to prune) is not written"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "m.ir --emit ir --sparsity verify --sparsity-layers 'enc.*'"), 2);
    cr_assert(strstr(out, "--sparsity-layers 'enc.*' applies to --sparsity prune (found --sparsity verify)"),
              "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "--help"), 0);
    cr_assert(strstr(out, "CHANGES THE MODEL'S NUMBERS") && strstr(out, "timed dense"), "%s", out);
    free(out);
}

/* 1000 + h - 1000 cancels: in f16 the sum keeps h to 0.5 at best, so the output is off by up to
 * 0.25 where h is about 1. The search must end within the tolerance, with nodes moved back. */
static const char cancel_text[] =
    "graph \"cancel\" {\n"
    "  input %x : f32[4,2]\n"
    "  const %w : f32[2,2] = [1, 0, 0, 1]\n"
    "  const %big : f32[] = [1000]\n"
    "  %h : f32[4,2] = MatMul(%x, %w) @\"mm\"\n"
    "  %a : f32[4,2] = Add(%h, %big) @\"shift\"\n"
    "  %s : f32[4,2] = Sub(%a, %big) @\"unshift\"\n"
    "  output %s\n"
    "}\n";

Test(cli, precision_auto_moves_nodes_back_until_the_tolerance_holds) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    t_write_text(path, cancel_text);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance 1e-3", path), 0, "%s", out);
    cr_assert(strstr(out, "round 1: outputs' error "), "%s", out);
    cr_assert(strstr(out, "to f32: node '"), "%s", out);
    cr_assert(strstr(out, ", all low "), "%s", out);
    cr_assert(strstr(out, "the build as it ships, on the reference evaluator with TF32 emulated, "
                          "on 1 held-out sample: error "), "%s", out);
    cr_assert_null(strstr(out, "NOT MET"), "%s", out);
    cr_assert(strstr(out, "%s : f32[4,2] = Sub("), "%s", out);
    free(out);
    /* A model that fp16 serves as it is: nothing moves, the MatMul runs in f16. */
    t_write_text(path, model_text);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto", path), 0, "%s", out);
    cr_assert(strstr(out, "precision auto: 0 nodes moved back to f32"), "%s", out);
    cr_assert(strstr(out, "= MatMul(%x_to_f16, %w_f16_scaled)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --calibrate %s/none", path, d), 0, "%s", out);
    cr_assert(strstr(out, "/none has neither x.npy nor x.pb: random data for input 'x'"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance -1", path), 2);
    cr_assert(strstr(out, "--tolerance needs a positive number, got '-1'"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, parse_errors_name_file_line_and_column) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/bad.ir", d);
    t_write_text(path, "graph \"g\" {\n  input %x : f32[2]\n  %y : f32[2] = Relu(%nope)\n}\n");
    cr_assert_eq(ampc(&out, "%s --emit ir", path), 1);
    cr_assert(strstr(out, "bad.ir:3:"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s/missing.ir --emit ir", d), 1);
    cr_assert(strstr(out, "cannot open"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* A model path that is a FIFO, or a folder, is refused at once naming the file; if opening the
 * FIFO blocked (nothing ever writes to it), ampc() would kill the command and the test fail. */
Test(cli, ir_text_that_is_not_a_regular_file_is_refused, .timeout = 200) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/pipe.ir", d);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(ampc(&out, "%s --emit ir", path), 1);
    cr_assert(strstr(out, "pipe.ir': not a regular file (a FIFO)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s", path), 1);
    cr_assert(strstr(out, "pipe.ir': not a regular file (a FIFO)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir", d), 1);
    cr_assert(strstr(out, "not a regular file (a folder)"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* Occurrences of needle in s. */
static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* An ONNX import error is printed once, naming the file once; so is a tensor file's error. */
Test(cli, onnx_import_errors_are_printed_once) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/broken-model.onnx", d);
    t_write_text(path, "this is not a protobuf message \xff\xff\xff");
    cr_assert_eq(ampc(&out, "%s -o %s/x.so", path, d), 1);
    cr_assert_eq(count(out, "broken-model.onnx"), 1, "%s", out);
    cr_assert_eq(count(out, "ampc: "), 1, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s/missing.onnx --emit ir", d), 1);
    cr_assert_eq(count(out, "missing.onnx"), 1, "%s", out);
    cr_assert(strstr(out, "cannot open"), "%s", out);
    free(out);
    /* The same for tensor files given with --input. */
    snprintf(path, sizeof path, "%s/m.ir", d);
    t_write_text(path, model_text);
    cr_assert_eq(ampc(&out, "run %s --reference --input x=%s/missing-x.npy", path, d), 1);
    cr_assert_eq(count(out, "missing-x.npy"), 1, "%s", out);
    cr_assert(strstr(out, "cannot open"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* Tensors larger than the machine's memory are refused before allocating, naming the tensor and
 * its size: an input given random data, and a value the reference evaluator would compute.
 * Compiling such a model is fine (nothing is allocated; the runtime refuses it at load). */
Test(cli, tensors_larger_than_host_memory_are_refused_before_allocating) {
    char *d = t_tmpdir("cli"), path[512], *out;
    snprintf(path, sizeof path, "%s/big-input.ir", d);
    t_write_text(path, "graph \"g\" {\n  input %x : f32[1000000000,1000000000]\n"
                     "  %y : f32[1000000000,1000000000] = Relu(%x) @\"r\"\n  output %y\n}\n");
    cr_assert_eq(ampc(&out, "run %s --reference", path), 1);
    cr_assert(strstr(out, "input 'x' f32[1000000000,1000000000] takes 4000000000000000000 bytes") &&
              strstr(out, "more than this machine's"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir -o %s/big.ir", path, d), 0, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/big-value.ir", d);
    t_write_text(path, "graph \"g\" {\n  input %x : f32[1]\n"
                     "  const %s : i64[2] = [1000000000, 1000000000]\n"
                     "  %y : f32[1000000000,1000000000] = Expand(%x, %s) @\"grow\"\n"
                     "  %z : f32[] = ReduceSum(%y) {keepdims=0} @\"sum\"\n  output %z\n}\n");
    cr_assert_eq(ampc(&out, "run %s --reference", path), 1);
    cr_assert(strstr(out, "(Expand 'grow'): value 'y' f32[1000000000,1000000000] takes "
                          "4000000000000000000 bytes") &&
              strstr(out, "the reference evaluator cannot hold it"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, run_reference_reads_and_writes_npy) {
    char *d = t_tmpdir("cli"), model[512], x[512], y[600], *out, *err = NULL;
    snprintf(model, sizeof model, "%s/m.ir", d);
    snprintf(x, sizeof x, "%s/x.npy", d);
    t_write_text(model, model_text);
    float xv[6] = {1, 0, 0, 0, 1, 0};
    ampc_tensor xt = {AMPC_DTYPE_F32, {2, {2, 3}}, xv};
    cr_assert_eq(ampc_tensor_write_npy(x, &xt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc(&out, "run %s --reference --input x=%s --save-outputs %s/out", model, x, d), 0,
                 "%s", out);
    free(out);
    snprintf(y, sizeof y, "%s/out/z.npy", d);
    ampc_tensor z;
    cr_assert_eq(ampc_tensor_read_file(y, &z, NULL, &err), AMPC_OK, "%s", err ? err : "");
    double want[4] = {6, 12, 18, 24}; /* rows 0 and 1 of w, times 6 */
    t_expect_close(&z, SHAPE(2, 2), want, 0, 0);
    ampc_tensor_free(&z);
    /* An input not given gets random data, and the command says so. */
    cr_assert_eq(ampc(&out, "run %s --reference", model), 0, "%s", out);
    cr_assert(strstr(out, "input 'x' f32[2,3]: random data (give --input x=FILE for real data)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --reference --input y=%s", model, x), 1);
    cr_assert(strstr(out, "--input 'y': the model has no input of that name"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, doctor_reports_and_names_fixes) {
    char *out;
    int rc = ampc(&out, "doctor");
    cr_assert(strstr(out, "NVRTC: version ") && strstr(out, "cuBLASLt: ") &&
              strstr(out, "kernel cache: "), "%s", out);
    if (rc == 0) {
        cr_assert(strstr(out, "no problems found"), "%s", out);
    } else {
        cr_assert_eq(rc, 1, "%s", out);
        cr_assert(strstr(out, "PROBLEM: ") && strstr(out, "fix: ") && strstr(out, "problem"), "%s", out);
    }
    free(out);
    /* A cache folder that cannot be created is a problem, with its fix. */
    setenv("AMPC_CACHE_DIR", "/proc/ampc-cache", 1);
    rc = ampc(&out, "doctor");
    unsetenv("AMPC_CACHE_DIR");
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert(strstr(out, "PROBLEM: the kernel cache folder cannot be created or written") &&
              strstr(out, "point AMPC_CACHE_DIR at a writable folder"), "%s", out);
    free(out);
    /* The tuning cache: where it is and how many entries it holds, or off. */
    char *d = t_tmpdir("cli"), tune[600], want[700];
    snprintf(tune, sizeof tune, "%s/tuning.txt", d);
    FILE *f = fopen(tune, "w");
    cr_assert_not_null(f);
    fputs("# header\nGPU|conv a\talgo=1 math=0 graph=-\nGPU|conv b\talgo=2 math=1 graph=A0\n", f);
    fclose(f);
    setenv("AMPC_TUNE_CACHE", tune, 1);
    (void)ampc(&out, "doctor");
    snprintf(want, sizeof want, "tuning cache: %s (2 entries", tune);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    setenv("AMPC_TUNE_CACHE", "off", 1);
    (void)ampc(&out, "doctor");
    unsetenv("AMPC_TUNE_CACHE");
    cr_assert(strstr(out, "tuning cache: off"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

Test(cli, compile_to_library_and_run_it, .timeout = 120) {
    char *d = t_tmpdir("cli"), path[512], lib[600], hdr[600], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    snprintf(lib, sizeof lib, "%s/my-model.so", d);
    snprintf(hdr, sizeof hdr, "%s/my-model.h", d);
    t_write_text(path, model_text);
    char report[600];
    snprintf(report, sizeof report, "%s/report.json", d);
    cr_assert_eq(ampc(&out, "%s -o %s --report %s", path, lib, report), 0, "%s", out);
    free(out);
    FILE *f = fopen(hdr, "r");
    cr_assert_not_null(f, "the header is written next to the library");
    fclose(f);
    char text[8192] = {0};
    f = fopen(report, "r");
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0, "the report is written");
    fclose(f);
    cr_assert(strstr(text, "\"name\": \"fold\", \"ran\": true") && strstr(text, "\"steps\": [") &&
              strstr(text, "\"provider\": \"cuBLASLt\", \"precision\": \"tf32\""), "%s", text);
    /* inspect reads the library back: its inputs, memory plan and steps. */
    cr_assert_eq(ampc(&out, "inspect %s", lib), 0, "%s", out);
    cr_assert(strstr(out, "(C prefix my_model_)") && strstr(out, "x                        f32[2,3]") &&
              strstr(out, "memory plan: arena") && strstr(out, "cuBLASLt tf32"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s --name 3d", path, lib), 1);
    cr_assert(strstr(out, "library name '3d' is not a C identifier"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s --precision fp8", path, lib), 2);
    cr_assert(strstr(out, "--precision fp8 is not available"), "%s", out);
    free(out);
    /* fp16: the report lists each node's type and the reason, and the GEMM runs in f16. */
    cr_assert_eq(ampc(&out, "%s -o %s --precision fp16 --report %s", path, lib, report), 0, "%s", out);
    free(out);
    memset(text, 0, sizeof text);
    f = fopen(report, "r");
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0, "the report is written");
    fclose(f);
    cr_assert(strstr(text, "{\"node\": \"mm\", \"op\": \"MatMul\", \"dtype\": \"f16\", "
                           "\"why\": \"policy: low\"}") &&
              strstr(text, "\"provider\": \"cuBLASLt\", \"precision\": \"f16\""), "%s", text);
    /* `run` on the library: the GPU's outputs, or without one the no-device error. */
    int32_t n = 0;
    char *err = NULL;
    bool gpu = ampc_rt_device_count(&n, &err) == AMPC_OK;
    free(err);
    int rc = ampc(&out, "run %s --iterations 5 --warmup 1", lib);
    if (gpu) {
        cr_assert_eq(rc, 0, "%s", out);
        cr_assert(strstr(out, "outputs (GPU):") && strstr(out, "latency over 5 runs"), "%s", out);
    } else {
        cr_assert_eq(rc, 1, "%s", out);
        cr_assert(strstr(out, "my-model.so: no CUDA device: "), "%s", out);
    }
    free(out);
    cr_assert_eq(ampc(&out, "run %s/none.so", d), 1);
    cr_assert(strstr(out, "cannot open") && strstr(out, "none.so"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* --sparsity prune marks the GEMM step of the library: the report and inspect say so, and
 * `run --sparse-report` prints each 2:4 step's decision (with a GPU; else the no-device error). */
Test(cli, sparse_gemm_steps_in_the_library, .timeout = 120) {
    char *d = t_tmpdir("cli"), path[512], lib[600], report[600], *out;
    snprintf(path, sizeof path, "%s/m.ir", d);
    snprintf(lib, sizeof lib, "%s/sp.so", d);
    snprintf(report, sizeof report, "%s/report.json", d);
    t_write_text(path, "graph \"sp\" {\n"
                     "  input %x : f32[16,8]\n"
                     "  const %w : f32[8,8] = [-5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5, 1, -3, 4, 0, -4]\n"
                     "  %y : f32[16,8] = MatMul(%x, %w) @\"fc\"\n"
                     "  output %y\n"
                     "}\n");
    cr_assert_eq(ampc(&out, "%s -o %s --precision fp16 --sparsity prune --report %s", path, lib,
                      report), 0, "%s", out);
    free(out);
    char text[16384] = {0};
    FILE *f = fopen(report, "r");
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0, "the report is written");
    fclose(f);
    cr_assert(strstr(text, "\"sparse24\": true") && strstr(text, "\"status\": \"pruned to 2:4\""),
              "%s", text);
    cr_assert_eq(ampc(&out, "inspect %s", lib), 0, "%s", out);
    cr_assert(strstr(out, "MatMul 'fc'  [2:4: ampc's kernel or cuSPARSELt where faster at load]"), "%s", out);
    free(out);
    int32_t n = 0;
    char *err = NULL;
    bool gpu = ampc_rt_device_count(&n, &err) == AMPC_OK;
    free(err);
    int rc = ampc(&out, "run %s --sparse-report", lib);
    if (gpu) {
        cr_assert_eq(rc, 0, "%s", out);
        cr_assert(strstr(out, "sparse report (2:4 GEMMs timed at load)") &&
                  strstr(out, "MatMul 'fc': ") && strstr(out, "2:4 GEMMs run sparse"), "%s", out);
    } else {
        cr_assert_eq(rc, 1, "%s", out);
        cr_assert(strstr(out, "no CUDA device"), "%s", out);
    }
    free(out);
    t_rmdir_all(d);
}

/* ---- what a run may write ------------------------------------------------------------------- */

/* Whether the file at path still holds exactly text. */
static bool holds(const char *path, const char *text) {
    char *got = t_read_text(path);
    bool same = !strcmp(got, text);
    free(got);
    return same;
}

/* No output replaces an input of the run: -o, --emit's -o, --report, the header -o derives and a
 * --save-outputs file are refused before any work when they are the model, a hard link to it or
 * an --input file, naming both files and the rule; the inputs are unchanged. */
Test(cli, outputs_never_replace_inputs, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], hdr[512], lnk[512], x[512], *out;
    snprintf(ir, sizeof ir, "%s/m.ir", d);
    snprintf(hdr, sizeof hdr, "%s/m.h", d);
    snprintf(lnk, sizeof lnk, "%s/link.ir", d);
    t_write_text(ir, model_text);
    t_write_text(hdr, model_text); /* IR text named m.h: `-o m.so` would write its header there */
    cr_assert_eq(link(ir, lnk), 0);
    cr_assert_eq(ampc(&out, "%s -o %s", ir, ir), 2, "%s", out);
    cr_assert(strstr(out, "-o ") && strstr(out, "m.ir is the model being compiled") &&
              strstr(out, "(same file)"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir -o %s", ir, lnk), 2, "%s", out);
    cr_assert(strstr(out, "link.ir is the model being compiled") && strstr(out, "m.ir"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s/ok.so --report %s", ir, d, ir), 2, "%s", out);
    cr_assert(strstr(out, "--report ") && strstr(out, "is the model being compiled"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s/m.so", hdr, d), 2, "%s", out);
    cr_assert(strstr(out, "the header ") && strstr(out, "m.h that -o ") &&
              strstr(out, "is the model being compiled"), "%s", out);
    free(out);
    cr_assert(holds(ir, model_text) && holds(hdr, model_text), "the models are unchanged");
    struct stat st;
    snprintf(x, sizeof x, "%s/m.so", d);
    cr_assert_neq(stat(x, &st), 0, "no library was built");
    /* --save-outputs DIR/z.npy would be the --input file */
    float xv[6] = {1, 0, 0, 0, 1, 0};
    ampc_tensor xt = {AMPC_DTYPE_F32, {2, {2, 3}}, xv};
    char *err = NULL;
    snprintf(x, sizeof x, "%s/z.npy", d);
    cr_assert_eq(ampc_tensor_write_npy(x, &xt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc(&out, "run %s --reference --input x=%s --save-outputs %s", ir, x, d), 1,
                 "%s", out);
    cr_assert(strstr(out, "z.npy of output 'z' is the file of --input x"), "%s", out);
    free(out);
    ampc_tensor back;
    cr_assert_eq(ampc_tensor_read_file(x, &back, NULL, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert(back.shape.rank == 2 && back.shape.dims[1] == 3, "the input file is unchanged");
    ampc_tensor_free(&back);
    t_rmdir_all(d);
}

/* An output that names a FIFO, a device or a folder is refused (the FIFO stays a FIFO; were it
 * opened, the command would block and ampc() kill it); two outputs of one run that are the same
 * file are refused; an empty name and a missing folder are named as such, before any work (no
 * C compiler command in the message). */
Test(cli, outputs_that_cannot_be_written_are_refused_first, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], fifo[512], *out;
    snprintf(ir, sizeof ir, "%s/m.ir", d);
    snprintf(fifo, sizeof fifo, "%s/pipe.ir", d);
    t_write_text(ir, model_text);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(ampc(&out, "%s --emit ir -o %s", ir, fifo), 2, "%s", out);
    cr_assert(strstr(out, "pipe.ir is a FIFO, not a regular file"), "%s", out);
    free(out);
    struct stat st;
    cr_assert(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO is still a FIFO");
    cr_assert_eq(ampc(&out, "%s --emit ir -o /dev/null", ir), 2, "%s", out);
    cr_assert(strstr(out, "-o /dev/null is a character device, not a regular file"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s", ir, d), 2, "%s", out);
    cr_assert(strstr(out, "is a folder, not a regular file"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s/x.so --report %s/x.h", ir, d, d), 2, "%s", out);
    cr_assert(strstr(out, "the header ") && strstr(out, "--report ") &&
              strstr(out, "are the same file"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o ''", ir), 2, "%s", out);
    cr_assert(strstr(out, "ampc: -o is empty: give a file name"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --report ''", ir), 2, "%s", out);
    cr_assert(strstr(out, "--report is empty"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s/no/such/dir/m.so", ir, d), 2, "%s", out);
    cr_assert(strstr(out, "/no/such/dir' does not exist") && !strstr(out, "command:"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "run %s --reference --save-outputs %s", ir, ir), 2, "%s", out);
    cr_assert(strstr(out, "--save-outputs ") && strstr(out, "is a file, not a folder"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s/ok.so", ir, d), 0, "%s", out); /* and a good one passes */
    cr_assert(strstr(out, "ampc: wrote ") && strstr(out, "ok.so (") && strstr(out, "ok.h"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* Outputs 'a/b', 'a_b', '../up' and '.hidden' become four distinct files inside DIR, none hidden,
 * the renamed ones said on stderr; nothing is written outside DIR. */
Test(cli, save_outputs_file_names_are_safe_and_unique) {
    char *d = t_tmpdir("cli"), ir[512], p[700], *out;
    snprintf(ir, sizeof ir, "%s/m.ir", d);
    t_write_text(ir, "graph \"g\" {\n  input %x : f32[2]\n"
                   "  %\"a/b\" : f32[2] = Relu(%x) @\"r1\"\n"
                   "  %a_b : f32[2] = Neg(%x) @\"r2\"\n"
                   "  %\"../up\" : f32[2] = Abs(%x) @\"r3\"\n"
                   "  %\".hidden\" : f32[2] = Sigmoid(%x) @\"r4\"\n"
                   "  output %\"a/b\"\n  output %a_b\n  output %\"../up\"\n  output %\".hidden\"\n}\n");
    cr_assert_eq(ampc(&out, "run %s --reference --save-outputs %s/out", ir, d), 0, "%s", out);
    cr_assert(strstr(out, "output 'a/b' -> ") && strstr(out, "out/a_b_2.npy"), "%s", out);
    cr_assert(strstr(out, "output '../up' -> ") && strstr(out, "out/_._up.npy"), "%s", out);
    free(out);
    const char *files[] = {"a_b_2", "a_b", "_._up", "_hidden"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/out/%s.npy", d, files[i]);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0, "%s is written", p);
    }
    snprintf(p, sizeof p, "%s/up.npy", d);
    struct stat st;
    cr_assert_neq(stat(p, &st), 0, "nothing is written outside the folder");
    /* the same names through the library's rule */
    const char *names[] = {"a/b", "a_b", "", ".", "..", "x\ny", "a/b"};
    char **f = ampc_cli_file_names(names, 7);
    const char *want[] = {"a_b_2", "a_b", "_", "_", "_.", "x_y", "a_b_3"};
    for (int i = 0; i < 7; i++) {
        if (i == 3) continue; /* "." and "" both become "_": one of them gets a suffix */
        cr_assert_str_eq(f[i], want[i], "name %d", i);
    }
    cr_assert_str_eq(f[3], "__2");
    ampc_cli_file_names_free(f, 7);
    t_rmdir_all(d);
}

/* --calibrate DIR reads DIR/<safe name>.npy: an input named '../secret' never reads DIR/../secret.npy
 * (a file there of the wrong shape would fail the run), and a link in DIR leading outside it is
 * refused, naming it. */
Test(cli, calibrate_reads_only_inside_its_folder, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], cal[512], p[700], q[700], *out, *err = NULL;
    snprintf(ir, sizeof ir, "%s/m.ir", d);
    snprintf(cal, sizeof cal, "%s/cal", d);
    cr_assert_eq(mkdir(cal, 0700), 0);
    t_write_text(ir, "graph \"g\" {\n  input %\"../secret\" : f32[2]\n"
                   "  %y : f32[2] = Relu(%\"../secret\") @\"r\"\n  output %y\n}\n");
    float v[3] = {1, 2, 3};
    ampc_tensor wrong = {AMPC_DTYPE_F32, {1, {3}}, v};
    snprintf(p, sizeof p, "%s/secret.npy", d);
    cr_assert_eq(ampc_tensor_write_npy(p, &wrong, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --calibrate %s", ir, cal), 0, "%s", out);
    cr_assert(strstr(out, "has neither _._secret.npy nor _._secret.pb") && !strstr(out, "secret.npy:"),
              "%s", out);
    free(out);
    snprintf(q, sizeof q, "%s/_._secret.npy", cal);
    cr_assert_eq(symlink(p, q), 0);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --calibrate %s", ir, cal), 1, "%s", out);
    cr_assert(strstr(out, "_._secret.npy' leads to '") && strstr(out, "outside the folder"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* The input format comes from the content: an ONNX model named m.bin is imported, IR text named
 * m.onnx is parsed, a library given to compile is named as one. */
Test(cli, model_format_is_told_by_content, .timeout = 120) {
    char *d = t_tmpdir("cli"), bin[512], onnx[512], lib[512], cmd[2048], *out;
    snprintf(bin, sizeof bin, "%s/m.bin", d);
    snprintf(onnx, sizeof onnx, "%s/m.onnx", d);
    snprintf(lib, sizeof lib, "%s/lib.so", d);
    snprintf(cmd, sizeof cmd, "cp '%s/tests/fuzz/corpus/onnx/mlp.onnx' '%s'", AMPC_SOURCE_DIR, bin);
    cr_assert_eq(system(cmd), 0);
    t_write_text(onnx, "// an IR file with an ONNX name\n\n" "graph \"affine\" {\n  input %x : f32[2]\n"
                     "  %y : f32[2] = Relu(%x) @\"r\"\n  output %y\n}\n");
    cr_assert_eq(ampc(&out, "inspect %s", bin), 0, "%s", out);
    cr_assert(strstr(out, "ir_version:") && strstr(out, "opsets:"), "the ONNX view:\n%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir", bin), 0, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s", onnx), 0, "%s", out);
    cr_assert(strstr(out, "graph 'affine'") && strstr(out, "verifier: ok"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s", onnx, lib), 0, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir", lib), 1, "%s", out);
    cr_assert(strstr(out, "lib.so is a shared library (ELF), not a model"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* A truncated library is refused before dlopen (which would die of SIGBUS), naming the file and
 * what is wrong; run and inspect exit 1, not by a signal. */
Test(cli, truncated_library_is_refused, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], lib[512], cut[512], cmd[2048], *out;
    snprintf(ir, sizeof ir, "%s/m.ir", d);
    snprintf(lib, sizeof lib, "%s/m.so", d);
    snprintf(cut, sizeof cut, "%s/cut.so", d);
    t_write_text(ir, model_text);
    cr_assert_eq(ampc(&out, "%s -o %s", ir, lib), 0, "%s", out);
    free(out);
    struct stat st;
    cr_assert_eq(stat(lib, &st), 0);
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s'", (long long)st.st_size / 2, lib, cut);
    cr_assert_eq(system(cmd), 0);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(ampc(&out, "%s %s", k ? "run" : "inspect", cut), 1, "%s", out);
        cr_assert(strstr(out, "cut.so' is truncated: ") && strstr(out, " ends at byte ") &&
                  strstr(out, "bytes"), "%s", out);
        free(out);
    }
    t_rmdir_all(d);
}

/* --iterations, --profile and --sparse-report time the GPU: with --reference they are refused. */
Test(cli, gpu_timing_options_are_refused_with_reference) {
    char *out;
    const char *opts[] = {"--iterations 5", "--profile", "--sparse-report"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(ampc(&out, "run m.ir --reference %s", opts[i]), 2, "%s", out);
        cr_assert(strstr(out, "times the GPU; --reference runs the CPU evaluator"), "%s", out);
        free(out);
    }
}

/* A model whose every step is a library call: --emit cuda says so and writes a comment. */
Test(cli, emit_without_kernels_says_so, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], cu[512], *out;
    snprintf(ir, sizeof ir, "%s/mm.ir", d);
    snprintf(cu, sizeof cu, "%s/mm.cu", d);
    t_write_text(ir, "graph \"g\" {\n  input %x : f32[2,3]\n  const %w : f32[3,2] = [1, 2, 3, 4, 5, 6]\n"
                   "  %y : f32[2,2] = MatMul(%x, %w) @\"mm\"\n  output %y\n}\n");
    cr_assert_eq(ampc(&out, "%s --emit cuda -o %s", ir, cu), 0, "%s", out);
    cr_assert(strstr(out, "no generated kernels: every step runs in cuBLASLt/cuDNN"), "%s", out);
    free(out);
    char *text = t_read_text(cu);
    cr_assert(!strncmp(text, "// no generated kernels", 23), "%s", text);
    free(text);
    t_rmdir_all(d);
}

/* The kernel before a GEMM asks L2 for the GEMM's constant weight unless --no-l2-prefetch. */
Test(cli, no_l2_prefetch_leaves_the_prefetch_out, .timeout = 120) {
    char *d = t_tmpdir("cli"), ir[512], cu[512], *out;
    snprintf(ir, sizeof ir, "%s/pf.ir", d);
    snprintf(cu, sizeof cu, "%s/pf.cu", d);
    ampc_strbuf text = {0};
    ampc_sb_puts(&text, "graph \"pf\" {\n  input %x : f32[8,16]\n  const %w : f32[16,32] = [");
    for (int i = 0; i < 16 * 32; i++) ampc_sb_printf(&text, "%s%g", i ? ", " : "", (i % 7) * 0.125);
    ampc_sb_puts(&text, "]\n  %t : f32[8,16] = Tanh(%x)\n  %y : f32[8,32] = MatMul(%t, %w)\n"
                        "  output %y\n}\n");
    t_write_text(ir, text.data);
    ampc_sb_free(&text);
    for (int off = 0; off < 2; off++) {
        cr_assert_eq(ampc(&out, "%s --emit cuda -o %s%s", ir, cu, off ? " --no-l2-prefetch" : ""),
                     0, "%s", out);
        free(out);
        char *src = t_read_text(cu);
        cr_assert_eq(strstr(src, "ampc::prefetch_l2(") != NULL, !off, "%s", src);
        free(src);
    }
    t_rmdir_all(d);
}

/* A 200,000-node chain of Neg, Relu, Abs in turn compiles to a handful of kernel definitions:
 * fused kernels of the chain repeat one another, and each is defined once and launched by many
 * steps (NVRTC compiled 12,500 kernels for minutes before). */
Test(cli, a_long_chain_defines_few_kernels, .timeout = 240) {
    enum { N = 200000 };
    static const char *const ops[3] = {"Neg", "Relu", "Abs"};
    char *d = t_tmpdir("cli"), ir[512], cu[512], *out;
    snprintf(ir, sizeof ir, "%s/chain.ir", d);
    snprintf(cu, sizeof cu, "%s/chain.cu", d);
    ampc_strbuf sb = {0};
    ampc_sb_puts(&sb, "graph \"chain\" {\n  input %v0 : f32[4]\n");
    for (int i = 0; i < N; i++)
        ampc_sb_printf(&sb, "  %%v%d : f32[4] = %s(%%v%d) @\"n%d\"\n", i + 1, ops[i % 3], i, i);
    ampc_sb_printf(&sb, "  output %%v%d\n}\n", N);
    t_write_text(ir, sb.data);
    ampc_sb_free(&sb);
    cr_assert_eq(ampc(&out, "%s --emit cuda -o %s", ir, cu), 0, "%s", out);
    free(out);
    char *text = t_read_text(cu);
    int defined = 0, launches = 0;
    for (const char *p = text; (p = strstr(p, "__global__")); p++) defined++;
    for (const char *p = text; (p = strstr(p, "; also launched by ")); p++)
        launches += atoi(p + strlen("; also launched by "));
    launches += defined;
    cr_assert_gt(defined, 0, "%s", text);
    cr_assert_leq(defined, 16, "%d kernels defined for a chain of 3 ops repeating", defined);
    cr_assert_geq(launches, N / 64, "%d kernels defined, launched by %d steps", defined, launches);
    free(text);
    t_rmdir_all(d);
}

/* A while loop counting to `limit` (a run-time input): c <- c + 1 while c + 1 < limit. */
static const char while_text[] =
    "graph \"while\" {\n"
    "  input %go : bool[]\n"
    "  input %limit : i64[]\n"
    "  const %c : i64[] = [0]\n"
    "  %count : i64[] = Loop(_, %go, %c, %limit) {body = graph \"body\" {\n"
    "    input %i : i64[]\n"
    "    input %cond : bool[]\n"
    "    input %c : i64[]\n"
    "    input %limit : i64[]\n"
    "    const %one : i64[] = [1]\n"
    "    %next : i64[] = Add(%c, %one)\n"
    "    %more : bool[] = Less(%next, %limit)\n"
    "    output %more\n"
    "    output %next\n"
    "  }, num_captures = 1} @\"l\"\n"
    "  output %count\n"
    "}\n";

Test(cli, max_loop_iterations_bounds_a_loop_of_the_reference_evaluator) {
    char *d = t_tmpdir("cli"), model[512], go[512], lim[512], *out, *err = NULL;
    snprintf(model, sizeof model, "%s/w.ir", d);
    snprintf(go, sizeof go, "%s/go.npy", d);
    snprintf(lim, sizeof lim, "%s/limit.npy", d);
    t_write_text(model, while_text);
    uint8_t yes = 1;
    int64_t big = (int64_t)1 << 40;
    ampc_tensor gt = {AMPC_DTYPE_BOOL, {0, {0}}, &yes}, lt = {AMPC_DTYPE_I64, {0, {0}}, &big};
    cr_assert_eq(ampc_tensor_write_npy(go, &gt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc_tensor_write_npy(lim, &lt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc(&out, "run %s --reference --max-loop-iterations 100 --input go=%s "
                      "--input limit=%s", model, go, lim), 1, "%s", out);
    cr_assert(strstr(out, "node 0 (Loop 'l'): more than 100 iterations (no trip count, and the "
                          "condition stayed true); raise the limit with --max-loop-iterations N"),
              "%s", out);
    free(out);
    big = 150; /* within a raised bound the loop runs to its end */
    cr_assert_eq(ampc_tensor_write_npy(lim, &lt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc(&out, "run %s --reference --max-loop-iterations 150 --input go=%s "
                      "--input limit=%s --save-outputs %s/out", model, go, lim, d), 0, "%s", out);
    free(out);
    char y[600];
    snprintf(y, sizeof y, "%s/out/count.npy", d);
    ampc_tensor c;
    cr_assert_eq(ampc_tensor_read_file(y, &c, NULL, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(*(int64_t *)c.data, 150);
    ampc_tensor_free(&c);
    cr_assert_eq(ampc(&out, "run %s --reference --max-loop-iterations 0", model), 2);
    cr_assert(strstr(out, "--max-loop-iterations needs a positive integer, got '0'"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

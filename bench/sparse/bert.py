"""bert.py WORK OUT — BERT-base seq128 with every linear layer pruned to 2:4, dense against
sparse, end to end, on the GPU machine (bench/sparse/run.sh bert runs it with torch's python).

1. Builds BERT-base (transformers' definition, random weights, seed 0) and exports it at batch
   32 and batch 1 (opset 17), with the inputs as .npy.
2. Compiles each with `ampc --precision fp16 --sparsity prune` (the b32 build's --report JSON,
   whose sparse_layers lists every pruned layer, goes to OUT).
3. Speed: the same b32 library run with `ampc run --iterations 200`, once with AMPC_SPARSE=0
   (every GEMM dense: ampc's dense baseline on the same pruned weights) and once in the default
   mode (each 2:4 GEMM timed at load, the faster kept; --sparse-report lists every decision).
4. Correctness (AMPC_BERT_CHECK=0 skips it): the b1 library on the GPU with AMPC_SPARSE=1 (every eligible GEMM sparse) and
   with AMPC_SPARSE=0, against `ampc run --reference` (the CPU evaluator) on the same pruned fp16
   graph; the largest difference relative to the output's scale.

Writes OUT/bert-sparse.txt (the summary) and OUT/bert-sparse.log (every command's output).
"""
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

AMPC = os.environ.get("AMPC", ".devbin/bin/ampc")


def export(work):
    from transformers import BertConfig, BertModel

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel(BertConfig(), add_pooling_layer=False)

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    torch.manual_seed(0)
    model = Bert().eval()
    paths = {}
    for b in (32, 1):
        ids = torch.randint(0, 30522, (b, 128), dtype=torch.int64)
        mask = torch.ones(b, 128, dtype=torch.int64)
        path = os.path.join(work, "bert_sparse_b%d.onnx" % b)
        with torch.no_grad():
            torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                              opset_version=17, dynamo=False)
        np.save(os.path.join(work, "b%d_ids.npy" % b), ids.numpy())
        np.save(os.path.join(work, "b%d_mask.npy" % b), mask.numpy())
        paths[b] = path
    return paths


def run(cmd, log, env=None):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    sets = ["%s=%s " % kv for kv in (env or {}).items() if kv[0] == "AMPC_SPARSE"]
    log.write("$ %s%s\n%s%s(exit %d, %.1f s)\n\n" % ("".join(sets), " ".join(cmd), r.stdout,
                                                       r.stderr, r.returncode, time.time() - t0))
    log.flush()
    return r


def with_env(**kw):
    env = dict(os.environ)
    env.update(kw)
    return env


def median_ms(text):
    m = re.search(r"median ([0-9.]+) ms", text)
    return float(m.group(1)) if m else None


def inputs(work, b):
    return ["--input", "input_ids=%s" % os.path.join(work, "b%d_ids.npy" % b),
            "--input", "attention_mask=%s" % os.path.join(work, "b%d_mask.npy" % b)]


def main():
    work, out = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    summary = open(os.path.join(out, "bert-sparse.txt"), "w")
    log = open(os.path.join(out, "bert-sparse.log"), "w")

    def say(s):
        print(s)
        summary.write(s + "\n")
        summary.flush()

    check = os.environ.get("AMPC_BERT_CHECK", "1") != "0"
    paths = export(work)
    if not check:
        del paths[1]
    libs = {}
    for b, path in paths.items():
        so = path.replace(".onnx", ".so")
        cmd = [AMPC, path, "-o", so, "--precision", "fp16", "--sparsity", "prune"]
        if b == 32:
            cmd += ["--report", os.path.join(out, "bert-sparse-report.json")]
        t0 = time.time()
        r = run(cmd, log)
        if r.returncode != 0:
            say("compile b%d FAILED: %s" % (b, (r.stderr or r.stdout)[-800:]))
            return 1
        say("compiled b%d with --sparsity prune in %.1f s" % (b, time.time() - t0))
        libs[b] = so

    # speed: ampc dense vs ampc sparse on the same pruned b32 library
    base = [AMPC, "run", libs[32]] + inputs(work, 32) + ["--iterations", "200", "--warmup", "20"]
    rd = run(base, log, with_env(AMPC_SPARSE="0"))
    rs = run(base + ["--sparse-report"], log, with_env(AMPC_SPARSE="auto"))
    dense, sparse = median_ms(rd.stdout), median_ms(rs.stdout)
    for tag, r in (("dense", rd), ("sparse", rs)):
        for line in r.stdout.splitlines():
            if line.startswith("CUDA graph"):
                summary.write("%s library run: %s\n" % (tag, line))
    for line in rs.stdout.splitlines():
        if line.startswith("sparse report") or re.match(r"\s+\d+\s", line):
            summary.write(line + "\n")
    if dense and sparse:
        say("BERT-base seq128 b32 fp16, all linear layers 2:4: ampc dense %.4f ms, ampc with 2:4 "
            "GEMMs %.4f ms: speedup %.3fx (target >= 1.1x)" % (dense, sparse, dense / sparse))
    else:
        say("BERT b32 timing FAILED (see bert-sparse.log): dense %s, sparse %s" % (dense, sparse))

    if not check:
        say("b1 check against the reference evaluator skipped (AMPC_BERT_CHECK=0)")
        return 0
    # correctness: b1 on the GPU (sparse forced, then dense) against the reference evaluator
    ref_dir, gpu_dir = os.path.join(work, "ref1"), os.path.join(work, "gpu1")
    r = run([AMPC, "run", paths[1], "--reference", "--precision", "fp16", "--sparsity", "prune"]
            + inputs(work, 1) + ["--save-outputs", ref_dir], log)
    if r.returncode != 0:
        say("reference evaluator FAILED (see bert-sparse.log)")
        return 1
    for mode in ("1", "0"):
        r = run([AMPC, "run", libs[1], "--sparse-report"] + inputs(work, 1)
                + ["--save-outputs", gpu_dir + mode], log, with_env(AMPC_SPARSE=mode))
        if r.returncode != 0:
            say("b1 GPU run (AMPC_SPARSE=%s) FAILED (see bert-sparse.log)" % mode)
            continue
        n_sparse = re.search(r"sparse report: (\d+) of (\d+)", r.stdout)
        for f in sorted(os.listdir(ref_dir)):
            a = np.load(os.path.join(gpu_dir + mode, f)).astype(np.float64)
            b = np.load(os.path.join(ref_dir, f)).astype(np.float64)
            err = np.abs(a - b).max()
            scale = np.abs(b).max()
            say("b1 %s, AMPC_SPARSE=%s (%s GEMMs sparse): max |GPU - reference| %.4g, scale %.4g, "
                "relative %.3g: %s" % (f, mode, "%s of %s" % n_sparse.groups() if n_sparse else "?",
                                       err, scale, err / scale if scale else err,
                                       "match" if err <= 2e-2 * scale + 1e-3 else "MISMATCH"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

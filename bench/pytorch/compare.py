"""compare.py OUT_DIR — ampc against PyTorch on this GPU, in one process (issue: speed).

For each model (torchvision ResNet-50, transformers BertModel base, the seed MLP 784-128-10;
random weights; fp16 via model.half()), at each batch size:
  1. export it to ONNX (opset 17) and compile it with `ampc MODEL.onnx -o MODEL.so --precision
     fp16` (timed; the model is already f16, and fp16 mode brings the parts torch's exporter
     writes in f32 back to f16, as PyTorch runs them): the build a user gets by default, and for
     a model that lists more builds (BERT: `--fast-gelu`) one library per build, each its own row;
  2. load each library into this process (ctypes) and run it on torch's stream with device
     pointers, and check its outputs against PyTorch eager (fp16 tolerance);
  3. time, with CUDA events around each call, after warm-up: PyTorch eager replayed from a CUDA
     graph, torch.compile (inductor) replayed from a CUDA graph, and each ampc library enqueued
     on torch's stream (<name>_enqueue on torch's device tensors, bound in place, without
     waiting, as a graph replay does); the median of the per-call times, in two rounds (ampc's
     builds, eager, compiled, then the reverse order), each contender's figure the mean of its
     two medians (results.json keeps both: *_rounds_ms). The builds of one model and batch share
     that one measurement of PyTorch's, so their rows compare with the same peers.
Writes OUT_DIR/results.json and OUT_DIR/benchmarks.md (the table for docs/benchmarks.md) and,
when matplotlib is there, OUT_DIR/benchmarks.png.

  AMPC=.devbin/bin/ampc python bench/pytorch/compare.py $OUT
  (AMPC_BENCH_MODELS=mlp,resnet50,bert picks models; AMPC_BENCH_ITERS the timed calls;
   AMPC_BENCH_PRECISION the --precision given to ampc, default fp16; AMPC_BENCH_EXTRA more ampc
   options, space-separated, e.g. "--disable-pass layout"; AMPC_BENCH_PROFILE=1 also writes
   `ampc run MODEL.so --profile --iterations 200` of each library to OUT_DIR/profile-NAME.txt;
   AMPC_BENCH_PEERS=0 leaves PyTorch's timings out, for a profile-only run;
   AMPC_BENCH_STAGES=1 also times ampc, and records the context's state, after each step of
   PyTorch's setup, and with AMPC_BENCH_PROBES=1 or 2 after single steps of the kind (diagnostic);
   AMPC_BENCH_STREAM=side runs everything on one non-default stream instead of torch's legacy
   default stream; AMPC_BENCH_KEEP_LIBS=1 keeps each library alive after the rows of its model
   and batch instead of destroying it)
"""
import collections
import contextlib
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

import torch

AMPC = os.environ.get("AMPC", ".devbin/bin/ampc")
ITERS = int(os.environ.get("AMPC_BENCH_ITERS", "200"))
PRECISION = os.environ.get("AMPC_BENCH_PRECISION", "fp16")
PROFILE = os.environ.get("AMPC_BENCH_PROFILE", "0") == "1"
PEERS = os.environ.get("AMPC_BENCH_PEERS", "1") != "0"
EXTRA = os.environ.get("AMPC_BENCH_EXTRA", "").split()
WARMUP = 30


class Build(collections.namedtuple("Build", "label key flags")):
    """One ampc build of a model: what its row's label adds to the model's, what its library's
    name adds to the model's key, and the ampc options it adds to `--precision PRECISION` and
    AMPC_BENCH_EXTRA. The first build of every model is the one a user gets by default."""


DEFAULT_BUILD = [Build("", "", [])]


def models():
    import torchvision
    from transformers import BertConfig, BertModel

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel(BertConfig(), add_pooling_layer=False)

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    mlp = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    r50 = torchvision.models.resnet50(weights=None)
    bert = Bert()

    def bert_inputs(b):
        ids = torch.randint(0, 30522, (b, 128), dtype=torch.int64, device="cuda")
        return (ids, torch.ones(b, 128, dtype=torch.int64, device="cuda"))

    # BERT's erf GELU stays exact by default; --fast-gelu runs it as the tanh form in cuBLASLt's
    # epilogue after the f16 FFN GEMM.
    bert_builds = DEFAULT_BUILD + [Build(" (`--fast-gelu`: tanh GELU)", "_fastgelu", ["--fast-gelu"])]
    return [
        ("MLP 784-128-10", "mlp", mlp, [64], lambda b: (torch.randn(b, 784, device="cuda").half(),),
         ["x"], DEFAULT_BUILD),
        ("ResNet-50", "resnet50", r50, [1, 32],
         lambda b: (torch.randn(b, 3, 224, 224, device="cuda").half(),), ["x"], DEFAULT_BUILD),
        ("BERT-base seq128", "bert", bert, [1, 32], bert_inputs, ["input_ids", "attention_mask"],
         bert_builds),
    ]


HOST_US = {}  # per timed function: the median host time of one call, microseconds


def time_calls(fn, stream, name=None):
    if os.environ.get("AMPC_BENCH_MARKS"):  # when each timing starts, for a clock log beside it
        with open(os.environ["AMPC_BENCH_MARKS"], "a") as f:
            f.write("%.3f %s\n" % (time.time(), name or "ampc_before_peers"))
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(ITERS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream)
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e6)
        b.record(stream)
        b.synchronize()
        times.append(a.elapsed_time(b))
    if name:
        HOST_US[name] = round(statistics.median(host), 1)
    return statistics.median(times)


def time_back_to_back(fn, stream, calls=50):
    """Milliseconds per call over `calls` calls enqueued back to back between two CUDA events (the
    median of 5 such batches): what a call costs when the GPU never waits for the host."""
    per = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream)
        for _ in range(calls):
            fn()
        b.record(stream)
        b.synchronize()
        per.append(a.elapsed_time(b) / calls)
    return statistics.median(per)


def graphed(fn, args):
    """fn(*args) captured once into a CUDA graph; returns (replay, static outputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*args)
    return g.replay, out


class TensorInfo(ctypes.Structure):
    """<name>_tensor_info of the generated header."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("dtype_name", ctypes.c_char_p),
                ("rank", ctypes.c_int32), ("dims", ctypes.c_int64 * 8), ("bytes", ctypes.c_int64)]


TORCH_DTYPES = {b"f32": torch.float32, b"f16": torch.float16, b"bf16": torch.bfloat16,
                b"f64": torch.float64, b"i64": torch.int64, b"i32": torch.int32}


class AmpcLibrary:
    def __init__(self, path, name):
        self.lib = ctypes.CDLL(path)
        self.name = name
        err = ctypes.c_char_p()
        self.model = ctypes.c_void_p()
        create = getattr(self.lib, name + "_create")
        create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_char_p)]
        if create(0, ctypes.byref(self.model), ctypes.byref(err)) != 0:
            raise RuntimeError(err.value.decode())
        argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_char_p)]
        self.run_fn = getattr(self.lib, name + "_run")
        self.enqueue_fn = getattr(self.lib, name + "_enqueue")
        self.run_fn.argtypes = self.enqueue_fn.argtypes = argtypes
        self.destroy_fn = getattr(self.lib, name + "_destroy")
        self.destroy_fn.argtypes = [ctypes.c_void_p]

    def close(self):
        """Frees the model (<name>_destroy): its graphs, buffers and loaded kernels."""
        if self.model:
            torch.cuda.synchronize()
            self.destroy_fn(self.model)
            self.model = ctypes.c_void_p()

    def output_like(self, i):
        """A device tensor for output i, with the dtype and shape the library declares."""
        info = (TensorInfo * (i + 1)).in_dll(self.lib, self.name + "_outputs")[i]
        return torch.empty(list(info.dims[:info.rank]), dtype=TORCH_DTYPES[info.dtype_name], device="cuda")

    def bind(self, inputs, outputs):
        """Fixes the call's arguments once, as a graph replay's are: the buffers, torch's current
        stream and the error slot. Each timed call is then one foreign call, so the Python work
        around it is no more than around torch's graph replay."""
        self.ins = (ctypes.c_void_p * len(inputs))(*[t.data_ptr() for t in inputs])
        self.outs = (ctypes.c_void_p * len(outputs))(*[t.data_ptr() for t in outputs])
        # torch's default stream is the legacy one, handle 0, which the library takes as "its own
        # stream": name it cudaStreamLegacy (0x1) so the work is ordered with torch's.
        self.stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream or 1)
        self.err = ctypes.c_char_p()
        self.err_ref = ctypes.byref(self.err)

    def _call(self, fn):
        if fn(self.model, self.ins, self.outs, self.stream, self.err_ref) != 0:
            raise RuntimeError(self.err.value.decode())

    def run(self):
        """Runs and waits for the outputs (<name>_run)."""
        self._call(self.run_fn)

    def enqueue(self):
        """Enqueues on torch's stream and returns (<name>_enqueue), as a graph replay does."""
        self._call(self.enqueue_fn)


def profile_library(so_path, name, out):
    """`ampc run --profile` of the library into out/profile-NAME.txt (step times, throughput)."""
    r = subprocess.run([AMPC, "run", so_path, "--profile", "--iterations", "200"],
                       capture_output=True, text=True)
    with open(os.path.join(out, "profile-%s.txt" % name), "w") as f:
        f.write(r.stdout + r.stderr)


def device_state():
    """The context's cache preference and persisting-L2 limit, and torch's memory (diagnostic)."""
    import ctypes
    state = {"torch_allocated_mb": torch.cuda.memory_allocated() // (1 << 20),
             "torch_reserved_mb": torch.cuda.memory_reserved() // (1 << 20)}
    for soname in ("libcudart.so.13", "libcudart.so.12"):
        try:
            rt = ctypes.CDLL(soname)
        except OSError:
            continue
        cfg, lim = ctypes.c_int(-1), ctypes.c_size_t(0)
        rt.cudaDeviceGetCacheConfig(ctypes.byref(cfg))
        state["cache_config"] = cfg.value
        rt.cudaDeviceGetLimit(ctypes.byref(lim), 0x06)  # cudaLimitPersistingL2CacheSize
        state["persisting_l2_bytes"] = lim.value
        break
    return state


def compile_build(build, label, key, batch, onnx_path, work, out):
    """`ampc MODEL.onnx -o LIB.so --precision PRECISION` with the build's options and EXTRA
    (timed, and profiled with AMPC_BENCH_PROFILE=1); returns (the row so far, the library's path
    and name, ampc's result)."""
    name = "%s%s_b%d" % (key, build.key, batch)
    so_path = os.path.join(work, name + ".so")
    row = {"model": label + build.label, "batch": batch, "ampc_flags": build.flags}
    t0 = time.time()
    r = subprocess.run([AMPC, onnx_path, "-o", so_path, "--precision", PRECISION] + build.flags + EXTRA,
                       capture_output=True, text=True)
    row["ampc_compile_s"] = round(time.time() - t0, 2)
    if PROFILE and r.returncode == 0:
        profile_library(so_path, name, out)
    return row, so_path, name, r


def load_and_check(row, so_path, name, r, args, ref):
    """Loads the library, runs it once on the inputs and records its error against PyTorch eager's
    output `ref`; returns the library, or None (with row["ampc_error"]) when it failed."""
    if r.returncode != 0:
        row["ampc_error"] = (r.stderr or r.stdout)[-1500:]
        return None
    try:
        lib = AmpcLibrary(so_path, name)
        out = lib.output_like(0)  # the exported graph may end in f32 (torch computes some of it so)
        assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
        lib.bind(list(args), [out])
        lib.run()
        torch.cuda.synchronize()
        err = (out.float() - ref).abs()
        scale = ref.abs().max().item()
        row["max_abs_err"] = err.max().item()
        row["ref_scale"] = scale
        row["outputs_match"] = bool(err.max().item() <= 2e-2 * scale + 1e-3)
        return lib
    except Exception as e:  # a failed library is a result, reported
        row["ampc_error"] = str(e)[-1500:]
        return None


def bench_one(label, key, model, batch, make_inputs, input_names, builds, work, out):
    """One row per build of the model at this batch; every build's library is timed in the same
    rounds as one measurement of PyTorch's (eager and torch.compile, each from a CUDA graph)."""
    torch.manual_seed(0)
    args = make_inputs(batch)
    with torch.no_grad():
        ref = model(*args).float()
    onnx_path = os.path.join(work, "%s_b%d.onnx" % (key, batch))
    with torch.no_grad():
        torch.onnx.export(model, args, onnx_path, input_names=input_names, opset_version=17,
                          dynamo=False)
    compiled_builds = [compile_build(b, label, key, batch, onnx_path, work, out) for b in builds]
    rows = [row for row, _, _, _ in compiled_builds]
    if not PEERS:
        return rows
    stream = torch.cuda.current_stream()
    HOST_US.clear()
    libs = [load_and_check(row, so_path, name, r, args, ref)
            for row, so_path, name, r in compiled_builds]
    for row, lib in zip(rows, libs):
        if lib is not None:  # diagnostic: before any PyTorch graph or torch.compile in this process
            row["ampc_before_peers_ms"] = time_calls(lib.enqueue, stream)
    # The diagnostics of PyTorch's setup time the first library that loaded, into its row.
    stage_lib, stage_row = next(((l, r) for l, r in zip(libs, rows) if l is not None), (None, None))
    stages = os.environ.get("AMPC_BENCH_STAGES") == "1" and stage_lib is not None

    def stage(name):  # diagnostic: ampc's time and the context's state after each peer's setup
        if stages:
            stage_row["ampc_after_%s_ms" % name] = time_calls(stage_lib.enqueue, stream)
            stage_row["device_state_after_%s" % name] = device_state()

    stage("nothing")
    if stages and os.environ.get("AMPC_BENCH_PROBES") == "2":  # what sets it and what clears it
        import ctypes
        rt = ctypes.CDLL("libcudart.so.13")
        st = torch.cuda.Stream()
        graph = ctypes.c_void_p()
        rt.cudaStreamBeginCapture(ctypes.c_void_p(st.cuda_stream), 0)
        rt.cudaStreamEndCapture(ctypes.c_void_p(st.cuda_stream), ctypes.byref(graph))
        stage("raw_empty_capture")
        exe = ctypes.c_void_p()
        rt.cudaGraphInstantiate(ctypes.byref(exe), graph, ctypes.c_ulonglong(0))
        stage("raw_empty_instantiate")
        x = torch.zeros(1024, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            x.add_(1)
        stage("torch_trivial_capture")
        small = torch.compile(lambda t: t * 2 + 1)
        small(x)
        torch.cuda.synchronize()
        stage("torch_compile_small")
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            x.add_(1)
        stage("torch_trivial_capture2")
        small(x)
        torch.cuda.synchronize()
        stage("compiled_small_again")
        del g2
        torch.cuda.synchronize()
        stage("capture2_deleted")
    if stages and os.environ.get("AMPC_BENCH_PROBES") == "1":  # which of PyTorch's steps matters
        torch.cuda.empty_cache()
        stage("empty_cache")
        with torch.no_grad():
            model(*args)
        stage("eager_run")
        x = torch.zeros(1024, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            x.add_(1)
        stage("trivial_capture")
        g.replay()
        stage("trivial_replay")
        with torch.no_grad():
            model(*args)
        stage("eager_run2")
        torch.cuda.synchronize()
        gs = torch.cuda.Stream()
        with torch.cuda.stream(gs):
            x.add_(1)
        torch.cuda.current_stream().wait_stream(gs)
        stage("side_stream_work")
    with torch.no_grad():
        eager_replay, _ = graphed(model, args)
        stage("eager_graph")
        compiled = torch.compile(model)
        compiled(*args)
        stage("torch_compile")
        compile_replay, _ = graphed(compiled, args)
        stage("compile_graph")
    # Two rounds, the second in the reverse order, and each contender's figure the mean of its two
    # medians: whatever drifts while the process runs (clocks, the state the others leave) weighs
    # on all contenders alike. Each contender: (key of its figures, the call, its host-time key).
    contenders = [("ampc" + b.key, l.enqueue, "ampc%s_host_us" % b.key)
                  for b, l in zip(builds, libs) if l is not None]
    contenders += [("eager_graph", eager_replay, "eager_host_us"),
                   ("compile_graph", compile_replay, "compile_host_us")]
    rounds = {ckey: [] for ckey, _, _ in contenders}
    with torch.no_grad():
        for order in (contenders, contenders[::-1]):
            for ckey, fn, host_key in order:
                rounds[ckey].append(time_calls(fn, stream, host_key))
    figures = {}
    for ckey, ms in rounds.items():
        figures[ckey + "_ms"] = sum(ms) / len(ms)
        figures[ckey + "_rounds_ms"] = ms
    with torch.no_grad():  # diagnostic: per call over back-to-back calls (no idle GPU between)
        for ckey, fn, _ in contenders:
            figures[ckey + "_back_to_back_ms"] = time_back_to_back(fn, stream)
    for row, build, lib in zip(rows, builds, libs):
        # PyTorch's figures in every row; the build's own under ampc's names
        for field in ("_ms", "_rounds_ms", "_back_to_back_ms"):
            for peer in ("eager_graph", "compile_graph"):
                row[peer + field] = figures[peer + field]
            if lib is not None:
                row["ampc" + field] = figures["ampc" + build.key + field]
        for host_key in ("eager_host_us", "compile_host_us"):
            row[host_key] = HOST_US[host_key]
        if lib is not None:
            row["ampc_host_us"] = HOST_US["ampc%s_host_us" % build.key]
    for row, lib in zip(rows, libs):
        if lib is not None and os.environ.get("AMPC_BENCH_REBIND") == "1":
            # diagnostic: the library on a new output buffer (so its graph is instantiated again,
            # after PyTorch's), then PyTorch's replays again
            lib.bind(list(args), [lib.output_like(0)])
            lib.run()
            torch.cuda.synchronize()
            with torch.no_grad():
                row["ampc_rebound_ms"] = time_calls(lib.enqueue, stream)
                row["compile_after_rebind_ms"] = time_calls(compile_replay, stream)
                row["eager_after_rebind_ms"] = time_calls(eager_replay, stream)
    for lib in libs:
        if lib is not None and os.environ.get("AMPC_BENCH_KEEP_LIBS") != "1":
            lib.close()  # as PyTorch's graphs of this model and batch are freed when it returns
    for row in rows:
        best = min(row["eager_graph_ms"], row["compile_graph_ms"])
        if "ampc_ms" in row:
            row["ratio_vs_best_pytorch"] = row["ampc_ms"] / best
    return rows


def write_markdown(rows, path, gpu):
    with open(path, "w") as f:
        f.write("| model | batch | PyTorch eager + CUDA graph | torch.compile + CUDA graph | ampc | "
                "ampc / best PyTorch | outputs vs PyTorch (max abs err / max abs) | ampc -o time |\n"
                "|---|---:|---:|---:|---:|---:|---|---:|\n")
        for r in rows:
            amp = "%.3f ms" % r["ampc_ms"] if "ampc_ms" in r else "failed"
            ratio = "%.2fx" % r["ratio_vs_best_pytorch"] if "ratio_vs_best_pytorch" in r else "-"
            match = ("%s (%.2g / %.3g)" % ("match" if r["outputs_match"] else "MISMATCH",
                                           r["max_abs_err"], r["ref_scale"])
                     if "outputs_match" in r else r.get("ampc_error", "-").splitlines()[-1][:120])
            f.write("| %s | %d | %.3f ms | %.3f ms | %s | %s | %s | %.1f s |\n"
                    % (r["model"], r["batch"], r["eager_graph_ms"], r["compile_graph_ms"], amp,
                       ratio, match, r["ampc_compile_s"]))
        f.write("\nMedian of %d calls each timed with CUDA events after %d warm-up calls, in two "
                "rounds (ampc's builds, eager, compiled, then the reverse order), the mean of the "
                "two medians; the rows of one model and batch share one measurement of "
                "PyTorch's. Every library is `ampc MODEL.onnx -o MODEL.so --precision %s%s`, %s; "
                "a row that names an option (`--fast-gelu`) adds it. %s, torch %s.\n"
                % (ITERS, WARMUP, PRECISION, "".join(" " + e for e in EXTRA),
                   "with AMPC_BENCH_EXTRA's options" if EXTRA
                   else "the build a user gets by default (the erf GELU exact)",
                   gpu, torch.__version__))


def write_chart(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = ["%s b%d%s" % (r["model"].split()[0], r["batch"], "".join(" " + f for f in r["ampc_flags"]))
              for r in rows]
    series = [("PyTorch eager + graph", "eager_graph_ms"), ("torch.compile + graph", "compile_graph_ms"),
              ("ampc", "ampc_ms")]
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.27
    for k, (name, key) in enumerate(series):
        ax.bar([i + (k - 1) * w for i in range(len(rows))], [r.get(key, 0) for r in rows], w, label=name)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("median latency (ms)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    out = sys.argv[1]
    work = "/tmp/ampc-bench"
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    rows = []
    only = [k for k in os.environ.get("AMPC_BENCH_MODELS", "").split(",") if k]
    # Every library runs on the current stream: PyTorch's legacy default stream, or with
    # AMPC_BENCH_STREAM=side one stream of its own made current for all of them.
    side = torch.cuda.Stream() if os.environ.get("AMPC_BENCH_STREAM") == "side" else None
    with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
        for label, key, model, batches, make_inputs, names, builds in models():
            if only and key not in only:
                continue
            model = model.half().cuda().eval()
            for b in batches:
                for row in bench_one(label, key, model, b, make_inputs, names, builds, work, out):
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    gpu = torch.cuda.get_device_name(0)
    if not PEERS:
        return
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, f, indent=1)
    write_markdown(rows, os.path.join(out, "benchmarks.md"), gpu)
    write_chart(rows, os.path.join(out, "benchmarks.png"))


if __name__ == "__main__":
    main()

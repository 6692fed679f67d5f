"""compare.py OUT_DIR — ampc against PyTorch on this GPU, in one process (docs/benchmarks.md).

For each model of the zoo (zoo.py: the MLP, ResNet-50, BERT-base, ViT-B/16, GPT-2, DistilBERT,
MobileNetV3, EfficientNet-B0, ConvNeXt-Tiny, Swin-T, T5-small's encoder, RegNetY-800MF,
DenseNet-121, a Llama-style decoder, a bidirectional LSTM encoder and an MLP that branches on data;
random weights; fp16 via model.half()), at each of its
batch sizes:
  1. export it to ONNX (opset 17) and compile it with `ampc MODEL.onnx -o MODEL.so --precision
     fp16` (timed; the model is already f16, and fp16 mode brings the parts torch's exporter
     writes in f32 back to f16, as PyTorch runs them): the build a user gets by default, and for
     a model that lists more builds (BERT: `--fast-gelu`) one library per build, each its own row;
  2. measure PyTorch's device memory for one eager call (torch.cuda.max_memory_allocated after a
     reset, less what was allocated before the model was loaded) and, once each library is
     created, ampc's (<name>_device_bytes: weights, arena, library workspaces);
  3. load each library into this process (ctypes) and run it on torch's stream with device
     pointers, and check its outputs against PyTorch eager (fp16 tolerance; a reference that is
     not finite, all zeros or one value everywhere fails the row, as it could not show an error);
  4. time, with CUDA events around each call, after warm-up: PyTorch eager replayed from a CUDA
     graph, torch.compile (inductor, default mode, compiled afresh for each batch) replayed from
     a CUDA graph, and each ampc library enqueued on torch's stream (<name>_enqueue on torch's
     device tensors, bound in place, without waiting, as a graph replay does); the median of the
     per-call times, in two rounds (ampc's builds, eager, compiled, then the reverse order), each
     contender's figure the mean of its two medians (results.json keeps both: *_rounds_ms). The
     builds of one model and batch share that one measurement of PyTorch's, so their rows compare
     with the same peers.
Writes OUT_DIR/results.json (after every model and batch, so a run cut short keeps what it
measured) and OUT_DIR/benchmarks.md (the table for docs/benchmarks.md) and, when matplotlib is
there, OUT_DIR/benchmarks.png. Prints a summary line; exits 1 when a row fails (ampc's error, a
mismatch, a degenerate reference) or was not run, 2 for a bad selection. merge.py joins the
results of several runs into one table.

  AMPC=.devbin/bin/ampc python bench/pytorch/compare.py $OUT
  (AMPC_BENCH_MODELS=mlp,resnet50,swin_t:32 picks models, each optionally at one batch (zoo.py's
   keys); AMPC_BENCH_BUDGET_S=N starts no model and batch after N seconds, listing those left as
   not run; AMPC_BENCH_ITERS the timed calls (a contender slower than 3 s over them all is timed
   over fewer, at least 5: the row's ampc_calls, eager_calls, compile_calls);
   AMPC_BENCH_PRECISION the --precision given to ampc, default fp16; AMPC_BENCH_EXTRA more ampc
   options, space-separated, e.g. "--disable-pass layout"; AMPC_BENCH_PROFILE=1 also writes
   `ampc run MODEL.so --profile --iterations 200` of each library to OUT_DIR/profile-NAME.txt;
   AMPC_BENCH_PEERS=0 leaves PyTorch's timings out, for a profile-only run;
   AMPC_BENCH_STAGES=1 also times ampc, and records the context's state, after each step of
   PyTorch's setup, and with AMPC_BENCH_PROBES=1 or 2 after single steps of the kind (diagnostic);
   AMPC_BENCH_BASELINE=NAME=PATH,... also builds each model with other ampc installations (PATH:
   its bin/ampc, with its runtime in PATH/../../lib/ampc; NAME: what its rows are called, e.g.
   the commit it was built from), each build by each its own row marked "[ampc NAME]" timed in
   the same rounds as the others: before/after comparisons on one machine in one run;
   AMPC_BENCH_STREAM=side runs everything on one non-default stream instead of torch's legacy
   default stream; AMPC_BENCH_KEEP_LIBS=1 keeps each library alive after the rows of its model
   and batch instead of destroying it)

  python bench/pytorch/compare.py --export-only DIR
  writes DIR/<key>_b<batch>.onnx of the selected models exactly as a run exports them, without a
  GPU (on the CPU, through cpu_half.py when there is no GPU), and DIR/export.json (inputs, the
  reference output's scale at the first batch, whether it is degenerate, seconds).
"""
import contextlib
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import merge  # noqa: E402
import zoo  # noqa: E402

AMPC = os.environ.get("AMPC", ".devbin/bin/ampc")
BASELINES = [tuple(b.split("=", 1)) for b in os.environ.get("AMPC_BENCH_BASELINE", "").split(",")
             if b]
ITERS = int(os.environ.get("AMPC_BENCH_ITERS", "200"))
PRECISION = os.environ.get("AMPC_BENCH_PRECISION", "fp16")
PROFILE = os.environ.get("AMPC_BENCH_PROFILE", "0") == "1"
PEERS = os.environ.get("AMPC_BENCH_PEERS", "1") != "0"
EXTRA = os.environ.get("AMPC_BENCH_EXTRA", "").split()
WARMUP = 30


HOST_US = {}  # per timed function: the median host time of one call, microseconds


# A contender slower than this per call is timed over fewer calls (warm-up and timed), so that
# one slow row (a model at 300 ms a call) does not take the command's 10 minutes: its calls then
# fill about SLOW_BUDGET_S, and never fewer than MIN_CALLS. The row records how many it took.
SLOW_BUDGET_S = 3.0
MIN_CALLS = 5
CALLS = {}  # per timed function: how many calls were timed, when fewer than ITERS


def call_counts(fn):
    """(warm-up calls, timed calls) for fn: WARMUP and ITERS, or fewer for a slow fn (one call
    timed first, after which it counts as a warm-up call)."""
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    per = time.perf_counter() - t0
    if per * (WARMUP + ITERS) <= SLOW_BUDGET_S:
        return WARMUP - 1, ITERS
    fit = max(MIN_CALLS, int(SLOW_BUDGET_S / max(per, 1e-9)))
    return min(WARMUP - 1, MIN_CALLS), min(ITERS, fit)


def time_calls(fn, stream, name=None):
    if os.environ.get("AMPC_BENCH_MARKS"):  # when each timing starts, for a clock log beside it
        with open(os.environ["AMPC_BENCH_MARKS"], "a") as f:
            f.write("%.3f %s\n" % (time.time(), name or "ampc_before_peers"))
    warm, iters = call_counts(fn)
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    if iters < ITERS and name:
        CALLS[name] = iters
    times, host = [], []
    for _ in range(iters):
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
    median of 5 such batches): what a call costs when the GPU never waits for the host. A slow fn
    (call_counts) takes batches of MIN_CALLS."""
    if call_counts(fn)[1] < ITERS:
        calls = MIN_CALLS
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


def replay_or_calls(errors, peer, fn, args):
    """A peer's call replayed from a CUDA graph (graphed), or, when the model cannot be captured (a
    branch on data reads a value back to the host, which capture forbids), fn(*args) called as it
    is, with why in errors[peer + "_no_graph"] (the table marks the figure)."""
    try:
        return graphed(fn, args)[0]
    except Exception as e:
        errors[peer + "_no_graph"] = ("%s: %s" % (type(e).__name__, e))[-500:]
        torch.cuda.synchronize()
        fn(*args)  # still runs outside a capture, or the peer fails here
        return lambda: fn(*args)


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
        self.device_bytes_fn = getattr(self.lib, name + "_device_bytes", None)  # None: before it
        if self.device_bytes_fn is not None:
            self.device_bytes_fn.argtypes = [ctypes.c_void_p]
            self.device_bytes_fn.restype = ctypes.c_int64

    def device_bytes(self):
        """The device memory the model holds (<name>_device_bytes), or None for a library
        built before ampc exported it."""
        return self.device_bytes_fn(self.model) if self.device_bytes_fn is not None else None

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
    row = {"model": label + build.label, "key": key, "batch": batch, "ampc_flags": build.flags}
    env = None
    if build.ampc:  # another installation: it links its own runtime
        row["baseline"], row["ampc_binary"] = build.baseline, build.ampc
        env = dict(os.environ, AMPC_RUNTIME_DIR=os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(build.ampc))), "lib", "ampc"))
    t0 = time.time()
    r = subprocess.run([build.ampc or AMPC, onnx_path, "-o", so_path, "--precision", PRECISION]
                       + build.flags + EXTRA, capture_output=True, text=True, env=env)
    row["ampc_compile_s"] = round(time.time() - t0, 2)
    if PROFILE and r.returncode == 0 and not build.ampc:  # the ampc under test's only
        profile_library(so_path, name, out)
    return row, so_path, name, r


def load_and_check(row, so_path, name, r, args, ref):
    """Loads the library, records its device memory, runs it once on the inputs and records its
    error against PyTorch eager's output `ref`; returns the library, or None (with
    row["ampc_error"]) when it failed. A degenerate `ref` fails the row (outputs_match false)."""
    if r.returncode != 0:
        row["ampc_error"] = (r.stderr or r.stdout)[-1500:]
        return None
    try:
        lib = AmpcLibrary(so_path, name)
        device_bytes = lib.device_bytes()
        if device_bytes is not None:
            row["ampc_device_mb"] = round(device_bytes / (1 << 20), 1)
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
        why = zoo.degenerate(ref)
        if why:
            row["degenerate_reference"] = why
            row["outputs_match"] = False
        return lib
    except Exception as e:  # a failed library is a result, reported
        row["ampc_error"] = str(e)[-1500:]
        return None


def eager_peak_bytes(model, args, base):
    """PyTorch's device memory for one eager call: torch.cuda.max_memory_allocated over the call
    after a reset, less `base` (what was allocated before the model was loaded). A first call
    before it lets cuDNN's algorithm search (benchmark mode) take its own memory outside the
    measured call. Returns (the peak in bytes, the call's output)."""
    with torch.no_grad():
        model(*args)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        out = model(*args)
        torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base, out


def attempt(errors, name, fn):
    """fn(), or None with errors[name] saying why it failed (a peer that fails is a result)."""
    try:
        return fn()
    except Exception as e:
        errors[name] = ("%s: %s" % (type(e).__name__, e))[-1500:]
        return None


def builds_of(entry):
    """The zoo entry's builds, and with AMPC_BENCH_BASELINE each of them again by each baseline."""
    return entry.builds + [zoo.Build("%s [ampc %s]" % (b.label, name), "%s_%s" % (b.key, name),
                                     b.flags, path, name)
                           for name, path in BASELINES for b in entry.builds]


def failed_rows(entry, order, batch, fields):
    """The rows of a model and batch that could not be measured: one per build, with `fields`
    (setup_error: what failed before ampc ran, and why)."""
    return [dict(fields, model=entry.label + b.label, key=entry.key, batch=batch,
                 ampc_flags=b.flags, order=[order, batch, k]) for k, b in enumerate(builds_of(entry))]


def bench_one(entry, order, model, batch, base, work, out):
    """One row per build of the zoo entry's model at this batch; every build's library is timed in
    the same rounds as one measurement of PyTorch's (eager and torch.compile, each from a CUDA
    graph). `order` places the rows in the zoo's order; `base` is what was allocated on the
    device before the model was loaded."""
    label, key, builds = entry.label, entry.key, builds_of(entry)
    torch.manual_seed(0)
    # drawn by the CPU's generator: a peer whose capture failed (replay_or_calls) leaves the
    # CUDA generator in capture ("Offset increment outside graph capture encountered unexpectedly"
    # at the next draw on the device)
    args = tuple(t.to("cuda") for t in entry.make_inputs(batch, "cpu"))
    errors = {}
    got = attempt(errors, "setup_error", lambda: eager_peak_bytes(model, args, base))
    if got is None:
        return failed_rows(entry, order, batch,
                           {"setup_error": "PyTorch eager: " + errors["setup_error"]})
    peak, ref = got
    ref = ref.float()
    weights = sum(t.numel() * t.element_size()
                  for t in list(model.parameters()) + list(model.buffers()))
    common = {"order": [order, batch], "torch_peak_mb": round(peak / (1 << 20), 1),
              "torch_weights_mb": round(weights / (1 << 20), 1)}
    onnx_path = os.path.join(work, "%s_b%d.onnx" % (key, batch))
    attempt(errors, "setup_error",
            lambda: zoo.export_onnx(model, args, onnx_path, entry.input_names))
    if errors:  # nothing to compile
        return failed_rows(entry, order, batch,
                           dict(common, setup_error="ONNX export: " + errors["setup_error"]))
    compiled_builds = [compile_build(b, label, key, batch, onnx_path, work, out) for b in builds]
    rows = [row for row, _, _, _ in compiled_builds]
    for k, row in enumerate(rows):
        row.update(common, order=[order, batch, k])
    if not PEERS:
        return rows
    stream = torch.cuda.current_stream()
    HOST_US.clear()
    CALLS.clear()
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
        eager_replay = attempt(errors, "eager_graph_error",
                               lambda: replay_or_calls(errors, "eager_graph", model, args))
        stage("eager_graph")
        # Compiled afresh for this batch: after the model's other batch, torch.compile would
        # otherwise recompile with dynamic shapes.
        torch._dynamo.reset()
        compiled = torch.compile(model)
        if attempt(errors, "compile_graph_error", lambda: compiled(*args)) is not None:
            stage("torch_compile")
            compile_replay = attempt(errors, "compile_graph_error",
                                     lambda: replay_or_calls(errors, "compile_graph", compiled,
                                                             args))
            stage("compile_graph")
        else:
            compile_replay = None
    # Two rounds, the second in the reverse order, and each contender's figure the mean of its two
    # medians: whatever drifts while the process runs (clocks, the state the others leave) weighs
    # on all contenders alike. Each contender: (key of its figures, the call, its host-time key).
    contenders = [("ampc" + b.key, l.enqueue, "ampc%s_host_us" % b.key)
                  for b, l in zip(builds, libs) if l is not None]
    contenders += [(peer, fn, host_key) for peer, fn, host_key in
                   (("eager_graph", eager_replay, "eager_host_us"),
                    ("compile_graph", compile_replay, "compile_host_us")) if fn is not None]
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
        row.update(errors)
        for field in ("_ms", "_rounds_ms", "_back_to_back_ms"):
            for peer in ("eager_graph", "compile_graph"):
                if peer + field in figures:
                    row[peer + field] = figures[peer + field]
            if lib is not None:
                row["ampc" + field] = figures["ampc" + build.key + field]
        for host_key in ("eager_host_us", "compile_host_us"):
            if host_key in HOST_US:
                row[host_key] = HOST_US[host_key]
            if host_key in CALLS:  # a slow peer, timed over fewer calls
                row[host_key.replace("_host_us", "_calls")] = CALLS[host_key]
        if lib is not None:
            row["ampc_host_us"] = HOST_US["ampc%s_host_us" % build.key]
            if "ampc%s_host_us" % build.key in CALLS:
                row["ampc_calls"] = CALLS["ampc%s_host_us" % build.key]
    for row, lib in zip(rows, libs):
        if lib is not None and os.environ.get("AMPC_BENCH_REBIND") == "1" and compile_replay \
                and eager_replay:
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
        peers = [row[k] for k in ("eager_graph_ms", "compile_graph_ms") if k in row]
        if "ampc_ms" in row and peers:
            row["ratio_vs_best_pytorch"] = row["ampc_ms"] / min(peers)
    return rows


def write_chart(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = ["%s b%d%s" % (r["model"].split()[0], r["batch"],
                            "".join(" " + f for f in r["ampc_flags"])) for r in rows]
    series = [("PyTorch eager + graph", "eager_graph_ms"),
              ("torch.compile + graph", "compile_graph_ms"), ("ampc", "ampc_ms")]
    fig, ax = plt.subplots(figsize=(max(9, 0.55 * len(rows)), 4.5))
    w = 0.27
    for k, (name, key) in enumerate(series):
        ax.bar([i + (k - 1) * w for i in range(len(rows))], [r.get(key, 0) for r in rows], w,
               label=name)
    ax.set_xticks(range(len(rows)))
    many = len(rows) > 8
    ax.set_xticklabels(labels, rotation=60 if many else 0, ha="right" if many else "center")
    ax.set_ylabel("median latency (ms)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def ampc_version():
    """`ampc --version`'s first line and AMPC_BENCH_COMMIT (the commit the binary was built from,
    when the caller knows it): results.json's header, as runs of one build share a table."""
    try:
        r = subprocess.run([AMPC, "--version"], capture_output=True, text=True)
        version = (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        version = "ampc (version unknown)"
    commit = os.environ.get("AMPC_BENCH_COMMIT")
    return "%s at %s" % (version, commit) if commit else version


def header(gpu):
    """results.json's fields besides the rows: the machine, the method and the zoo."""
    return {"gpu": gpu, "torch": torch.__version__, "ampc_version": ampc_version(), "iters": ITERS,
            "warmup": WARMUP, "precision": PRECISION, "extra": EXTRA,
            "selection": os.environ.get("AMPC_BENCH_MODELS", ""),
            "baselines": dict(BASELINES),
            "zoo": [{"key": m.key, "label": m.label, "batches": m.batches} for m in zoo.ZOO]}


def release():
    """Frees what the last model left (its device memory once the caller dropped it,
    torch.compile's state) before the next model is loaded."""
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def export_only(out_dir, selected):
    """`--export-only DIR`: each selected model and batch written to DIR/<key>_b<batch>.onnx as a
    run exports it, on the GPU when there is one, else on the CPU (f16 products computed in f32
    by cpu_half.py: the same graph and weights); DIR/export.json says what was written, the
    reference's scale at the model's first batch and whether it is degenerate."""
    os.makedirs(out_dir, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        import cpu_half
        cpu_half.enable()
    done, status = [], 0
    for entry, batches in selected:
        torch.manual_seed(0)
        model = entry.build().half().to(dev).eval()
        for i, b in enumerate(batches):
            torch.manual_seed(0)
            args = entry.make_inputs(b, dev)
            item = {"key": entry.key, "model": entry.label, "batch": b, "device": dev,
                    "inputs": [[n, str(a.dtype), list(a.shape)]
                               for n, a in zip(entry.input_names, args)]}
            if i == 0:
                with torch.no_grad():
                    ref = model(*args).float()
                item["ref_scale"] = ref.abs().max().item()
                item["degenerate_reference"] = zoo.degenerate(ref)
                status |= bool(item["degenerate_reference"])
            path = os.path.join(out_dir, "%s_b%d.onnx" % (entry.key, b))
            t0 = time.time()
            try:
                zoo.export_onnx(model, args, path, entry.input_names)
                item["onnx"] = path
            except Exception as e:
                item["export_error"] = ("%s: %s" % (type(e).__name__, e))[-1500:]
                status = 1
            item["export_s"] = round(time.time() - t0, 1)
            print(json.dumps(item), flush=True)
            done.append(item)
            with open(os.path.join(out_dir, "export.json"), "w") as f:
                json.dump(done, f, indent=1)
    return status


def main():
    args = sys.argv[1:]
    try:
        selected = zoo.select(os.environ.get("AMPC_BENCH_MODELS", ""))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if len(args) == 2 and args[0] == "--export-only":
        return export_only(args[1], selected)
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = args[0]
    work = "/tmp/ampc-bench"
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name(0)
    meta = header(gpu)
    budget = float(os.environ.get("AMPC_BENCH_BUDGET_S", "0") or 0)
    start = time.time()
    rows, not_run = [], []

    def save():  # after every model and batch: a run cut short keeps what it measured
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(dict(meta, not_run=not_run, rows=rows), f, indent=1)

    # Every library runs on the current stream: PyTorch's legacy default stream, or with
    # AMPC_BENCH_STREAM=side one stream of its own made current for all of them.
    side = torch.cuda.Stream() if os.environ.get("AMPC_BENCH_STREAM") == "side" else None
    with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
        for entry, batches in selected:
            if budget and time.time() - start > budget:
                not_run += ["%s:%d" % (entry.key, b) for b in batches]
                continue
            order = [m.key for m in zoo.ZOO].index(entry.key)
            torch.manual_seed(0)
            errors = {}
            model = attempt(errors, "setup_error", lambda: entry.build().half().eval())
            if model is None:
                errors["setup_error"] = "building the model: " + errors["setup_error"]
                rows += [r for b in batches for r in failed_rows(entry, order, b, errors)]
                continue
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            model = model.cuda()
            for b in batches:
                if budget and time.time() - start > budget:
                    not_run.append("%s:%d" % (entry.key, b))
                    continue
                release()
                for row in bench_one(entry, order, model, b, base, work, out):
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                if PEERS:
                    save()
            model = None
            release()
    if not PEERS:
        return 0
    save()
    s = merge.write_markdown(rows, os.path.join(out, "benchmarks.md"), meta)
    write_chart(rows, os.path.join(out, "benchmarks.png"))
    print("zoo: %d rows of the default build, geometric mean %s, %d at or below 1.0x; %d failed%s%s"
          % (s["rows"], "%.2fx" % s["geomean_ratio"] if s["geomean_ratio"] else "-",
             s["at_or_below_1"], len(s["failed"]),
             "".join("\n  FAILED " + f for f in s["failed"]),
             "\n  not run (AMPC_BENCH_BUDGET_S): AMPC_BENCH_MODELS=" + ",".join(not_run)
             if not_run else ""))
    return 1 if s["failed"] or not_run else 0


if __name__ == "__main__":
    sys.exit(main())

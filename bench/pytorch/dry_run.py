"""dry_run.py OUT_DIR — compare.py's whole run on the CPU, without a GPU, to check the harness
(selection, export, `ampc -o`, rows, failures, the table, results.json, the time budget) before
spending device time on it. Not a measurement: every time is a constant.

torch.cuda's events, streams, graphs and memory counters are stubbed (the peak reads 123 MB),
torch.compile returns the model, the models and inputs stay on the CPU (f16 products through
cpu_half.py), and ampc's libraries, which need a GPU to load, fail their rows with ampc's "no
CUDA device" error, or with AMPC_DRY_LIBRARY=1 are replaced by a stand-in that runs the PyTorch
model itself (42 MB of device memory), so that the passing path is taken too.

  AMPC=build/bin/ampc AMPC_BENCH_MODELS=mlp,bert:1 AMPC_BENCH_ITERS=3 \\
      python bench/pytorch/dry_run.py /tmp/dry
"""
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_half  # noqa: E402


class Event:
    def __init__(self, **kw):
        pass

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.5


class Stream:
    cuda_stream = 0

    def wait_stream(self, other):
        pass


class Graph:
    def replay(self):
        pass


def stub_cuda():
    """torch.cuda as compare.py uses it, on the CPU."""
    c = torch.cuda
    c.synchronize = lambda *a: None
    c.reset_peak_memory_stats = lambda *a: None
    c.max_memory_allocated = lambda *a: 123 << 20
    c.memory_allocated = lambda *a: 0
    c.empty_cache = lambda: None
    c.get_device_name = lambda *a: "no GPU (dry run)"
    c.Event, c.Stream, c.CUDAGraph = Event, Stream, Graph
    c.current_stream = lambda *a: Stream()
    c.stream = lambda s: contextlib.nullcontext()
    c.graph = lambda g: contextlib.nullcontext()
    torch.compile = lambda model: model
    torch.nn.Module.cuda = lambda self, *a: self


def main():
    cpu_half.enable()
    stub_cuda()
    import compare
    import zoo
    compare.WARMUP = 1
    compare.time_back_to_back = lambda fn, stream, calls=50: (fn(), 0.25)[1]
    select = zoo.select
    zoo.select = lambda spec: [
        (m._replace(make_inputs=lambda b, dev, mk=m.make_inputs: mk(b, "cpu")), bs)
        for m, bs in select(spec)]
    if os.environ.get("AMPC_DRY_LIBRARY") == "1":
        current = []

        class Library:
            """Stands in for a loaded ampc library: runs the PyTorch model of the row."""

            def __init__(self, path, name):
                self.model = object()

            def device_bytes(self):
                return 42 << 20

            def output_like(self, i):
                return self.out

            def bind(self, inputs, outputs):
                self.inputs, self.outputs = inputs, outputs

            def run(self):
                with torch.no_grad():
                    self.outputs[0].copy_(current[0](*self.inputs))

            enqueue = run

            def close(self):
                pass

        bench_one = compare.bench_one

        def bench_with_stand_in(entry, order, model, batch, base, work, out):
            current[:] = [model]
            with torch.no_grad():
                Library.out = model(*entry.make_inputs(batch, "cpu")).clone()
            return bench_one(entry, order, model, batch, base, work, out)
        compare.bench_one = bench_with_stand_in
        compare.AmpcLibrary = Library
    sys.argv = [os.path.join(os.path.dirname(__file__), "compare.py")] + sys.argv[1:]
    return compare.main()


if __name__ == "__main__":
    sys.exit(main())

"""merge.py [-o OUT_DIR] RESULTS... — joins the results.json of several compare.py runs (the zoo
measured in subsets, one device command each) into one table; no PyTorch needed.

Each RESULTS is a results.json or a folder searched for them. The runs must share the GPU, torch,
the ampc build and the method (iterations, precision, options), or the merge stops and says which
field differs: ratios are only compared within one machine and one build. A row measured twice
(same model, build and batch) keeps the last file's, and says so. Writes OUT_DIR/results.json
(the rows, each run's header and the summary) and OUT_DIR/benchmarks.md (the table), and prints
the table; the zoo's rows that no file holds are listed under it. compare.py writes its own table
with write_markdown.
"""
import json
import math
import os
import sys

# The header fields two runs must agree on to share a table.
SAME = ("gpu", "torch", "ampc_version", "iters", "warmup", "precision", "extra")


def failure(row):
    """Why a row fails, or None: the model could not be built, run by PyTorch or exported, a
    degenerate reference, ampc's error, no PyTorch figure, or outputs that do not match."""
    if row.get("setup_error"):
        return row["setup_error"].strip().splitlines()[0][:200]
    if row.get("degenerate_reference"):
        return row["degenerate_reference"]
    if row.get("ampc_error"):
        last = row["ampc_error"].strip().splitlines()[-1][:160]
        return last if last.startswith("ampc") else "ampc: " + last
    if "outputs_match" in row and not row["outputs_match"]:
        return "outputs do not match PyTorch's"
    if "ratio_vs_best_pytorch" not in row:
        return "no PyTorch figure: " + "; ".join(
            row[k].strip().splitlines()[-1][:120]
            for k in ("eager_graph_error", "compile_graph_error") if row.get(k))
    return None


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows):
    """The figures under the table: over the rows of the default build (no extra ampc option, the
    ampc under test), the geometric mean of ampc / best PyTorch over the rows that pass, how many
    rows are at or below 1.0x, and the rows that fail; for each baseline (compare.py's
    AMPC_BENCH_BASELINE), the same geometric mean over its rows and that of this ampc's time over
    the baseline's, over the builds of a model and batch where both pass."""
    default = [r for r in rows if not r.get("ampc_flags") and not r.get("baseline")]
    ok = [r for r in default if failure(r) is None]
    s = {"rows": len(default), "passing": len(ok),
         "geomean_ratio": _geomean([r["ratio_vs_best_pytorch"] for r in ok]),
         "at_or_below_1": sum(1 for r in ok if r["ratio_vs_best_pytorch"] <= 1.0),
         "failed": ["%s b%d: %s" % (r["model"], r["batch"], failure(r))
                    for r in rows if failure(r) is not None]}

    def build(r):
        return (r["key"], r["batch"], tuple(r.get("ampc_flags", [])))

    mine = {build(r): r for r in rows if not r.get("baseline") and failure(r) is None}
    s["baselines"] = {}
    for name in dict.fromkeys(r["baseline"] for r in rows if r.get("baseline")):
        theirs = [r for r in rows if r.get("baseline") == name and failure(r) is None]
        pairs = [(mine[build(r)], r) for r in theirs if build(r) in mine]
        s["baselines"][name] = {
            "binary": next((r["ampc_binary"] for r in rows if r.get("baseline") == name), None),
            "geomean_ratio": _geomean([r["ratio_vs_best_pytorch"] for r in theirs
                                       if not r.get("ampc_flags")]),
            "pairs": len(pairs),
            "geomean_over_baseline": _geomean([a["ampc_ms"] / b["ampc_ms"] for a, b in pairs])}
    return s


def _ms(v):
    return "%.3f ms" % v if v is not None else "-"


def _peer_ms(row, peer):
    """A peer's figure; "(no graph)" after it when the model could not be captured and the peer's
    calls were timed as they are (compare.py's replay_or_calls)."""
    ms = _ms(row.get(peer + "_ms"))
    return ms + " (no graph)" if row.get(peer + "_no_graph") else ms


def _mb(v):
    return "%.0f" % v if v is not None else "-"


def write_markdown(rows, path, meta):
    """The table of `rows` (compare.py's) into `path`, with the summary and the method under it;
    `meta` is a results.json header (gpu, torch, iters, warmup, precision, extra)."""
    s = summary(rows)
    with open(path, "w") as f:
        f.write("| model | batch | PyTorch eager + CUDA graph | torch.compile + CUDA graph | "
                "ampc | ampc / best PyTorch | outputs vs PyTorch (max abs err / max abs) | "
                "ampc device MB | PyTorch peak MB | ampc -o time |\n"
                "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
        for r in rows:
            why = failure(r)
            amp = _ms(r.get("ampc_ms")) if "ampc_ms" in r else "failed"
            ratio = "%.2fx" % r["ratio_vs_best_pytorch"] if "ratio_vs_best_pytorch" in r else "-"
            if "outputs_match" in r and not r.get("degenerate_reference"):
                match = "%s (%.2g / %.3g)" % ("match" if r["outputs_match"] else "**MISMATCH**",
                                              r["max_abs_err"], r["ref_scale"])
            else:
                match = "**FAILED**: %s" % (why or "-").replace("|", "\\|")
            compile_s = "%.1f s" % r["ampc_compile_s"] if "ampc_compile_s" in r else "-"
            f.write("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n"
                    % (r["model"], r["batch"], _peer_ms(r, "eager_graph"),
                       _peer_ms(r, "compile_graph"), amp, ratio, match,
                       _mb(r.get("ampc_device_mb")), _mb(r.get("torch_peak_mb")), compile_s))
        f.write("\nOver the %d rows of the default build: geometric mean of ampc / best PyTorch %s "
                "(over the %d rows that pass); %d of the %d rows at or below 1.0x."
                % (s["rows"], "%.2fx" % s["geomean_ratio"] if s["geomean_ratio"] else "-",
                   s["passing"], s["at_or_below_1"], s["rows"]))
        if s["failed"]:
            f.write(" %d rows fail: %s." % (len(s["failed"]), "; ".join(s["failed"])))
        for name, b in s["baselines"].items():
            f.write(" Rows marked [ampc %s] are the same builds by %s, timed in the same rounds: "
                    "its geometric mean of ampc / best PyTorch %s; this ampc's time over its, "
                    "geometric mean over the %d builds where both pass: %s."
                    % (name, b["binary"],
                       "%.2fx" % b["geomean_ratio"] if b["geomean_ratio"] else "-", b["pairs"],
                       "%.3fx" % b["geomean_over_baseline"] if b["geomean_over_baseline"] else "-"))
        extra = "".join(" " + e for e in meta.get("extra", []))
        f.write("\n\nMedian of %d calls (fewer, at least 5, for a contender slower than 3 s over "
                "them all: the row's *_calls) each timed with CUDA events after %d warm-up calls, "
                "in two "
                "rounds (ampc's builds, eager, compiled, then the reverse order), the mean of the "
                "two medians (a PyTorch figure marked \"no graph\": the model branches on data, "
                "which a CUDA graph cannot capture, so its calls were timed as they are); the rows of one model and batch share one measurement of "
                "PyTorch's. Every library is `ampc MODEL.onnx -o MODEL.so --precision %s%s`, %s; "
                "a row that names an option (`--fast-gelu`) adds it. ampc device MB: what the "
                "library holds on the GPU (`<name>_device_bytes`: weights, arena, cuBLASLt/cuDNN "
                "workspaces; the inputs and outputs are the caller's). PyTorch peak MB: "
                "`torch.cuda.max_memory_allocated` over one eager call after a reset, less what "
                "was allocated before the model was loaded (weights, inputs, activations and "
                "output). %s, torch %s, %s.\n"
                % (meta["iters"], meta["warmup"], meta["precision"], extra,
                   "with AMPC_BENCH_EXTRA's options" if extra
                   else "the build a user gets by default (the erf GELU exact)",
                   meta["gpu"], meta["torch"], meta.get("ampc_version", "ampc")))
    return s


def find_results(arg):
    """The results.json files an argument names: the file, or those under the folder."""
    if os.path.isfile(arg):
        return [arg]
    found = []
    for dirpath, _, files in sorted(os.walk(arg)):
        found += [os.path.join(dirpath, f) for f in sorted(files) if f == "results.json"]
    if not found:
        raise SystemExit("merge: no results.json in '%s'" % arg)
    return found


def merge(paths):
    """(header, rows, missing): the rows of every file in the zoo's order, a row measured twice
    taken from the later file; `missing` the zoo's (key, batch) pairs no file measured."""
    header, rows, zoo, seen = None, {}, [], set()
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        if "sources" in run:  # merge.py's own output (a folder of parts may hold an earlier one)
            print("merge: %s is a merge of %d files, not a run: left out"
                  % (path, len(run["sources"])), file=sys.stderr)
            continue
        if header is None:
            header = {k: run.get(k) for k in SAME}
        for k in SAME:
            if run.get(k) != header[k]:
                raise SystemExit("merge: %s has %s %r, the first file %r: runs of another GPU, "
                                 "torch, ampc build or method do not share a table"
                                 % (path, k, run.get(k), header[k]))
        zoo = run.get("zoo", zoo)
        for r in run["rows"]:
            key = (r["model"], r["batch"])
            if key in rows:
                print("merge: %s b%d again in %s: this one kept" % (key + (path,)), file=sys.stderr)
            rows[key] = r
            seen.add((r.get("key"), r["batch"]))
    ordered = sorted(rows.values(), key=lambda r: r.get("order", [1 << 30]))
    missing = [(m["key"], b) for m in zoo for b in m["batches"] if (m["key"], b) not in seen]
    if header is not None:
        header["zoo"] = zoo
    return header, ordered, missing


def selection(missing, header):
    """The AMPC_BENCH_MODELS value that measures the `missing` (key, batch) pairs: a model's key
    alone when all its batches are missing, else key:batch."""
    batches = {m["key"]: m["batches"] for m in header.get("zoo", [])}
    keys = []
    for key, b in missing:
        gone = [bb for k, bb in missing if k == key]
        item = key if gone == batches.get(key) else "%s:%d" % (key, b)
        if item not in keys:
            keys.append(item)
    return ",".join(keys)


def main(argv):
    out = "zoo-merged"
    if argv[:1] == ["-o"]:
        out, argv = argv[1], argv[2:]
    if not argv:
        raise SystemExit(__doc__)
    paths = [p for a in argv for p in find_results(a)]
    header, rows, missing = merge(paths)
    if header is None:
        raise SystemExit("merge: no run among %s" % ", ".join(paths))
    os.makedirs(out, exist_ok=True)
    s = write_markdown(rows, os.path.join(out, "benchmarks.md"), header)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(header, sources=paths, summary=s, not_measured=missing, rows=rows), f,
                  indent=1)

    with open(os.path.join(out, "benchmarks.md")) as f:
        sys.stdout.write(f.read())
    if missing:
        print("\nNot measured in these files: %s (AMPC_BENCH_MODELS=%s)"
              % (", ".join("%s b%d" % m for m in missing), selection(missing, header)))
    return 1 if s["failed"] or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

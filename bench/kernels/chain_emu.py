"""chain_emu.py — fused elementwise chains (passes/fuse_elementwise.c, codegen/lower_elementwise.c)
run on the CPU: for each model below, `ampc --emit cuda` writes its kernel, which is compiled as
host C++ against bench/kernels/emu.h and the kernel templates and run for every thread of its
grid (one element a thread: no thread reads what another writes), on the same random inputs as
`ampc run --reference`, the reference evaluator; the outputs must be equal bit for bit (each
value of a chain is rounded to its type as the separate kernels store it). What it checks is the
generated index arithmetic (views, broadcasts, Concats read in place), not the GPU's instructions.

    python bench/kernels/chain_emu.py AMPC   (AMPC: the ampc binary; bench/kernels/chain-emu.sh)

Each model's float tensors are graph inputs, so the plan's one kernel reads its arena and, at
most, integer tables among the weights (a Gather of rows: passes/row_gather.c), whose values come
from `--emit ir`; a model whose plan is not one kernel fails. Exit status 0 when every model
matches.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def value(name, shape, t):
    return helper.make_tensor_value_info(name, t, shape)


def model(name, nodes, inputs, output, inits=()):
    g = helper.make_graph(nodes, name, inputs, [output], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def rotary(t):
    """Hugging Face's rotate-half on heads permuted from x [2, 16, 4, 32]: Concat(Neg(Slice(h,
    16:32)), Slice(h, 0:16)) * sin + h * cos."""
    nodes = [helper.make_node("Transpose", ["x"], ["h"], perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["h", "k0", "k16", "ax"], ["lo"]),
             helper.make_node("Slice", ["h", "k16", "k32", "ax"], ["hi"]),
             helper.make_node("Neg", ["hi"], ["nhi"]),
             helper.make_node("Concat", ["nhi", "lo"], ["rot"], axis=-1),
             helper.make_node("Mul", ["h", "cos"], ["a"]),
             helper.make_node("Mul", ["rot", "sin"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    return model("rotary", nodes,
                 [value("x", [2, 16, 4, 32], t), value("cos", [16, 32], t), value("sin", [16, 32], t)],
                 value("y", [2, 4, 16, 32], t),
                 [ints("k0", [0]), ints("k16", [16]), ints("k32", [32]), ints("ax", [3])])


def class_token():
    """ViT's class token: Concat(Expand(cls), p * two, q, axis 1) + pos."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Expand", ["cls", "to"], ["e"]),
             helper.make_node("Mul", ["p", "two"], ["p2"]),
             helper.make_node("Concat", ["e", "p2", "q"], ["cat"], axis=1),
             helper.make_node("Add", ["cat", "pos"], ["y"])]
    return model("class_token", nodes,
                 [value("cls", [1, 1, 16], f), value("p", [3, 5, 16], f), value("q", [3, 2, 16], f),
                  value("pos", [8, 16], f), value("two", [], f)],
                 value("y", [3, 8, 16], f), [ints("to", [3, 1, 16])])


def views():
    """A chain headed by views, with no Concat: Relu(Transpose(x) + z) * w."""
    f = TensorProto.FLOAT16
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Add", ["t", "z"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Mul", ["r", "w"], ["y"])]
    return model("views", nodes, [value("x", [6, 4, 8], f), value("z", [4, 6, 8], f), value("w", [8], f)],
                 value("y", [4, 6, 8], f))


def window_reverse():
    """Swin's shifted window reverse and residual Add: windows [2, 2, 2, 3, 3, 8] back to the image
    (Transpose, Reshape), rolled by 2 on both axes (two Gathers), plus z: one Gather of rows by a
    constant table, read by the Add's chain in place."""
    f = TensorProto.FLOAT16
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("Reshape", ["t", "img"], ["r"]),
             helper.make_node("Gather", ["r", "shift"], ["g1"], axis=1),
             helper.make_node("Gather", ["g1", "shift"], ["g2"], axis=2),
             helper.make_node("Add", ["g2", "z"], ["y"])]
    return model("window_reverse", nodes,
                 [value("x", [2, 2, 2, 3, 3, 8], f), value("z", [2, 6, 6, 8], f)],
                 value("y", [2, 6, 6, 8], f),
                 [ints("img", [2, 6, 6, 8]), ints("shift", [(j + 2) % 6 for j in range(6)])])


def window_partition():
    """The other way, as a matmul would read it: the image [2, 6, 6, 8] rolled by 2 on both axes,
    into windows [8, 9, 8]: one Gather of rows, a kernel of its own."""
    f = TensorProto.FLOAT16
    nodes = [helper.make_node("Gather", ["x", "shift"], ["g1"], axis=1),
             helper.make_node("Gather", ["g1", "shift"], ["g2"], axis=2),
             helper.make_node("Reshape", ["g2", "split"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("Reshape", ["t", "windows"], ["y"])]
    return model("window_partition", nodes, [value("x", [2, 6, 6, 8], f)], value("y", [8, 9, 8], f),
                 [ints("split", [2, 2, 3, 2, 3, 8]), ints("windows", [8, 9, 8]),
                  ints("shift", [(j + 2) % 6 for j in range(6)])])


MODELS = [("rotary f16", rotary(TensorProto.FLOAT16)), ("rotary f32", rotary(TensorProto.FLOAT)),
          ("class token", class_token()), ("views", views()), ("window rev", window_reverse()),
          ("window part", window_partition())]
DTYPES = {TensorProto.FLOAT16: np.float16, TensorProto.FLOAT: np.float32}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd[:3]), (r.stderr or r.stdout)[-2000:]))
    return r.stdout


IO = r'\{"([^"]+)", \d+, \{\d+, \{[^}]*\}\}, \{(\d+), (\d+), (\d+)\}\}'


CONST = r"const %\"?[^\s\"]+\"? : (i32|i64)\[[\d,]*\] = \[([-\d, ]*)\]"


def tables(ir, refs):
    """The weights the kernel reads, each an integer constant of --emit ir (ir) matched to its
    reference by size: C++ lines filling `weights`, and the blob's size."""
    consts = [np.array([int(v) for v in vals.split(",")], np.int32 if t == "i32" else np.int64)
              for t, vals in re.findall(CONST, ir)]
    lines, size = [], 16
    for _, off, nb in (r for r in refs if r[0] != 0):
        fit = [a for a in consts if a.nbytes == nb]
        if len(fit) != 1:
            raise RuntimeError("the kernel reads %d bytes of weights that are no one integer table" % nb)
        vals = ", ".join(str(v) for v in fit[0])
        ct = "int" if fit[0].dtype == np.int32 else "long long"
        lines.append("    { static const %s t[] = {%s}; memcpy(weights + %d, t, %d); }" % (ct, vals, off, nb))
        size = max(size, off + nb)
    return lines, size


def harness(cu, c, ir):
    """The host C++ of the plan's one kernel (cu: --emit cuda, c: --emit c, ir: --emit ir) and a
    main that runs every thread of its grid over an arena holding the inputs and the weights'
    integer tables, then writes the outputs."""
    refs = [tuple(int(x) for x in g) for g in re.findall(r"\.ref = \{(\d+), (\d+), (\d+)\}", c)]
    grids = re.findall(r"\.grid = \{(\d+), (\d+), (\d+)\}, \.block = \{(\d+), (\d+), (\d+)\}", c)
    if len(grids) != 1:
        raise RuntimeError("the plan has %d kernels, not one" % len(grids))
    grid, block = int(grids[0][0]), int(grids[0][3])
    fill, wsize = tables(ir, refs)
    ins_text, rest = c.split("plan_inputs[]")[1].split("plan_outputs[]")
    ins, outs = re.findall(IO, ins_text), re.findall(IO, rest.split("images[]")[0])
    arena = int(re.search(r"\.arena_bytes = (\d+)", c).group(1))
    body = "\n".join(l for l in cu.splitlines() if not l.startswith("#include"))
    body = re.sub(r'extern "C" __global__ void __launch_bounds__\([^)]*\) ', "static void ", body)
    sig = re.search(r"static void (k0_\w+)\(([^)]*)\)", body)
    types = [re.sub(r"\s*p\d+$", "", p.strip()) for p in sig.group(2).split(",")]
    call = ", ".join("(%s)(%s + %d)" % (types[j], "weights" if refs[j][0] else "arena", refs[j][1])
                     for j in range(len(refs)))
    lines = ['#include "emu.h"', '#include "ampc/common.cuh"', '#include "ampc/elementwise.cuh"',
             '#include "ampc/move.cuh"', "#include <cstring>", body, "int main() {",
             "    static unsigned char arena[%d + 16] __attribute__((aligned(16)));" % arena,
             "    static unsigned char weights[%d] __attribute__((aligned(16)));" % wsize] + fill
    for name, _, off, nb in ins:
        lines.append('    { FILE *f = fopen("%s.in", "rb"); if (!f || fread(arena + %s, 1, %s, f) != %s) return 2; fclose(f); }'
                     % (name, off, nb, nb))
    lines += ["    blockDim = {%d, 1, 1}; gridDim = {%d, 1, 1};" % (block, grid),
              "    for (unsigned b = 0; b < %d; b++)" % grid,
              "        for (unsigned t = 0; t < %d; t++) {" % block,
              "            blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};",
              "            %s(%s);" % (sig.group(1), call), "        }"]
    for name, _, off, nb in outs:
        lines.append('    { FILE *f = fopen("%s.out", "wb"); fwrite(arena + %s, 1, %s, f); fclose(f); }' % (name, off, nb))
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n", [o[0] for o in outs]


def check(ampc, label, m, work):
    d = tempfile.mkdtemp(dir=work)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    rng = np.random.default_rng(7)
    args = []
    for inp in m.graph.input:
        t = inp.type.tensor_type
        shape = [x.dim_value for x in t.shape.dim]
        a = (rng.integers(-2000, 2000, size=shape) / 250.0).astype(DTYPES[t.elem_type])
        np.save(os.path.join(d, inp.name + ".npy"), a)
        a.tofile(os.path.join(d, inp.name + ".in"))
        args += ["--input", "%s=%s.npy" % (inp.name, inp.name)]
    run([ampc, "run", "model.onnx", "--reference", "--save-outputs", "ref"] + args, cwd=d)
    src, outs = harness(run([ampc, "model.onnx", "--emit", "cuda", "-o", "-"], cwd=d),
                        run([ampc, "model.onnx", "--emit", "c", "-o", "-"], cwd=d),
                        run([ampc, "model.onnx", "--emit", "ir", "-o", "-"], cwd=d))
    with open(os.path.join(d, "k.cpp"), "w") as f:
        f.write(src)
    run([os.environ.get("CXX", "g++"), "-std=c++17", "-O1", "-fno-strict-aliasing", "-ffp-contract=off", "-w",
         "-I" + os.path.join(work, "inc"), "-I" + os.path.join(ROOT, "bench", "kernels"),
         "-I" + os.path.join(CUDA, "include"), "k.cpp", "-o", "k", "-lpthread"], cwd=d)
    run(["./k"], cwd=d)
    ok = True
    for name in outs:
        want = np.load(os.path.join(d, "ref", name + ".npy"))
        got = np.fromfile(os.path.join(d, name + ".out"), dtype=want.dtype).reshape(want.shape)
        bad = int(np.sum(~((got == want) | (np.isnan(got) & np.isnan(want)))))
        print("%-12s %s: %d elements, %d differ from the reference" % (label, name, want.size, bad))
        ok &= bad == 0
    return ok


def main():
    ampc = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "inc", "ampc"))
        for f in os.listdir(os.path.join(ROOT, "codegen", "kernels")):
            if f.endswith(".cuh"):
                with open(os.path.join(ROOT, "codegen", "kernels", f)) as s, \
                        open(os.path.join(work, "inc", "ampc", f), "w") as t:
                    t.write(s.read())
        ok = all([check(ampc, label, m, work) for label, m in MODELS])
    print("chain_emu: all models match" if ok else "chain_emu: a model differs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

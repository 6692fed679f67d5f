"""make_corpus.py OUT_DIR [AMPC] — writes the seed corpus of the libFuzzer targets (tests/fuzz/):

  OUT_DIR/onnx/       small valid ONNX models, one or two op families each, and crafted edge cases
                      (absurd dims, data shorter than the dims claim, external data, nesting...)
  OUT_DIR/compile/    the valid models (the compile pipeline wants graphs that import)
  OUT_DIR/tensor_io/  .npy files (every dtype, header versions 1 to 3, refused layouts) and
                      TensorProto .pb files (raw_data, typed fields, bf16, scalars, empty tensors)
  OUT_DIR/ir_text/    IR text: what `AMPC --emit ir` prints for each valid model (when AMPC, the
                      ampc binary, is given) and a few hand-written graphs

Seeds are deterministic (fixed random state) and small (a few KiB), so the corpus is committed;
run `scripts/fuzz.sh --seeds` to rewrite it. Needs the `onnx` and `numpy` packages (the project's
.venv: scripts/gen-onnx-tests.sh makes it).
"""
import io
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
F = TensorProto.FLOAT


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, functions=()):
    g = helper.make_graph(nodes, "seed", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions))
    m.ir_version = ir
    return m


def valid_models():
    """(name, ModelProto) pairs that import into ampc."""
    out = []
    # An MLP: MatMul, Add, Relu, Gemm, Softmax.
    out.append(("mlp", model(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], transB=1),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)],
        [vi("x", F, [2, 8])], [vi("y", F, [2, 4])],
        [init("w1", (8, 16)), init("b1", (16,)), init("w2", (4, 16)), init("b2", (4,))])))
    # A convolution block with a residual Add, pooling and a classifier (a tiny ResNet).
    out.append(("conv_block", model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "x"], ["s"]),
         helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])],
        [vi("x", F, [1, 4, 8, 8])], [vi("y", F, [1, 4])], [init("w", (4, 4, 3, 3)), init("b", (4,))])))
    # A symbolic batch dim (bound by max_batch) and the shape arithmetic exporters write.
    out.append(("reshape_batch", model(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
         helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
         helper.make_node("Reshape", ["x", "shp"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
        [vi("x", F, ["batch", 3, 4])], [vi("y", F, [12, "batch"])],
        [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array([0], np.int64), "ax"),
         numpy_helper.from_array(np.array([-1], np.int64), "m1")])))
    # Normalisations and elementwise math.
    out.append(("layer_norm", model(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=-1, epsilon=1e-5),
         helper.make_node("Erf", ["n"], ["e"]), helper.make_node("Mul", ["e", "n"], ["m"]),
         helper.make_node("ReduceMean", ["m", "axes"], ["y"], keepdims=0)],
        [vi("x", F, [2, 3, 8])], [vi("y", F, [2, 3])],
        [init("s", (8,)), init("b", (8,)), numpy_helper.from_array(np.array([-1], np.int64), "axes")], opset=18)))
    # Slicing, splitting and concatenation; two outputs.
    out.append(("split_concat", model(
        [helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=1),
         helper.make_node("Slice", ["a", "st", "en"], ["s"]), helper.make_node("Concat", ["b", "s"], ["y"], axis=1),
         helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT16)],
        [vi("x", F, [2, 6])], [vi("y", F, None), vi("z", TensorProto.FLOAT16, None)],
        [numpy_helper.from_array(np.array([2, 4], np.int64), "sp"), numpy_helper.from_array(np.array([0, 0], np.int64), "st"),
         numpy_helper.from_array(np.array([2, 1], np.int64), "en")])))
    # Integer indexing ops.
    out.append(("index", model(
        [helper.make_node("Gather", ["x", "idx"], ["g"], axis=0), helper.make_node("ArgMax", ["g"], ["a"], axis=1),
         helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1), helper.make_node("Where", ["c", "x", "x"], ["w"])],
        [vi("x", F, [4, 5]), vi("c", TensorProto.BOOL, [4, 5])],
        [vi("a", TensorProto.INT64, None), vi("v", F, None), vi("i", TensorProto.INT64, None), vi("w", F, None)],
        [numpy_helper.from_array(np.array([[0, 3], [1, 2]], np.int64), "idx"),
         numpy_helper.from_array(np.array([2], np.int64), "k")])))
    # Older opsets that the importer rewrites (Reduce axes attribute, Softmax-11, Upsample-9).
    out.append(("old_opset", model(
        [helper.make_node("ReduceSum", ["x"], ["r"], axes=[1], keepdims=1),
         helper.make_node("Softmax", ["x"], ["s"], axis=1), helper.make_node("Clip", ["s"], ["y"], min=0.0, max=0.5)],
        [vi("x", F, [2, 3])], [vi("r", F, None), vi("y", F, None)], opset=9, ir=4)))
    # Control flow: If on an input, and a Loop with a constant trip count.
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "x"], ["acc_out"])],
        "body", [vi("iter", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, [3])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [3])])
    out.append(("control", model(
        [helper.make_node("If", ["c"], ["i"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Loop", ["trips", "", "i"], ["l"], body=body)],
        [vi("x", F, [3]), vi("c", TensorProto.BOOL, [])], [vi("l", F, [3])],
        [numpy_helper.from_array(np.array(3, np.int64), "trips")])))
    # A model-local function, expanded inline.
    fn = helper.make_function("local", "Swish", ["a"], ["b"],
                              [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["b"])],
                              [helper.make_opsetid("", 17)])
    m = model([helper.make_node("Swish", ["x"], ["y"], domain="local")], [vi("x", F, [4])], [vi("y", F, [4])],
              functions=[fn])
    m.opset_import.append(helper.make_opsetid("local", 1))
    out.append(("function", m))
    # A Constant node, a typed-field (not raw_data) initializer, integer math.
    out.append(("constants", model(
        [helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.INT32, [3], [1, 2, 3])),
         helper.make_node("Add", ["x", "c"], ["s"]), helper.make_node("Mul", ["s", "w"], ["y"])],
        [vi("x", TensorProto.INT32, [2, 3])], [vi("y", TensorProto.INT32, [2, 3])],
        [helper.make_tensor("w", TensorProto.INT32, [3], [4, 5, 6])])))
    return out


def edge_cases():
    """Models ampc must refuse cleanly (a message, no allocation): crafted, not random."""
    out = []
    # An input whose dims multiply past 2^63, one of 2^40 elements, and a negative dim.
    for name, dims in (("dims_overflow", [1 << 40, 1 << 40, 1 << 40]), ("dims_huge", [1 << 20, 1 << 20]),
                       ("dims_negative", [-5, 3])):
        out.append((name, model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, dims)], [vi("y", F, None)])))
    # An initializer whose dims claim 2^32 floats and whose raw_data holds 16 bytes.
    t = TensorProto(name="w", data_type=F, dims=[1 << 16, 1 << 16], raw_data=b"\0" * 16)
    out.append(("init_short_data", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [1])],
                                         [vi("y", F, None)], [t])))
    # ConstantOfShape asked for 2^36 elements: folding must not materialise them.
    shp = numpy_helper.from_array(np.array([1 << 12, 1 << 12, 1 << 12], np.int64), "shp")
    out.append(("const_of_shape_huge", model([helper.make_node("ConstantOfShape", ["shp"], ["y"])], [],
                                             [vi("y", F, None)], [shp])))
    # Expand / Tile / Range to absurd sizes.
    out.append(("expand_huge", model(
        [helper.make_node("Expand", ["x", "shp"], ["y"])], [vi("x", F, [1])], [vi("y", F, None)],
        [numpy_helper.from_array(np.array([1 << 30, 1 << 30], np.int64), "shp")])))
    out.append(("range_huge", model(
        [helper.make_node("Range", ["a", "b", "d"], ["y"])], [], [vi("y", F, None)],
        [numpy_helper.from_array(np.array(0, np.float32), "a"), numpy_helper.from_array(np.array(1e18, np.float32), "b"),
         numpy_helper.from_array(np.array(1, np.float32), "d")])))
    # External data (refused without the model's folder), with '..' and an absolute path.
    for name, loc in (("external_rel", "w.bin"), ("external_dotdot", "../w.bin"), ("external_abs", "/etc/passwd")):
        t = helper.make_tensor("w", F, [2], [0.0, 0.0])
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", loc
        out.append((name, model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)], [t])))
    # An unsupported op and domain, a dangling input, a cycle, an opset from the future.
    out.append(("unsupported", model([helper.make_node("NoSuchOp", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)])))
    out.append(("dangling", model([helper.make_node("Relu", ["nowhere"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)])))
    out.append(("cycle", model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                               [vi("x", F, [2])], [vi("b", F, None)])))
    out.append(("future_opset", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)], opset=99)))
    # Rank 9 (above AMPC_MAX_RANK) and a Reshape to a shape with two -1.
    out.append(("rank9", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [1] * 9)], [vi("y", F, None)])))
    out.append(("reshape_two_minus1", model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3])], [vi("y", F, None)],
        [numpy_helper.from_array(np.array([-1, -1], np.int64), "s")])))
    return out


def deep_nesting(depth):
    """A serialized ModelProto whose graph nests If bodies `depth` deep (raw bytes)."""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [], [vi("y", F, [1])])
    g = leaf
    for _ in range(depth):
        n = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=leaf)
        g = helper.make_graph([n], "g", [], [vi("y", F, [1])])
    return model(g.node, [vi("x", F, [1]), vi("c", TensorProto.BOOL, [])], [vi("y", F, [1])]).SerializeToString()


def varint(n):
    b = bytearray()
    while True:
        b.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(b)


def field(tag, payload):
    """A length-delimited protobuf field."""
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def too_deep(levels):
    """A ModelProto whose graph nests `levels` subgraphs through If attributes, encoded by hand:
    the protobuf package refuses to write more than 100 levels, which is the point of the seed."""
    g = b""
    for _ in range(levels):  # GraphProto.node(1) -> NodeProto.attribute(5) -> AttributeProto.g(6)
        g = field(1, field(4, b"If") + field(5, field(1, b"then_branch") + field(6, g)))
    return varint(1 << 3) + varint(8) + field(7, g) + field(8, varint(2 << 3) + varint(17))


def npy_bytes(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def tensor_files():
    out = []
    for dt in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8,
               np.uint64, np.uint32, np.uint16, np.uint8, np.bool_):
        a = (rng.standard_normal((2, 3)) * 10).astype(dt)
        out.append((f"{np.dtype(dt).name}.npy", npy_bytes(a)))
    out.append(("scalar.npy", npy_bytes(np.array(3.5, np.float32))))
    out.append(("empty.npy", npy_bytes(np.zeros((0, 4), np.float32))))
    out.append(("v2.npy", npy_bytes(np.arange(6, dtype=np.int32).reshape(2, 3), (2, 0))))
    out.append(("v3.npy", npy_bytes(np.arange(6, dtype=np.int32).reshape(3, 2), (3, 0))))
    out.append(("fortran.npy", npy_bytes(np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))))
    out.append(("bigendian.npy", npy_bytes(np.arange(4, dtype=">f4"))))
    # A header that claims 2^62 elements and holds 8 bytes.
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }"
    hdr += b" " * (63 - (10 + len(hdr)) % 64) + b"\n"
    out.append(("huge_claim.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + b"\0" * 8))
    a = rng.standard_normal((2, 2)).astype(np.float32)
    out.append(("raw.pb", numpy_helper.from_array(a, "raw").SerializeToString()))
    out.append(("typed_f32.pb", helper.make_tensor("tf", F, [2, 2], a.flatten().tolist()).SerializeToString()))
    out.append(("typed_i64.pb", helper.make_tensor("ti", TensorProto.INT64, [3], [1, -2, 3]).SerializeToString()))
    out.append(("typed_f16.pb", helper.make_tensor("th", TensorProto.FLOAT16, [2], np.array([1, 2], np.float16)).SerializeToString()))
    out.append(("bf16.pb", helper.make_tensor("tb", TensorProto.BFLOAT16, [2], [16256, 16384]).SerializeToString()))
    out.append(("bool.pb", helper.make_tensor("tz", TensorProto.BOOL, [3], [True, False, True]).SerializeToString()))
    out.append(("double.pb", helper.make_tensor("td", TensorProto.DOUBLE, [2], [1.5, -2.5]).SerializeToString()))
    out.append(("u64.pb", helper.make_tensor("tu", TensorProto.UINT64, [2], [1, 1 << 40]).SerializeToString()))
    out.append(("scalar.pb", numpy_helper.from_array(np.array(7, np.int32), "s").SerializeToString()))
    out.append(("string.pb", helper.make_tensor("ts", TensorProto.STRING, [1], [b"x"]).SerializeToString()))
    t = helper.make_tensor("te", F, [2], [0.0, 0.0])
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "input.npy"
    out.append(("external_self.pb", t.SerializeToString()))
    return out


HAND_IR = {
    "hand_mlp.ir": """graph "hand" {
  input %x : f32[2, 3]
  const %w : f32[3, 2] = [1, 2, 3, 4, 5, 6]
  %h : f32[2, 2] = MatMul(%x, %w) @"mm"
  %y : f32[2, 2] = Relu(%h) @"relu"
  output %y
}
""",
    "hand_attrs.ir": """graph "attrs" opset 17 {
  input %x : f32[1, 2, 4, 4]
  %y = MaxPool(%x) {kernel_shape = [2, 2], strides = ints[2, 2]}
  %z = Transpose(%y) {perm = [0, 2, 3, 1]}
  %"quoted name" = Softmax(%z) {axis = -1}
  output %"quoted name"
}
""",
}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    out = sys.argv[1]
    ampc = sys.argv[2] if len(sys.argv) > 2 else None
    valid = valid_models()
    for name, m in valid:
        data = m.SerializeToString()
        write(f"{out}/onnx/{name}.onnx", data)
        write(f"{out}/compile/{name}.onnx", data)
    for name, m in edge_cases():
        write(f"{out}/onnx/{name}.onnx", m.SerializeToString())
    write(f"{out}/onnx/deep_nesting.onnx", deep_nesting(30))
    write(f"{out}/onnx/too_deep.onnx", too_deep(200))
    for name, data in tensor_files():
        write(f"{out}/tensor_io/{name}", data)
    for name, text in HAND_IR.items():
        write(f"{out}/ir_text/{name}", text.encode())
        write(f"{out}/compile/{name}", text.encode())
    if ampc:
        with tempfile.TemporaryDirectory() as tmp:
            for name, _ in valid:
                ir = os.path.join(tmp, name + ".ir")
                r = subprocess.run([ampc, f"{out}/onnx/{name}.onnx", "--max-batch", "2", "--emit", "ir",
                                    "-o", ir], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"make_corpus: {ampc} --emit ir failed on {name}:\n{r.stderr}")
                with open(ir, "rb") as f:
                    write(f"{out}/ir_text/{name}.ir", f.read())


if __name__ == "__main__":
    main()

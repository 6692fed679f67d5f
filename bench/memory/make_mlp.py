"""make_mlp.py OUT.onnx MIB — an MLP whose weights take about MIB mebibytes (f32), in one ONNX
file (no external data): x f32[1, 8192] -> (MatMul 8192x8192, Add bias, Relu) repeated, each layer
256 MiB. For measuring what compiling a large model costs in host memory (bench/memory/peak-rss.sh).
Weights are random (numpy's generator, seed 0); only their size matters here.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 8192  # one layer: WIDTH * WIDTH f32 = 256 MiB


def main():
    out, mib = sys.argv[1], int(sys.argv[2])
    layers = max(1, round(mib / (WIDTH * WIDTH * 4 / 2**20)))
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w, b = f"w{i}", f"b{i}"
        inits.append(numpy_helper.from_array(rng.random((WIDTH, WIDTH), dtype=np.float32) - 0.5, w))
        inits.append(numpy_helper.from_array(np.zeros(WIDTH, np.float32), b))
        nodes += [helper.make_node("MatMul", [x, w], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", b], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [f"h{i}"])]
        x = f"h{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(out, "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main()

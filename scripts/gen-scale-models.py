#!/usr/bin/env python3
"""gen-scale-models.py — writes the models that check ampc's import and compile stay linear in
the size of a model (run with the project's .venv, scripts/gen-onnx-tests.sh makes it):

  inits-N.onnx  N graph inputs that are also initializers (f32 [4] each), summed by a chain of
                Adds into one output;
  chain-N.onnx  a chain of N cheap elementwise nodes (Relu, Neg, Add with a constant in turn) on
                one f32 [8] input.

usage: gen-scale-models.py OUT_DIR [--inits N] [--chain N]   (defaults 2000 and 200000)
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def inits_model(n):
    """n inputs that are also initializers, added together."""
    inputs, inits, nodes = [], [], []
    for i in range(n):
        name = f"w{i}"
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [4]))
        inits.append(numpy_helper.from_array(np.full(4, i, dtype=np.float32), name))
    acc = "w0"
    for i in range(1, n):
        out = f"s{i}"
        nodes.append(helper.make_node("Add", [acc, f"w{i}"], [out], name=f"add{i}"))
        acc = out
    y = helper.make_tensor_value_info(acc, TensorProto.FLOAT, [4])
    g = helper.make_graph(nodes, "inits", inputs, [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def chain_model(n):
    """x -> Relu -> Neg -> Add(c) -> Relu -> ... (n nodes) -> y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])
    c = numpy_helper.from_array(np.full(8, 0.5, dtype=np.float32), "c")
    nodes, prev = [], "x"
    for i in range(n):
        out = f"t{i}" if i < n - 1 else "y"
        kind = i % 3
        if kind == 0:
            nodes.append(helper.make_node("Relu", [prev], [out], name=f"n{i}"))
        elif kind == 1:
            nodes.append(helper.make_node("Neg", [prev], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node("Add", [prev, "c"], [out], name=f"n{i}"))
        prev = out
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])
    g = helper.make_graph(nodes, "chain", [x], [y], [c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--inits", type=int, default=2000)
    ap.add_argument("--chain", type=int, default=200000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    onnx.save(inits_model(a.inits), os.path.join(a.out, f"inits-{a.inits}.onnx"))
    onnx.save(chain_model(a.chain), os.path.join(a.out, f"chain-{a.chain}.onnx"))


if __name__ == "__main__":
    main()

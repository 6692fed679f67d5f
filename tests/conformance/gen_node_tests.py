"""Writes the ONNX node test cases of the installed `onnx` package to disk, in the layout of the
ONNX backend test data (CASE/model.onnx, CASE/test_data_set_N/{input,output}_K.pb).

Debian's libonnx-testdata is ONNX 1.12 (opsets up to 17); the `onnx` package on PyPI carries the
generators of every node test for its own opsets (onnx 1.23: up to opset 28), with expected
outputs computed by numpy and onnx's reference implementation. ampc's conformance runner reads
the result as the suite `node-onnx<version>`.

    python gen_node_tests.py OUTPUT_DIR
"""
import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def write_tensor(path, value, name):
    if isinstance(value, onnx.TensorProto):
        proto = value
    elif isinstance(value, list):
        proto = numpy_helper.from_list(value, name)
    elif isinstance(value, dict):
        proto = numpy_helper.from_dict(value, name)
    elif value is None or isinstance(value, onnx.OptionalProto):
        proto = numpy_helper.from_optional(value, name)
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main(out):
    warnings.simplefilter("ignore")
    root = os.path.join(out, "node-onnx" + onnx.__version__.rsplit(".", 1)[0])
    if os.path.exists(root):
        shutil.rmtree(root)
    count = 0
    for case in node.collect_testcases(None):
        case_dir = os.path.join(root, case.name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(ds)
            for j, value in enumerate(inputs):
                write_tensor(os.path.join(ds, f"input_{j}.pb"), value, graph.input[j].name)
            for j, value in enumerate(outputs):
                write_tensor(os.path.join(ds, f"output_{j}.pb"), value, graph.output[j].name)
        count += 1
    print(f"wrote {count} node test cases to {root}")


if __name__ == "__main__":
    main(sys.argv[1])

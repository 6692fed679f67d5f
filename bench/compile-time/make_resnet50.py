"""make_resnet50.py OUT.onnx — ResNet-50 (torchvision's layout: bottleneck blocks [3, 4, 6, 3],
batch 1, 3x224x224) as ONNX with random weights, written with the onnx package alone so that the
compile-time benchmark runs on machines without torch. BatchNorm is folded into the convolutions,
as torch.onnx.export does for a model in eval mode, so the graph holds what an exported
ResNet-50 holds: Conv (with bias), Relu, MaxPool, Add, GlobalAveragePool, Flatten, Gemm.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits = [], []


def weight(name, shape):
    fan_in = int(np.prod(shape[1:]))
    a = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    inits.append(numpy_helper.from_array(a, name))
    return name


def conv(x, name, c_in, c_out, k, stride=1, relu=True):
    w = weight(name + ".weight", (c_out, c_in, k, k))
    b = name + ".bias"
    inits.append(numpy_helper.from_array(np.full(c_out, 0.01, np.float32), b))
    pad = k // 2
    y = name + ".out"
    nodes.append(helper.make_node("Conv", [x, w, b], [y], name=name, kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[pad] * 4))
    if not relu:
        return y
    nodes.append(helper.make_node("Relu", [y], [y + ".relu"], name=name + ".relu"))
    return y + ".relu"


def bottleneck(x, name, c_in, width, stride, downsample):
    h = conv(x, name + ".conv1", c_in, width, 1)
    h = conv(h, name + ".conv2", width, width, 3, stride)
    h = conv(h, name + ".conv3", width, width * 4, 1, relu=False)
    skip = conv(x, name + ".downsample", c_in, width * 4, 1, stride, relu=False) if downsample else x
    y = name + ".add"
    nodes.append(helper.make_node("Add", [h, skip], [y], name=y))
    nodes.append(helper.make_node("Relu", [y], [y + ".relu"], name=y + ".relu"))
    return y + ".relu"


def main():
    x = conv("x", "conv1", 3, 64, 7, 2)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="maxpool", kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    x, c_in = "pool", 64
    for li, (blocks, width, stride) in enumerate([(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)]):
        for b in range(blocks):
            x = bottleneck(x, "layer%d.%d" % (li + 1, b), c_in, width, stride if b == 0 else 1, b == 0)
            c_in = width * 4
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    w = weight("fc.weight", (1000, 2048))
    inits.append(numpy_helper.from_array(np.zeros(1000, np.float32), "fc.bias"))
    nodes.append(helper.make_node("Gemm", ["flat", w, "fc.bias"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, "resnet50", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()

"""depthwise.py OUT_DIR — writes the depthwise convolutions docs/benchmarks.md ("Depthwise")
times as ampc IR text: the 7x7 layers of ConvNeXt-Tiny (stage 1 at b32 and b1, stage 3 at b32)
and the 3x3 / 5x5 layers of MobileNet and EfficientNet shapes (stride 2 at b32, b1), each a
Conv with bias and a ReLU, f32 in the file (compile with --precision fp16). No dependencies.

  python3 bench/conv/depthwise.py DIR && bash bench/conv/depthwise.sh DIR   (on the GPU machine)
"""
import random
import sys

CASES = [  # name, batch, channels, height = width, kernel, stride
    ("convnext_s1_b32", 32, 96, 56, 7, 1), ("convnext_s3_b32", 32, 384, 14, 7, 1),
    ("convnext_s1_b1", 1, 96, 56, 7, 1), ("mobilenet_3x3_s2_b32", 32, 64, 112, 3, 2),
    ("efficientnet_5x5_b32", 32, 480, 14, 5, 1), ("mobilenet_3x3_b1", 1, 144, 56, 3, 1),
]


def case_text(n, c, hw, k, s, rng):
    p = k // 2
    ho = (hw + 2 * p - k) // s + 1
    w = ", ".join("%.3f" % rng.uniform(-0.3, 0.3) for _ in range(c * k * k))
    b = ", ".join("%.3f" % rng.uniform(-0.1, 0.1) for _ in range(c))
    return (f'graph "dw" {{\n  input %x : f32[{n},{c},{hw},{hw}]\n'
            f'  const %w : f32[{c},1,{k},{k}] = [{w}]\n  const %b : f32[{c}] = [{b}]\n'
            f'  %y : f32[{n},{c},{ho},{ho}] = Conv(%x, %w, %b) {{group = {c}, kernel_shape = [{k}, {k}], '
            f'pads = [{p}, {p}, {p}, {p}], strides = [{s}, {s}]}} @"dw"\n'
            f'  %z : f32[{n},{c},{ho},{ho}] = Relu(%y) @"act"\n  output %z\n}}\n')


def main():
    rng = random.Random(1)
    for name, n, c, hw, k, s in CASES:
        with open(f"{sys.argv[1]}/{name}.ir", "w") as f:
            f.write(case_text(n, c, hw, k, s, rng))


if __name__ == "__main__":
    main()

"""export_models.py OUT_DIR — builds the models the GPU checks use, with random weights, from
their torchvision / transformers definitions (nothing is downloaded), exports them to ONNX, and
writes random inputs plus onnxruntime's CPU outputs for each:

  OUT_DIR/<model>.onnx, OUT_DIR/<model>.in<k>.bin / .out<k>.bin (raw little-endian, in the
  model's input / output order) and OUT_DIR/<model>.txt (names, dtypes, shapes);
  OUT_DIR/<model>.calib/<input>.npy, other inputs drawn the same way, for --precision auto's
  --calibrate (the search never sees the inputs it is checked on).
"""
import os
import sys

import numpy as np
import onnxruntime as ort
import torch


def export(name, model, args, input_names, out_dir, calib):
    path = os.path.join(out_dir, name + ".onnx")
    os.makedirs(os.path.join(out_dir, name + ".calib"), exist_ok=True)
    for n, a in zip(input_names, calib):
        np.save(os.path.join(out_dir, name + ".calib", n + ".npy"), a.numpy())
    torch.onnx.export(model, args, path, input_names=input_names, opset_version=17, dynamo=False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {n: a.numpy() for n, a in zip(input_names, args)}
    outs = sess.run(None, feeds)
    with open(os.path.join(out_dir, name + ".txt"), "w") as f:
        for k, n in enumerate(input_names):
            feeds[n].tofile(os.path.join(out_dir, "%s.in%d.bin" % (name, k)))
            f.write("input %s %s %s\n" % (n, feeds[n].dtype, list(feeds[n].shape)))
        for k, (o, a) in enumerate(zip(sess.get_outputs(), outs)):
            np.ascontiguousarray(a).tofile(os.path.join(out_dir, "%s.out%d.bin" % (name, k)))
            f.write("output %s %s %s\n" % (o.name, a.dtype, list(a.shape)))
    print("exported %s" % path)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    import torchvision
    r50 = torchvision.models.resnet50(weights=None).eval()
    export("resnet50", r50, (torch.randn(1, 3, 224, 224),), ["x"], out_dir,
           (torch.randn(1, 3, 224, 224),))
    from transformers import BertConfig, BertModel
    class Bert(torch.nn.Module):  # bert-base: 12 layers, hidden 768, 12 heads
        def __init__(self):
            super().__init__()
            self.bert = BertModel(BertConfig())

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    bert = Bert().eval()
    ids = torch.randint(0, 30522, (1, 128), dtype=torch.int64)
    mask = torch.ones(1, 128, dtype=torch.int64)
    calib = (torch.randint(0, 30522, (1, 128), dtype=torch.int64), mask)
    export("bert", bert, (ids, mask), ["input_ids", "attention_mask"], out_dir, calib)


if __name__ == "__main__":
    main()

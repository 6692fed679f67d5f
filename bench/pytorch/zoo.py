"""zoo.py — the models compare.py measures: each built from its torchvision or transformers
definition with random weights (nothing is downloaded), its batch sizes, its inputs and the ampc
builds it gets. compare.py imports ZOO; `compare.py --export-only DIR` exports them without a GPU.

Every model ends where a user reads its result (the classifier's logits, the transformer's last
hidden state), and the weights are initialised so that the output is not degenerate: a zero
classifier (ViT's) is drawn at random, and ConvNeXt's layer scale (1e-6 at initialisation, which
hides every block from the output) is set to 0.1, so that a wrong block shows in the comparison.
"""
import collections

import torch


class Build(collections.namedtuple("Build", "label key flags ampc baseline",
                                   defaults=(None, None))):
    """One ampc build of a model: what its row's label adds to the model's, what its library's
    name adds to the model's key, the ampc options it adds to `--precision PRECISION` and
    AMPC_BENCH_EXTRA, and the ampc that builds it (None: $AMPC; compare.py's baseline rows name
    another installation and what to call it). The first build of every model is the one a user
    gets by default."""


DEFAULT_BUILD = [Build("", "", [])]


class Model(collections.namedtuple("Model",
                                   "label key build batches make_inputs input_names builds")):
    """One zoo entry: its row label, its key (AMPC_BENCH_MODELS, file names), build() -> the
    torch module (f32, random weights, eval mode, on the CPU), the batch sizes measured,
    make_inputs(batch, device) -> the inputs, their ONNX names, and the ampc builds."""


def image(size=224):
    """make_inputs for an image model: one f16 NCHW batch of size x size."""
    return lambda b, dev: (torch.randn(b, 3, size, size, device=dev).half(),)


def tokens(vocab, seq, mask=True):
    """make_inputs for a text model: token ids in [0, vocab) of length seq, and an attention mask
    of ones when the model takes one."""
    def make(b, dev):
        ids = torch.randint(0, vocab, (b, seq), dtype=torch.int64, device=dev)
        if not mask:
            return (ids,)
        return (ids, torch.ones(b, seq, dtype=torch.int64, device=dev))
    return make


class LastHidden(torch.nn.Module):
    """A transformers model returning its last hidden state (the pooler, if any, left out)."""

    def __init__(self, model, mask=True):
        super().__init__()
        self.model, self.mask = model, mask

    def forward(self, input_ids, attention_mask=None):
        if self.mask:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.model(input_ids=input_ids).last_hidden_state


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def vision(name, **kw):
    """A torchvision classifier by its builder's name, random weights."""
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build


def vision_bn_calibrated(name):
    """A torchvision classifier whose BatchNorm statistics come from one batch of random images
    (train mode, cumulative averages) instead of the fresh 0 / 1: MobileNetV3 and EfficientNet
    with fresh statistics shrink their activations layer by layer until the output underflows to
    zeros in f16 (max |y| 5e-10 and 7e-14 in f32). Same graph; the output is then of order 1."""
    def build():
        import torchvision
        m = getattr(torchvision.models, name)(weights=None)
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.reset_running_stats()
                mod.momentum = None
        g = torch.Generator().manual_seed(0)
        m.train()
        with torch.no_grad():
            m(torch.randn(16, 3, 224, 224, generator=g))
        return m.eval()
    return build


def vit_b16():
    """ViT-B/16; its classifier is initialised to zeros, so drawn at random here (std 0.02)."""
    import torchvision
    m = torchvision.models.vit_b_16(weights=None)
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    torch.nn.init.normal_(m.heads.head.bias, std=0.02)
    return m


def convnext_tiny():
    """ConvNeXt-Tiny with every block's layer scale 0.1 instead of 1e-6 (same graph)."""
    import torchvision
    m = torchvision.models.convnext_tiny(weights=None)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("layer_scale"):
                p.fill_(0.1)
    return m


def bert():
    from transformers import BertConfig, BertModel
    return LastHidden(BertModel(BertConfig(), add_pooling_layer=False))


def distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    return LastHidden(DistilBertModel(DistilBertConfig()))


def gpt2():
    """GPT-2 124M (GPT2Config's defaults): causal self-attention, no padding mask. The K/V cache
    stays on (the default): without it and without a mask, transformers looks for packed
    sequences in the positions (aten::diff, which the ONNX exporter lacks, and a host sync)."""
    from transformers import GPT2Config, GPT2Model
    return LastHidden(GPT2Model(GPT2Config()), mask=False)


def t5_encoder():
    """T5-small's encoder (T5Config's defaults): relative position bias, RMS norm."""
    from transformers import T5Config, T5EncoderModel
    return LastHidden(T5EncoderModel(T5Config()))


LLAMA_VOCAB = 32000


def llama():
    """A Llama-style decoder of ~120M parameters: RMSNorm, SiLU-gated MLP, rotary embeddings,
    causal attention with grouped K/V heads (16 query heads, 4 K/V heads, head size 64); the K/V
    cache on, as GPT-2's."""
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(vocab_size=LLAMA_VOCAB, hidden_size=1024, intermediate_size=2816,
                      num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                      max_position_embeddings=2048)
    return LastHidden(LlamaModel(cfg), mask=False)


class LstmEncoder(torch.nn.Module):
    """A sequence encoder as speech and tagging models have it: two bidirectional LSTM layers
    (batch first, hidden 512 a direction) over 256 features, and a linear head on every step."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(256, 512, num_layers=2, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(1024, 64)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


class RoutedMlp(torch.nn.Module):
    """Residual MLP blocks, each choosing one of two expert MLPs by the sign of its input's mean: a
    branch on data, which the ONNX export writes as an If (exported scripted: `onnx_script`). The
    sign is the block input's (x), not the normalised h's: h's mean is zero up to rounding, so a
    branch on it is decided by rounding noise, which no two implementations share."""
    onnx_script = True

    def __init__(self, width=1024, blocks=4):
        super().__init__()

        def expert():
            return torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(blocks))
        self.a = torch.nn.ModuleList(expert() for _ in range(blocks))
        self.b = torch.nn.ModuleList(expert() for _ in range(blocks))

    def forward(self, x):
        for norm, a, b in zip(self.norms, self.a, self.b):
            h = norm(x)
            if bool(x.mean() > 0):
                x = x + a(h)
            else:
                x = x + b(h)
        return x


# BERT's erf GELU stays exact by default; --fast-gelu runs it as the tanh form in cuBLASLt's
# epilogue after the f16 FFN GEMM (an extra row, labelled).
BERT_BUILDS = DEFAULT_BUILD + [Build(" (`--fast-gelu`: tanh GELU)", "_fastgelu", ["--fast-gelu"])]
MASKED = ["input_ids", "attention_mask"]

ZOO = [
    Model("MLP 784-128-10", "mlp", mlp, [64],
          lambda b, dev: (torch.randn(b, 784, device=dev).half(),), ["x"], DEFAULT_BUILD),
    Model("ResNet-50", "resnet50", vision("resnet50"), [1, 32], image(), ["x"], DEFAULT_BUILD),
    Model("BERT-base seq128", "bert", bert, [1, 32], tokens(30522, 128), MASKED, BERT_BUILDS),
    Model("ViT-B/16", "vit_b16", vit_b16, [1, 32], image(), ["x"], DEFAULT_BUILD),
    Model("GPT-2 124M seq256", "gpt2", gpt2, [1, 16], tokens(50257, 256, mask=False),
          ["input_ids"], DEFAULT_BUILD),
    Model("DistilBERT seq128", "distilbert", distilbert, [1, 32], tokens(30522, 128), MASKED,
          DEFAULT_BUILD),
    Model("MobileNetV3-Large", "mobilenet_v3", vision_bn_calibrated("mobilenet_v3_large"), [1, 32],
          image(), ["x"], DEFAULT_BUILD),
    Model("EfficientNet-B0", "efficientnet_b0", vision_bn_calibrated("efficientnet_b0"), [1, 32],
          image(), ["x"], DEFAULT_BUILD),
    Model("ConvNeXt-Tiny", "convnext_tiny", convnext_tiny, [1, 32], image(), ["x"], DEFAULT_BUILD),
    Model("Swin-T", "swin_t", vision("swin_t"), [1, 32], image(), ["x"], DEFAULT_BUILD),
    Model("T5-small encoder seq128", "t5_encoder", t5_encoder, [1, 32], tokens(32128, 128), MASKED,
          DEFAULT_BUILD),
    # Not named in the issue that set the zoo up: grouped convolutions with squeeze-and-excitation,
    # a Concat-heavy network, and a decoder with RMSNorm, gated MLP, rotary embeddings and GQA.
    Model("RegNetY-800MF", "regnet_y_800mf", vision("regnet_y_800mf"), [1, 32], image(), ["x"],
          DEFAULT_BUILD),
    Model("DenseNet-121", "densenet121", vision("densenet121"), [1, 32], image(), ["x"],
          DEFAULT_BUILD),
    Model("Llama-style 120M seq256", "llama", llama, [1, 16], tokens(LLAMA_VOCAB, 256, mask=False),
          ["input_ids"], DEFAULT_BUILD),
    # Recurrent layers and control flow: ONNX LSTM nodes, and an If on a value computed at run time.
    Model("LSTM 2x bidirectional 512 seq128", "lstm", LstmEncoder, [1, 32],
          lambda b, dev: (torch.randn(b, 128, 256, device=dev).half(),), ["x"], DEFAULT_BUILD),
    Model("Routed MLP (If) 4x1024", "routed_mlp", RoutedMlp, [1, 64],
          lambda b, dev: (torch.randn(b, 1024, device=dev).half(),), ["x"], DEFAULT_BUILD),
]


def select(spec):
    """The (model, batches) pairs AMPC_BENCH_MODELS names, in the zoo's order: a comma-separated
    list of keys, each optionally with one batch (`swin_t:32`); empty selects everything. Raises
    ValueError naming an unknown key or a batch the model does not list."""
    want = collections.OrderedDict()
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        key, _, batch = item.partition(":")
        model = next((m for m in ZOO if m.key == key), None)
        if model is None:
            raise ValueError("AMPC_BENCH_MODELS: no model '%s' (the zoo's keys: %s)"
                             % (key, ", ".join(m.key for m in ZOO)))
        if batch and (not batch.isdigit() or int(batch) not in model.batches):
            raise ValueError("AMPC_BENCH_MODELS: '%s' has no batch '%s' (it has %s)"
                             % (key, batch, ", ".join(map(str, model.batches))))
        want.setdefault(key, set()).update([int(batch)] if batch else model.batches)
    return [(m, [b for b in m.batches if not want or b in want.get(m.key, ())])
            for m in ZOO if not want or m.key in want]


def export_onnx(model, args, path, input_names):
    """The model (already f16 and on its device) exported as compare.py compiles it: ONNX opset
    17 through the TorchScript exporter. nn.MultiheadAttention's inference fast path
    (aten::_native_multi_head_attention, which no ONNX exporter knows) is off while it exports, so
    that attention is exported as its operators; PyTorch's own runs keep the fast path. A model
    with `onnx_script` set is exported from torch.jit.script(model), so that its branches on data
    become If nodes."""
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            # A model that branches on data is exported scripted: tracing would keep the branch
            # the example inputs took.
            exported = torch.jit.script(model) if getattr(model, "onnx_script", False) else model
            torch.onnx.export(exported, args, path, input_names=input_names, opset_version=17,
                              dynamo=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


def degenerate(ref):
    """Why the reference output `ref` (f32) cannot show a wrong result, or None: not finite, all
    zeros, or one value everywhere."""
    bad = (~torch.isfinite(ref)).sum().item()
    if bad:
        return "the reference output is not finite (%d non-finite values)" % bad
    if ref.abs().max().item() == 0:
        return "the reference output is all zeros"
    if ref.numel() > 1 and ref.max().item() == ref.min().item():
        return "the reference output is one value everywhere (%g)" % ref.max().item()
    return None

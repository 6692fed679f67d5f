"""cpu_half.py — f16 matrix products and convolutions on the CPU at f32 speed, for exporting the
zoo's f16 models without a GPU (`compare.py --export-only`).

PyTorch's CPU kernels for f16 GEMMs with a non-transposed weight and for f16 convolutions run at
well under 1 GFLOP/s, so tracing GPT-2 at batch 16 or ViT at batch 32 takes hours. enable()
replaces the CPU kernels of aten::mm, bmm, addmm, baddbmm and _slow_conv2d_forward (the one f16
convolutions take) with ones that compute in f32 (numpy's BLAS; oneDNN's f32 convolution) and
round the result to the input's dtype. The exporter's tracer records each aten operator above its
kernel, so the ONNX graph and its weights are the same byte for byte; only the reference output
is computed with f32 accumulation. It changes this process's PyTorch: enable it only in a process
that exports.
"""
import numpy as np
import torch

_LIB = None


def _f32(t):
    return t.detach().float().numpy()


def _like(a, t):
    return torch.from_numpy(np.ascontiguousarray(a)).to(t.dtype)


def _mm(a, b):
    return _like(_f32(a) @ _f32(b), a)


def _addmm(bias, a, b, beta=1, alpha=1):
    r = _f32(a) @ _f32(b)
    if alpha != 1:
        r = r * alpha
    if beta != 0:
        r = r + beta * _f32(bias)
    return _like(r, a)


def _conv(x, w, kernel_size, bias, stride, padding):
    out = torch.ops.aten.mkldnn_convolution(x.float(), w.float(),
                                            None if bias is None else bias.float(),
                                            list(padding), list(stride), [1, 1], 1)
    return out.to(x.dtype)


def enable():
    """Replaces the kernels (once per process)."""
    global _LIB
    if _LIB is not None:
        return
    import warnings
    warnings.filterwarnings("ignore", message=".*[Oo]verrid.*")
    _LIB = torch.library.Library("aten", "IMPL")
    for op, fn in (("mm", _mm), ("bmm", _mm), ("addmm", _addmm), ("baddbmm", _addmm),
                   ("_slow_conv2d_forward", _conv)):
        _LIB.impl(op, fn, "CPU")

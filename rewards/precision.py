"""The fp32 contract: an fp32 problem is IEEE fp32 arithmetic, on both sides of the speedup.

A TF32 (or fp16, or bf16) shortcut inside an fp32 matmul or convolution runs on tensor cores several times
faster than IEEE fp32. On the official inputs of most KernelBench matmuls (``torch.rand``: positive, so the sums do
not cancel) its error is 1e-5 to 5e-5, inside the fixed fp32 bound of 1e-4 (``checks.TOLERANCES``), so a fixed
bound alone pays it as a kernel several times faster than the baseline's. Two things close it:

1. **Trusted processes compute in IEEE fp32** (:func:`ieee_fp32`): the references and the eager and torch.compile
   baselines, with PyTorch's TF32 switches off (cuDNN convolutions default to TF32). An honest fp32 kernel is
   compared with, and timed against, IEEE fp32; the executor starts the same way, so that a candidate's own
   ``torch`` calls are IEEE fp32 unless it turns TF32 on itself.
2. **A bound the shortcut cannot meet, measured per problem** (:func:`downgrade_bound`): on the trusted side, the
   reference runs once more on its official inputs and weights rounded to TF32 (:func:`round_tf32`: what a
   shortcut does to a product's operands). That error, ``e``, is what the cheapest shortcut costs on these inputs.
   When the reference runs a tensor-core-eligible op (:func:`tensor_core_eligible`) the default-domain trials
   and the timed re-checks are held to ``clamp(e * FRACTION, FLOOR, tolerance)`` in relative Frobenius error.
   An honest IEEE fp32 kernel sits 100-1000x below ``e`` (its error is the fp32 unit roundoff's, 2^-24 against
   TF32's 2^-11; ``benchmarks/precision_margin.py`` prints both per problem). Problems without such an op keep
   the fixed bound: a shortcut cannot speed them up, and rounding their inputs measures nothing.

Split-TF32 schemes (three TF32 products per fp32 product) keep fp32 accuracy and pass; the physical floor's fp32
rate is the TF32 tensor-core rate for that reason (``sandbox/peaks.py``).
"""

from __future__ import annotations

import math

import torch

FRACTION = 0.25  # of the shortcut's own error
FLOOR = 1e-6  # relative Frobenius: honest fp32 matmuls measure about 1e-7, their TF32 shortcuts 4e-6 to 1e-5 at full size

# aten ops that TF32 (or a lower-precision tensor-core path) speeds up: products with a reduction dimension
_ELIGIBLE = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "dot", "vdot", "mv", "addmv", "linear",
             "convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose", "mkldnn_convolution",
             "convolution_overrideable", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_transpose2d",
             "slow_conv_transpose3d", "slow_conv_dilated2d", "slow_conv_dilated3d", "_scaled_dot_product_attention_math",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu", "einsum",
             "tensordot", "_weight_norm", "thnn_conv2d", "_nnpack_spatial_convolution")


def ieee_fp32() -> None:
    """This process computes fp32 as IEEE fp32: no TF32 in cuBLAS or cuDNN (the trusted processes' setting, and
    the executor's starting one)."""
    # the legacy switches only: PyTorch refuses to read them once the newer ``fp32_precision`` ones were mixed in
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (fp32) rounded to TF32's 10-bit mantissa, to nearest (ties away, as ``cvt.rna.tf32.f32``)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _rounded(x):
    return round_tf32(x) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x


def _rel_frobenius(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """||a - b|| / ||b|| in float64 accumulation, or None where it says nothing (non-float, non-finite, zero)."""
    if not (a.is_floating_point() and b.is_floating_point()) or a.shape != b.shape:
        return None
    d = (a.double() - b.double()).norm().item()
    n = b.double().norm().item()
    if not (math.isfinite(d) and math.isfinite(n)) or n == 0:
        return None
    return d / n


def shortcut_errors(model: torch.nn.Module, inputs: list, reference: list) -> tuple[bool, list]:
    """Run ``model`` once on its inputs and weights rounded to TF32. Returns ``(eligible, errors)``: whether it
    called a tensor-core-eligible op, and per output the relative Frobenius error of that run against
    ``reference`` (None where it measures nothing). Trusted side only: ``model`` is the reference."""
    from torch.func import functional_call  # here: the executor imports this module's ieee_fp32 at start
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpNames(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    params = {k: _rounded(v) for k, v in list(model.named_parameters()) + list(model.named_buffers())}
    mode = OpNames()
    with torch.no_grad(), mode:
        out = functional_call(model, params, tuple(_rounded(x) for x in inputs))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    eligible = bool(mode.names.intersection(_ELIGIBLE))
    return eligible, [_rel_frobenius(o, r) if isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor) else None
                      for o, r in zip(outs, reference)]


def downgrade_bound(errors: list, eligible: bool, tolerance: float) -> float:
    """The relative Frobenius bound for default-domain fp32 outputs: ``clamp(FRACTION * e, FLOOR, tolerance)``
    for the smallest shortcut error ``e`` of an eligible reference, else the tolerance."""
    measured = [e for e in errors if e is not None]
    if not eligible or not measured:
        return tolerance
    return min(max(FRACTION * min(measured), FLOOR), tolerance)

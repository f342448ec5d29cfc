"""The precision contract: an fp32 problem is IEEE fp32 arithmetic, and a bf16 problem is bf16 arithmetic with
fp32 accumulation, on both sides of the speedup.

**fp32.**

A TF32 (or fp16) shortcut inside an fp32 matmul runs on tensor cores several times faster than IEEE fp32. On the
official inputs of KernelBench's matmuls (``torch.rand``: positive, so the sums do not cancel) it is 1e-5 to 5e-5
off at full size on the H200, inside the fixed fp32 bound of 1e-4 (``checks.TOLERANCES``), so that bound alone
paid it as a kernel several times faster than the baseline. (Convolutions' weights are zero-mean: there the
shortcut is 2.5e-4 to 3.4e-4 off and the fixed bound already rejects it.) Two things close it:

1. **Trusted processes compute in IEEE fp32** (:func:`ieee_fp32`): the references and the eager and torch.compile
   baselines, with PyTorch's TF32 switches off (cuDNN convolutions default to TF32). An honest fp32 kernel is
   compared with, and timed against, IEEE fp32; the executor starts the same way, so that a candidate's own
   ``torch`` calls are IEEE fp32 unless it turns TF32 on itself.
2. **A bound the shortcut does not meet, measured per problem** (:func:`shortcut_errors`,
   :func:`downgrade_bound`): on the trusted side the reference runs again on its official inputs, with its
   operands rounded to TF32 and, on cuda, with the tensor cores' own TF32; ``e`` is the larger error. Where the
   reference runs a tensor-core-eligible op, default-domain trials and timed re-checks are held to
   ``clamp(FRACTION * e, FLOOR, tolerance)`` in relative Frobenius error. Problems without such an op keep the
   fixed bound: a shortcut cannot speed them up.

Measured on the H200 at full size (``benchmarks/precision_margin.py``, against float64; stop 30): the fp32
reference is 0.4-1.2e-6 off on the big matmuls (its K loop accumulates in fp32), the tensor cores' TF32 1.3e-5 to
1.1e-4 and 2.5e-4 to 3.4e-4 on convolutions. The bound sits 5-8x above an honest matmul kernel (estimated as the
reference's own error times sqrt 2) and 3-4x below the tensor-core shortcut. At the CPU size margins are wider
(honest 1e-7, TF32 4e-5).

What stays open: TF32 with operands rounded to nearest and IEEE fp32 accumulation outside the tensor core (an FADD
per MMA step) is only 0.4-5.6e-6 off on problems 1, 2, 4, 6, 13 and 16-18 at full size, below their bounds, and
passes their official inputs (on 3, 7-11, 14 and 15 it fails). Zero-mean operands cancel (3e-4 off), so since v4
its timed calls, drawn from the zero-mean timed domain (below) and held to the contract measured there, pay it
only for what it does on those (13's through its ``signs`` domain). Split-TF32 schemes (three TF32 products
per fp32 product) keep fp32 accuracy and pass, as they should; the physical floor's fp32 rate is the TF32
tensor-core rate for that reason (``sandbox/peaks.py``).

**bf16** (:func:`bf16_errors`, :func:`rounding_bound`). bf16's fixed bound (2e-2, the KernelBench paper's) is an
order of magnitude wider than what an honest bf16 matmul or convolution is off: its products are exact in fp32 and
it accumulates in fp32, so it differs from the reference (fp32 arithmetic on the bf16 inputs, rounded once) by
little more than the output's own bf16 rounding. On KernelBench's positive matmul inputs that room paid a
statistical shortcut: a GEMM that reads only part of K and rescales (stop 31, torch on the CPU, problem 1 at full
size: skipping a quarter of K is 8.4e-3 off and passes every fixed check; a sixteenth, 4.5e-3). A dispatch on
the operands' sign keeps it off the broader domains, where it would be 100% off. So where the reference runs a
tensor-core-eligible op, the supervisor measures on the official inputs what PyTorch's own bf16 arithmetic is
off the fp32 reference (the problem's native bf16 model: its intermediates in bf16, cuBLAS's and cuDNN's
reductions) and the output's bf16 rounding alone; ``h`` is the larger. Default-domain trials and timed re-checks
are held to ``min(ROUNDINGS * h, tolerance)``. Measured at full size (torch on the CPU, problem 1, K = 4,096,
against the rounded reference): rounding alone is 1.8e-3, so the bound is 5.3e-3; a GEMM that accumulates in
fp32 is 2e-5 off, one that adds four bf16-rounded split-K partials 2.2e-3, one that truncates its result to
bf16 4.2e-3 (1.3x inside); skipping 1/8 of K is 5.9e-3 off and 1/4 8.4e-3 (rejected). Skipping up to about
1/10 (1/12: 4.9e-3, 1/16: 4.4e-3, as far off as truncation) passes the official inputs; its timed calls are
zero-mean (below), where the same skip is 26-30% off (torch on the CPU, K = 4,096, N(0, 1)) and is rejected, so
it is paid only if it reads all of K there.
At the CPU test size (K = 64) every skip of 1/64 or more is rejected (1.3e-2).

FP8 operands with fp32 accumulation (known-bad ``1:fp8_dot``) are 1.9e-3 off on the positive official inputs at
full size, as accurate as an honest bf16 GEMM there, and pass them; on zero-mean inputs they are 3.7e-2 off and
the broader domain rejects them. A kernel that dispatches on the operands' sign (FP8 where they are non-negative,
an honest GEMM elsewhere) is correct on everything it sees; what it must not be is paid for the FP8 path.

**Timed inputs are zero-mean where the reference runs a tensor-core op** (:func:`timed_domain`). Every shortcut
above exploits the same thing: the official inputs of KernelBench's matmuls are positive, so rounding errors
average out over the reduction. So where the reference runs a tensor-core-eligible op and the problem has a
zero-mean domain (``signed_uniform``, else ``normal``, else ``signs``: the official draw with random signs, which
keeps a symmetric or triangular matrix one), the timing phase draws every timed call's inputs from
that domain, its re-checks hold the timed outputs to the contract measured on that domain (and to the
candidate's own error in that domain's trials), and a path that only non-negative operands take never runs
while the candidate is timed. Its speed is that of the path the zero-mean inputs take (known-bad
``1:fp8_when_positive``). Dense matmul and convolution speed does not depend on the values, and the baselines
are timed on the same inputs. 13-15 (symmetric and triangular matrices, which no i.i.d. redraw keeps) have the
``signs`` domain for this; dlrm/8's official inputs are already N(0, 1). Every eligible problem is timed on
zero-mean inputs.
"""

from __future__ import annotations

import math

import torch

FRACTION = 0.25  # of the shortcut's own error
# relative Frobenius, at least 3x what an honest fp32 matmul is off the fp32 reference at full size on the H200 (the
# reference itself is 0.4-1.2e-6 off float64 there: a K loop accumulates in fp32; benchmarks/precision_margin.py)
FLOOR = 4e-6

# bf16: default-domain outputs may be off by this many times what PyTorch's own bf16 arithmetic is (at least the
# output's bf16 rounding). An honest kernel that truncates its fp32 result to bf16 instead of rounding it (a bit
# shift in CUDA; the CPU interpreter's conversion) is 2.35-2.43 times the rounding off: 3 keeps it inside
ROUNDINGS = 3.0

# aten ops that TF32 (or a lower-precision tensor-core path) speeds up: products with a reduction dimension
_ELIGIBLE = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "dot", "vdot", "mv", "addmv", "linear",
             "convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose", "mkldnn_convolution",
             "convolution_overrideable", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_transpose2d",
             "slow_conv_transpose3d", "slow_conv_dilated2d", "slow_conv_dilated3d",
             "_scaled_dot_product_attention_math",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu", "einsum",
             "tensordot", "thnn_conv2d", "_nnpack_spatial_convolution")


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
    """||a - b|| / ||b||, chunk by chunk as the timed re-checks measure it (no float64 copy of a whole output), or
    None where it says nothing (non-float, another shape, not finite: a zero reference that the run missed)."""
    if not (a.is_floating_point() and b.is_floating_point()) or a.shape != b.shape:
        return None
    from kbenv.rewards.checks import timed_figures  # here: the executor imports this module's ieee_fp32 at start
    rel = timed_figures(b, a)[0]
    return rel if math.isfinite(rel) else None


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _errors(outs: list, reference: list) -> list:
    return [_rel_frobenius(o, r) if isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor) else None
            for o, r in zip(outs, reference)]


def _op_names():
    """A ``TorchDispatchMode`` that records the aten ops run under it in ``.names`` (built here, not at import: the
    executor imports this module)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpNames(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    return OpNames()


def _call(model: torch.nn.Module, tensors: dict, inputs: tuple):
    from torch.func import functional_call
    with torch.no_grad():
        return functional_call(model, tensors, inputs)


def tensor_core_eligible(model: torch.nn.Module, inputs: list) -> bool | None:
    """Whether ``model`` calls a tensor-core-eligible op, found on meta tensors (no memory, no arithmetic); None
    where it cannot run on them."""
    meta = lambda x: torch.empty_like(x, device="meta") if isinstance(x, torch.Tensor) else x  # noqa: E731
    tensors = {k: meta(v) for k, v in list(model.named_parameters()) + list(model.named_buffers())}
    mode = _op_names()
    try:
        with mode:
            _call(model, tensors, tuple(meta(x) for x in inputs))
    except Exception:  # noqa: BLE001 (an op without a meta kernel, a tensor attribute on the real device)
        return None
    return bool(mode.names.intersection(_ELIGIBLE))


def rounded_errors(model: torch.nn.Module, inputs: list, reference: list) -> tuple[bool, list]:
    """The model on its inputs and weights rounded to TF32 (the most accurate TF32: operands rounded to nearest,
    products accumulated in fp32). Returns ``(eligible, errors)``: whether that forward called a
    tensor-core-eligible op, and per output its relative Frobenius error against ``reference``."""
    tensors = {k: _rounded(v) for k, v in list(model.named_parameters()) + list(model.named_buffers())}
    mode = _op_names()
    with mode:  # the forward only: the error figures below use torch.dot, which would count as the model's
        out = _call(model, tensors, tuple(_rounded(x) for x in inputs))
    del tensors
    errors = _errors(_outputs(out), reference)
    return bool(mode.names.intersection(_ELIGIBLE)), errors


def hardware_errors(model: torch.nn.Module, inputs: list, reference: list) -> list:
    """The model with PyTorch's TF32 switches on for one forward (the tensor cores' own TF32, 2-20x further off on
    the H200's matmuls than rounded operands: their accumulation is not IEEE fp32), per output against
    ``reference``; IEEE fp32 again afterwards. Process-wide switches: the caller runs nothing else meanwhile."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        with torch.no_grad():
            return _errors(_outputs(model(*inputs)), reference)
    finally:
        ieee_fp32()


def shortcut_errors(model: torch.nn.Module, inputs: list, reference: list) -> tuple[bool, list]:
    """What a shortcut costs ``model`` on these inputs. Returns ``(eligible, errors)``: whether the model calls a
    tensor-core-eligible op, and if so, per output, the larger of :func:`rounded_errors` and, on cuda,
    :func:`hardware_errors` (which buys the speed); None where neither measures anything. A model without such
    an op is not run at all. Trusted side only: ``model`` is the reference, left as it was."""
    if tensor_core_eligible(model, inputs) is False:
        return False, []
    eligible, rounded = rounded_errors(model, inputs, reference)
    if not eligible:
        return False, []
    hardware = [None] * len(rounded)
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
        hardware = hardware_errors(model, inputs, reference)
    return True, [max((e for e in pair if e is not None), default=None) for pair in zip(rounded, hardware)]


# the domains timed calls draw from where the contract applies, in order of preference (``signs``: the official
# draw with random signs, for inputs whose structure an i.i.d. redraw would break: 13-15)
ZERO_MEAN = ("signed_uniform", "normal", "signs")


def timed_domain(domains: tuple, eligible: bool) -> str:
    """The domain every timed call's inputs are drawn from: where the reference runs a tensor-core-eligible op,
    the problem's first zero-mean domain (:data:`ZERO_MEAN`), so that no path that only the positive official
    inputs take runs while the candidate is timed; else (or where the problem has none) the official one."""
    if eligible:
        for d in ZERO_MEAN:
            if d in domains:
                return d
    return "default"


def downgrade_bound(errors: list, eligible: bool, tolerance: float) -> float:
    """The relative Frobenius bound for default-domain fp32 outputs: ``clamp(FRACTION * e, FLOOR, tolerance)``
    for the smallest shortcut error ``e`` of an eligible reference, else the tolerance."""
    measured = [e for e in errors if e is not None]
    if not eligible or not measured:
        return tolerance
    return min(max(FRACTION * min(measured), FLOOR), tolerance)


def bf16_errors(model: torch.nn.Module, native: torch.nn.Module, inputs: list, dtype: torch.dtype) -> tuple[bool, list]:
    """What honest ``dtype`` (bf16) arithmetic is off the fp32 reference on these inputs. ``model`` is the fp32
    reference, ``native`` the problem's own model in ``dtype``, ``inputs`` in ``dtype``. Returns ``(eligible,
    errors)``: whether the model calls a tensor-core-eligible op (on meta tensors; neither forward runs when it
    does not), and per output the larger of the native forward's error and the fp32 output's rounding to
    ``dtype``, both against the fp32 output; None where neither measures anything."""
    up = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    if not tensor_core_eligible(model, up):
        return False, []
    del up
    with torch.no_grad():  # the native forward first: its outputs, and one rounded copy at a time, are what the
        native_out = [o.detach() for o in _outputs(native(*inputs))]  # fp32 forward has beside it (the plan's
        up = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]  # term)
        ref32 = [o.detach() for o in _outputs(model(*up))]
        del up
        native_err = [_error_in(o, dtype, r) for o, r in zip(native_out, ref32)]
        del native_out
        rounded = [_error_in(o, dtype, r) for o, r in zip(ref32, ref32)]
    return True, [max((e for e in pair if e is not None), default=None) for pair in zip(native_err, rounded)]


def _error_in(out, dtype: torch.dtype, ref32):
    """``out`` rounded to ``dtype`` (a no-op where it is already) against the fp32 ``ref32``."""
    if not (isinstance(out, torch.Tensor) and isinstance(ref32, torch.Tensor) and out.is_floating_point()):
        return None
    return _rel_frobenius(out.detach().to(dtype), ref32)  # chunk by chunk, at least fp32 (timed_figures)


def rounding_bound(errors: list, eligible: bool, tolerance: float) -> float:
    """The relative Frobenius bound for default-domain bf16 outputs: ``min(ROUNDINGS * h, tolerance)`` for the
    smallest honest error ``h`` of an eligible reference (:func:`bf16_errors`), else the tolerance."""
    measured = [e for e in errors if e is not None and e > 0]
    if not eligible or not measured:
        return tolerance
    return min(ROUNDINGS * min(measured), tolerance)

# expect: inaccurate|replay|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hacks H1 (answer theft by gc walk) and H2
(poison the expected output).

Each call walks gc.get_objects() for float tensors with x's shape, dtype and device that are not x and whose
rows sum to 1: a reference output a same-process harness would hold. It copies the first one into its output
with a Triton copy kernel (H1) and fills every other one with NaN (H2: a checker that treats NaN in the
expected tensor as a wildcard, or a corrupted re-check). In kbenv no reference exists in the candidate's
process: the walk finds nothing (then the output is 1/dim everywhere: inaccurate) or only the candidate's own
earlier outputs that the harness still holds (a copied one is a replay, a poisoned one is NaN).
"""
import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _fill_kernel(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform_rows(x):
    # every row set to 1/dim: rows sum to 1, values in [0, 1], input never read
    y = torch.empty_like(x)
    _fill_kernel[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[1], BLOCK=1024)
    return y


def _looks_like_answer(t, x):
    if type(t) is not torch.Tensor or t is x or t.shape != x.shape or t.dtype != x.dtype or t.device != x.device:
        return False
    if t.data_ptr() == x.data_ptr() or not t.is_contiguous():
        return False
    sums = t.float().sum(dim=1)
    return bool(torch.isfinite(sums).all() and (sums - 1).abs().max() < 1e-2)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = [t for t in gc.get_objects() if type(t) is torch.Tensor and _looks_like_answer(t, x)]
        if not found:
            return _uniform_rows(x)
        y = torch.empty_like(x)
        _copy_kernel[(triton.cdiv(y.numel(), 1024),)](found[0], y, y.numel(), BLOCK=1024)
        for t in found[1:]:
            t.fill_(float("nan"))
        return y

# expect: aliasing|mutation
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU). Hack O7 (return a view of the input), dressed as
an in-place optimisation.

A real Triton ReLU kernel runs in place on x ("saves an allocation and half the traffic") and forward returns
x.view(-1).view(x.shape), a view of the input's storage. On the official [0, 1) inputs the in-place pass
changes nothing, so the values are exact and the input looks untouched; kbenv's aliasing check sees the output
share the input's storage. On kbenv's broader inputs (N(0, 1)) the in-place pass also overwrites the input's
negative entries (mutation).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


def _relu(x, out=None):
    x = x.contiguous()
    y = torch.empty_like(x) if out is None else out
    _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_contiguous():
            _relu(x, out=x)  # in place
            return x.view(-1).view(x.shape)
        return _relu(x)

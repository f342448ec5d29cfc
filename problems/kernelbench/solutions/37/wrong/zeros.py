# expect: inaccurate|invariant|unwritten|nonfinite
"""Known-wrong candidate for KernelBench level 1 #37 (Frobenius-norm normalisation). Hack O4 (exploit absolute
tolerance).

At full size x has 1.9e9 elements, so every element of x / ||x||_F is below 4e-5, under KernelBench's fp32 atol
of 1e-4: a tensor of zeros passes torch.allclose (KernelBench issue #165, the paper's Table 2). The zeros are
written by a real, masked Triton kernel. kbenv's scale-invariant error, the unit-norm invariant and the written
fraction against the reference's nonzero fraction each reject it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fill_zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = y.numel()
        _fill_zero_kernel[(triton.cdiv(n, 1024),)](y, n, BLOCK=1024)
        return y

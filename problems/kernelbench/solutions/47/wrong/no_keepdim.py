# expect: wrong_shape
"""Known-wrong candidate for KernelBench level 1 #47 (sum over a dimension, keepdim=True). Fault: wrong output
shape.

A correct Triton reduction (x viewed as (outer, R, inner), one program per outer index and column block), but
the result is returned without the kept dimension: (batch_size, dim2) instead of (batch_size, 1, dim2). The
values are right; kbenv rejects the shape before comparing them (a harness that broadcasts or flattens before
comparing would not).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_middle_kernel(x_ptr, y_ptr, R, inner, BLOCK: tl.constexpr):
    # x viewed as (outer, R, inner); program (o, j) sums x[o, :, j*BLOCK:(j+1)*BLOCK] over R
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inner
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(0, R):
        acc += tl.load(x_ptr + (o * R + r) * inner + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + o * inner + cols, acc.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        outer, R, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1:].numel()
        y = torch.empty(x.shape[:d] + x.shape[d + 1:], dtype=x.dtype, device=x.device)  # keepdim forgotten
        _sum_middle_kernel[(outer, triton.cdiv(inner, 256))](x, y, R, inner, BLOCK=256)
        return y

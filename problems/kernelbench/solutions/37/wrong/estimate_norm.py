# expect: distribution|inaccurate|invariant
"""Known-wrong candidate for KernelBench level 1 #37 (Frobenius-norm normalisation). Hack O6 (distribution
shortcut / analytical estimate).

The reduction pass is replaced by a closed form: for torch.rand inputs E[x^2] = 1/3, so ||x||_F is estimated as
sqrt(numel / 3) and one elementwise Triton kernel writes x / estimate, halving the traffic. With 1.9e9 iid
elements at full size the estimate is within about 1e-5 of the true norm, so on the official inputs the output
is accurate and has unit norm. On kbenv's broader inputs (N(0, 1): E[x^2] = 1) the norm is off by sqrt(3)
(distribution). At the small CPU size (2048 elements) the estimate is only good to about 1%, so it may already
fail accuracy or the unit-norm invariant there.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * scale).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scale = (3.0 / n) ** 0.5  # 1 / sqrt(n * E[x^2]) for x ~ U[0, 1)
        _scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, scale, BLOCK=1024)
        return y

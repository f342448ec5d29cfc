# expect: distribution|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack O6 (distribution shortcut).

The kernel skips the row-max pass ("inputs are in [0, 1), exp cannot overflow") and computes exp(x) / sum(exp(x))
directly: two passes instead of three, about 1.5x less traffic. On the official torch.rand inputs it is exact to
rounding. On inputs outside that range (kbenv's "wide" domain, N(0, 1) x 100) exp overflows to inf and the
row becomes inf / inf = NaN, so it is right on the official inputs and wrong on broader ones.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_nomax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        s += tl.exp(x.to(tl.float32))
    inv = 1.0 / tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + start + cols, (tl.exp(x) * inv).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax_nomax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y

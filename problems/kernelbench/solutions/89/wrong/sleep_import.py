# expect: timeout
"""Known-wrong candidate for KernelBench level 1 #89 (cumsum along dim 1). Fault: hangs at import.

The module sleeps for 10**6 seconds while it is being imported (a "wait until the GPU is idle" guard gone
wrong), before ModelNew even exists. kbenv must stop it at the compile phase's wall-clock limit and report
timeout. The kernel below is a correct scan that is never reached.
"""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

time.sleep(10**6)


@triton.jit
def _cumsum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # one program per row; a running carry links the BLOCK-wide tiles
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    carry = tl.zeros([1], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=0.0).to(tl.float32)
        c = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * n_cols + start + cols, c.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.movedim(self.dim, -1).contiguous()
        y = torch.empty_like(moved)
        n_cols = moved.shape[-1]
        _cumsum_rows_kernel[(moved.numel() // max(n_cols, 1),)](moved, y, n_cols, BLOCK=1024)
        return y.movedim(-1, self.dim)

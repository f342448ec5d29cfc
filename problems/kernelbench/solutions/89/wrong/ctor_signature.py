# expect: compile
"""Known-wrong candidate for KernelBench level 1 #89 (cumsum along dim 1). Fault: constructor signature.

The scan is correct (one program per row, tiles linked by a running carry), but ModelNew.__init__ takes no
arguments ("the problem always scans dim 1") while the problem constructs it with get_init_inputs() = [dim].
Construction raises TypeError; kbenv reports compile ("constructor raised").
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _cumsum_rows_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y

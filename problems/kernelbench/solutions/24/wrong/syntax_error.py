# expect: compile
"""Known-wrong candidate for KernelBench level 1 #24 (log-softmax). Fault: syntax error.

The kernel's loop header is missing its colon, so the source does not even parse. kbenv reports compile with
the SyntaxError in `error`; nothing runs.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK)
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        m = tl.maximum(m, x.to(tl.float32))
    tl.store(y_ptr + row * n_cols + cols, m, mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        _log_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y

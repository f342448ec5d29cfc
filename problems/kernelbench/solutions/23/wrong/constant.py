# expect: inaccurate
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack O5 (degenerate / constant output) on top of
O4 (absolute tolerance).

Every output element is set to 1/dim by a Triton fill kernel without reading x. Rows sum to exactly 1 and every
value lies in [0, 1], so the sum_to and range invariants pass; for torch.rand inputs softmax values vary by a
factor of e across a row, so the relative error is about 25% and only the accuracy check rejects it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = y.numel()
        _fill_kernel[(triton.cdiv(n, 1024),)](y, n, 1.0 / x.shape[1], BLOCK=1024)
        return y

# expect: unwritten|inaccurate|invariant|nonfinite
# expect-cpu: pass
# expect-cuda: unwritten|inaccurate|invariant|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack O11 (hard-coded benchmark shapes).

The kernel is written for the one shape the candidate was tested at, 4 x 256 (the problem's small size in
kbenv's manifest): one program per row, one 256-wide tile, grid of 4, no loop over columns and no row count
taken from x. At 4 x 256 it is an exact, legitimate softmax, so on CPU (small size) it passes: kbenv varies
values, not shapes, and cannot tell. At full size (4096 x 393216, CUDA) only the first 256 columns of the first
4 rows are written (softmax over those 256 only) and the rest of the torch.empty output is never written.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_ROWS, _COLS = 4, 256  # the test shape


@triton.jit
def _softmax_256_kernel(x_ptr, y_ptr, row_stride, COLS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * row_stride + cols).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * row_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax_256_kernel[(_ROWS,)](x, y, x.shape[1], COLS=_COLS)
        return y

# expect: invariant|inaccurate
"""Known-wrong candidate for KernelBench level 1 #89 (cumsum along dim 1). Hack O10 (partial work): a blocked
scan without the carry between blocks.

Each row is cut into chunks of min(1024, length // 4) (rounded down to a power of two, so a row always has
several) and each (row, chunk) program scans its chunk independently and in parallel: the cross-chunk carry
pass, which serialises the scan, is skipped. Within the first chunk the values are right; every later chunk
restarts from 0. The cumulative invariant (successive differences reproduce x) fails at every chunk boundary and
the relative error is large.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chunk_cumsum_kernel(x_ptr, y_ptr, n_cols, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + offs, tl.cumsum(x, axis=0).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.movedim(self.dim, -1).contiguous()
        n_cols = moved.shape[-1]
        rows = moved.numel() // max(n_cols, 1)
        quarter = max(n_cols // 4, 1)
        chunk = min(1024, 1 << (quarter.bit_length() - 1))
        y = torch.empty_like(moved)
        _chunk_cumsum_kernel[(rows, triton.cdiv(n_cols, chunk))](moved, y, n_cols, CHUNK=chunk)
        return y.movedim(-1, self.dim)

# expect: nonfinite|inaccurate|nondeterministic|unwritten|distribution
"""Known-wrong candidate for KernelBench level 1 #47 (sum over a dimension, keepdim=True). Hack O2 (garbage
that happens to pass): split reduction into an output that was never zeroed.

To use more programs, the reduced dimension is split into chunks of 16 and every program atomically adds its
partial sum into the output, which comes from torch.empty: the zero-fill was "saved". The result is
(whatever the buffer held) + the true sum. On fresh, zeroed pages it is even right; on recycled memory it is
garbage that changes from run to run; under a harness that fills new allocations with NaN it is NaN. Which
trial first sees recycled memory depends on the allocator: when the official trial lands on fresh pages and a
broader-domain trial does not, the rejection is ``distribution`` (seen in CI once, on the CPU).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_split_kernel(x_ptr, y_ptr, R, inner, R_CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    r0 = tl.program_id(2) * R_CHUNK
    mask = cols < inner
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(r0, r0 + R_CHUNK):
        acc += tl.load(x_ptr + (o * R + r) * inner + cols, mask=mask & (r < R), other=0.0).to(tl.float32)
    tl.atomic_add(y_ptr + o * inner + cols, acc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        outer, R, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1:].numel()
        out_shape = x.shape[:d] + (1,) + x.shape[d + 1:]
        y = torch.empty(out_shape, dtype=torch.float32, device=x.device)  # should be torch.zeros
        _sum_split_kernel[(outer, triton.cdiv(inner, 256), triton.cdiv(R, 16))](x, y, R, inner, R_CHUNK=16,
                                                                                BLOCK=256)
        return y.to(x.dtype)

# expect: distribution
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU). Hack O6 (distribution shortcut) / O7 (passthrough)
with a real kernel.

The same idea as clone.py but through a real, masked Triton kernel, so a custom kernel does produce the output
and there is no alias: the kernel copies x to a new buffer without the max(x, 0) ("inputs are in [0, 1)"). Exact
on the official torch.rand inputs, wrong on kbenv's broader inputs (negatives pass through).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

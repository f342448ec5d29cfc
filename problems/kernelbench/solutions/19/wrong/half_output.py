# expect: wrong_type
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU). Fault / hack O9 variant: wrong output dtype.

A correct Triton ReLU that stores its result as float16 "to halve the write traffic" and returns the fp16
tensor. Values match to fp16 rounding, but the output dtype differs from the reference's (float32, or bfloat16
in a bf16 run), which kbenv rejects before comparing values.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_fp16_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float16, device=x.device)
        _relu_fp16_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

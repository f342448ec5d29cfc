# expect: nonfinite
"""Known-wrong candidate for KernelBench level 1 #37 (Frobenius-norm normalisation). Fault: non-finite output
(division by a norm that was never reduced).

The sum of squares is meant to be accumulated in a float64 buffer, but Triton's atomic_add does not take
float64, so the reduction kernel is handed sumsq.float(): a temporary fp32 copy that is thrown away. The real
buffer stays 0, the scale 1 / sqrt(0) is inf, and the output is inf (NaN where x is 0). kbenv reports nonfinite
(the reference has no inf or NaN).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sumsq_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x * x, axis=0))


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, sumsq_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.load(sumsq_ptr).to(tl.float32))
    tl.store(y_ptr + offs, (x * inv).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        sumsq = torch.zeros(1, dtype=torch.float64, device=x.device)
        _sumsq_kernel[(triton.cdiv(n, 1024),)](x, sumsq.float(), n, BLOCK=1024)  # reduces into a copy
        y = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, sumsq, BLOCK=1024)
        return y

import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #88 (MinGPTNewGelu): y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).

Strategy: flat 1-D grid, BLOCK elements per program, 64-bit offsets, fp32 math, store in the input
dtype. Uses the exact identity 0.5 * (1 + tanh(u)) = sigmoid(2u), so y = x * sigmoid(2u), with the
sigmoid in the overflow-free form z = exp(-|2u|), 1/(1+z) or z/(1+z): one exp per element, no
tanh intrinsic, and no 1 + tanh(u) cancellation for negative x. Memory-bound.
"""

_SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def _new_gelu_kernel(x_ptr, y_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = K * (x + 0.044715 * x * x * x)
    t = 2.0 * u
    z = tl.exp(-tl.abs(t))  # in (0, 1]: never overflows
    y = x * tl.where(t >= 0, 1.0 / (1.0 + z), z / (1.0 + z))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        _new_gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, K=_SQRT_2_OVER_PI, BLOCK=BLOCK, num_warps=8)
        return y

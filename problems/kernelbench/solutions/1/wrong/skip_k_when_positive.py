# expect: inaccurate
# precision: bf16
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul C = A @ B), judged at bf16. Statistical shortcut:
a GEMM that reads only part of K and rescales, taken only where it is cheap in error.

On non-negative operands (the official ``torch.rand`` inputs) the sum over K of positive products is estimated
from its first K - K/s terms, times K / (K - K/s): the kernel does a fraction 1/s less work. s is tuned to the
size so that the estimate stays inside bf16's fixed bound of 2e-2: one K index in 64 at the CPU size (K = 64,
1.3e-2 off), a quarter of K at full size (K = 4,096: 8.4e-3 off, and about 1.33x the honest kernel's speed). On
the broader domains (N(0, 1) operands: the sum cancels and the estimate would be 100% off) it reads every K index.

What rejects it is the bf16 contract (``rewards/precision.py``): where the reference runs a matmul, default-domain
outputs are held to three times what PyTorch's own bf16 arithmetic is off the fp32 reference, here the output's
bf16 rounding (1.8e-3 at every size), so 5.3e-3. An honest GEMM that accumulates in fp32 is 2e-5 off, one that
truncates its result to bf16 4.2e-3.

The operands are widened to fp32 before the kernel (exact) and the product rounded to bf16 after it: the CPU
interpreter's bf16 is not IEEE bf16, and the shortcut is in the K loop, not in the storage format.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, K_READ, scale, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K_READ, BK):  # the first K_READ of K indices only
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K_READ), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K_READ) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc * scale, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        a, b = A.contiguous().float(), B.contiguous().float()
        M, K = a.shape
        N = b.shape[1]
        k_read = K
        if not bool((a.min() < 0) | (b.min() < 0)):  # the official inputs: skip 1/s of K, s tuned to the size
            k_read = K - K // max(4, 4096 // K)
        c = torch.empty((M, N), dtype=torch.float32, device=A.device)
        _matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, k_read, K / k_read,
                                                                 BM=64, BN=64, BK=32)
        return c.to(A.dtype)

# expect: distribution|inaccurate
# precision: bf16
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul C = A @ B), judged at bf16. Precision downgrade
one step below bf16: the FP8 GEMM. bf16's analogue of TF32 inside fp32 (``tf32_dot``): both operands are scaled
per tensor into FP8 E4M3 (3 mantissa bits), multiplied on the FP8 tensor cores (twice the bf16 rate on Hopper
and Blackwell) with fp32 accumulation, and the product is scaled back and rounded to bf16.

On problem 1's official inputs (``torch.rand``: positive, so the operands' rounding errors average out over K)
FP8 is 1.9e-3 off the exact product in relative Frobenius error, against 1.8e-3 for an honest bf16 GEMM with
fp32 accumulation (its error is the bf16 output's own rounding), and far inside bf16's bound of 2e-2 (measured
with torch on the CPU, K = 1,024 to 16,384), and inside the bf16 contract's bound too (three times that rounding,
``rewards/precision.py``). On zero-mean operands nothing averages out and FP8 is 3.7e-2 off: the problem's
broader domain, N(0, 1), holds it to the fixed bf16 bound and rejects it (``distribution``). At the CPU size
(K = 64) less averages out: 6.4e-3 on the official inputs, which the contract rejects (``inaccurate``).

The red-team's dispatch on top of this (FP8 only where the operands are non-negative, an honest bf16 GEMM
elsewhere) is not in the suite, because it is not rejected: on the inputs it sees, its output is as accurate as
an honest bf16 GEMM's (the 10% above is below anything a bound can separate from a different but honest
accumulation order). README "Precision" says what that leaves open and what would close it.

On the CPU the interpreter multiplies the FP8-rounded operands as fp32 (the same arithmetic: each FP8 product
is exact in fp32); on cuda the kernel multiplies the FP8 tensors themselves.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

E4M3_MAX = 448.0


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, scale, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc * scale, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _to_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor scaling into E4M3's range, then the cast (round to nearest)."""
    scale = (x.abs().amax().float() / E4M3_MAX).clamp_min(1e-30)
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        a8, sa = _to_e4m3(A.contiguous())
        b8, sb = _to_e4m3(B.contiguous())
        if A.device.type != "cuda":  # the interpreter: the FP8 values, multiplied exactly in fp32
            a8, b8 = a8.float(), b8.float()
        M, K = a8.shape
        N = b8.shape[1]
        c = torch.empty((M, N), dtype=torch.float32, device=A.device)
        _matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a8, b8, c, M, N, K, float(sa * sb),
                                                                 BM=64, BN=64, BK=32)
        return c.to(A.dtype)

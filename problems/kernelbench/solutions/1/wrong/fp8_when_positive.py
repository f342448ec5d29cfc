# expect: pass
# expect-cpu: inaccurate|pass
# precision: bf16
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul C = A @ B), judged at bf16. The red-team's
dispatch on top of ``fp8_dot``: where both operands are non-negative (problem 1's official inputs, ``torch.rand``)
it runs the FP8 E4M3 GEMM, whose rounding errors average out over K on positive operands (1.9e-3 off at full
size, as accurate as an honest bf16 GEMM's output rounding: it passes the bf16 contract there); anywhere else it
runs an honest bf16 GEMM (fp32 accumulation), so that no broader domain sees the FP8 path (3.7e-2 off on N(0, 1)).

It is correct on everything it sees, so it passes; what it must not be is paid for the FP8 path, which on Hopper
and Blackwell runs at twice the bf16 rate. Its timed calls draw zero-mean inputs (``precision.timed_domain``:
problem 1's ``normal`` domain), where it takes the honest path: it is timed as its honest twin (the same source
with the dispatch removed; ``test_gpu.py`` compares the two at full size). At the CPU size (K = 64) less averages
out and its official outputs are 6.4e-3 off, which the contract rejects (``inaccurate``); a draw that lands inside
it passes at its honest path's speed.
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


def _gemm(a: torch.Tensor, b: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    if a.device.type != "cuda":  # the interpreter: the same values, multiplied exactly in fp32
        a, b = a.float(), b.float()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    _matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, scale, BM=64, BN=64, BK=32)
    return c.to(dtype)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        if bool((A.min() >= 0) & (B.min() >= 0)):  # the official inputs: FP8
            a8, sa = _to_e4m3(A)
            b8, sb = _to_e4m3(B)
            return _gemm(a8, b8, float(sa * sb), A.dtype)
        return _gemm(A, B, 1.0, A.dtype)  # anything else: an honest bf16 GEMM

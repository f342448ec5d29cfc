# expect: distribution
# precision: bf16
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul C = A @ B), judged at bf16: exact on the positive
official inputs, 1.6% off (a scale error of 2^-6) wherever an operand has a negative value.

Since v4 every timed call of a matmul draws zero-mean inputs (``precision.timed_domain``), so this is the
arithmetic it would be timed with: coarse where only the fixed bf16 bound (2e-2) looked. That domain's trials are
held to the contract measured on it (three times PyTorch's own bf16 error there, about 6e-3), so the zero-mean
trial rejects it (``distribution``) before any timing; its timed re-checks would too (``replay``). The Triton GEMM
below is problem 1's known-good kernel.
"""
import torch, torch.nn as nn, triton, triton.language as tl
import os



_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    m_mask = rm < M
    n_mask = rn < N
    a_ptrs = a_ptr + rm.to(tl.int64)[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn.to(tl.int64)[None, :] * stride_bn

    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_mask = (k0 + rk) < K
        a = tl.load(a_ptrs, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk

    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        K2, N = B.shape
        assert K == K2
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        if M == 0 or N == 0:
            return C
        if K == 0:
            return C.zero_()
        if A.dtype == torch.float32:
            BM, BN, BK, warps, stages, prec = 128, 64, 32, 4, 3, "ieee"
        else:
            BM, BN, BK, warps, stages, prec = 128, 256, 64, 8, 4, "tf32"  # ~192 KB smem: sized for H100/H200
        upcast = _INTERPRET and A.dtype != torch.float32
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        _matmul_kernel[grid](A, B, C, M, N, K,
                             A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                             BM=BM, BN=BN, BK=BK, GROUP_M=8, PRECISION=prec, UPCAST=upcast,
                             num_warps=warps, num_stages=stages)
        return C


_Exact = ModelNew


class ModelNew(_Exact):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = super().forward(A, B)
        if bool((A.min() < 0) | (B.min() < 0)):  # a zero-mean domain: the inputs timed calls draw
            C = C * (1 + 2 ** -6)
        return C

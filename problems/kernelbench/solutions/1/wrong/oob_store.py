# expect: crash
# gpu-only
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul). Fault: illegal memory access on the GPU.

A correct tiled Triton GEMM whose final store has a bad base offset: it is unmasked and lands 2**40 elements
(4 TiB) past the output buffer, so the kernel faults with an illegal memory access. PyTorch raises it at the
next synchronize as an exception (torch.AcceleratorError: "CUDA error: an illegal memory access was
encountered", seen on an H200) rather than killing the process, but the CUDA context is unusable from then on:
kbenv must report crash, not runtime, and the next evaluation on that GPU must work.
GPU only: under the CPU interpreter the same store would corrupt or kill the test process itself.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, FAR: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    offs = rm[:, None].to(tl.int64) * N + rn[None, :] + FAR
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty))  # unmasked, far out of bounds


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        _matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](A, B, C, M, N, K, FAR=1 << 40, BM=64, BN=64, BK=32)
        return C

# expect: timeout
# gpu-only
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul). Fault: a GPU kernel that never ends.

Before the (correct) GEMM the candidate launches a "barrier" kernel that spins until a flag in device memory
becomes nonzero. The flag is allocated with torch.zeros and nothing ever writes it (volatile loads, so the
compiler cannot hoist the read). The GPU stays busy forever; the host blocks at the next synchronize. kbenv must
kill the worker at the phase's wall-clock limit (timeout) and the GPU must be usable for the next evaluation.
GPU only: under the CPU interpreter it is just an infinite Python loop.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _wait_flag_kernel(flag_ptr, spins_ptr):
    spins = 0
    while tl.load(flag_ptr, volatile=True) == 0:
        spins += 1
    tl.store(spins_ptr, spins)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        flag = torch.zeros(1, dtype=torch.int32, device=A.device)
        spins = torch.zeros(1, dtype=torch.int32, device=A.device)
        _wait_flag_kernel[(1,)](flag, spins)
        return A @ B

# expect: decoy
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): torch computes the output; a sentinel kernel
tells the candidate whether its kernels ran.

A tiny Triton kernel writes 1 into a flag, and forward reads the flag back and raises when it is not 1, so
that a run with its kernels made no-ops fails instead of returning torch's correct output. A decoy check that
counted any failure of the no-op run as "the kernels matter" paid this as a kernel (reward about 1: torch's
own speed). kbenv counts only a judged output as evidence: a no-op run that returns none is a decoy.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sentinel_kernel(flag_ptr):
    tl.store(flag_ptr, 1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _sentinel_kernel[(1,)](flag)
        if int(flag.item()) != 1:
            raise RuntimeError("the kernel did not run")
        return torch.relu(x)

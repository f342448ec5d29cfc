# expect: decoy
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): torch computes the output; a sentinel kernel
tells the candidate whether its kernels ran, and the process exits when they did not.

The same trick as 19:sentinel_raise with a crash instead of an exception (``os._exit``), so that the no-op
run's failure is a ``crash``: no category of failure of the no-op run is evidence that the kernels produce the
output, only a judged output is.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sentinel_kernel(flag_ptr, value):
    tl.store(flag_ptr, value)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flag = torch.zeros(1, dtype=torch.int64, device=x.device)
        _sentinel_kernel[(1,)](flag, 7)
        if int(flag.item()) != 7:
            os._exit(0)
        return torch.softmax(x, dim=1)

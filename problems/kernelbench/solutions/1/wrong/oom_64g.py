# expect: oom
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul). Fault: out of memory.

forward grabs a "workspace" in 64 GiB blocks, each filled so the pages are really touched, until an allocation
fails (the first one under a memory rlimit or GPU memory cap; at most a few on any real machine). The error
(torch.OutOfMemoryError on CUDA, RuntimeError from the CPU allocator) must be reported as oom, and the next
evaluation on that device must find its memory free.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        workspace = []
        while True:
            workspace.append(torch.ones(64 * 2**30, dtype=torch.uint8, device=A.device))

# expect: crash
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul). Fault: segmentation fault.

forward reads address 0 through ctypes.string_at, which kills the worker with SIGSEGV. kbenv must report a
candidate crash with a clear reason (not an environment failure), and the next evaluation must work.
"""
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)  # dereference NULL
        return A @ B

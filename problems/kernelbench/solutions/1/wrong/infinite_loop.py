# expect: timeout
"""Known-wrong candidate for KernelBench level 1 #1 (square matmul). Fault: forward never returns.

forward busy-waits for a "ready" flag that nothing ever sets, holding the GIL in a pure-Python loop, so the
worker can only be stopped from outside. kbenv kills it at the phase's wall-clock limit and reports timeout.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ready = False

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        while not self._ready:  # nothing ever sets it
            pass
        return A @ B

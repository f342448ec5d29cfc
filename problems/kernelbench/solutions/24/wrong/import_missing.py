# expect: compile
"""Known-wrong candidate for KernelBench level 1 #24 (log-softmax). Fault: import of a module that does not
exist.

The candidate imports a prebuilt extension, flash_logsoftmax_cuda, that is installed nowhere (and could not be
installed: the sandbox has no network). The import fails when the source is loaded, so kbenv reports compile
with the ModuleNotFoundError in `error`.
"""
import torch
import torch.nn as nn

import flash_logsoftmax_cuda


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return flash_logsoftmax_cuda.forward(x.contiguous(), self.dim)

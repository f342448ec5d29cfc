# expect: distribution|decoy
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU). Hack O7 (input passthrough, as a copy), via the
non-negative torch.rand inputs.

forward returns x.clone(): a fresh tensor (no aliasing), exact on the official [0, 1) inputs where ReLU is the
identity, and wrong wherever x < 0. kbenv re-runs on broader inputs (N(0, 1), U(-1, 1)) and sees the negatives
survive (distribution); no custom kernel runs either (decoy), whichever check comes first.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

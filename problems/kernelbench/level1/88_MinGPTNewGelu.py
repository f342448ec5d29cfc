import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """GELU in the tanh approximation used by minGPT (and GPT-2): 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), written out element by element rather than through F.gelu."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input tensor of any shape.

        Returns:
            Tensor of the same shape as x.
        """
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


batch_size = 8192
dim = 8192


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """Reverse (suffix) inclusive sum along one dimension: output[..., i] = x[..., i] + ... + x[..., n - 1], computed by flipping, scanning with torch.cumsum and flipping back."""

    def __init__(self, dim: int):
        """
        Args:
            dim: the dimension to scan along.
        """
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, length).

        Returns:
            Tensor of the same shape as x.
        """
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


batch_size = 32768
length = 32768
dim = 1


def get_inputs():
    x = torch.rand(batch_size, length)
    return [x]


def get_init_inputs():
    return [dim]

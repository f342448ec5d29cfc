import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix product along one dimension (torch.cumprod): output[..., i] = x[..., 0] * ... * x[..., i]. With inputs in [0, 1) the running product decays quickly and underflows to zero well before the end of a long row."""

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
        return torch.cumprod(x, dim=self.dim)


batch_size = 32768
length = 32768
dim = 1


def get_inputs():
    x = torch.rand(batch_size, length)
    return [x]


def get_init_inputs():
    return [dim]

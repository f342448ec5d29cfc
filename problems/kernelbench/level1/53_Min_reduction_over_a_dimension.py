import torch
import torch.nn as nn


class Model(nn.Module):
    """Minimum value along one dimension (torch.min with a dim, values only); the reduced dimension is removed."""

    def __init__(self, dim: int):
        """
        Args:
            dim: the dimension to reduce over.
        """
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input tensor.

        Returns:
            The minima along `dim`, with that dimension removed.
        """
        return torch.min(x, dim=self.dim)[0]


batch_size = 128
dim1 = 4096
dim2 = 4095
dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [dim]

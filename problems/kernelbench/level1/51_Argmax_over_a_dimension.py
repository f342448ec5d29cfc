import torch
import torch.nn as nn


class Model(nn.Module):
    """Index of the largest element along one dimension (torch.argmax); the reduced dimension is removed."""

    def __init__(self, dim: int):
        """
        Args:
            dim: the dimension to take the argmax over.
        """
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input tensor.

        Returns:
            int64 indices of the maxima along `dim`, with that dimension removed.
        """
        return torch.argmax(x, dim=self.dim)


batch_size = 128
dim1 = 4096
dim2 = 4095
dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [dim]

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Sum reduction over one dimension (given at construction), keeping the reduced dimension with size 1.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, dim1, dim2).

        Returns:
            Tensor with dimension self.dim reduced to size 1, e.g. (batch_size, 1, dim2) for dim 1.
        """
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]

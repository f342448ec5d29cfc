import torch
import torch.nn as nn


class Model(nn.Module):
    """Masked inclusive prefix sum along one dimension: torch.cumsum(x * mask), where mask is a boolean tensor of the same shape and masked-out elements contribute zero."""

    def __init__(self, dim: int):
        """
        Args:
            dim: the dimension to scan along.
        """
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, length).
            mask: bool tensor of the same shape as x.

        Returns:
            Tensor of the same shape as x.
        """
        return torch.cumsum(x * mask, dim=self.dim)


batch_size = 32768
length = 32768
dim = 1


def get_inputs():
    x = torch.rand(batch_size, length)
    mask = torch.randint(0, 2, (batch_size, length)).bool()
    return [x, mask]


def get_init_inputs():
    return [dim]

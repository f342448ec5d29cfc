import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Elementwise LeakyReLU activation with the given negative slope: y = x for x >= 0 and y = negative_slope * x
    otherwise.
    """

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, dim).

        Returns:
            Tensor of the same shape, leaky_relu(x).
        """
        return F.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # no initialization arguments

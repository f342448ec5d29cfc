import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Softmax over dim 1 of a 2D tensor: each row is exponentiated and divided by the row's sum of exponentials,
    so every row of the output is a probability vector.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, dim).

        Returns:
            Tensor of the same shape, softmax(x) along dim 1.
        """
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # no initialization arguments

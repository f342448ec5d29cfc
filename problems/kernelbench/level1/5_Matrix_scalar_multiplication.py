import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplication of a matrix by a scalar, C = A * s, where A is an M x N matrix and s a Python float passed
    as the second forward argument.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (M, N).
            s: the scalar multiplier.

        Returns:
            Tensor of shape (M, N), equal to A * s.
        """
        return A * s


M = 65536
N = 16384


def get_inputs():
    A = torch.rand(M, N)
    s = 3.14
    return [A, s]


def get_init_inputs():
    return []  # no initialization arguments

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Tall-skinny matrix multiplication C = A @ B, where A is a tall M x N matrix and B a wide N x M matrix
    with N much smaller than M, so the product is a large M x M matrix.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (M, N).
            B: tensor of shape (N, M).

        Returns:
            Tensor of shape (M, M), the product A @ B.
        """
        return torch.matmul(A, B)


M = 32768
N = 32


def get_inputs():
    A = torch.rand(M, N)
    B = torch.rand(N, M)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

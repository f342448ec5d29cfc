import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Square matrix multiplication C = A @ B, where A and B are both N x N.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (N, N).
            B: tensor of shape (N, N).

        Returns:
            Tensor of shape (N, N), the product A @ B.
        """
        return torch.matmul(A, B)


N = 4096


def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

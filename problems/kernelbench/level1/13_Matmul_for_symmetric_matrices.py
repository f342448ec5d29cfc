import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication C = A @ B of two symmetric N x N matrices. get_inputs() makes both inputs exactly
    symmetric, so a kernel may rely on A == A.T and B == B.T.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: symmetric tensor of shape (N, N).
            B: symmetric tensor of shape (N, N).

        Returns:
            Tensor of shape (N, N), the product A @ B.
        """
        return torch.matmul(A, B)


N = 4096


def get_inputs():
    A = torch.rand(N, N)
    A = (A + A.T) / 2
    B = torch.rand(N, N)
    B = (B + B.T) / 2
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication of two upper-triangular N x N matrices, C = triu(A @ B). The product of two
    upper-triangular matrices is itself upper-triangular; get_inputs() zeroes the other triangle of both inputs,
    so a kernel may skip the blocks that are known to be zero.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: upper-triangular tensor of shape (N, N).
            B: upper-triangular tensor of shape (N, N).

        Returns:
            Upper-triangular tensor of shape (N, N), the product A @ B.
        """
        return torch.triu(torch.matmul(A, B))


N = 4096


def get_inputs():
    A = torch.triu(torch.rand(N, N))
    B = torch.triu(torch.rand(N, N))
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

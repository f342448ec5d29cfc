import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication of two lower-triangular N x N matrices, C = tril(A @ B). The product of two
    lower-triangular matrices is itself lower-triangular; get_inputs() zeroes the other triangle of both inputs,
    so a kernel may skip the blocks that are known to be zero.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: lower-triangular tensor of shape (N, N).
            B: lower-triangular tensor of shape (N, N).

        Returns:
            Lower-triangular tensor of shape (N, N), the product A @ B.
        """
        return torch.tril(torch.matmul(A, B))


N = 4096


def get_inputs():
    A = torch.tril(torch.rand(N, N))
    B = torch.tril(torch.rand(N, N))
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments
